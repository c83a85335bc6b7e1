"""The systemd sandbox of every unit sparkfleet writes, each directive with its reason.

A Spark sits on a LAN next to other people's machines: every unit runs with the strongest sandbox
its program tolerates, and each relaxation says why (rendered as a comment above it, as the vLLM
flags are). The roles render these lists; nothing here touches a host. The directives every unit shares and the
checks of what a unit is given are sparkfleet.hostconfig.directives; here each unit kind's sandbox is put together.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import PlanError
from ..models import Platform
from .directives import (
    WEBUI_CACHE_DIRECTORY,
    WEBUI_STATE_DIRECTORY,
    Directive,
    UnitKind,
    check_clients,
    check_rdma_devices,
    common,
    devices,
    directive,
    ip_policy,
    is_loopback,
    jit_relaxations,
    offline,
    private_network,
    rdma,
    socket_group,
)

# What callers name through this module: the unit kinds, a directive, the client check.
__all__ = ["Directive", "UnitKind", "check_clients", "sandbox"]


@dataclass(frozen=True)
class UnitInputs:
    """What a unit is given beside its kind and platform (sandbox's keyword arguments)."""

    bind_host: str
    allowed_clients: Sequence[str]
    link_subnet: str | None
    rdma_devices: Sequence[str]
    socket: str | None
    socket_group: str | None


def sandbox(
    kind: UnitKind,
    platform: Platform,
    *,
    writable: Sequence[str] = (),
    bind_host: str = "127.0.0.1",
    allowed_clients: Sequence[str] = (),
    link_subnet: str | None = None,
    rdma_devices: Sequence[str] = (),
    socket: str | None = None,
    socket_group: str | None = None,
) -> list[Directive]:
    """Every sandbox directive of one unit, in the order they are rendered.

    `rdma_devices` (the verbs nodes a host has) open the RDMA link to a cluster member on gb10: a Ray unit,
    or an instance that spans nodes (it has a link subnet); a single-node instance keeps the closed policy.
    `socket`: the instance serves (vllm) or is reached (watchdog, activator, benchmark) on this Unix socket
    behind the door, so the unit needs no network of the host's; `socket_group` is the group of its directory.
    """
    out = common()
    if kind is UnitKind.VLLM and socket:
        writable = [*writable, posixpath.dirname(socket)]
    if writable:
        # '-': a path that does not exist yet is skipped instead of failing the start.
        paths = " ".join(f"-{path}" for path in writable)
        out.append(directive("ReadWritePaths", paths, "its own state and caches, nothing else"))
    given = UnitInputs(bind_host, allowed_clients, link_subnet, rdma_devices, socket, socket_group)
    return _BUILDERS.get(kind, _network_service)(out, kind, platform, given)


def _jit_unit(out: list[Directive], kind: UnitKind, platform: Platform, given: UnitInputs) -> list[Directive]:
    """vLLM and Ray: JIT-compiled kernels, the GPU (and on a cluster member the RDMA link), their own network."""
    out = [*out, *jit_relaxations(), *devices(platform)]
    if platform is Platform.GB10 and given.link_subnet and given.rdma_devices:
        out += rdma(check_rdma_devices(given.rdma_devices))
    out.append(
        directive(
            "RestrictAddressFamilies",
            "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
            "its API, vLLM's internal sockets and interface discovery (netlink)",
        )
    )
    if kind is UnitKind.VLLM and given.socket and not given.link_subnet:
        return [
            *out,
            *private_network(f"it serves on {given.socket} and its engine's own sockets stay inside"),
            directive(
                "IPAddressAllow",
                "localhost",
                "the loopback of its own namespace: its API server, engine core and workers talk there",
            ),
        ]
    if kind is UnitKind.VLLM:
        return out + ip_policy(given.bind_host, given.allowed_clients, given.link_subnet)
    # Fails closed: a link whose subnet is not known admits loopback only, never every address.
    allow = f"localhost {given.link_subnet}" if given.link_subnet else "localhost"
    why = (
        f"this host and the cluster members' own link addresses {given.link_subnet} (not their subnet)"
        if given.link_subnet
        else ("this host only: the cluster link's subnet is not known (ray_cluster_interface has no IPv4 address)")
    )
    return [
        *out,
        directive("IPAddressDeny", "any", "defence in depth: Ray talks to nothing but this host and its peers"),
        directive("IPAddressAllow", allow, why),
    ]


def _closed_service(out: list[Directive]) -> list[Directive]:
    """A long-running service that needs no JIT and no device: the strict system call filter."""
    return [
        *out,
        directive("MemoryDenyWriteExecute", "yes", "no writable+executable memory"),
        directive("PrivateDevices", "yes", "no physical devices"),
        directive("SystemCallFilter", "@system-service", "only the system calls services use"),
        directive("SystemCallErrorNumber", "EPERM", "a filtered system call fails instead of killing the process"),
    ]


def _watchdog(out: list[Directive], kind: UnitKind, platform: Platform, given: UnitInputs) -> list[Directive]:
    out = [
        *_closed_service(out),
        directive("RuntimeDirectory", "sparkfleet", "its miss counts live in /run/sparkfleet (read-only otherwise)"),
        directive("RuntimeDirectoryPreserve", "yes", "the counts must survive between timer runs"),
    ]
    if given.socket:
        door = socket_group(given.socket_group, "")[0].value
        return [
            *out,
            directive(
                "SupplementaryGroups",
                f"systemd-journal {door}",
                f"it reads its instance's journal and opens {posixpath.dirname(given.socket)}, where its instance serves",
            ),
            directive("RestrictAddressFamilies", "AF_UNIX", "its instance's socket and systemd's bus"),
            *private_network("it reaches its instance over the instance's Unix socket only"),
        ]
    # It only talks to the instance, at the address the probe uses (bind_host here).
    peers = ["localhost"] + ([] if is_loopback(given.bind_host) else [given.bind_host])
    return [
        *out,
        directive("SupplementaryGroups", "systemd-journal", "it reads its instance's journal"),
        directive("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6", "the API it probes and systemd's bus"),
        directive("IPAddressDeny", "any", "defence in depth: it talks to nothing but its instance"),
        directive("IPAddressAllow", " ".join(peers), "the instance's API, where the probe reaches it"),
    ]


def _webui(out: list[Directive], kind: UnitKind, platform: Platform, given: UnitInputs) -> list[Directive]:
    return [
        *_closed_service(out),
        directive("StateDirectory", WEBUI_STATE_DIRECTORY, "its accounts and chats, kept across starts and private to it"),
        directive("CacheDirectory", WEBUI_CACHE_DIRECTORY, "its caches, private to it"),
        directive("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6", "its listener and the door"),
        directive("IPAddressDeny", "any", "defence in depth: it talks to nothing but this host"),
        directive("IPAddressAllow", "localhost", "the door forwards browsers to it on loopback; it reaches the door there"),
    ]


def _door_activator(out: list[Directive], kind: UnitKind, platform: Platform, given: UnitInputs) -> list[Directive]:
    if given.socket:
        door = socket_group(given.socket_group, "")[0].value
        return [
            *_closed_service(out),
            directive(
                "SupplementaryGroups",
                f"systemd-journal {door}",
                "its probe reads a failed start's journal for the reason it answers; it opens the on-demand "
                "instances' socket directories",
            ),
            directive("RestrictAddressFamilies", "AF_UNIX", "nginx's socket, systemd's bus, the instances' sockets"),
            *private_network("every on-demand instance serves on a Unix socket"),
        ]
    return [
        *_closed_service(out),
        directive(
            "SupplementaryGroups",
            "systemd-journal",
            "its probe reads a failed start's journal for the reason it answers",
        ),
        directive("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6", "nginx's socket, systemd's bus, the instances"),
        directive("IPAddressDeny", "any", "defence in depth: it talks to nothing but this host's instances"),
        directive("IPAddressAllow", "localhost", "the on-demand instances, which behind the door bind loopback"),
    ]


def _network_service(out: list[Directive], kind: UnitKind, platform: Platform, given: UnitInputs) -> list[Directive]:
    """node_exporter and Prometheus (drop-ins on Debian's units): a listener and what they read or scrape."""
    if kind is UnitKind.NODE_EXPORTER:
        return [
            *_closed_service(out),
            directive(
                "RestrictAddressFamilies",
                "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
                "its listener and the network statistics it reads over netlink",
            ),
        ]
    return [
        *_closed_service(out),
        directive("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6", "its listener and the targets it scrapes"),
    ]


def _door_metrics(out: list[Directive], kind: UnitKind, platform: Platform, given: UnitInputs) -> list[Directive]:
    return [
        *out,
        directive("SupplementaryGroups", "adm", "reads the door's access log, which Debian's logrotate gives to group adm"),
        directive("StateDirectory", "sparkfleet-door-metrics", "its counters and log offset survive between runs"),
        *offline(),
    ]


def _memory_guard(out: list[Directive], kind: UnitKind, platform: Platform, given: UnitInputs) -> list[Directive]:
    return [
        *out,
        directive("RuntimeDirectory", "sparkfleet-memory-guard", "what it did, for the doctor and the tests"),
        directive("RuntimeDirectoryPreserve", "yes", "its record of stops survives its own restart"),
        *offline(),
    ]


def _link_test(common: list[Directive], kind: UnitKind, platform: Platform, given: UnitInputs) -> list[Directive]:
    """One bandwidth test over the cluster link: the tool talks to its one peer and to nothing else."""
    peer, rdma_devices = given.link_subnet, given.rdma_devices
    if not peer:
        raise PlanError("link_subnet", "a link test needs the address of its peer on the link")
    out = [
        *common,
        directive("MemoryDenyWriteExecute", "yes", "no writable+executable memory"),
        directive("SystemCallFilter", "@system-service", "only the system calls services use"),
        directive("SystemCallErrorNumber", "EPERM", "a filtered system call fails instead of killing the tool"),
        directive(
            "RestrictAddressFamilies",
            "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
            "the test's TCP connection (ib_write_bw's exchange too) and the interface lookup over netlink",
        ),
        directive("IPAddressDeny", "any", "every address but the peer's is dropped"),
        directive("IPAddressAllow", peer, "the one member at the other end of the test"),
    ]
    if platform is Platform.GB10 and rdma_devices:
        out.append(directive("DevicePolicy", "closed", "only the pseudo devices and the RDMA verbs nodes below"))
        return out + rdma(check_rdma_devices(rdma_devices))
    out.append(directive("PrivateDevices", "yes", "no physical devices: a TCP test needs none"))
    return out


def _drop_caches(common: list[Directive], kind: UnitKind, platform: Platform, given: UnitInputs) -> list[Directive]:
    """Root without capabilities: /proc/sys/vm/drop_caches is writable by its owner, root, and nothing else is needed."""
    relaxed = {
        "ProtectKernelTunables": directive(
            "ProtectKernelTunables", "no", "relaxed: it writes /proc/sys/vm/drop_caches, its only job"
        ),
        "CapabilityBoundingSet": directive(
            "CapabilityBoundingSet", "", "no capabilities: root's ownership of drop_caches is all it needs"
        ),
    }
    return [*(relaxed.get(d.name, d) for d in common), *offline()]


def _nft_gate(common: list[Directive], kind: UnitKind, platform: Platform, given: UnitInputs) -> list[Directive]:
    """Root with CAP_NET_ADMIN alone, in the host's network namespace: nft loads its one table there (the metrics
    gate and the door's)."""
    relaxed = {
        "CapabilityBoundingSet": directive("CapabilityBoundingSet", "CAP_NET_ADMIN", "relaxed: it loads its nftables table"),
        "PrivateNetwork": directive("PrivateNetwork", "no", "relaxed: its table belongs to the host's network namespace"),
        "RestrictAddressFamilies": directive(
            "RestrictAddressFamilies", "AF_UNIX AF_NETLINK", "nft talks netlink to the kernel"
        ),
    }
    return [relaxed.get(d.name, d) for d in [*common, *offline()]] + [
        directive("SystemCallFilter", "~@privileged @resources", "no privileged or resource calls"),
        directive("ProcSubset", "pid", "no /proc but processes"),
    ]


def _front_door(common: list[Directive], kind: UnitKind, platform: Platform, given: UnitInputs) -> list[Directive]:
    """nginx's master starts as root to bind the port, read the keys and hand the workers to the door's account."""
    relaxed = {
        "CapabilityBoundingSet": directive(
            "CapabilityBoundingSet",
            "CAP_NET_BIND_SERVICE CAP_SETUID CAP_SETGID CAP_CHOWN CAP_KILL CAP_DAC_OVERRIDE",
            "relaxed: bind the TLS port, run workers as the door's account, give them its temp directories, signal "
            "its workers, open the logs Debian's logrotate leaves to www-data:adm 0640",
        ),
        "UMask": directive("UMask", "0027", "logs and temp files readable by its group (adm reads the logs), no one else"),
    }
    return [
        *(relaxed.get(d.name, d) for d in common),
        directive(
            "ReadWritePaths",
            "/var/log/nginx /var/lib/nginx",
            "its logs and its temp directories; its pid file is in its RuntimeDirectory (front_door), nothing else in /run",
        ),
        directive("MemoryDenyWriteExecute", "yes", "no writable+executable memory (njs is interpreted; no PCRE JIT)"),
        directive("PrivateDevices", "yes", "no physical devices"),
        directive("SystemCallFilter", "@system-service", "only the system calls services use"),
        directive("SystemCallErrorNumber", "EPERM", "a filtered system call fails instead of killing the process"),
        directive("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6", "its listener and the loopback instances"),
        directive(
            "OOMScoreAdjust",
            "500",
            "when the shared memory runs out, the kernel takes the door (systemd restarts it) before vLLM",
        ),
    ]


_BUILDERS: dict[UnitKind, Callable[[list[Directive], UnitKind, Platform, UnitInputs], list[Directive]]] = {
    UnitKind.VLLM: _jit_unit,
    UnitKind.RAY: _jit_unit,
    UnitKind.WATCHDOG: _watchdog,
    UnitKind.WEBUI: _webui,
    UnitKind.DOOR_ACTIVATOR: _door_activator,
    UnitKind.DOOR_METRICS: _door_metrics,
    UnitKind.MEMORY_GUARD: _memory_guard,
    UnitKind.GPU_METRICS: lambda out, kind, platform, given: [*out, *devices(platform), *offline(private_devices=False)],
    UnitKind.DROP_CACHES: _drop_caches,
    UnitKind.METRICS_GATE: _nft_gate,
    UnitKind.DOOR_GATE: _nft_gate,
    UnitKind.LINK_TEST: _link_test,
    UnitKind.FRONT_DOOR: _front_door,
}
