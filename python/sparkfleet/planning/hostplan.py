"""Plan every vLLM instance of one host together: names, ports and memory must fit side by side."""

from __future__ import annotations

import functools
import hashlib
import re
import urllib.parse
from collections.abc import Mapping
from typing import Annotated

from pydantic import Field, field_validator

from ..errors import InfeasibleError, PlanError
from ..models import (
    GIB,
    RELEASE_NAME_PATTERN,
    WILDCARDS,
    ClusterBackend,
    HostFacts,
    Intent,
    ModelProfile,
    NodePlacement,
    Platform,
    ServePlan,
    SideRelease,
    Strict,
)
from . import memory as mem
from .memguard import GuardPlan, guard_plan
from .planner import plan
from .releases import plan_on_release

# Instance names become unit names (sparkfleet-vllm-<name>.service) and directory names.
_INSTANCE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
# Each instance runs as a system account of its own, named after its unit; Linux caps account names at 32 characters.
INSTANCE_ACCOUNT_PREFIX = "sparkfleet-vllm-"
_ACCOUNT_NAME_MAX = 32
# An on-demand instance stops after this long without a request (the front door's activator stops it).
IDLE_STOP_AFTER_S = 900


class InstanceRequest(Strict):
    name: str
    profile: ModelProfile
    model_ref: str
    # Where the model's files are on the host, when known (a staged directory or the hub snapshot to be).
    model_dir: str | None = None
    # The filesystem type the model is read from, when model_facts read it (for the load strategy).
    model_fs: Annotated[str, Field(pattern=r"^[a-z0-9._-]{1,32}$")] | None = None
    intent: Intent
    # The profile of intent.drafter when it was read (staged, or described from the hub).
    drafter: ModelProfile | None = None
    # One rank of a native multi-node instance (the head's rank 0, or a headless rank this node runs).
    placement: NodePlacement | None = None
    # Not kept running: the front door starts it on the first request for its model and stops it idle.
    on_demand: bool = False
    # The release it runs from, by its name in vllm_install_releases; None: the main one, else the newest that loads it.
    release: Annotated[str, Field(pattern=RELEASE_NAME_PATTERN)] | None = None
    idle_stop_after_s: Annotated[int, Field(ge=60, le=7 * 86400)] = IDLE_STOP_AFTER_S

    @field_validator("name")
    @classmethod
    def _name_shape(cls, value: str) -> str:
        if not _INSTANCE_NAME.fullmatch(value):
            raise ValueError(f"name {value!r}: lower-case letters, digits and '-', at most 40 characters")
        return value

    @property
    def headless(self) -> bool:
        return self.placement is not None and self.placement.rank > 0


class Endpoint(Strict):
    """Where an instance listens, and the URL something on the same host reaches it at."""

    host: str
    port: int
    local_host: str
    local_url: str
    # Behind the door: the Unix socket it serves on instead (host and port are then not listened on),
    # in the run-time directory /run/<runtime_directory>, mode 0750, owned by the service user and the
    # door's worker group.
    socket: str | None = None
    runtime_directory: str | None = None


def endpoint(host: str, port: int) -> Endpoint:
    """An instance listening on every address is reached over loopback from its own host."""
    local = "127.0.0.1" if host in WILDCARDS else host
    shown = f"[{local}]" if ":" in local else local
    return Endpoint(host=host, port=port, local_host=local, local_url=f"http://{shown}:{port}")


def runtime_directory(name: str) -> str:
    """The directory under /run that holds an instance's socket (systemd-tmpfiles keeps it across boots)."""
    return f"sparkfleet-vllm-{name}"


def socket_path(name: str) -> str:
    return f"/run/{runtime_directory(name)}/api.sock"


def socket_endpoint(name: str, host: str, port: int) -> Endpoint:
    """An instance on its Unix socket: reached at http+unix://<the path, percent-encoded> (the probe's scheme)."""
    path = socket_path(name)
    return endpoint(host, port).model_copy(
        update={
            "local_url": "http+unix://" + urllib.parse.quote(path, safe=""),
            "socket": path,
            "runtime_directory": runtime_directory(name),
        }
    )


