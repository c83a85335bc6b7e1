# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster member's link: its RDMA ports and the network interfaces they and the link use, from sysfs."""

from __future__ import annotations

import os
import re


def read_text(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def read_int(path):
    text = read_text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def describe_netdev(sysfs, name):
    if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,15}", name) or name in (".", ".."):
        return None
    base = os.path.join(sysfs, "class", "net", name)
    if not os.path.isdir(base):
        return None
    speed = read_int(os.path.join(base, "speed"))
    return {
        "mtu": read_int(os.path.join(base, "mtu")),
        "operstate": read_text(os.path.join(base, "operstate")) or "",
        "speed_mbps": speed if speed is not None and speed > 0 else None,
    }


def read_link(sysfs, interfaces):
    """The RDMA ports (what ibstat and ibdev2netdev show) and the network interfaces they and the link use."""
    ports = []
    root = os.path.join(sysfs, "class", "infiniband")
    for device in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        netdir = os.path.join(root, device, "device", "net")
        netdevs = sorted(os.listdir(netdir)) if os.path.isdir(netdir) else []
        portdir = os.path.join(root, device, "ports")
        for port in sorted(os.listdir(portdir)) if os.path.isdir(portdir) else []:
            if not port.isdigit():
                continue
            here = os.path.join(portdir, port)
            ports.append(
                {
                    "device": device,
                    "port": int(port),
                    "state": read_text(os.path.join(here, "state")) or "",
                    "phys_state": read_text(os.path.join(here, "phys_state")) or "",
                    "rate": read_text(os.path.join(here, "rate")) or "",
                    "link_layer": read_text(os.path.join(here, "link_layer")) or "",
                    "netdevs": netdevs,
                }
            )
    names = sorted({name for port in ports for name in port["netdevs"]} | set(interfaces))
    described = {name: describe_netdev(sysfs, name) for name in names}
    return {"rdma_ports": ports, "netdevs": {name: found for name, found in described.items() if found is not None}}
