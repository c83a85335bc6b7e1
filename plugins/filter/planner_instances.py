# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: planner_instances
short_description: The planner's request for each instance, with its model's and drafter's source decided
version_added: 0.5.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Decides where each instance's model and drafter come from (the staged copy, the controller directory
    model_stage will copy, the hub description at the pinned commit, or the bare id of a catalog model), in
    the library (C(sparkfleet.modelsource)), and refuses an instance whose model or drafter nothing will
    provide, naming the variable.
  - Host and port fall back to the planner's own defaults; only whether an instance has a key reaches it.
positional: facts, host, keyed, link
options:
  _input:
    description: The instances (C(vllm_serve_instances) without their keys, and the ranks this member runs).
    type: list
    elements: dict
    required: true
  facts:
    description:
      - C(staged) (model_facts), C(stage_entries) (C(model_stage_models)), C(described) (controller directories
        described), C(hub) (hub models described), C(pins) (C(model_stage_pins)), C(hf_home), C(model_store)
        and C(render_only).
    type: dict
    required: true
  host:
    description: The inventory host, for the messages.
    type: str
    required: true
  keyed:
    description: The names of the instances that have an API key.
    type: list
    elements: str
    required: true
  link:
    description: This member's place on the cluster link, C(master_addr) and C(host_ip) (empty off a cluster).
    type: dict
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Describe each instance to the planner
  ansible.builtin.set_fact:
    __instances: >-
      {{ __public | sparkfleet.vllm.planner_instances(
           {'staged': __facts.staged, 'stage_entries': model_stage_models, 'hf_home': '/var/lib/sparkfleet/hf',
            'model_store': '/var/lib/sparkfleet/models'},
           inventory_hostname, ['qwen'], {'master_addr': '', 'host_ip': ''}) }}
"""

RETURN = r"""
_value:
  description: One C({name, model, drafter, intent, placement}) per instance, as the C(host_plan) filter takes them.
  type: list
  elements: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

planner_instances = library_filter("planner_instances")


class FilterModule:
    def filters(self):
        return {"planner_instances": planner_instances}