def instance_account(name: str) -> str:
    """The account an instance runs as: its unit's name, or, for a name too long for an account, its first
    characters and a digest of the whole name (two instance names never share an account)."""
    whole = INSTANCE_ACCOUNT_PREFIX + name
    if len(whole) <= _ACCOUNT_NAME_MAX:
        return whole
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{whole[: _ACCOUNT_NAME_MAX - len(digest) - 1]}-{digest}"


def own_account(served: ServePlan) -> bool:
    """Whether an instance runs as its own account: all but one Ray runs, whose workers are the Ray unit's
    processes and share its account and caches."""
    return served.cluster_backend is not ClusterBackend.RAY


class OnDemand(Strict):
    """An instance the front door switches in on its first request and stops after idle_stop_after_s."""

    footprint_gib: Annotated[float, Field(ge=0)]
    idle_stop_after_s: int


class HostPlan(Strict):
    instances: dict[str, ServePlan]
    endpoints: dict[str, Endpoint]
    # The most the instances hold at once as planned: every always-on one plus the largest on-demand one.
    footprint_gib: Annotated[float, Field(ge=0)]
    usable_gib: float
    mem_total_gib: float
    host_reserve_gib: float
    on_demand: dict[str, OnDemand] = Field(default_factory=dict)
    # Headless ranks this host runs for another host's native multi-node instance: they hold memory here
    # but serve no API (rank 0 on the head does), so the door, monitoring and probes never see them.
    ranks: dict[str, ServePlan] = Field(default_factory=dict)
    # What on-demand instances may hold together beside the always-on ones; the activator keeps to it.
    on_demand_budget_gib: float = 0.0
    # The host memory guard's floors and each instance's start figures (sparkfleet.planning.memguard).
    memory_guard: GuardPlan | None = None
    # The account each instance and rank of this host runs as, with its own caches and temporary files, so that
    # no instance reaches another's socket, engine sockets or compiled kernels. One Ray runs is absent: it runs
    # as the service user, which the Ray unit's workers are.
    accounts: dict[str, str] = Field(default_factory=dict)


def footprint_gib(served: ServePlan) -> float:
    """What one instance holds once it is up: its model, runtime, graphs and KV, plus the process baseline."""
    m = served.memory
    return m.weights + m.runtime + m.activation + m.cudagraph + m.extra + m.drafter + m.encoder + m.kv + m.process_baseline


# Ports the other sparkfleet services on a host listen on by default (the monitoring and ray_cluster
# roles' defaults): an instance there would fail to start or take their place.
RESERVED_PORTS = {
    9090: "Prometheus's port (monitoring_prometheus_listen_address)",
    9100: "node_exporter's port (monitoring_node_exporter_port)",
    6379: "the Ray head's port (ray_cluster_port)",
    8265: "Ray's dashboard port",
    10001: "Ray's client port",
}
# The service runs as an unprivileged user with an empty capability set (sparkfleet.hostconfig.hardening).
FIRST_UNPRIVILEGED_PORT = 1024


def _free_port(start: int, taken: set[int]) -> int:
    return next(p for p in range(max(start, 8000), 65536) if p not in taken and p not in RESERVED_PORTS)


def _check_port(request: InstanceRequest, index: int, label: str, taken: set[int]) -> None:
    port = request.intent.port
    if port < FIRST_UNPRIVILEGED_PORT:
        raise PlanError(
            f"{label}[{index}].port",
            f"{port} is a privileged port: {request.name} runs as the unprivileged service user with no capabilities",
            (f"port {_free_port(8000, taken)} and a reverse proxy in front for 80 / 443",),
        )
    if port in RESERVED_PORTS:
        raise PlanError(
            f"{label}[{index}].port",
            f"{port} is {RESERVED_PORTS[port]} on a sparkfleet host",
            (f"port {_free_port(port + 1, taken)}",),
        )


def _overlaps(a: Intent, b: Intent) -> bool:
    return a.port == b.port and (a.host == b.host or a.host in WILDCARDS or b.host in WILDCARDS)


