"""A vLLM instance's start, read from its journal: its phases, its milestones and the kernels it compiled.

The probe (sparkfleet_probe.py) records a start when the instance first answers right after it (the readiness
check, or the watchdog's first good answer): /run/sparkfleet/start-<name>.json and, where node_exporter's textfile
directory exists, sparkfleet_start_<name>.prom. The watchdog names the phase a start that overran its budget
stopped in. The log lines are vLLM 0.32 / 0.33's and FlashInfer 0.7's own (vllm/logger.py's prefix; FlashInfer
logs a build, never a load, and prints it by default).
Python's standard library only.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Any

# In the order a start goes through them; a start is in the phase of the last sign it logged.
PHASES = (
    ("loading", re.compile(r"Starting to load model|Loading safetensors checkpoint shards|Loading weights took")),
    (
        "compiling",
        re.compile(
            r"Starting torch\.compile|Dynamo bytecode transform time|Compiling a graph for compile range|"
            r"flashinfer\.jit: Building JIT module|Compiling CuTe-DSL kernel|Model loading took"
        ),
    ),
    ("capturing", re.compile(r"Capturing CUDA graphs|Graph capturing finished")),
    (
        "warming up",
        re.compile(r"JIT kernel warmup|Running FlashInfer autotune|init engine \(profile, create kv cache, warmup model\)"),
    ),
    (
        "answering",
        re.compile(r"Starting vLLM server on|Application startup complete"),
    ),
)
# Milestones from the journal: the API socket is made in the step that logs the version line (plain, or closing the
# banner vLLM draws when its formatter is on); /health answers once the application has started.
VERSION_LINE = r"vLLM server version \S+, serving model| version \d+\.\d+\S*\s*$"
MILESTONES = {
    "socket": re.compile(VERSION_LINE),
    "health": re.compile(r"Application startup complete"),
}
# A kernel compiled during the start, by kind: FlashInfer's JIT modules and CuTe-DSL kernels (logged only when
# built, never when loaded from the release's prebuilt cache), and torch.compile's graphs (not from its cache).
KERNELS = {
    "flashinfer_jit": re.compile(r"flashinfer\.jit: Building JIT module"),
    "cute_dsl": re.compile(r"Compiling CuTe-DSL kernel"),
    "torch_compile": re.compile(r"Compiling a graph for compile range"),
}
STATE_DIR = "/run/sparkfleet"


def journal_since(unit: str, since: float) -> list[tuple[float, str]]:
    """(seconds since the start, message) of each journal entry of the unit since its start (monotonic `since`)."""
    began = time.time() - (time.monotonic() - since)
    out = subprocess.run(
        ["journalctl", "-u", unit, "-o", "json", "--no-pager", "--since", f"@{int(began) - 1}"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    entries = []
    for line in out.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("MESSAGE")
        if isinstance(message, list):  # journald's form for a message that is not UTF-8
            message = bytes(message).decode("utf-8", "replace")
        at = int(entry.get("__MONOTONIC_TIMESTAMP") or 0) / 1e6
        if isinstance(message, str) and at >= since:
            entries.append((round(at - since, 2), message))
    return entries


def phase_of(entries: list[tuple[float, str]]) -> tuple[str, str]:
    """The phase a start is in (the last sign it logged) and that sign's line."""
    phase, line = "starting the process", ""
    for _at, message in entries:
        for name, sign in PHASES:
            if sign.search(message):
                phase, line = name, message
    return phase, line.strip()[:300]


def timeline(entries: list[tuple[float, str]]) -> dict[str, Any]:
    """Seconds from the start to each milestone the journal shows, and the kernels compiled on the way."""
    found: dict[str, Any] = {f"{name}_s": None for name in MILESTONES}
    for at, message in entries:
        for name, sign in MILESTONES.items():
            if found[f"{name}_s"] is None and sign.search(message):
                found[f"{name}_s"] = at
    found["kernels_compiled"] = {kind: sum(1 for _at, m in entries if sign.search(m)) for kind, sign in KERNELS.items()}
    return found


