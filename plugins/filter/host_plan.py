# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: host_plan
short_description: Plan all vLLM instances of one host together (ports and memory must fit side by side)
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Runs the C(sparkfleet) planner for every instance of a host and refuses a set whose names or
    ports clash or whose footprints do not fit in the host's memory together.
  - Errors name the offending list entry (for example C(vllm_serve_instances[1].port)) and what would fit.
positional: instances, label, behind_door, releases
options:
  _input:
    description: Host facts as M(sparkfleet.vllm.host_facts) returns them (the fact C(sparkfleet_facts)).
    type: dict
    required: true
  instances:
    description:
      - A list of instances, each a dict with C(name), C(model) (a catalog id or a staged model's
        facts dict) and C(intent) (see the serve_plan filter).
    type: list
    elements: dict
    required: true
  label:
    description: The variable name used in error messages.
    type: str
    default: instances
  behind_door:
    description:
      - The front door is the only way in. Every single-node instance then serves on a Unix socket
        (vLLM's C(--uds)) in its own network namespace, and its endpoint carries the socket's path.
    type: bool
    default: false
  releases:
    description:
      - The releases installed beside the host's main one (the vllm_install role publishes them as
        C(vllm_install_side_releases)), each a dict with C(name), C(vllm_version) and, once locked, C(id),
        C(path), C(capabilities), C(prebuilt_kernels) and C(record).
      - An instance with C(release) runs from the release of that name. One without runs from the main release,
        else from the newest side release that loads its model; its plan's C(release) says which and why.
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Plan every instance on this host
  ansible.builtin.set_fact:
    __plans: >-
      {{ sparkfleet_facts | sparkfleet.vllm.host_plan([
           {'name': 'coder', 'model': 'nvidia/Qwen3.6-35B-A3B-NVFP4', 'intent': {'max_context': 65536}},
         ], 'vllm_serve_instances') }}
"""

RETURN = r"""
_value:
  description: C(instances) (name to ServePlan), C(footprint_gib) (all instances together) and C(usable_gib).
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

host_plan = library_filter("host_plan")


class FilterModule:
    def filters(self):
        return {"host_plan": host_plan}
