# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: scrape_targets
short_description: Prometheus file_sd target groups for every vLLM instance and node_exporter a server scrapes
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Takes each inventory host's instances (name, host, port, with the planner's defaults) and returns
    the target groups of the hosts whose C(server) is the given one, labelled C(sparkfleet_host) and
    C(sparkfleet_instance).
  - The server's own instances are scraped over the address they listen on (loopback for 0.0.0.0);
    another host's over its scrape address. An instance on loopback of another host is refused,
    naming the instance and what would work.
positional: server, node_port
options:
  _input:
    description: Inventory host name to C({address, server, node_exporter, instances}).
    type: dict
    required: true
  server:
    description: The inventory host whose Prometheus the targets are for.
    type: str
    required: true
  node_port:
    description: The port node_exporter listens on.
    type: int
    default: 9100
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Plan the targets of this host's Prometheus
  ansible.builtin.set_fact:
    __targets: >-
      {{ {'spark01': {'address': '10.0.0.1', 'server': 'spark01', 'instances': [{'name': 'coder'}]}}
         | sparkfleet.vllm.scrape_targets(inventory_hostname, 9100) }}
"""

RETURN = r"""
_value:
  description: C(vllm) and C(node), each a list of file_sd target groups.
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

scrape_targets = library_filter("scrape_targets")


class FilterModule:
    def filters(self):
        return {"scrape_targets": scrape_targets}