def metrics(name: str, record: dict[str, Any]) -> str:
    label = f'sparkfleet_instance="{name}"'
    lines = [
        "# HELP sparkfleet_start_seconds seconds from the unit's start to each milestone of its last start",
        "# TYPE sparkfleet_start_seconds gauge",
    ]
    for milestone in ("socket", "health", "answer"):
        value = record.get(f"{milestone}_s")
        if value is not None:
            lines.append(f'sparkfleet_start_seconds{{{label},milestone="{milestone}"}} {value}')
    lines += [
        "# HELP sparkfleet_start_kernels_compiled kernels compiled during the last start (0: none, as planned)",
        "# TYPE sparkfleet_start_kernels_compiled gauge",
    ]
    lines += [
        f'sparkfleet_start_kernels_compiled{{{label},kind="{kind}"}} {count}'
        for kind, count in sorted(record["kernels_compiled"].items())
    ]
    lines += [
        "# HELP sparkfleet_start_budget_seconds the plan's start budget",
        "# TYPE sparkfleet_start_budget_seconds gauge",
        f"sparkfleet_start_budget_seconds{{{label}}} {record.get('budget_s') or 0}",
        "# HELP sparkfleet_start_timestamp_seconds when the last start began",
        "# TYPE sparkfleet_start_timestamp_seconds gauge",
        f"sparkfleet_start_timestamp_seconds{{{label}}} {record['started_at']:.0f}",
    ]
    return "\n".join(lines) + "\n"


def write_atomic(path: str, text: str) -> None:
    """Readable by node_exporter and the doctor (the watchdog's UMask is 0077); never through a planted link."""
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o644)
        handle.write(text)
    os.replace(tmp, path)


def began_at(unit: str, since: float) -> float:
    """When the start began: the unit left inactive (before its ExecCondition and ExecStartPre, and before the
    ExecStartPost that waits for a socket makes it active, `since`)."""
    out = subprocess.run(
        ["systemctl", "show", unit, "--property=InactiveExitTimestampMonotonic"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    began = int(out.strip().partition("=")[2] or 0) / 1e6
    return began if 0 < began <= since else since


def record_start(
    unit: str,
    since: float,
    answer_s: float,
    *,
    budget_s: int | None,
    textfile_dir: str | None,
    state_dir: str = STATE_DIR,
) -> dict[str, Any] | None:
    """Record the start that became active at monotonic `since` and first answered right `answer_s` later (once per
    start); its milestones count from when the unit left inactive."""
    name = unit.removeprefix("sparkfleet-vllm-").removesuffix(".service")
    path = os.path.join(state_dir, f"start-{name}.json")
    try:
        with open(path, encoding="utf-8") as handle:
            if json.load(handle).get("since") == since:
                return None  # recorded already (the readiness check's figure is finer than the watchdog's)
    except (OSError, ValueError):
        pass
    began = began_at(unit, since)
    record = {
        "unit": unit,
        "since": since,
        "started_at": round(time.time() - (time.monotonic() - began), 3),
        "budget_s": budget_s,
        **timeline(journal_since(unit, began)),
        "answer_s": round(answer_s + since - began, 2),
    }
    os.makedirs(state_dir, exist_ok=True)
    write_atomic(path, json.dumps(record) + "\n")
    if textfile_dir and os.path.isdir(textfile_dir):
        write_in_place(os.path.join(textfile_dir, f"sparkfleet_start_{name.replace('-', '_')}.prom"), metrics(name, record))
    return record


def write_in_place(path: str, text: str) -> None:
    """Over the file vllm_serve made for this instance (the directory is root's alone, so the watchdog's account makes
    no file there): written whole, then cut to its length; never through a planted link. Without that file, or
    without the right to write it, the start is recorded without its metrics."""
    data = text.encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    except OSError as exc:
        print(f"{path}: the start's metrics are not written ({exc.strerror}); vllm_serve makes this file", file=sys.stderr)
        return
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.truncate(len(data))
