"""What keeps a host from wedging: the memory guard's floors, each instance's start budget and admission figures.

In: a host plan's instances (their footprints and start figures) and the platform. Out: the guard's table, which
the host memory guard (vllm_serve's sparkfleet_memory_guard.py) and each unit's start admission read. Pure.

On GB10 the GPU's allocations are host memory that cgroups do not see (cgroup v2 memory.current stayed at
409 MB while 12 GiB was allocated inside MemoryMax=8G, Blackwellboy/model-serving-minefield#57): MemoryMax bounds
only host-side RAM, and what overruns hangs the host. The guard watches MemAvailable itself and stops a sparkfleet
instance before the floor is crossed; nothing else on the host is ever its victim.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..models import GIB, Platform, ServePlan, Strict

GUARD_SOURCE = (
    "Blackwellboy/model-serving-minefield#57 (cgroup v2 does not count CUDA allocations on GB10; the host hangs "
    "on unified-memory exhaustion, vllm#56824)"
)
# MemAvailable the OS, sshd, the door and monitoring keep. Stricter while an instance starts (loading, compiling
# and capturing grow fast) than while every instance serves. On GB10 each sits 3 and 2 GiB under what healthy
# Sparks show at that point (a floor a healthy start or serve reaches would stop it), and above the 1.5-2 GiB the
# OS, sshd, journald, the door and node_exporter hold on a headless Spark.
GUARD_FLOOR_GIB = {
    Platform.GB10: {"starting": 4.5, "serving": 2.5},
    # The CPU sandbox's host reserve is 2 GiB (memory.HOST_RESERVE_GIB): under half of it while starting, a quarter
    # while serving (sized for a 24 GiB CI machine that runs three scenarios side by side).
    Platform.CPU: {"starting": 0.75, "serving": 0.5},
}
GUARD_FLOOR_SOURCE = {
    Platform.GB10: (
        "knapcio/GLM-5.3-4x-DGX-Spark-TP4 (healthy ranks keep 7.5 GiB free before CUDA-graph capture and 4.5 GiB live: "
        "the floors sit 3 and 2 GiB under them) and seed 003 (headless saves 2-3 GB)"
    ),
    Platform.CPU: "under half and a quarter of the CPU platform's 2 GiB host reserve (memory.HOST_RESERVE_GIB)",
}
# How often the guard reads MemAvailable, and how long it lets a stopped instance's memory come back before it
# judges again (a stop of vLLM returns once its processes are gone; the kernel frees their pages right after).
GUARD_INTERVAL_S = 1.0
GUARD_SETTLE_S = 5.0
# An always-on instance the guard stopped is started again (through its start admission) once MemAvailable has stayed
# above what its start needs for this long: a tenant's burst that went away leaves no model down for good, and one
# that keeps coming back costs at most this many starts per stop (issue 61).
GUARD_RETURN_AFTER_S = 60.0
GUARD_RETURN_TRIES = 3

# A start's budget: engine init, profiling and CUDA-graph capture; the weights read at the slowest storage the
# field reports; FlashInfer's first-start kernel compiles where the release has no prebuilt kernels.
START_BASE_S = {Platform.GB10: 300, Platform.CPU: 180}
START_BASE_SOURCE = (
    "seed 002 §7.2.2 (~90 s start, 84 s of it loading) and seed 000 §7 (torch.compile ~15 s cold, 4 s cached), "
    "with room for profiling and capture"
)
START_READ_BYTES_PER_S = 117e6
START_READ_SOURCE = "seed 000 §5 (66 GiB of weights over a ~475 MB/s USB SSD loaded in 606 s with mmap)"
START_COMPILE_S = 1020
START_COMPILE_SOURCE = "vllm PR #45179 (FlashInfer's JIT compiles for about 17 minutes at a GB10's first start)"


def start_budget_s(platform: Platform, weights_gib: float, compiles: bool) -> int:
    """Seconds a start may take before it counts as stuck: engine init, the weights read, first-start compiles."""
    read = weights_gib * GIB / START_READ_BYTES_PER_S
    return int(START_BASE_S[platform] + read + (START_COMPILE_S if compiles else 0))


def start_budget_reason(platform: Platform, weights_gib: float, compiles: bool) -> tuple[str, str]:
    """(why, source) of start_budget_s, for the plan's reasons."""
    why = (
        f"{START_BASE_S[platform]} s for engine init, profiling and capture, "
        f"{weights_gib * GIB / START_READ_BYTES_PER_S:.0f} s to read {weights_gib:.1f} GiB of weights at the slowest "
        "storage seen on a Spark"
        + (f", {START_COMPILE_S} s of FlashInfer kernel compiles (no prebuilt kernels)" if compiles else "")
        + ": the watchdog never restarts a start within it, and the unit's start timeout is at least this"
    )
    sources = [START_BASE_SOURCE, START_READ_SOURCE] + ([START_COMPILE_SOURCE] if compiles else [])
    return why, "; ".join(sources)


class Reservation(Strict):
    """Memory a system unit keeps under reclaim (a systemd drop-in host_prep writes): setting -> value."""

    unit: str
    settings: dict[str, str]
    reason: str


