"""Judging what keeps a host from wedging: the memory guard, CUDA's free figure on GB10, and each instance's last start."""

from __future__ import annotations

import time
from typing import Any

from .observations import Finding, InstanceObservation, ServeObservation, Status, gib_text


def guard_findings(serve: ServeObservation, facts: dict[str, Any], now: float | None = None) -> list[Finding]:
    """The memory guard runs and what it stopped; on GB10, CUDA's free figure against the host's ceiling."""
    if serve.host_plan is None or not serve.host_plan.get("memory_guard"):
        return []
    out: list[Finding] = []
    state = serve.memory_guard or {}
    running = serve.memory_guard_state == "active"
    floor = state.get("floor_bytes")
    out.append(
        Finding(
            area="host",
            check="memory guard",
            status=Status.GREEN if running else Status.RED,
            detail=(
                f"running; MemAvailable {gib_text(state.get('memavailable_bytes', 0))} over its "
                f"{gib_text(floor or 0)} {state.get('phase', '')} floor"
                if running
                else f"sparkfleet-memory-guard is {serve.memory_guard_state or 'missing'}: nothing stops an instance "
                "that overruns its plan before the host hangs (MemoryMax does not see GPU memory on GB10)"
            ),
        )
    )
    now = time.time() if now is None else now
    for name, stop in sorted((state.get("stops") or {}).items()):
        ago = now - float(stop.get("at", now))
        out.append(
            Finding(
                area="host",
                check=f"memory guard stopped {name}",
                status=Status.YELLOW if ago > 86400 else Status.RED,
                detail=f"{stop.get('count', 1)} time(s), last {ago / 60:.0f} min ago: MemAvailable "
                f"{gib_text(stop.get('memavailable_bytes', 0))} under the {gib_text(stop.get('floor_bytes', 0))} "
                f"{stop.get('phase', '')} floor"
                + (" while it started" if stop.get("starting") else "")
                + "; its next start is admitted only on the figures (journalctl -u sparkfleet-memory-guard)",
            )
        )
    free, total, ceiling = facts.get("cuda_free_bytes"), facts.get("cuda_total_bytes"), facts.get("cuda_ceiling_bytes")
    if free is not None and total:
        out.append(
            Finding(
                area="host",
                check="CUDA free memory",
                status=Status.GREEN,
                detail=f"{gib_text(free)} of {gib_text(total)} as CUDA reports it after dropping the page cache"
                + (f"; this host's ceiling (no instance running): {gib_text(ceiling)}" if ceiling else ""),
            )
        )
    return out


def start_findings(obs: InstanceObservation) -> list[Finding]:
    """The instance's last start: its milestones, the kernels it compiled, and a start that overran its budget."""
    area = f"instance {obs.name}"
    out: list[Finding] = []
    overrun = (obs.watchdog or {}).get("overrun")
    if overrun:
        answered = bool((obs.watchdog or {}).get("ready_seen"))
        out.append(
            Finding(
                area=area,
                check="start",
                status=Status.YELLOW if answered else Status.RED,
                detail=f"overran its start budget without a right answer, in phase {overrun} (the watchdog's journal "
                "line has the last sign): a slow disk, a first-start compile or a hang there"
                + ("; it answered right later" if answered else ""),
            )
        )
    start = obs.start
    if not start:
        return out
    compiled = start.get("kernels_compiled") or {}
    jit = int(compiled.get("flashinfer_jit", 0)) + int(compiled.get("cute_dsl", 0))
    labels = (("socket", "socket_s"), ("/health", "health_s"), ("answer", "answer_s"))
    milestones = ", ".join(f"{label} {start[key]:.1f} s" for label, key in labels if start.get(key) is not None)
    budget = start.get("budget_s")
    late = budget and (start.get("answer_s") or 0) > budget
    out.append(
        Finding(
            area=area,
            check="last start",
            status=Status.YELLOW if late or jit else Status.GREEN,
            detail=f"{milestones or 'no milestone read'}"
            + (f" of a {budget} s budget" if budget else "")
            + f"; kernels compiled: {sum(int(v) for v in compiled.values())} "
            f"({', '.join(f'{k} {v}' for k, v in sorted(compiled.items()))})"
            + ("; FlashInfer compiled at start: the release lacks its prebuilt kernels" if jit else ""),
        )
    )
    return out
