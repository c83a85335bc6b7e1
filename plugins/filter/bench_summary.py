# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: bench_summary
short_description: The comparable summary of one instance's benchmark runs
version_added: 0.2.0
author: sparkfleet contributors (@sparkfleet)
description:
  - From the C(vllm bench serve) results of every run at every concurrency, returns what the numbers were
    measured under (release id and key package versions, argv and its hash, the environment's hash, context,
    sequences, graph sizes, the backends vLLM logged it selected, and the thinking switch) and, per concurrency, each metric's
    median, minimum, maximum and spread over the runs.
  - Each level's decode (concurrency x 1000 / median time per output token) is held against the plan's speed
    prediction at that concurrency; a level under half its predicted range's low end is flagged with what the
    record and the start show could explain it (a kernel fallback, eager mode, kernels compiled at start).
  - Each level keeps its prefix cache figures (C(prefix_cache)) - tokens queried and hit over its runs and the hit rate,
    from the instance's own counters read by the probe before and after each run - since a warm cache alone moves
    throughput.
  - C(sparkfleet bench compare A B) prints two such summaries side by side.
positional: plan, release, journal, input_len, output_len, start, thinking, offline, long_reply
options:
  _input:
    description:
      - The registered results of the loop that read each run's JSON, each with C(item) (concurrency, run) and
        C(stdout) (vLLM's result).
    type: list
    elements: dict
    required: true
  plan:
    description: The instance's applied plan (its C(.plan.json)).
    type: dict
    required: true
  release:
    description: The release the instance runs (C(sparkfleet_facts.release)), with C(id), C(vllm_version), C(lock_packages).
    type: dict
    required: true
  journal:
    description: What vLLM logged at the instance's last start (the doctor's journal lines).
    type: str
    required: true
  input_len:
    description: Input tokens per request.
    type: int
    required: true
  output_len:
    description: Output tokens per request.
    type: int
    required: true
  start:
    description:
      - The instance's last start as its probe recorded it (C(/run/sparkfleet/start-<name>.json)), with the seconds
        to its socket, C(/health) and the first right answer, and the kernels compiled during it. Kept in the summary
        as C(start).
    type: dict
  thinking:
    description:
      - The run's thinking switch (P(sparkfleet.vllm.bench_thinking_args#filter)), kept in the record as C(thinking).
    type: str
    default: default
    choices: [default, "on", "off"]
  offline:
    description:
      - The offline run, when it ran (C(vllm_serve_benchmark_offline)), as C(argv) (its words,
        P(sparkfleet.vllm.bench_offline_argv#filter)) and C(stdout) (what C(vllm bench throughput --output-json) wrote).
        Kept as C(offline) (requests, tokens and output tokens a second, the argv and its hash); the record's
        C(modes) says which measurements the summary holds.
    type: dict
  long_reply:
    description:
      - The long-reply check, when it ran (C(vllm_serve_benchmark_long_reply_tokens) above 0), as C(name) (the
        instance) and C(stdout) (the probe's C(long-reply) line, a greedy reply's decode logprobs and the same tokens
        rescored by one prefill). Kept as C(long_reply), the verdict - C(green), or C(red) naming the instance, its
        speculation and its KV dtype where the decode drifts from the prefill past the stated bounds.
    type: dict
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Summarise the runs
  ansible.builtin.set_fact:
    __summary: "{{ __read.results | sparkfleet.vllm.bench_summary(plan, sparkfleet_facts.release, journal, 1024, 128) }}"
"""

RETURN = r"""
_value:
  description: >-
    C(schema), C(record), C(start), C(input_len), C(output_len), C(levels) (concurrency, runs, completed, failed,
    metrics), C(offline) (or null) and C(against_prediction) (each level's measured aggregate decode over the plan's predicted one, a flag
    where it is far below and the likely causes; on a CPU host, C(predicted) false and why).
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

bench_summary = library_filter("bench_summary")


class FilterModule:
    def filters(self):
        return {"bench_summary": bench_summary}
