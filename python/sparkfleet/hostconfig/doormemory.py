"""What the front door's nginx may hold (its MemoryMax): request bodies in flight at their measured cost.

Enters: the door's keys, each key's concurrency, the largest body a route takes and the largest text body, and the
host-wide large-body lane. Leaves: the MemoryMax in MiB and the sentence that says how it was counted.
"""

from __future__ import annotations

import math

# nginx itself (master, workers, TLS sessions, zones), before any request body.
NGINX_BASE_MIB = 256


# What one request in flight costs nginx, in bodies: its buffer and njs's copy that the router scans (the scan
# itself allocates nothing per byte). Measured with benchmarks/door_memory.py's shapes on Debian's nginx 1.22
# and njs: 2.2 bodies for 2 and 8 MiB bodies of nested arrays, many keys and chat messages alike; 2.5 leaves
# room for TLS and the proxy's buffers.
BODY_COPIES_IN_FLIGHT = 2.5


def door_memory_mib(clients: int, concurrency: int, max_body_mib: int, large: tuple[int, int] | None = None) -> int:
    """What nginx may hold: each key's requests in flight at the body limit, at their measured cost. With a
    large-body lane (`large`: its requests in flight and the text bodies' limit), each key's requests hold text
    bodies and the lane's few the largest body."""
    if large is None:
        return NGINX_BASE_MIB + math.ceil(max(clients, 1) * concurrency * max_body_mib * BODY_COPIES_IN_FLIGHT)
    lane, text = large
    held = max(clients, 1) * concurrency * text + lane * max_body_mib
    return NGINX_BASE_MIB + math.ceil(held * BODY_COPIES_IN_FLIGHT)


def door_memory(
    keys: int, each: int, max_body: int, text_body: int, lane: int, *, connections_mib: int = 0
) -> tuple[int, str]:
    """nginx's MemoryMax and why: with a route that takes more than any text body, the large-body lane holds those;
    the connections the firewall admits (sparkfleet.hostconfig.doorgate) hold `connections_mib` besides."""
    if max_body > text_body:
        memory_max = door_memory_mib(keys, each, max_body, (lane, text_body))
        held = (
            f"{keys} keys x {each} requests x {text_body} MiB of text body + {lane} requests with a larger body "
            f"(media, host-wide: front_door_limits.large_body_concurrency) x {max_body} MiB"
        )
    else:
        memory_max = door_memory_mib(keys, each, max_body)
        held = f"{keys} keys x {each} requests x {max_body} MiB of body"
    memory_max += connections_mib
    held_open = f" + {connections_mib} MiB for the connections it may hold open" if connections_mib else ""
    why = (
        f"nginx may hold {memory_max} MiB (MemoryMax: ({held}) x {BODY_COPIES_IN_FLIGHT} (its buffer and the router's "
        f"copy, measured) + {NGINX_BASE_MIB} MiB for nginx{held_open}); past it the kernel stops the door, never vLLM"
    )
    return memory_max, why
