# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: monitoring
short_description: The Prometheus rules, the Grafana dashboard and the plan's textfile metrics of sparkfleet
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Renders one monitoring artifact from the C(sparkfleet.hostconfig.monitoring) tables, so the recording rules,
    the alerts and the dashboard panels share their expressions.
  - C(rules) is the rule file (recording rules per instance; alerts for an instance or node_exporter
    down, KV cache nearly full, MemAvailable below the plan's floor, TTFT p95, generation stalled with
    running requests, speculative acceptance collapsed); C(dashboard) the importable Grafana JSON;
    C(queries) every rule expression plus the signal each alert watches; C(plan_metrics) the applied
    host plan as node_exporter textfile metrics.
positional: what, host_plan
options:
  _input:
    description:
      - Alert thresholds (C(kv_cache_usage), C(ttft_p95_seconds), C(memory_floor_fraction),
        C(spec_acceptance), C(down_for), C(stalled_for), C(sustained_for)); unknown keys and bad values
        are refused with the key named.
    type: dict
    required: true
  what:
    description: The artifact.
    type: str
    choices: [rules, dashboard, queries, plan_metrics]
    required: true
  host_plan:
    description: The host plan vllm_serve applied (C(host.plan.json)); only for C(plan_metrics).
    type: dict
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Write the rules
  ansible.builtin.copy:
    content: "{{ {'kv_cache_usage': 0.85} | sparkfleet.vllm.monitoring('rules') | to_nice_yaml }}"
    dest: /etc/prometheus/sparkfleet/rules.yml
    mode: "0644"
"""

RETURN = r"""
_value:
  description: A dict (rules, dashboard), a list of dicts (queries) or the textfile text (plan_metrics).
  type: raw
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

monitoring = library_filter("monitoring")


class FilterModule:
    def filters(self):
        return {"monitoring": monitoring}