def _check_names_and_ports(requests: list[InstanceRequest], label: str) -> None:
    seen: dict[str, int] = {}
    serving = [r for r in requests if not r.headless]
    taken = {r.intent.port for r in serving}
    for index, request in enumerate(requests):
        if request.headless and request.on_demand:
            raise PlanError(f"{label}[{index}].on_demand", "a rank of a multi-node instance is never switched on demand")
        if not request.headless:
            _check_port(request, index, label, taken)
        if request.placement is not None and request.placement.rank == 0 and request.intent.cluster_port in taken:
            raise PlanError(
                f"{label}[{index}].intent.cluster_port",
                f"{request.intent.cluster_port} is also an instance's API port on this host",
                (f"cluster_port {_free_port(request.intent.cluster_port + 1, taken)}",),
            )
        if request.name in seen:
            raise PlanError(
                f"{label}[{index}].name",
                f"{request.name!r} is already the name of {label}[{seen[request.name]}]",
                ("a unique name per instance",),
            )
        seen[request.name] = index
        for other_index, other in enumerate(requests[:index]):
            if not request.headless and not other.headless and _overlaps(request.intent, other.intent):
                free = _free_port(request.intent.port + 1, taken)
                raise PlanError(
                    f"{label}[{index}].port",
                    f"{request.name} and {other.name} ({label}[{other_index}]) both listen on "
                    f"{request.intent.host}:{request.intent.port}",
                    (f"port {free}",),
                )


def on_socket(request: InstanceRequest) -> bool:
    """Behind the door, every instance whose API this host serves does so on a Unix socket: one on one node
    (always-on or on demand: the activator starts it and asks it through the socket) and rank 0 of one over
    several nodes (its ranks meet on the cluster link; its API is the door's alone). A headless rank serves no
    API."""
    return not request.headless


def _admit_starts(host: HostFacts, requests: list[InstanceRequest], plans: dict[str, ServePlan], label: str) -> None:
    """On GB10, refuse before any host changes the always-on instances that this run would start and vLLM's start
    check would refuse: together they need utilization x CUDA's total of the free figure CUDA reported (after the
    page cache was dropped). Running ones are restarted in place, giving back their own share first."""
    if host.cuda_free_bytes is None or host.cuda_total_bytes is None or host.running_instances is None:
        return
    need = 0.0
    for index, request in enumerate(requests):
        if request.on_demand or f"sparkfleet-vllm-{request.name}.service" in host.running_instances:
            continue
        utilization = plans[request.name].gpu_memory_utilization
        need += utilization * host.cuda_total_bytes
        if need > host.cuda_free_bytes:
            fits = int(100 * host.cuda_free_bytes / host.cuda_total_bytes) / 100
            raise InfeasibleError(
                f"{label}[{index}] ({request.name})",
                f"vLLM's start check would refuse it: CUDA reports {host.cuda_free_bytes / GIB:.2f} GiB free of "
                f"{host.cuda_total_bytes / GIB:.2f} GiB with the page cache dropped (CUDA counts it as used on GB10), "
                f"and starting it{'' if need == utilization * host.cuda_total_bytes else ' with the others it starts'} "
                f"needs {need / GIB:.2f} GiB (gpu_memory_utilization {utilization:.2f} x the total)",
                (
                    "stop what else holds memory on the host (another vLLM, containers, a desktop)",
                    f"gpu_memory_utilization {fits:.2f} or less",
                    "on_demand: true (the door starts it when asked, stopping idle ones first)",
                ),
            )


def _plan_request(facts: HostFacts, request: InstanceRequest) -> ServePlan:
    return plan(
        facts,
        request.profile,
        request.intent,
        model_ref=request.model_ref,
        drafter=request.drafter,
        model_dir=request.model_dir,
        model_fs=request.model_fs,
        placement=request.placement,
    )


def _plan_each(
    host: HostFacts, requests: list[InstanceRequest], label: str, releases: Mapping[str, SideRelease]
) -> dict[str, ServePlan]:
    """Each instance's plan, on its release; a refusal names the instance and its place in the list."""
    plans: dict[str, ServePlan] = {}
    for index, request in enumerate(requests):
        try:
            plans[request.name] = plan_on_release(
                host,
                request.release,
                releases,
                functools.partial(_plan_request, request=request),
            )
        except PlanError as exc:
            raise type(exc)(f"{label}[{index}] ({request.name}) {exc.variable}", exc.problem, exc.suggestions) from exc
    return plans


