# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: settings_as_text
short_description: The typed role options given as text, each with how to pass it typed
version_added: 0.13.0
author: sparkfleet contributors (@sparkfleet)
description:
  - A role's argument spec accepts the text C("false") for a boolean without converting it, and Jinja then reads it as
    true (C(-e name=value) and INI inventories pass text). For each option of P(sparkfleet.vllm.role_options#lookup) whose
    value is text, returns a line naming it and the C(-e) with JSON that passes it typed.
positional: values
options:
  _input:
    description: The options, each C({name, type}) with type C(bool), C(int) or C(float).
    type: list
    elements: dict
    required: true
  values:
    description: Each option's value in the same order, the text C(__undefined__) where it is unset.
    type: list
    elements: raw
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Refuse typed settings given as text
  vars:
    options: "{{ query('sparkfleet.vllm.role_options', 'bool') }}"
  ansible.builtin.assert:
    that: >-
      options | sparkfleet.vllm.settings_as_text(query('ansible.builtin.vars', *(options | map(attribute='name')),
                                                       default='__undefined__')) | length == 0
"""

RETURN = r"""
_value:
  description: One line per option given as text; empty when there is none.
  type: list
  elements: str
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

settings_as_text = library_filter("settings_as_text")


class FilterModule:
    def filters(self):
        return {"settings_as_text": settings_as_text}
