"""The door's connections, counted before TLS: the host firewall's per-address and per-port caps and nginx's own.

nginx's limit_conn acts on a request, after its head: a client that opens connections and never finishes a TLS
handshake holds a worker connection each for header_timeout_s without ever reaching it (1,530 such connections from
one address filled Debian's 768 a worker, issue 61). So the host firewall counts each address's connections to each
door port (and each port's from every address) before nginx accepts them, and nginx is given room for every
connection the firewall lets through, on each worker, with its upstream's.

Enters: the door's ports and its limits. Leaves: the nftables table (loaded by sparkfleet-door-gate.service), nginx's
worker_connections and open-file limit, and what the held connections add to nginx's memory.
"""

from __future__ import annotations

import math

from ..models import Strict
from .doorlimits import DoorLimits

TABLE = "sparkfleet_door"

# A proxied request holds two connections of its worker (the client's and the upstream's), and nginx accepts on
# every worker without balancing them, so each worker is given room for every connection the firewall admits.
CONNECTIONS_PER_REQUEST = 2
# The master's and each worker's own files besides connections: logs, the temp files of spooled bodies, njs's
# module and maps, the listening sockets.
OWN_FILES = 1024
# What nginx holds for the costliest connection a client can leave open: one that sent its ClientHello and went silent
# mid-handshake (46.4 and 47.2 KiB each over 800 and 1,600 of them on a freshly started nginx; a bare TCP connection
# 0.4-0.6 KiB, a finished idle handshake 1.4-1.6 KiB, HTTP/1.1 or HTTP/2), measured on the sandbox host with Debian
# 12's nginx 1.22 and OpenSSL 3 (benchmarks/door_connections.py; docs/performance.md, "The door's connections"), with
# a tenth for room.
CONNECTION_KIB = 52


class DoorConnections(Strict):
    """What the door holds open: the firewall's caps, nginx's room for them and their memory."""

    table: str = TABLE
    ports: list[int]
    per_source: int
    per_port: int
    worker_connections: int
    open_files: int
    memory_mib: int
    ruleset: str
    reason: str


def ruleset(ports: list[int], per_source: int, per_port: int) -> str:
    """The table, replacing the one loaded before in one transaction: a new connection to a door port past its
    address's share of that port, or past the port's whole share, is reset before nginx sees it."""
    port_set = ", ".join(str(p) for p in sorted(set(ports)))
    match = f"tcp dport {{ {port_set} }} ct state new"
    reset = "counter reject with tcp reset"
    return (
        f"table inet {TABLE}\n"
        f"delete table inet {TABLE}\n"
        f"table inet {TABLE} {{\n"
        "  set ipv4_sources {\n    type ipv4_addr . inet_service; size 65535; flags dynamic;\n  }\n"
        "  set ipv6_sources {\n    type ipv6_addr . inet_service; size 65535; flags dynamic;\n  }\n"
        "  set ports {\n    type inet_service; size 64; flags dynamic;\n  }\n"
        "  chain input {\n"
        "    type filter hook input priority filter; policy accept;\n"
        f"    {match} add @ipv4_sources {{ ip saddr . tcp dport ct count over {per_source} }} {reset}\n"
        f"    {match} add @ipv6_sources {{ ip6 saddr . tcp dport ct count over {per_source} }} {reset}\n"
        f"    {match} add @ports {{ tcp dport ct count over {per_port} }} {reset}\n"
        "  }\n"
        "}\n"
    )


def door_connections(ports: list[int], limits: DoorLimits) -> DoorConnections:
    """The firewall's caps on `ports`, and nginx sized to hold every connection they admit."""
    admitted = len(set(ports)) * limits.port_connections
    worker_connections = CONNECTIONS_PER_REQUEST * admitted + OWN_FILES // 8
    open_files = worker_connections + OWN_FILES
    memory_mib = math.ceil(admitted * CONNECTION_KIB / 1024)
    reason = (
        f"connections: at most {limits.source_connections} from one client address to each door port and "
        f"{limits.port_connections} to each port in all, counted by the host firewall before TLS "
        f"(nftables table inet {TABLE}, front_door_limits.source_connections / port_connections), so one address "
        "cannot fill the door and a flood of one port leaves the other reachable; each nginx worker has room for "
        f"all {admitted} with their upstreams (worker_connections {worker_connections}, LimitNOFILE {open_files}), "
        f"{memory_mib} MiB of its memory at {CONNECTION_KIB} KiB a connection"
    )
    return DoorConnections(
        ports=sorted(set(ports)),
        per_source=limits.source_connections,
        per_port=limits.port_connections,
        worker_connections=worker_connections,
        open_files=open_files,
        memory_mib=memory_mib,
        ruleset=ruleset(ports, limits.source_connections, limits.port_connections),
        reason=reason,
    )
