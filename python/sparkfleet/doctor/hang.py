"""Why a cluster hangs: NCCL RAS polls of its communicators and the GPUs' power, classified into what to try.

NCCL's RAS (on by default from 2.24; `echo verbose status | nc localhost 28028`, JSON from 2.28.7 with `set format
json`) reports per rank how many collectives it launched. Polled a few times a few seconds apart: counts that still
rise are progress; a rank missing or dead is a lost process; counts frozen and equal are a kernel stuck on every
rank; counts frozen with a spread, even of one, are a collective desync (nvidia/nccl#2213: "frozen-and-equal counts
point at a stuck kernel or host, frozen-with-a-spread at a genuine collective desync"). A GPU near 96 % busy at
15-21 W is a kernel spinning in place, NCCL's or another's (vllm#46097, vllm#48720): the power says it spins, RAS
says which spin.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..hostconfig.monitoring.thresholds import Thresholds

SOURCE_RAS = "NCCL docs, troubleshooting/ras.rst (RAS on localhost:28028; counts rising across queries are progress)"
SOURCE_SPLIT = "nvidia/nccl#2213 (frozen and equal: a stuck kernel or host; frozen with a spread: a collective desync)"
SOURCE_SPIN = "vllm-project/vllm#46097 and #48720 (every rank at ~96 % GPU and 15-21 W while the engine stalls)"
SOURCE_NOT_NCCL = (
    "vllm-project/vllm#48720 (a frozen-equal wedge was flashinfer's sparse-MLA prefill kernel spinning, not NCCL)"
)
# Busy at almost no power: the same line the SparkfleetGpuBusyAtLowPower alert draws (its thresholds' defaults).
SPIN_UTILIZATION = Thresholds().gpu_busy_utilization
SPIN_WATTS = Thresholds().gpu_busy_min_watts

Kind = Literal["progressing", "idle", "frozen", "process lost", "stuck kernel", "collective desync", "unknown"]


class Communicator(BaseModel):
    """One communicator of one poll: each rank's launched collectives, and whether RAS lost any rank."""

    model_config = ConfigDict(frozen=True)

    counts: dict[int, int] = Field(default_factory=dict)
    lost: list[str] = Field(default_factory=list)


class GpuReading(BaseModel):
    model_config = ConfigDict(frozen=True)

    host: str
    utilization: float  # 0-1
    watts: float


class Verdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Kind
    detail: str
    lever: str
    source: str
    spinning: list[str] = Field(default_factory=list)


_RANK = re.compile(r"Rank (\d+) has launched up to operation (\d+)")
_GROUP = re.compile(r"(\d+) ranks have launched up to operation (\d+)")
_HEADER = re.compile(r"#\d+-\d+ \(([0-9a-f]+)\)")


def parse_ras(text: str) -> dict[str, Communicator]:
    """One RAS poll: its JSON (set format json) or its text (verbose status), by communicator hash."""
    stripped = text.strip()
    if stripped.startswith("{"):
        return _from_json(json.loads(stripped))
    comms: dict[str, dict[str, Any]] = {}
    current: str | None = None
    group = 0
    for line in text.splitlines():
        header = _HEADER.search(line)
        if header:
            current = header[1]
            comms.setdefault(current, {"counts": {}, "lost": []})
            group = 0
            continue
        if current is None:
            continue
        rank = _RANK.search(line)
        if rank:
            comms[current]["counts"][int(rank[1])] = int(rank[2])
        elif grouped := _GROUP.search(line):
            # Ranks summarised by count keep no number: each group is kept apart under its own negative key.
            group -= 1
            comms[current]["counts"][group] = int(grouped[2])
        elif "considered dead" in line or "Missing communicator data" in line:
            comms[current]["lost"].append(line.strip())
    return {name: Communicator.model_validate(value) for name, value in comms.items()}


