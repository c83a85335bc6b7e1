# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: bench_offline_argv
short_description: The vllm bench throughput words of an offline run of an instance's engine
version_added: 0.14.0
author: sparkfleet contributors (@sparkfleet)
description:
  - The C(vllm) words (after the release's C(bin/vllm)) of C(vllm bench throughput) over random prompts of the given
    lengths, with the plan's engine arguments in its order; C(vllm serve)'s front-end flags (address, port, socket,
    tool and chat template settings), which that parser does not take, are left out.
  - Refused (naming C(vllm_serve_benchmark_offline)) for an instance served across nodes or a pooling model.
positional: input_len, output_len, num_prompts, output_json
options:
  _input:
    description: The instance's applied plan (its C(.plan.json)).
    type: dict
    required: true
  input_len:
    description: Input tokens per prompt.
    type: int
    required: true
  output_len:
    description: Output tokens per prompt.
    type: int
    required: true
  num_prompts:
    description: Prompts in the run.
    type: int
    required: true
  output_json:
    description: Where vLLM writes its result.
    type: str
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: The offline run's words
  ansible.builtin.set_fact:
    __words: "{{ plan | sparkfleet.vllm.bench_offline_argv(1024, 128, 16, '/var/lib/sparkfleet/benchmarks/tiny/offline.json') }}"
"""

RETURN = r"""
_value:
  description: The words after C(vllm).
  type: list
  elements: str
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

bench_offline_argv = library_filter("bench_offline_argv")


class FilterModule:
    def filters(self):
        return {"bench_offline_argv": bench_offline_argv}
