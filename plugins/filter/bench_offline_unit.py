# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: bench_offline_unit
short_description: The systemd-run words that give an offline benchmark the instance unit's environment and limits
version_added: 0.14.0
author: sparkfleet contributors (@sparkfleet)
description:
  - From C(systemctl show -p Environment -p MemoryMax -p MemoryHigh -p LimitNOFILE) of the instance's unit, returns
    C(--setenv) for each of its environment assignments (the caches of its release, C(HF_HOME), the plan's
    variables) and C(--property) for each limit it sets, so C(vllm bench throughput) runs as the instance's engine
    would.
options:
  _input:
    description: What C(systemctl show) printed (one C(KEY=VALUE) a line).
    type: str
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: The words of the instance's environment and limits
  ansible.builtin.set_fact:
    __words: "{{ __show.stdout | sparkfleet.vllm.bench_offline_unit }}"
"""

RETURN = r"""
_value:
  description: The C(systemd-run) words.
  type: list
  elements: str
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

bench_offline_unit = library_filter("bench_offline_unit")


class FilterModule:
    def filters(self):
        return {"bench_offline_unit": bench_offline_unit}
