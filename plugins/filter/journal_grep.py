# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: journal_grep
short_description: The journalctl --grep pattern for the vLLM log lines the doctor judges
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Returns one PCRE2 pattern that matches every line the doctor reads from a vLLM start - the memory
    vLLM reported (KV cache tokens and memory, weights, start time), the backends it selected (attention,
    NVFP4 GEMM, MoE, compile cache) and the known signatures of a GB10 going wrong or harmlessly noisy.
  - The lines and their meaning live in the sparkfleet library (sparkfleet.logsigns), so the role and the
    judgement never disagree on what is read.
options:
  _input:
    description: Ignored; pass any value (the pattern depends on nothing on the host).
    type: raw
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Read what vLLM reported and selected at its last start
  ansible.builtin.command:
    argv: [journalctl, --output=cat, --no-pager, "--grep={{ none | sparkfleet.vllm.journal_grep }}", _SYSTEMD_INVOCATION_ID=0123]
"""

RETURN = r"""
_value:
  description: The pattern, alternatives of literal anchors joined by C(|).
  type: str
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

journal_grep = library_filter("journal_grep")


class FilterModule:
    def filters(self):
        return {"journal_grep": journal_grep}
