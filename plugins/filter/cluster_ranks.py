# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: cluster_ranks
short_description: The headless ranks a cluster member runs for the head's native multi-node instances
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - A native multi-node instance (vLLM's own launch) is declared once, in the head's vllm_serve_instances; rank k
    runs on the k-th member after the head, in inventory order, without an API server.
  - Returns that member's copies of those entries (API key removed) with C(rank) set. Refuses an instance that
    spans more nodes than the cluster has members.
positional: head, members, me
options:
  _input:
    description: The head's vllm_serve_instances.
    type: list
    elements: dict
    required: true
  head:
    description: The cluster's head (ray_cluster_head).
    type: str
    required: true
  members:
    description: Every member of the cluster, the head included, in inventory order.
    type: list
    elements: str
    required: true
  me:
    description: The member asking.
    type: str
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Add this member's ranks
  ansible.builtin.set_fact:
    __ranks: "{{ hostvars['spark01'].vllm_serve_instances | sparkfleet.vllm.cluster_ranks('spark01', ['spark01', 'spark02'], inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: The head's native multi-node instance entries this member runs a rank of, each with C(rank).
  type: list
  elements: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

cluster_ranks = library_filter("cluster_ranks")


class FilterModule:
    def filters(self):
        return {"cluster_ranks": cluster_ranks}