# What keeps a Spark reachable and watched while vLLM presses on memory: reclaim hits everything else first.
# MemoryMin is never reclaimed; MemoryLow only when nothing unprotected is left. On cgroup v2 (Ubuntu 24.04) a
# protection holds only as far as every ancestor slice grants it (systemd.resource-control(5)), so system.slice
# carries the sum of what its services reserve (the memory guard's own MemoryMin included).
_SERVICES = (
    Reservation(unit="ssh.service", settings={"MemoryMin": "64M"}, reason="the way in to a squeezed host"),
    Reservation(unit="systemd-journald.service", settings={"MemoryMin": "64M"}, reason="the record of what happened"),
    Reservation(unit="nginx.service", settings={"MemoryLow": "128M"}, reason="the front door's master and workers"),
    Reservation(unit="prometheus-node-exporter.service", settings={"MemoryLow": "32M"}, reason="MemAvailable's exporter"),
    Reservation(unit="prometheus.service", settings={"MemoryLow": "256M"}, reason="the alerts on the floor"),
)
# The guard's own unit (vllm_serve's memory-guard.service.j2 says MemoryMin=64M).
GUARD_MEMORY_MIN_MIB = 64


def _mib(value: str) -> int:
    return int(value.removesuffix("M"))


_MIN_MIB = GUARD_MEMORY_MIN_MIB + sum(_mib(r.settings.get("MemoryMin", "0M")) for r in _SERVICES)
_LOW_MIB = _MIN_MIB + sum(_mib(r.settings.get("MemoryLow", "0M")) for r in _SERVICES)
RESERVATIONS = (
    *_SERVICES,
    Reservation(
        unit="system.slice",
        settings={"MemoryMin": f"{_MIN_MIB}M", "MemoryLow": f"{_LOW_MIB}M"},
        reason="the sum its services reserve: a service's protection holds only as far as its slice grants it",
    ),
)
RESERVATIONS_SOURCE = (
    "issue 45 (system services get a reservation so reclaim hits elsewhere first); systemd.resource-control(5)"
)


class GuardedInstance(Strict):
    """One instance as the guard and the unit's start admission see it."""

    unit: str
    # What it holds once up (hostplan.footprint_gib), in bytes: the guard stops the one holding the most first.
    footprint_bytes: Annotated[int, Field(ge=0)]
    # MemAvailable it takes at start (ServePlan.required_available_bytes).
    required_available_bytes: Annotated[int, Field(ge=0)]
    # On GB10, vLLM refuses to start unless CUDA's free figure is at least utilization x CUDA's total.
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)]
    start_budget_s: Annotated[int, Field(gt=0)]
    on_demand: bool = False


class GuardPlan(Strict):
    """The host memory guard's table (written to the host as memory-guard.json)."""

    platform: Platform
    floor_starting_bytes: Annotated[int, Field(gt=0)]
    floor_serving_bytes: Annotated[int, Field(gt=0)]
    interval_s: Annotated[float, Field(gt=0)] = GUARD_INTERVAL_S
    settle_s: Annotated[float, Field(ge=0)] = GUARD_SETTLE_S
    return_after_s: Annotated[float, Field(ge=0)] = GUARD_RETURN_AFTER_S
    return_tries: Annotated[int, Field(ge=0)] = GUARD_RETURN_TRIES
    instances: dict[str, GuardedInstance] = Field(default_factory=dict)
    reservations: tuple[Reservation, ...] = RESERVATIONS
    # The guard's own unit keeps this much under reclaim (counted in system.slice's reservation).
    memory_min_mib: int = GUARD_MEMORY_MIN_MIB
    reason: str
    source: str


def guard_plan(platform: Platform, instances: dict[str, tuple[ServePlan, float, bool]]) -> GuardPlan:
    """The guard's table for a host: its floors, and each instance's unit, footprint and start figures.

    instances: name -> (its plan, its footprint in GiB, whether the door switches it on demand).
    """
    floors = GUARD_FLOOR_GIB[platform]
    return GuardPlan(
        platform=platform,
        floor_starting_bytes=int(floors["starting"] * GIB),
        floor_serving_bytes=int(floors["serving"] * GIB),
        instances={
            name: GuardedInstance(
                unit=f"sparkfleet-vllm-{name}.service",
                footprint_bytes=int(footprint * GIB),
                required_available_bytes=served.required_available_bytes,
                gpu_memory_utilization=served.gpu_memory_utilization,
                start_budget_s=served.start_budget_s or start_budget_s(platform, served.memory.weights, False),
                on_demand=on_demand,
            )
            for name, (served, footprint, on_demand) in sorted(instances.items())
        },
        reason=(
            f"MemAvailable is kept above {floors['starting']} GiB while an instance starts and {floors['serving']} GiB "
            "while all serve: under it the guard stops the starting instance, else the one holding the most; never "
            "sshd, the door or monitoring. MemoryMax bounds only host-side RAM: on GB10 cgroups do not see what "
            f"the GPU allocates. An always-on instance it stopped is started again once MemAvailable has stayed above "
            f"what its start needs for {GUARD_RETURN_AFTER_S:.0f} s, {GUARD_RETURN_TRIES} tries a stop; an on-demand "
            "one on its next request"
        ),
        source=f"{GUARD_SOURCE}; {GUARD_FLOOR_SOURCE[platform]}",
    )
