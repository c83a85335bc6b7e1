# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: bench_metrics
short_description: The Prometheus textfile of a benchmark held against its speed prediction
version_added: 0.13.0
author: sparkfleet contributors (@sparkfleet)
description:
  - From an instance's benchmark summary (P(sparkfleet.vllm.bench_summary#filter)'s result), returns node_exporter textfile
    metrics, C(sparkfleet_benchmark_decode_ratio) (measured over predicted aggregate decode, per concurrency) and
    C(sparkfleet_benchmark_far_below_prediction) (1 when a level decoded far below its predicted range).
  - An empty string where the plan predicted no speed (a CPU host), whose figures are never held against a Spark's.
positional: instance
options:
  _input:
    description: The benchmark summary.
    type: dict
    required: true
  instance:
    description: The instance's name (the metrics' C(instance) label).
    type: str
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Write the benchmark's ratio for node_exporter
  ansible.builtin.copy:
    content: "{{ summary | sparkfleet.vllm.bench_metrics('coder') }}"
    dest: /var/lib/prometheus/node-exporter/sparkfleet-benchmark-coder.prom
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The textfile's content, or an empty string.
  type: str
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

bench_metrics = library_filter("bench_metrics")


class FilterModule:
    def filters(self):
        return {"bench_metrics": bench_metrics}
