# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: webui_plan
short_description: Plan Open WebUI behind the front door (listener, settings with reasons, command)
version_added: 0.2.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Runs the C(sparkfleet.hostconfig.webui) planner. Open WebUI listens on loopback only, reaches the host's models through
    the door with its own client key and trusts the door's certificate only; nothing it does at run time leaves
    the host (no hub, no update check, no telemetry).
  - Refuses a bad release, admin e-mail or name, and a default model the host does not serve, naming the variable.
positional: host_plan, door, root
options:
  _input:
    description: C(version), C(port), C(admin_email), C(admin_name) and C(default_model) (the webui_* variables).
    type: dict
    required: true
  host_plan:
    description: The host plan (C(vllm_serve_plan)); its served model names.
    type: dict
    required: true
  door:
    description:
      - The door's C(address), C(port), C(server_name), C(webui_port), C(subject_alt_names) and C(certificate) (where
        the UI reads the door's certificate).
    type: dict
    required: true
  root:
    description: Where Open WebUI's releases live (C(webui_root)).
    type: str
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Plan Open WebUI
  ansible.builtin.set_fact:
    __webui_plan: >-
      {{ {'version': '0.12.4', 'admin_email': 'admin@example.com'} | sparkfleet.vllm.webui_plan(vllm_serve_plan,
         {'address': '0.0.0.0', 'port': 443, 'server_name': 'spark01', 'webui_port': 8443,
          'certificate': '/etc/sparkfleet/webui-door.crt'}, '/opt/sparkfleet-webui') }}
"""

RETURN = r"""
_value:
  description: C(upstream) (loopback address), C(url) (what browsers open), C(argv), C(environment) (name, value,
    reason) and C(reasons).
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

webui_plan = library_filter("webui_plan")


class FilterModule:
    def filters(self):
        return {"webui_plan": webui_plan}
