# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: cluster_check
short_description: Every way the nodes of a Ray cluster differ from its head, each naming the node
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Compares each node with the head - release id, vLLM / torch / Ray / NCCL versions, staged models - and
    reports a missing interconnect interface or a peer that does not answer on it.
  - A staged model is C(true) when complete, or what C(model_facts) reports of it
    (C(complete), C(manifest_digest), C(failing)); then a node whose manifest digest differs from the head's
    (other files or another commit) is named, and a node's failing files are listed.
positional: head, interface
options:
  _input:
    description: Node name to C({release_id, packages, versions, models, interface, addressed, peers}).
    type: dict
    required: true
  head:
    description: The head node.
    type: str
    required: true
  interface:
    description: The interconnect interface, for messages.
    type: str
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Compare the nodes
  ansible.builtin.set_fact:
    __problems: "{{ nodes | sparkfleet.vllm.cluster_check('spark01', 'enp1s0f1np1') }}"
"""

RETURN = r"""
_value:
  description: The problems, one sentence each; empty when the cluster matches.
  type: list
  elements: str
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

cluster_check = library_filter("cluster_check")


class FilterModule:
    def filters(self):
        return {"cluster_check": cluster_check}
