"""The door's connections counted before TLS (issue 61, deliver 3): the firewall's caps and nginx sized for them.

The specification: issue 61 saw 1,530 silent TLS connections from one address fill both of Debian's 768-connection
workers (shared by 443 and 8443); docs/performance.md, "The door's connections", measured what one costs nginx. The
nftables table itself is loaded by the kernel in the default scenario (verify_exposure.yml), which floods it.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkfleet.hostconfig.doorgate import door_connections, ruleset
from sparkfleet.hostconfig.doorlimits import DoorLimits

# Debian 12's nginx.conf: `events { worker_connections 768; }`, one worker per core.
DEBIAN_WORKER_CONNECTIONS = 768
ISSUE_FLOOD = 1530


def test_one_address_is_held_under_what_filled_debians_door() -> None:
    plan = door_connections([443, 8443], DoorLimits())
    # One address's flood is reset long before the 1,530 connections that filled a two-worker door, on each port.
    assert plan.per_source < DEBIAN_WORKER_CONNECTIONS < ISSUE_FLOOD
    # And every connection the firewall admits on both ports, with its upstream, fits one worker.
    assert plan.worker_connections >= 2 * 2 * plan.per_port
    assert plan.open_files > plan.worker_connections


def test_each_address_is_counted_per_port_so_a_flood_of_one_port_leaves_the_other() -> None:
    text = ruleset([8443, 443], per_source=256, per_port=2048)
    assert text.startswith("table inet sparkfleet_door\ndelete table inet sparkfleet_door\n")
    assert "type ipv4_addr . inet_service;" in text and "type ipv6_addr . inet_service;" in text
    rules = [line.strip() for line in text.splitlines() if "ct count over" in line]
    assert rules == [
        "tcp dport { 443, 8443 } ct state new add @ipv4_sources { ip saddr . tcp dport ct count over 256 } "
        "counter reject with tcp reset",
        "tcp dport { 443, 8443 } ct state new add @ipv6_sources { ip6 saddr . tcp dport ct count over 256 } "
        "counter reject with tcp reset",
        "tcp dport { 443, 8443 } ct state new add @ports { tcp dport ct count over 2048 } counter reject with tcp reset",
    ]


def test_a_door_without_the_chat_ui_counts_its_one_port() -> None:
    plan = door_connections([443], DoorLimits(source_connections=64, port_connections=512))
    assert plan.ports == [443] and "{ 443 }" in plan.ruleset and "count over 64" in plan.ruleset
    assert plan.worker_connections >= 2 * 512
    # docs/performance.md: 46.4-47.2 KiB a silent mid-handshake connection; each admitted one is counted at no less.
    assert plan.memory_mib * 1024 >= 512 * 47.2


@given(
    source=st.integers(min_value=1, max_value=65_535),
    port=st.integers(min_value=16, max_value=65_535),
    ports=st.lists(st.integers(min_value=1, max_value=65_535), min_size=1, max_size=2),
)
def test_nginx_always_has_room_and_memory_for_what_the_firewall_admits(source: int, port: int, ports: list[int]) -> None:
    plan = door_connections(ports, DoorLimits(source_connections=source, port_connections=port))
    admitted = len(set(ports)) * port
    assert plan.worker_connections >= 2 * admitted and plan.open_files > plan.worker_connections
    assert plan.memory_mib * 1024 >= admitted * 47.2
    assert re.search(rf"count over {source} }}", plan.ruleset) and f"count over {port} }}" in plan.ruleset


@pytest.mark.parametrize(("field", "value"), [("source_connections", 0), ("port_connections", 8)])
def test_a_cap_out_of_range_is_refused(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=field):
        DoorLimits.model_validate({field: value})
