# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: doctor
short_description: Judge a host from what the doctor playbook observed (green, yellow, red with reasons)
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Takes the observations the C(doctor) entry points of host_prep, vllm_serve and monitoring gathered
    and returns one finding per check - driver and CUDA policy, memory headroom against the plan's floor and
    page cache, default target, sysctl drift, current release, each instance's unit, readiness, model
    staging, release, inventory drift, the plan against what vLLM reported at its last start, and the
    attention, MoE and linear kernels vLLM selected at that start against the ones the plan forces.
positional: host
options:
  _input:
    description: The C(sparkfleet_doctor) fact (sections C(host), C(serve), C(services), C(alerts)).
    type: dict
    required: true
  host:
    description: The host name printed at the top of the table.
    type: str
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Judge what was observed
  ansible.builtin.set_fact:
    report: "{{ sparkfleet_doctor | sparkfleet.vllm.doctor(inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: C(findings) (area, check, status green|yellow|red, detail), C(red) (the red findings) and C(table) (text).
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

doctor = library_filter("doctor")


class FilterModule:
    def filters(self):
        return {"doctor": doctor}
