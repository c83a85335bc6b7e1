#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: link_reach
short_description: Check this host reaches each peer's address from its own link address
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Opens a TCP connection from I(source) to each peer's address on I(port), with no tool beyond Python.
  - A peer answers when the connection is accepted or refused (a refusal is the peer's own kernel answering);
    a timeout, no route or an unreachable host means the link does not carry traffic between the two, or a
    firewall drops that port.
  - Binding I(source) makes the test go out of the link interface, not another route to the peer.
  - Reads only; changes nothing.
options:
  source:
    description: This host's address on the link; the connections leave from it.
    type: str
    required: true
  peers:
    description: Each peer's name and its address on the link.
    type: dict
    required: true
  port:
    description: The TCP port tried on each peer (a port the cluster uses, so a firewall dropping it shows).
    type: int
    required: true
  timeout:
    description: Seconds to wait for each peer to answer.
    type: float
    default: 3
  interface:
    description:
      - The link interface. When set, the hosts this host has a complete neighbour entry for on it (the kernel's
        ARP table) are returned as RV(neighbours), so a preflight can name hosts on the link that are not members.
    type: str
attributes:
  check_mode:
    description: Runs the same read-only test in check mode.
    support: full
  diff_mode:
    description: Nothing to show; it changes nothing.
    support: none
  platform:
    description: POSIX hosts.
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Reach every other cluster member on the link
  sparkfleet.vllm.link_reach:
    source: 192.168.100.10
    peers: {spark02: 192.168.100.11}
    port: 6379
"""

RETURN = r"""
peers:
  description: For each peer, whether it answered, how (accepted, refused, or why not) and in how many milliseconds.
  returned: always
  type: dict
unanswered:
  description: "The peers that did not answer, each as C(name (address): why)."
  returned: always
  type: list
  elements: str
neighbours:
  description: The IPv4 addresses with a complete neighbour entry on I(interface) (empty without it).
  returned: always
  type: list
  elements: str
"""

import errno
import socket
import time

from ansible.module_utils.basic import AnsibleModule


def knock(source, address, port, timeout):
    """(answered, how, milliseconds) of one TCP connection from source to address:port."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    began = time.monotonic()
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.bind((source, 0))
        except OSError as exc:
            return False, f"cannot send from {source}: {exc.strerror or exc}", None
        try:
            sock.connect((address, port))
            how = "accepted"
        except ConnectionRefusedError:
            how = "refused"
        except socket.timeout:
            return False, f"no answer within {timeout:g} s", None
        except OSError as exc:
            name = errno.errorcode.get(exc.errno or 0, "error")
            return False, f"{exc.strerror or exc} ({name})", None
    return True, how, round((time.monotonic() - began) * 1000, 1)


ARP_COMPLETE = 0x2  # ATF_COM in include/uapi/linux/if_arp.h


def neighbours(interface, table="/proc/net/arp"):
    """The IPv4 addresses this host has a complete (resolved) neighbour entry for on the interface."""
    try:
        with open(table, encoding="ascii") as handle:
            rows = handle.read().splitlines()[1:]
    except OSError:
        return []
    found = []
    for row in rows:
        fields = row.split()
        # IP address, HW type, Flags, HW address, Mask, Device
        if len(fields) >= 6 and fields[5] == interface and int(fields[2], 16) & ARP_COMPLETE:
            found.append(fields[0])
    return sorted(set(found))


def main():
    module = AnsibleModule(
        argument_spec={
            "source": {"type": "str", "required": True},
            "peers": {"type": "dict", "required": True},
            "port": {"type": "int", "required": True},
            "timeout": {"type": "float", "default": 3},
            "interface": {"type": "str"},
        },
        supports_check_mode=True,
    )
    params = module.params
    if not 1 <= params["port"] <= 65535:
        module.fail_json(msg=f"port: {params['port']} is not a TCP port (1 to 65535)")
    if not 0 < params["timeout"] <= 60:
        module.fail_json(msg=f"timeout: {params['timeout']} must be more than 0 and at most 60 seconds")
    results, unanswered = {}, []
    for name, address in sorted(params["peers"].items()):
        answered, how, ms = knock(params["source"], str(address), params["port"], params["timeout"])
        results[name] = {"address": str(address), "answered": answered, "how": how, "ms": ms}
        if not answered:
            unanswered.append(f"{name} ({address}): {how}")
    seen = neighbours(params["interface"]) if params["interface"] else []
    module.exit_json(changed=False, peers=results, unanswered=unanswered, neighbours=seen)


if __name__ == "__main__":
    main()
