# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: release_groups
short_description: A host's instance plans grouped by the vLLM release each runs from
version_added: 0.15.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Groups the plans by release, the main release first; a plan with C(release) runs from that release's
    directory (one installed beside the main one), every other from the main release.
  - The role checks each group's argv with that release's own vLLM parser.
positional: main
options:
  _input:
    description: The plans by instance name (the host plan's C(instances) and C(ranks)).
    type: dict
    required: true
  main:
    description: The main release (C(path), C(vllm_version)).
    type: dict
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Group the plans by release
  ansible.builtin.set_fact:
    __groups: "{{ vllm_serve_plan.instances | sparkfleet.vllm.release_groups(vllm_install_release) }}"
"""

RETURN = r"""
_value:
  description: One dict per release (C(path), C(vllm_version), C(plans)), the main release first.
  type: list
  elements: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

release_groups = library_filter("release_groups")


class FilterModule:
    def filters(self):
        return {"release_groups": release_groups}
