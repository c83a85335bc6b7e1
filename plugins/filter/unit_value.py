# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: unit_value
short_description: One value spelled for a systemd unit file, or refused
version_added: 0.2.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Returns the value spelled so that systemd reads back exactly that value as one token at the given
    place of a unit file, quoting and escaping (C(%%), C($$), C(\\), C(\")) as that place needs.
  - Refuses, naming O(variable), a value that cannot be spelled safely, such as one with a newline or another
    control character (it would add lines to the unit), a lone C(;) on a command line, or one longer
    than 4096 characters.
positional: place, variable
options:
  _input:
    description: The value; anything else is turned into its text first.
    type: raw
    required: true
  place:
    description:
      - V(exec) for one word of a command line (C(ExecStart=)), V(environment) for one C(NAME=value) of
        C(Environment=), V(setting) for a whole setting value such as C(Description=), V(comment) for the
        text of a comment line.
    type: str
    choices: [exec, environment, setting, comment]
    required: true
  variable:
    description: What the value came from, named in a refusal.
    type: str
    default: unit file
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Spell the speculative config for ExecStart
  ansible.builtin.debug:
    msg: "ExecStart=/opt/vllm serve --speculative-config {{ '{\"method\": \"mtp\"}' | sparkfleet.vllm.unit_value('exec') }}"
"""

RETURN = r"""
_value:
  description: The spelled value; a JSON object for ExecStart comes back in double quotes, its own quotes escaped.
  type: str
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

unit_value = library_filter("unit_value")


class FilterModule:
    def filters(self):
        return {"unit_value": unit_value}
