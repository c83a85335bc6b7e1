# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: serve_plan
short_description: Plan a vLLM instance (argv, env, memory) from host facts, a model and an intent
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Runs the C(sparkfleet) planner on the controller and returns the ServePlan as a dictionary.
  - The plan holds the C(vllm serve) argv, environment, C(--kv-cache-memory-bytes) and
    C(--gpu-memory-utilization), a memory breakdown, systemd limits, the warm-up request and a
    reason and source for every argv entry and environment variable.
  - Intent that cannot fit, or that a vLLM release would refuse, fails with the planner's message.
positional: model, intent
options:
  _input:
    description: Host facts as M(sparkfleet.vllm.host_facts) returns them (the fact C(sparkfleet_facts)).
    type: dict
    required: true
  model:
    description:
      - A catalog id such as C(nvidia/Qwen3.6-35B-A3B-NVFP4), or the facts of a staged model
        directory (a dict with C(id), C(path), C(config) and C(weight_bytes) as M(sparkfleet.vllm.model_facts) reports it);
        a staged model whose id is in the catalog keeps the catalog profile and is loaded from its path.
    type: raw
    required: true
  intent:
    description: Serving intent (max_context, concurrency, profile, kv_cache_dtype, speculative, host, port, api_key, ...).
    type: dict
    default: {}
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Plan the instance
  ansible.builtin.set_fact:
    __plan: "{{ sparkfleet_facts | sparkfleet.vllm.serve_plan('nvidia/Qwen3.6-35B-A3B-NVFP4', {'max_context': 65536, 'concurrency': 4}) }}"
"""

RETURN = r"""
_value:
  description: The ServePlan (argv, env, gpu_memory_utilization, kv_cache_memory_bytes, kv_tokens, memory, warnings, reasons, ...).
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

serve_plan = library_filter("serve_plan")


class FilterModule:
    def filters(self):
        return {"serve_plan": serve_plan}
