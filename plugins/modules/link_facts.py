#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: link_facts
short_description: Describe a cluster member's link from sysfs, as the fact sparkfleet_link
version_added: 0.9.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Reports each RDMA device port (what ibstat and ibdev2netdev show) and the network interfaces they and
    O(interfaces) use, with their MTU, state and speed; what the cluster's link preflight and doctor judge.
  - Reads only; safe in check mode.
options:
  interfaces:
    description: Network interfaces to describe beside the RDMA devices' own (the cluster link, C(ray_cluster_interface)).
    type: list
    elements: str
    default: []
  sysfs:
    description: Where sysfs is mounted.
    type: path
    default: /sys
  meminfo:
    description: The kernel's memory figures, for its CMA reservation (C(CmaTotal), C(CmaFree)).
    type: path
    default: /proc/meminfo
  nccl_conf:
    description: NCCL's own configuration file, which every NCCL process on the host reads beside its environment.
    type: path
    default: /etc/nccl.conf
attributes:
  facts:
    description: Sets the fact C(sparkfleet_link).
    support: full
extends_documentation_fragment:
  - sparkfleet.vllm.read_only
"""

EXAMPLES = r"""
- name: Describe the link
  sparkfleet.vllm.link_facts:
    interfaces: [enp1s0f0np0]
"""

RETURN = r"""
ansible_facts:
  description: The facts set.
  returned: always
  type: dict
  contains:
    sparkfleet_link:
      description:
        - C(rdma_ports), each RDMA device port (device, port, state, phys_state, rate, link_layer, the netdevs of
          its PCI function, and C(gids), its GID table's addresses with index and type), and C(netdevs), those netdevs
          and O(interfaces) with mtu, operstate and speed_mbps.
        - C(cma), the kernel's C(total_kb) and C(free_kb) of contiguous memory (null without those lines), and
          C(nccl_conf), O(nccl_conf)'s path and settings (null where there is no such file).
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.vllm.plugins.module_utils.link_state import read_link


def main():
    module = AnsibleModule(
        argument_spec={
            "interfaces": {"type": "list", "elements": "str", "default": []},
            "sysfs": {"type": "path", "default": "/sys"},
            "meminfo": {"type": "path", "default": "/proc/meminfo"},
            "nccl_conf": {"type": "path", "default": "/etc/nccl.conf"},
        },
        supports_check_mode=True,
    )
    module.exit_json(
        changed=False,
        ansible_facts={
            "sparkfleet_link": read_link(
                module.params["sysfs"], module.params["interfaces"], module.params["meminfo"], module.params["nccl_conf"]
            )
        },
    )


if __name__ == "__main__":
    main()