def _from_json(data: dict[str, Any]) -> dict[str, Communicator]:
    out: dict[str, Communicator] = {}
    for index, comm in enumerate(data.get("communicators", [])):
        name = str(comm.get("hash", index))
        counts = {
            int(rank.get("rank", position)): sum(int(v) for v in (rank.get("collective_counts") or {}).values())
            for position, rank in enumerate(comm.get("ranks", []))
        }
        lost = [
            f"rank {m.get('rank', '?')} on {m.get('host', '?')}"
            for m in comm.get("missing_ranks", [])
            if (m.get("status") or {}).get("unresponsive") or (m.get("status") or {}).get("considered_dead")
        ]
        out[name] = Communicator(counts=counts, lost=lost)
    return out


def spinning(gpus: Sequence[GpuReading]) -> list[str]:
    return [g.host for g in gpus if g.utilization >= SPIN_UTILIZATION and g.watts < SPIN_WATTS]


def classify(polls: Sequence[dict[str, Communicator]], gpus: Sequence[GpuReading] = ()) -> Verdict:
    """What the polls (oldest first, a few seconds apart) and the GPUs say, and the lever to try first."""
    spin = spinning(gpus)
    power = f"; {', '.join(spin)} at >= {SPIN_UTILIZATION:.0%} GPU under {SPIN_WATTS:g} W: a kernel spins" if spin else ""
    if len(polls) < 2:
        return Verdict(
            kind="unknown",
            detail="one RAS poll says nothing of progress: poll again a few seconds apart" + power,
            lever="poll RAS at least twice (echo verbose status | nc localhost 28028 on each member)",
            source=SOURCE_RAS,
            spinning=spin,
        )
    first, last = polls[0], polls[-1]
    lost = sorted({item for comm in last.values() for item in comm.lost})
    if lost:
        return Verdict(
            kind="process lost",
            detail=f"RAS lost {'; '.join(lost)}" + power,
            lever="read that member's journal and kernel log (out of memory, Xid, a crashed rank): the rest wait for it",
            source=SOURCE_RAS,
            spinning=spin,
        )
    moving = [
        h for h, comm in last.items() if h in first and any(comm.counts.get(r, c) != c for r, c in first[h].counts.items())
    ]
    if moving:
        return Verdict(
            kind="progressing",
            detail=f"the collective counts still rise ({', '.join(moving)}): slow, not hung" + power,
            lever="look for a slow rank or link (the link doctor's measured bandwidth), not a hang",
            source=SOURCE_RAS,
            spinning=spin,
        )
    spread = {h: sorted(set(comm.counts.values())) for h, comm in last.items() if len(set(comm.counts.values())) > 1}
    if spread:
        behind = {h: [r for r, c in last[h].counts.items() if c == counts[0] and r >= 0] for h, counts in spread.items()}
        said = "; ".join(
            f"{h}: counts {counts[0]} to {counts[-1]}"
            + (f", behind: rank {', '.join(map(str, behind[h]))}" if behind[h] else "")
            for h, counts in spread.items()
        )
        return Verdict(
            kind="collective desync",
            detail=f"frozen with a spread ({said}): a rank never issued the collective the others wait in" + power,
            lever="dump the lagging rank's stack (py-spy dump --pid) and keep every rank on one release and argv",
            source=SOURCE_SPLIT,
            spinning=spin,
        )
    if gpus and not spin:
        return Verdict(
            kind="idle",
            detail="the collective counts are frozen and equal, and no GPU spins: no collective is in flight",
            lever="nothing: an instance with no request runs no collective",
            source=SOURCE_RAS,
        )
    if not spin:
        return Verdict(
            kind="frozen",
            detail="the collective counts are frozen and equal on every rank: idle, or a kernel stuck on every rank; "
            "the GPUs' utilisation and power tell which",
            lever="read the GPUs' utilisation and power (about 96 % at 15-21 W is a kernel spinning in place)",
            source=f"{SOURCE_SPLIT}; {SOURCE_SPIN}",
        )
    return Verdict(
        kind="stuck kernel",
        detail="the collective counts are frozen and equal on every rank: a kernel is stuck on every rank" + power,
        lever="if the counts stopped before the stalled request, a compute kernel spins ahead of the collective ("
        f"{SOURCE_NOT_NCCL}): try another attention or MoE backend (intent.moe_backend); if they stopped in it, "
        "suspect NCCL's transport (the link preflight, the NCCL build each rank loads)",
        source=f"{SOURCE_SPLIT}; {SOURCE_SPIN}",
        spinning=spin,
    )
