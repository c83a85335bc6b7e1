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


ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def read_gids(port_dir):
    """The port's GID table as NCCL reads it: each index with an address, its type (gid_attrs/types) and address."""
    gids = []
    gid_dir = os.path.join(port_dir, "gids")
    names = os.listdir(gid_dir) if os.path.isdir(gid_dir) else []
    for name in sorted((n for n in names if n.isdigit()), key=int):
        address = read_text(os.path.join(gid_dir, name))
        if not address or address == ZERO_GID:
            continue
        kind = read_text(os.path.join(port_dir, "gid_attrs", "types", name)) or ""
        gids.append({"index": int(name), "type": kind, "gid": address})
    return gids


def read_cma(meminfo):
    """CmaTotal and CmaFree (kB) as /proc/meminfo has them; None where the file or the lines are absent."""
    found = {}
    try:
        with open(meminfo, encoding="utf-8") as handle:
            for line in handle:
                key, _sep, rest = line.partition(":")
                if key in ("CmaTotal", "CmaFree") and rest.split():
                    found[key] = int(rest.split()[0])
    except (OSError, ValueError):
        return None
    if not found:
        return None
    return {"total_kb": found.get("CmaTotal"), "free_kb": found.get("CmaFree")}


def read_nccl_conf(path):
    """The settings of NCCL's own configuration file (KEY=VALUE lines), which every NCCL process on the host
    reads; None where there is no such file."""
    text = read_text(path)
    if text is None:
        return None
    settings = {}
    for raw in text.splitlines():
        key, sep, value = raw.split("#", 1)[0].strip().partition("=")
        if sep and key.strip():
            settings[key.strip()] = value.strip()
    return {"path": path, "settings": settings}


def read_link(sysfs, interfaces, meminfo=None, nccl_conf=None):
    """The RDMA ports (what ibstat and ibdev2netdev show) and the network interfaces they and the link use; with
    meminfo and nccl_conf, the kernel's CMA figures and NCCL's configuration file."""
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
                    "gids": read_gids(here),
                }
            )
    names = sorted({name for port in ports for name in port["netdevs"]} | set(interfaces))
    described = {name: describe_netdev(sysfs, name) for name in names}
    facts = {"rdma_ports": ports, "netdevs": {name: found for name, found in described.items() if found is not None}}
    if meminfo is not None:
        facts["cma"] = read_cma(meminfo)
    if nccl_conf is not None:
        facts["nccl_conf"] = read_nccl_conf(nccl_conf)
    return facts
