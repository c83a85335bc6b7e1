# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: unit_dropins
short_description: A drop-in of each item's systemd unit, for the files module
version_added: 0.13.0
author: sparkfleet contributors (@sparkfleet)
description:
  - For each item (a mapping with C(unit), a systemd unit name), the drop-in directory C(/etc/systemd/system/UNIT.d)
    and a C(templates) entry of M(sparkfleet.vllm.files) that renders O(template) with the item as O(variable) into
    C(UNIT.d/FILENAME), root's and 0644.
positional: template, filename, variable
options:
  _input:
    description: The items, each with C(unit).
    type: list
    elements: dict
    required: true
  template:
    description: The role's template.
    type: str
    required: true
  filename:
    description: The drop-in's file name, such as C(90-sparkfleet-memory.conf).
    type: str
    required: true
  variable:
    description: The name the template reads the item by.
    type: str
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Write the memory drop-ins
  vars:
    dropins: "{{ reservations | sparkfleet.vllm.unit_dropins('memory.conf.j2', '90-memory.conf', 'reservation') }}"
  sparkfleet.vllm.files:
    directories: "{{ dropins.directories }}"
    templates: "{{ dropins.templates }}"
"""

RETURN = r"""
_value:
  description: C(directories) and C(templates), as M(sparkfleet.vllm.files) takes them.
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

unit_dropins = library_filter("unit_dropins")


class FilterModule:
    def filters(self):
        return {"unit_dropins": unit_dropins}
