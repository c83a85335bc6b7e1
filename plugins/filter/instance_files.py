# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: instance_files
short_description: What the vllm_serve role writes for a host's instances, in the files module's terms
version_added: 0.13.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Returns the directories to make (each instance account's caches, seeded from the caches the instances shared
    before; the socket directories behind the front door), each instance's environment file (a template, secrets),
    its plan (a file) and its unit and watchdog units (templates that see C(__vllm_serve_instance) and
    C(__vllm_serve_this)), and each watched instance's start metrics file in node_exporter's textfile directory
    (made once for the supervisors' account, which writes it in place), for M(sparkfleet.vllm.files).
positional: instances, layout
options:
  _input:
    description: The host plan (C(vllm_serve_plan)).
    type: dict
    required: true
  instances:
    description: The instances the role serves, without their keys; a rank of a multi-node instance carries C(rank).
    type: list
    elements: dict
    required: true
  layout:
    description:
      - The role's paths, accounts and switches (C(config_dir), C(shared_cache_dir), C(instance_cache_dir),
        C(cache_names), C(group), C(service_user), C(supervisor_group), C(door_worker_group), C(watchdog),
        C(textfile_dir), C(render_only)).
    type: dict
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Write the instances' plans and units
  vars:
    __files: "{{ vllm_serve_plan | sparkfleet.vllm.instance_files(__vllm_serve_public, __vllm_serve_layout) }}"
  sparkfleet.vllm.files:
    files: "{{ __files.plans }}"
    templates: "{{ __files.unit_templates }}"
"""

RETURN = r"""
_value:
  description: C(directories), C(env_templates), C(plans), C(unit_templates) and C(metric_files), each a list of the files module's entries.
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

instance_files = library_filter("instance_files")


class FilterModule:
    def filters(self):
        return {"instance_files": instance_files}
