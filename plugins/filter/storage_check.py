# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: storage_check
short_description: Whether the models still to stage fit on the filesystems they are written to
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Sums what staging writes per filesystem (hub downloads under HF_HOME, copies under the model store; one
    filesystem may hold both) and returns one problem per filesystem whose free space cannot take it plus the
    margin kept for the caches after it.
positional: storage, margin_gib
options:
  _input:
    description: What is still to stage, each C(id), C(bytes) and C(into) (C(hf_home) or C(model_store)).
    type: list
    elements: dict
    required: true
  storage:
    description: The C(storage) facts of M(sparkfleet.vllm.model_facts).
    type: dict
    required: true
  margin_gib:
    description: GiB to leave free after staging (C(model_stage_free_margin_gib)).
    type: float
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Refuse a download that does not fit
  ansible.builtin.assert:
    that: __problems | length == 0
    fail_msg: "{{ __problems | join('; ') }}"
  vars:
    __problems: "{{ [{'id': 'org/m', 'bytes': 1000, 'into': 'hf_home'}] | sparkfleet.vllm.storage_check(__storage, 10) }}"
"""

RETURN = r"""
_value:
  description: One message per filesystem that is too small, naming the models, the GiB they need and the GiB free.
  type: list
  elements: str
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

storage_check = library_filter("storage_check")


class FilterModule:
    def filters(self):
        return {"storage_check": storage_check}
