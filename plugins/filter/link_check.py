# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: link_check
short_description: The link preflight of a cluster of Sparks
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Judges every member's cluster link before anything changes; each RDMA device in I(hcas) is ACTIVE, every ACTIVE
    RoCE device is in I(hcas) (both PCIe halves of a ConnectX-7 port), and the netdevs NCCL uses run at MTU 9000.
  - A link with no RDMA device (TCP only) is refused unless I(accept_sockets), then warned with its cost.
  - Refuses an NCCL older than 2.30.4 when a multi-node instance captures CUDA graphs across nodes on gb10.
positional: settings
options:
  _input:
    description: Member name to its C(sparkfleet_link) fact, as M(sparkfleet.vllm.link_facts) reads it (C(rdma_ports), C(netdevs)).
    type: dict
    required: true
  settings:
    description:
      - C(interface) and C(hcas) (ray_cluster_interface, ray_cluster_hcas), C(accept_sockets), C(platform),
        C(nccl) (C(version), C(where)) and C(instances) (the head's vllm_serve_instances).
    type: dict
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Judge the link of every member
  ansible.builtin.set_fact:
    __link: "{{ {'spark01': facts1, 'spark02': facts2} | sparkfleet.vllm.link_check({'interface': 'enp1s0f0np0', 'hcas': []}) }}"
"""

RETURN = r"""
_value:
  description: C(problems) (the cluster must not start) and C(warnings) (accepted), one sentence each.
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

link_check = library_filter("link_check")


class FilterModule:
    def filters(self):
        return {"link_check": link_check}
