# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: argv_refusals
short_description: What a release's own vLLM parser refused of the planned argv, one sentence per instance
version_added: 0.13.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Reads the JSON lines of the role's argv check (one per instance, C(ok) false where the release's parser refused
    it) and returns one sentence per refused instance, naming it, the release and the parser's error.
positional: version
options:
  _input:
    description: The argv check's stdout lines.
    type: list
    elements: str
    required: true
  version:
    description: The release's vLLM version.
    type: str
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Refuse what the release refused
  ansible.builtin.assert:
    that: check.rc == 0
    fail_msg: "{{ check.stdout_lines | sparkfleet.vllm.argv_refusals('0.33.0') }}"
"""

RETURN = r"""
_value:
  description: The sentences, or an empty string when nothing was refused.
  type: str
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

argv_refusals = library_filter("argv_refusals")


class FilterModule:
    def filters(self):
        return {"argv_refusals": argv_refusals}
