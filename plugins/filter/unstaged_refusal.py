# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: unstaged_refusal
short_description: Why vllm_serve cannot start its instances on a host yet, in one message
version_added: 0.13.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Names a missing vLLM release, and every instance's model (by its index in C(vllm_serve_instances)) and drafter
    (C(intent.drafter)) that is not staged completely on the host, each with where it was looked for and what to run;
    an empty string when nothing is missing. Rendered-only instances need no staged model.
positional: drafters, staged, release, where, render_only
options:
  _input:
    description: The instances (C(vllm_serve_instances) without their keys).
    type: list
    elements: dict
    required: true
  drafters:
    description: The drafter checkpoints the instances name.
    type: list
    elements: str
    required: true
  staged:
    description: Each model and drafter as M(sparkfleet.vllm.model_facts) found it (C(staged)), with C(complete).
    type: dict
    required: true
  release:
    description: The release the units run (its C(vllm_version)), or none.
    type: dict
  where:
    description: C(host), C(root) (the release root), C(model_store) and C(hf_home), which the message names.
    type: dict
    required: true
  render_only:
    description: The instances are rendered only; no model need be staged.
    type: bool
    default: false
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Refuse a host without a release or with models missing
  ansible.builtin.assert:
    that: __refused | length == 0
    fail_msg: "{{ __refused }}"
  vars:
    __refused: >-
      {{ vllm_serve_instances | sparkfleet.vllm.unstaged_refusal([], staged, release,
           {'host': inventory_hostname, 'root': '/opt/sparkfleet', 'model_store': '/var/lib/sparkfleet/models',
            'hf_home': '/var/lib/sparkfleet/hf'}) }}
"""

RETURN = r"""
_value:
  description: The refusal, or an empty string.
  type: str
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

unstaged_refusal = library_filter("unstaged_refusal")


class FilterModule:
    def filters(self):
        return {"unstaged_refusal": unstaged_refusal}
