# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: changed_instances
short_description: Which of a host's instances had their own files written anew
version_added: 0.13.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Maps each instance name to whether its environment file, plan or unit was written anew (of the paths the files
    module reports changed) or its own chat template changed; only those restart.
positional: changed_files, templates_changed
options:
  _input:
    description: The instance names.
    type: list
    elements: str
    required: true
  changed_files:
    description: The paths the files module wrote (its C(changed_files)).
    type: list
    elements: str
    required: true
  templates_changed:
    description: The instances whose own chat template changed.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Note what changed for each instance
  ansible.builtin.set_fact:
    __changed: "{{ ['tiny'] | sparkfleet.vllm.changed_instances(['/etc/sparkfleet/tiny.env'], []) }}"
"""

RETURN = r"""
_value:
  description: Each instance name and whether it changed.
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

changed_instances = library_filter("changed_instances")


class FilterModule:
    def filters(self):
        return {"changed_instances": changed_instances}
