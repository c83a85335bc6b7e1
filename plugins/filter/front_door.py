# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: front_door
short_description: Plan the front door of a host (routes by model name, allow-listed paths, clients, limits)
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Runs the C(sparkfleet) door planner on a host plan (the P(sparkfleet.vllm.host_plan#filter) result).
  - Refuses an instance that binds beyond loopback, two instances with one model name, a door port that
    clashes with an instance or a sparkfleet service, and client lists with bad names, weak keys or a
    key given twice. Errors name the variable; a key is never shown.
  - Client keys leave this filter as SHA-256 digests only.
positional: settings, variable
options:
  _input:
    description: The host plan (C(vllm_serve_plan)).
    type: dict
    required: true
  settings:
    description:
      - C(address), C(port), C(server_name), C(tls) (C(self_signed), C(provided) or C(ca)), C(http2),
        C(clients) (a list of C(name) and C(key)) and C(limits) (C(requests_per_minute), C(burst),
        C(concurrency), C(max_body_mib), C(read_timeout_s), C(retry_after_s), C(on_demand_wait_s), and per address
        without a valid key C(anonymous_per_minute), C(anonymous_burst), C(anonymous_concurrency); per address
        on the chat UI's port C(webui_per_minute), C(webui_burst), C(webui_concurrency)).
    type: dict
    required: true
  variable:
    description: The variable prefix used in error messages.
    type: str
    default: front_door
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Plan the door
  ansible.builtin.set_fact:
    __door: >-
      {{ vllm_serve_plan | sparkfleet.vllm.front_door({'port': 443, 'clients': [{'name': 'alice', 'key': alice_key}]}) }}
"""

RETURN = r"""
_value:
  description: C(routes) (model name to loopback upstream), C(paths), C(models) (the /v1/models answer), C(clients)
    (names and key digests), C(limits) and C(reasons).
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

front_door = library_filter("front_door")


class FilterModule:
    def filters(self):
        return {"front_door": front_door}
