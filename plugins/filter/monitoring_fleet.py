# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: monitoring_fleet
short_description: Each inventory host as the Prometheus that scrapes it sees it
version_added: 0.13.0
author: sparkfleet contributors (@sparkfleet)
description:
  - For every inventory host, where Prometheus scrapes it (C(monitoring_scrape_address), else C(ansible_host), else its
    name), which Prometheus does (C(monitoring_server), else itself), whether node_exporter runs, and its instances'
    C(name), C(host), C(port) and C(on_demand) only (an instance's key never enters the result).
  - This host is read from its own variables (with the monitoring role's defaults); every other host from its
    hostvars. This host's instances that serve on sockets behind its door are scraped through the door.
positional: me, local, others, sockets, door_port, door_address
options:
  _input:
    description: The inventory hosts (C(groups['all'])).
    type: list
    elements: str
    required: true
  me:
    description: This host's inventory name.
    type: str
    required: true
  local:
    description: This host's C(monitoring_server), C(monitoring_scrape_address), C(monitoring_node_exporter) and C(vllm_serve_instances).
    type: dict
    required: true
  others:
    description:
      - Per variable (those of O(local) and C(ansible_host)), one value per host of the input, C(none) where the
        host does not set it (C(groups['all'] | map('extract', hostvars, NAME) | map('default', none) | list)).
    type: dict
    required: true
  sockets:
    description: The names of this host's instances that serve on a Unix socket behind its door.
    type: list
    elements: str
    required: true
  door_port:
    description: This host's door port.
    type: int
    required: true
  door_address:
    description: This host's door address.
    type: str
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Describe the fleet
  ansible.builtin.set_fact:
    fleet: >-
      {{ groups['all'] | sparkfleet.vllm.monitoring_fleet(inventory_hostname, {'monitoring_server': inventory_hostname},
           {'monitoring_server': groups['all'] | map('extract', hostvars, 'monitoring_server') | map('default', none) | list},
           [], 443, '0.0.0.0') }}
"""

RETURN = r"""
_value:
  description: Per host, C(server), C(address), C(node_exporter), C(instances), C(door_port) and C(door_address).
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

monitoring_fleet = library_filter("monitoring_fleet")


class FilterModule:
    def filters(self):
        return {"monitoring_fleet": monitoring_fleet}
