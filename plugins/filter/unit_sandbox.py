# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: unit_sandbox
short_description: The systemd sandbox directives of a sparkfleet unit, each with its reason
version_added: 0.2.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Returns the directives (NoNewPrivileges, ProtectSystem=strict with ReadWritePaths, PrivateTmp,
    an empty capability set, system call and address family filters, device policy, IP filtering
    from the bind address ...) a unit of that kind runs with, in render order, each with the reason
    the unit carries as a comment. Relaxations (JIT memory for vLLM and Ray, the GB10 device nodes)
    say why.
positional: platform, writable, bind_host, allowed_clients, link_subnet, rdma_devices, socket, socket_group
options:
  _input:
    description:
      - The unit kind (C(vllm), C(watchdog), C(ray), C(node_exporter), C(prometheus), C(drop_caches), C(front_door),
        C(door_metrics), C(gpu_metrics), C(door_activator), C(webui), C(link_test), C(memory_guard), C(metrics_gate),
        C(door_gate)).
    type: str
    required: true
  platform:
    description: C(gb10) or C(cpu).
    type: str
    required: true
  writable:
    description: Paths the unit writes (its state and caches).
    type: list
    elements: str
    default: []
  bind_host:
    description: The address the unit's API binds (vllm) or the probe reaches (watchdog).
    type: str
    default: 127.0.0.1
  allowed_clients:
    description: Client addresses or networks admitted when the API binds beyond loopback; empty admits any.
    type: list
    elements: str
    default: []
  link_subnet:
    description:
      - What a cluster member admits on the link, space-separated addresses or networks (the members'
        addresses); for C(link_test), the one peer of the test.
    type: str
  rdma_devices:
    description:
      - The RDMA verbs nodes of the host (C(/dev/infiniband/uverbsN), C(/dev/infiniband/rdma_cm); M(sparkfleet.vllm.host_facts) lists them).
      - On gb10 a cluster member (a Ray unit, or an instance with a link subnet) may open them, with an unlimited memlock;
        never the rest of C(/dev/infiniband).
    type: list
    elements: str
    default: []
  socket:
    description:
      - The Unix socket an instance serves on behind the door (vllm), or that the unit reaches it at
        (watchdog, the benchmark's vllm-kind unit, and for C(door_activator) any of its instances' sockets).
      - The unit then runs in a network namespace of its own (C(PrivateNetwork=yes)).
    type: str
  socket_group:
    description: The group of the socket directories (nginx's workers' group); a watchdog or activator joins it.
    type: str
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Render a unit's sandbox
  ansible.builtin.set_fact:
    __sandbox: "{{ 'vllm' | sparkfleet.vllm.unit_sandbox('gb10', ['/var/lib/sparkfleet'], '127.0.0.1') }}"
"""

RETURN = r"""
_value:
  description: A list of C({name, value, reason}).
  type: list
  elements: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

unit_sandbox = library_filter("unit_sandbox")


class FilterModule:
    def filters(self):
        return {"unit_sandbox": unit_sandbox}