def _host_room(host: HostFacts, requests: list[InstanceRequest], instances: int) -> tuple[float, float]:
    """(the reserve the host keeps, what is left for vLLM): the smallest reserve an instance asks for, else the
    platform's; on GB10 no more than vLLM's utilization cap and each process's baseline allow."""
    total = host.mem_total_gib
    reserve = min(
        (r.intent.host_reserve_gib for r in requests if r.intent.host_reserve_gib is not None),
        default=mem.HOST_RESERVE_GIB[host.platform],
    )
    usable = total - reserve
    if host.platform is Platform.GB10:
        usable = min(usable, mem.GB10_MAX_UTILIZATION * total + mem.PROCESS_BASELINE_GIB[host.platform] * instances)
    return reserve, usable


def _check_fit(
    requests: list[InstanceRequest], always: dict[str, float], switched: dict[str, float], usable: float, label: str
) -> None:
    """The always-on instances fit together; each on-demand one fits beside them on its own."""
    used = sum(always.values())
    if len(always) > 1 and used > usable:
        shares = ", ".join(f"{name} {gib:.1f}" for name, gib in always.items())
        raise InfeasibleError(
            label,
            f"the instances need {used:.1f} GiB together ({shares}) but this host has {usable:.1f} GiB for vLLM",
            (
                "a smaller max_context or concurrency on one of them",
                "profile interactive instead of throughput",
                "kv_cache_dtype fp8",
                "on_demand: true on the ones used now and then (the front door switches them in)",
                "one instance per host",
            ),
        )
    for index, request in enumerate(requests):
        if request.on_demand and always and used + switched[request.name] > usable:
            raise InfeasibleError(
                f"{label}[{index}].on_demand",
                f"{request.name} needs {switched[request.name]:.1f} GiB but the always-on instances "
                f"({', '.join(always)}) leave {usable - used:.1f} of this host's {usable:.1f} GiB for vLLM: "
                "an on-demand instance must fit beside them on its own",
                ("a smaller max_context or concurrency on it", "on_demand: true on an always-on instance too"),
            )


def plan_host(
    host: HostFacts,
    requests: list[InstanceRequest],
    label: str = "instances",
    behind_door: bool = False,
    releases: Mapping[str, SideRelease] | None = None,
) -> HostPlan:
    """Plan each instance, then refuse a set that clashes on a port or does not fit in memory together.

    behind_door: the front door is the only way in, so every instance that serves an API here does so on its socket.
    releases: the releases installed beside the main one, by name (planning/releases.py picks each instance's).
    """
    _check_names_and_ports(requests, label)
    if behind_door:
        requests = [
            r.model_copy(update={"intent": r.intent.model_copy(update={"socket": socket_path(r.name)})})
            if on_socket(r)
            else r
            for r in requests
        ]
    plans = _plan_each(host, requests, label, releases or {})
    reserve, usable = _host_room(host, requests, len(plans))
    always = {r.name: footprint_gib(plans[r.name]) for r in requests if not r.on_demand}
    switched = {r.name: footprint_gib(plans[r.name]) for r in requests if r.on_demand}
    used = sum(always.values())
    _check_fit(requests, always, switched, usable, label)
    _admit_starts(host, requests, plans, label)
    headless = {r.name for r in requests if r.headless}
    accounts = {name: instance_account(name) for name, served in plans.items() if own_account(served)}
    if len(set(accounts.values())) < len(accounts):
        raise PlanError(label, f"two instance names give one account ({accounts}): rename one", ())
    return HostPlan(
        instances={name: served for name, served in plans.items() if name not in headless},
        ranks={name: served for name, served in plans.items() if name in headless},
        endpoints={
            r.name: socket_endpoint(r.name, r.intent.host, r.intent.port)
            if r.intent.socket
            else endpoint(r.intent.host, r.intent.port)
            for r in requests
            if not r.headless
        },
        footprint_gib=round(used + max(switched.values(), default=0.0), 2),
        usable_gib=round(usable, 2),
        mem_total_gib=round(host.mem_total_gib, 2),
        host_reserve_gib=reserve,
        on_demand={
            r.name: OnDemand(footprint_gib=round(switched[r.name], 2), idle_stop_after_s=r.idle_stop_after_s)
            for r in requests
            if r.on_demand
        },
        on_demand_budget_gib=round(usable - used, 2),
        memory_guard=guard_plan(
            host.platform,
            {r.name: (plans[r.name], footprint_gib(plans[r.name]), r.on_demand) for r in requests},
        ),
        accounts=accounts,
    )
