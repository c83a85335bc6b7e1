"""The link_reach module run by ansible itself on this machine: a peer that accepts, one that refuses (its
kernel answers), one that never answers, and a source address the host does not have.

A silent peer is made locally: a listener whose accept queue is full drops further SYNs, as a dead link or a
dropping firewall does (an outside address is no use: this machine's network refuses every connection out)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from adhoc import run_module


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


@pytest.fixture
def silent() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(0)
        port = int(sock.getsockname()[1])
        queued = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(3)]
        for pending in queued:
            pending.setblocking(False)
            pending.connect_ex(("127.0.0.1", port))
        try:
            yield port
        finally:
            for pending in queued:
                pending.close()


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_accepted_and_refused_both_answer(listener: int) -> None:
    accepted = run_module("link_reach", {"source": "127.0.0.1", "peers": {"peer": "127.0.0.1"}, "port": listener})
    assert accepted["changed"] is False and accepted["unanswered"] == []
    assert accepted["peers"] == {
        "peer": {"address": "127.0.0.1", "answered": True, "how": "accepted", "ms": accepted["peers"]["peer"]["ms"]}
    }  # type: ignore[index]
    refused = run_module(
        "link_reach", {"source": "127.0.0.1", "peers": {"peer": "127.0.0.1"}, "port": closed_port()}, "--check"
    )
    assert refused["unanswered"] == [] and refused["peers"]["peer"]["how"] == "refused"  # type: ignore[index]


def test_a_silent_peer_is_unanswered_with_the_reason(silent: int) -> None:
    result = run_module("link_reach", {"source": "127.0.0.1", "peers": {"gone": "127.0.0.1"}, "port": silent, "timeout": 1})
    assert result["changed"] is False and "failed" not in result
    assert result["unanswered"] == ["gone (127.0.0.1): no answer within 1 s"]
    assert result["peers"]["gone"]["answered"] is False  # type: ignore[index]


def test_a_source_the_host_lacks_is_named() -> None:
    result = run_module("link_reach", {"source": "192.0.2.77", "peers": {"peer": "127.0.0.1"}, "port": 6379})
    assert result["unanswered"] == ["peer (127.0.0.1): cannot send from 192.0.2.77: Cannot assign requested address"]


@pytest.mark.parametrize(
    ("args", "message"), [({"port": 0}, "port: 0 is not a TCP port"), ({"port": 1, "timeout": 0}, "timeout: 0")]
)
def test_bad_input_is_refused(args: dict[str, object], message: str) -> None:
    result = run_module("link_reach", {"source": "127.0.0.1", "peers": {}, **args})
    assert result.get("failed") is True and message in str(result["msg"])


def test_neighbours_are_the_complete_entries_on_the_link_interface(tmp_path: Path) -> None:
    from conftest import load_file

    module = load_file("plugins/modules/link_reach.py")
    table = tmp_path / "arp"
    table.write_text(
        "IP address       HW type     Flags       HW address            Mask     Device\n"
        "10.89.0.6        0x1         0x2         5e:0b:8e:2b:9f:01     *        eth1\n"
        "10.89.0.9        0x1         0x2         5e:0b:8e:2b:9f:09     *        eth1\n"
        "10.89.0.7        0x1         0x0         00:00:00:00:00:00     *        eth1\n"
        "10.88.0.1        0x1         0x2         5e:0b:8e:2b:9f:02     *        eth0\n"
    )
    assert module.neighbours("eth1", str(table)) == ["10.89.0.6", "10.89.0.9"]
    assert module.neighbours("eth1", str(tmp_path / "missing")) == []
