# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: side_releases
short_description: The vLLM releases installed beside the main one, as the planner reads them
version_added: 0.15.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Each side release's C(name), C(vllm_version), release C(id), C(path), C(capabilities) and C(prebuilt_kernels)
    from its install recipe, with the record its build wrote (what it implements) where the host has one.
  - P(sparkfleet.vllm.host_plan#filter) plans each instance against the release it runs from.
positional: records
options:
  _input:
    description: The side releases' install recipes (the P(sparkfleet.vllm.side_recipes#lookup) lookup).
    type: list
    elements: dict
    required: true
  records:
    description: Each release directory's record (C(.sparkfleet-record.json)), by directory; a missing one is none.
    type: dict
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Publish the side releases
  ansible.builtin.set_fact:
    __releases: "{{ __side_recipes | sparkfleet.vllm.side_releases({}) }}"
"""

RETURN = r"""
_value:
  description: One dict per side release (C(name), C(vllm_version), C(id), C(path), C(capabilities), C(prebuilt_kernels), C(record)).
  type: list
  elements: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

side_releases = library_filter("side_releases")


class FilterModule:
    def filters(self):
        return {"side_releases": side_releases}
