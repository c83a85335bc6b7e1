"""The front door's Prometheus metrics, from its JSON access log, for node_exporter's textfile collector.

Run by sparkfleet-door-metrics.timer: reads the log lines written since the last run (following a
rotation to the renamed file), adds them to the counters kept in STATE, and rewrites OUT atomically.
Models and clients come from CONFIG (the door's plan), so every series exists from the first run and
a name a client made up never becomes a label. Standard library only: it runs on the host.

Usage: python3 sparkfleet_door_metrics.py CONFIG ACCESS_LOG STATE OUT
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, cast

# Seconds; a streamed answer counts from the request to its last byte.
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)
CLASSES = ("2xx", "3xx", "4xx", "5xx")
NONE = "(none)"


def empty_state() -> dict[str, Any]:
    return {"inode": None, "offset": 0, "auth_failures": 0, "series": {}}


def _series(state: dict[str, Any], model: str, client: str) -> dict[str, Any]:
    key = f"{model}\t{client}"
    if key not in state["series"]:
        state["series"][key] = {
            "requests": dict.fromkeys(CLASSES, 0),
            "buckets": [0] * len(BUCKETS),
            "count": 0,
            "sum": 0.0,
            "bytes": 0,
        }
    return cast("dict[str, Any]", state["series"][key])


def account(state: dict[str, Any], line: str, models: set[str], clients: set[str]) -> None:
    """Add one access-log line; a line that is not the door's JSON is skipped."""
    try:
        entry = json.loads(line)
        status = int(entry["status"])
        latency = float(entry["latency_s"])
        sent = int(entry["response_bytes"])
    except (ValueError, KeyError, TypeError):
        return
    model = entry.get("model") if entry.get("instance") and entry.get("model") in models else NONE
    client = entry.get("client") if entry.get("client") in clients else NONE
    if status == 401:
        state["auth_failures"] += 1
    series = _series(state, model, client)
    code = f"{status // 100}xx"
    series["requests"][code if code in CLASSES else "5xx" if status >= 500 else "4xx"] += 1
    for index, bound in enumerate(BUCKETS):
        if latency <= bound:
            series["buckets"][index] += 1
    series["count"] += 1
    series["sum"] += latency
    series["bytes"] += sent


def read_new_lines(state: dict[str, Any], log: str) -> list[str]:
    """Lines appended since the last run; after a rotation, the rest of the renamed file first."""
    lines: list[str] = []
    try:
        current = os.stat(log)
    except FileNotFoundError:
        return lines
    if state["inode"] is not None and state["inode"] != current.st_ino:
        rotated = log + ".1"
        try:
            if os.stat(rotated).st_ino == state["inode"]:
                with open(rotated, "rb") as handle:
                    handle.seek(state["offset"])
                    lines += handle.read().decode(errors="replace").splitlines()
        except FileNotFoundError:
            pass
        state["offset"] = 0
    if current.st_size < state["offset"]:  # truncated in place
        state["offset"] = 0
    with open(log, "rb") as handle:
        handle.seek(state["offset"])
        data = handle.read()
    # A line still being written waits for the next run.
    complete = data[: data.rfind(b"\n") + 1]
    state["inode"] = current.st_ino
    state["offset"] += len(complete)
    return lines + complete.decode(errors="replace").splitlines()


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(state: dict[str, Any], models: list[str], clients: list[str]) -> str:
    for model in [*models, NONE]:
        for client in [*clients, NONE]:
            _series(state, model, client)
    out = [
        "# HELP sparkfleet_door_requests_total Requests the door answered, by model, client key name and status class.",
        "# TYPE sparkfleet_door_requests_total counter",
    ]
    rows = sorted(state["series"].items())
    for key, s in rows:
        model, client = key.split("\t")
        for code, value in s["requests"].items():
            out.append(
                f'sparkfleet_door_requests_total{{model="{_label(model)}",client="{_label(client)}",code="{code}"}} {value}'
            )
    out += [
        "# HELP sparkfleet_door_request_duration_seconds Time from a request to its answer's last byte at the door.",
        "# TYPE sparkfleet_door_request_duration_seconds histogram",
    ]
    for key, s in rows:
        model, client = (_label(part) for part in key.split("\t"))
        labels = f'model="{model}",client="{client}"'
        for bound, value in zip(BUCKETS, s["buckets"], strict=True):
            out.append(f'sparkfleet_door_request_duration_seconds_bucket{{{labels},le="{bound}"}} {value}')
        out.append(f'sparkfleet_door_request_duration_seconds_bucket{{{labels},le="+Inf"}} {s["count"]}')
        out.append(f"sparkfleet_door_request_duration_seconds_sum{{{labels}}} {s['sum']:.6f}")
        out.append(f"sparkfleet_door_request_duration_seconds_count{{{labels}}} {s['count']}")
    out += [
        "# HELP sparkfleet_door_response_bytes_total Bytes the front door sent, by model and client key name.",
        "# TYPE sparkfleet_door_response_bytes_total counter",
    ]
    for key, s in rows:
        model, client = (_label(part) for part in key.split("\t"))
        out.append(f'sparkfleet_door_response_bytes_total{{model="{model}",client="{client}"}} {s["bytes"]}')
    out += [
        "# HELP sparkfleet_door_auth_failures_total Requests refused for a missing or unknown key (401).",
        "# TYPE sparkfleet_door_auth_failures_total counter",
        f"sparkfleet_door_auth_failures_total {state['auth_failures']}",
    ]
    return "\n".join(out) + "\n"


def write_atomically(path: str, text: str, mode: int) -> None:
    temporary = f"{path}.{os.getpid()}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.fchmod(descriptor, mode)  # the unit's UMask would narrow it: node_exporter reads this file
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def main(config_path: str, log: str, state_path: str, out: str) -> int:
    with open(config_path, encoding="utf-8") as handle:
        config = json.load(handle)
    models, clients = list(config["models"]), list(config["clients"])
    try:
        with open(state_path, encoding="utf-8") as handle:
            state = json.load(handle)
    except (FileNotFoundError, ValueError):
        state = empty_state()
    known_models, known_clients = set(models), set(clients)
    for line in read_new_lines(state, log):
        account(state, line, known_models, known_clients)
    # Series of a model or client no longer in the plan are dropped with it.
    kept_models, kept_clients = known_models | {NONE}, known_clients | {NONE}
    state["series"] = {
        key: value
        for key, value in state["series"].items()
        if key.split("\t")[0] in kept_models and key.split("\t")[1] in kept_clients
    }
    write_atomically(out, render(state, models, clients), 0o644)
    write_atomically(state_path, json.dumps(state), 0o600)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
