# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: bench_thinking_args
short_description: The vllm bench serve words of a benchmark's thinking switch
version_added: 0.13.0
author: sparkfleet contributors (@sparkfleet)
description:
  - For C(default), no words (each request runs as the instance's own default); for C(on) or C(off), C(--extra-body)
    with every request's C(chat_template_kwargs) C(enable_thinking), so a reasoning model is measured thinking and not.
  - Refused (naming C(vllm_serve_benchmark_thinking)) where the instance's chat template has no such switch (no
    reasoning parser whose template reads it, and no C(enable_thinking) in the instance's own template defaults).
positional: thinking
options:
  _input:
    description: The instance's applied plan (its C(.plan.json)).
    type: dict
    required: true
  thinking:
    description: The switch.
    type: str
    required: true
    choices: [default, "on", "off"]
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Add the switch to the bench's argv
  ansible.builtin.set_fact:
    __words: "{{ plan | sparkfleet.vllm.bench_thinking_args('off') }}"
"""

RETURN = r"""
_value:
  description: The words to add to C(vllm bench serve), or an empty list.
  type: list
  elements: str
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

bench_thinking_args = library_filter("bench_thinking_args")


class FilterModule:
    def filters(self):
        return {"bench_thinking_args": bench_thinking_args}
