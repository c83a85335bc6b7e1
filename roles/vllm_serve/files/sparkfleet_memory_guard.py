"""The host memory guard of a sparkfleet host, and the start admission of its vLLM instances.

watch   keep MemAvailable above the plan's floor (memory-guard.json, sparkfleet.planning.memguard): under the floor
        (the starting floor while an instance starts, the serving floor otherwise) stop the sparkfleet instance
        that is starting, else the one holding the most, and never anything else (sshd, the door, monitoring
        are not in its table). On GB10 the GPU's allocations are host memory that cgroups do not see, so
        MemoryMax cannot do this. One journal line per stop names the floor, the figure, the instance and the
        host's largest memory holders (what took the memory may be something the guard may not stop); the
        state file and node_exporter's textfile carry the same. A stopped instance is stopped, not failed:
        systemd does not restart it. The guard brings it back: once MemAvailable has stayed above what its start
        needs (the start and the starting floor) for the table's return_after_s, it starts the unit, whose
        start passes `admit`; return_tries starts a stop at most, each with a journal line and a metric. An
        on-demand instance is left to the door's activator (its next request), and one no longer enabled stays
        stopped.
admit   one instance's start (its unit's ExecCondition, and the door's activator): refused, naming both figures,
        when MemAvailable less what the start takes would fall under the starting floor, and on GB10 when CUDA's
        own free figure (the kernel's MemFree there: page cache counts as used) is below utilization x CUDA's
        total, the check vLLM makes at start.
Python's standard library only; on GB10 CUDA's figures come from sparkfleet_cuda_memory.py beside this file.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import subprocess
import sys
import time
from typing import Any

GIB = 1024**3
STATE_DIR = "/run/sparkfleet"


def log(message: str) -> None:
    print(message, flush=True)


def gib(value: float) -> str:
    return f"{value / GIB:.2f} GiB"


def read_meminfo(path: str = "/proc/meminfo") -> dict[str, int]:
    values: dict[str, int] = {}
    with open(path, encoding="ascii") as handle:
        for line in handle:
            name, rest = [*line.split(":", 1), ""][:2]
            fields = rest.split()
            if fields and fields[0].isdigit():
                values[name] = int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return values


def load_table(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        table: dict[str, Any] = json.load(handle)
    return table


def unit_states(units: list[str]) -> dict[str, dict[str, str]]:
    """systemctl show of several units in one call: their properties, by unit."""
    if not units:
        return {}
    props = ["Id", "ActiveState", "SubState", "ActiveEnterTimestampMonotonic", "ControlGroup", "UnitFileState"]
    out = subprocess.run(
        ["systemctl", "show", *units, *(f"--property={p}" for p in props)], capture_output=True, text=True, check=False
    ).stdout
    states: dict[str, dict[str, str]] = {}
    for block in out.strip().split("\n\n"):
        values = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if values.get("Id"):
            states[values["Id"]] = values
    return states


def cgroup_bytes(control_group: str) -> int:
    """What the unit's cgroup holds (host-side RAM only: on GB10 the GPU's allocations are not in it)."""
    if not control_group:
        return 0
    try:
        with open(f"/sys/fs/cgroup{control_group}/memory.current", encoding="ascii") as handle:
            return int(handle.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def seen_ready(name: str, since: float, state_dir: str | None = None) -> bool:
    """Whether the instance's watchdog or readiness check saw it answer right since this start."""
    state_dir = state_dir or STATE_DIR
    for path in (f"{state_dir}/watchdog-{name}.json", f"{state_dir}/start-{name}.json"):
        try:
            with open(path, encoding="utf-8") as handle:
                state = json.load(handle)
        except (OSError, ValueError):
            continue
        if state.get("since") == since and (state.get("ready_seen") or state.get("answer_s") is not None):
            return True
    return False


def instances_now(table: dict[str, Any], now: float) -> tuple[list[dict[str, Any]], list[str]]:
    """Each running instance (its name, unit, whether it is starting, how long since its start, what it holds), and
    the units still stopping: they hold their memory until they are gone."""
    instances = table["instances"]
    states = unit_states([spec["unit"] for spec in instances.values()])
    running, stopping = [], []
    for name, spec in instances.items():
        state = states.get(spec["unit"], {})
        if state.get("ActiveState") == "deactivating":
            stopping.append(spec["unit"])
            continue
        # A unit waiting to be restarted (activating, auto-restart) holds nothing yet.
        if state.get("ActiveState") not in ("active", "activating", "reloading") or state.get("SubState") == "auto-restart":
            continue
        since = int(state.get("ActiveEnterTimestampMonotonic") or 0) / 1e6
        age = now - since if since else 0.0
        starting = state.get("ActiveState") == "activating" or (age < spec["start_budget_s"] and not seen_ready(name, since))
        held = max(int(spec["footprint_bytes"]), cgroup_bytes(state.get("ControlGroup", "")))
        running.append({"name": name, "unit": spec["unit"], "starting": starting, "age": age, "held": held, "since": since})
    return running, stopping


def top_holders(cgroup_root: str = "/sys/fs/cgroup", count: int = 3) -> list[tuple[str, int]]:
    """The units and user sessions holding the most memory (their cgroups' figure, host-side only), largest first:
    what the journal names at a stop, since what took the memory may be no instance of ours. cgroup v2's
    memory.current, else v1's memory controller (hybrid hosts, such as the sandbox's containers)."""
    for memory_dir, figure in ((cgroup_root, "memory.current"), (f"{cgroup_root}/memory", "memory.usage_in_bytes")):
        found: list[tuple[str, int]] = []
        for slice_dir in ("system.slice", "user.slice"):
            base = os.path.join(memory_dir, slice_dir)
            try:
                entries = os.listdir(base)
            except OSError:
                continue
            for entry in entries:
                held = _bytes_at(os.path.join(base, entry, figure))
                if held:
                    found.append((entry, held))
        if found:
            return sorted(found, key=lambda item: -item[1])[:count]
    return []


def _bytes_at(path: str) -> int:
    try:
        with open(path, encoding="ascii") as handle:
            return int(handle.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def victim(running: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The starting instance (the one holding the most if several start), else the one holding the most."""
    starting = [r for r in running if r["starting"]]
    pool = starting or running
    return max(pool, key=lambda r: (r["held"], -r["age"])) if pool else None


def floor_for(table: dict[str, Any], running: list[dict[str, Any]]) -> tuple[int, str]:
    if any(r["starting"] for r in running):
        return int(table["floor_starting_bytes"]), "starting"
    return int(table["floor_serving_bytes"]), "serving"


def write_atomic(path: str, text: str) -> None:
    """Readable by node_exporter and the doctor (the unit's UMask is 0077); never through a planted link."""
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o644)
        handle.write(text)
    os.replace(tmp, path)


def per_instance(name: str, kind: str, meaning: str, values: dict[str, int]) -> list[str]:
    """One of the guard's per-instance series, every guarded instance in it (0 until it happens: alerts see the first)."""
    metric = f"sparkfleet_memory_guard_{name}"
    return [f"# HELP {metric} {meaning}", f"# TYPE {metric} {kind}"] + [
        f'{metric}{{sparkfleet_instance="{n}"}} {value}' for n, value in values.items()
    ]


def metrics_text(state: dict[str, Any], guarded: list[str]) -> str:
    """The guard's textfile: every guarded instance has a stop count (0 until it is stopped), so alerts see it."""
    lines = [
        "# HELP sparkfleet_memory_guard_memavailable_bytes MemAvailable at the guard's last reading",
        "# TYPE sparkfleet_memory_guard_memavailable_bytes gauge",
        f"sparkfleet_memory_guard_memavailable_bytes {state['memavailable_bytes']}",
        "# HELP sparkfleet_memory_guard_floor_bytes the MemAvailable floor in force (starting or serving)",
        "# TYPE sparkfleet_memory_guard_floor_bytes gauge",
        f'sparkfleet_memory_guard_floor_bytes{{phase="{state["phase"]}"}} {state["floor_bytes"]}',
        "# HELP sparkfleet_memory_guard_last_check_timestamp_seconds when the guard last read MemAvailable",
        "# TYPE sparkfleet_memory_guard_last_check_timestamp_seconds gauge",
        f"sparkfleet_memory_guard_last_check_timestamp_seconds {state['checked_at']:.0f}",
    ]
    stops = state["stops"]
    named = sorted(set(guarded) | set(stops))
    lines += per_instance("stops_total", "counter", "instances the guard stopped under the floor",
                          {n: stops.get(n, {}).get("count", 0) for n in named})  # fmt: skip
    lines += per_instance("returns_total", "counter", "starts the guard made of an instance it had stopped",
                          {n: stops.get(n, {}).get("returns", 0) for n in named})  # fmt: skip
    lines += per_instance("stopped", "gauge", "the instance is stopped by the guard and not back yet",
                          {n: int(bool(stops.get(n, {}).get("pending"))) for n in named})  # fmt: skip
    lines += [
        "# HELP sparkfleet_memory_guard_last_stop_timestamp_seconds when the guard last stopped the instance",
        "# TYPE sparkfleet_memory_guard_last_stop_timestamp_seconds gauge",
    ]
    lines += [
        f'sparkfleet_memory_guard_last_stop_timestamp_seconds{{sparkfleet_instance="{n}"}} {s["at"]:.0f}'
        for n, s in sorted(stops.items())
    ]
    return "\n".join(lines) + "\n"


class Guard:
    def __init__(self, table_path: str, state_path: str, textfile: str | None, meminfo: str) -> None:
        self.table_path, self.state_path, self.textfile, self.meminfo = table_path, state_path, textfile, meminfo
        self.table: dict[str, Any] = {}
        self.mtime = 0.0
        self.settle_until = 0.0
        self.state: dict[str, Any] = {"stops": {}}
        self.textfile_refused = False
        try:
            with open(state_path, encoding="utf-8") as handle:
                self.state["stops"] = json.load(handle).get("stops", {})
        except (OSError, ValueError):
            pass

    def reload(self) -> None:
        mtime = os.stat(self.table_path).st_mtime
        if mtime != self.mtime:
            self.table, self.mtime = load_table(self.table_path), mtime
            log(
                f"memory guard: floors {gib(self.table['floor_starting_bytes'])} starting, "
                f"{gib(self.table['floor_serving_bytes'])} serving; "
                f"watching {', '.join(self.table['instances']) or 'no instance'}"
            )

    def check(self) -> None:
        self.reload()
        now_mono, now = time.monotonic(), time.time()
        available = read_meminfo(self.meminfo)["MemAvailable"]
        running, stopping = instances_now(self.table, now_mono)
        floor, phase = floor_for(self.table, running)
        self.state.update(memavailable_bytes=available, floor_bytes=floor, phase=phase, checked_at=now)
        # A stopped instance holds its memory until it is gone, and its pages take a moment to come back after: no
        # second stop while one is still stopping, nor within the settle time after it (unless far under the floor).
        if available < floor and not stopping and (now_mono >= self.settle_until or available < floor / 2):
            self.stop(victim(running), available, floor, phase, now)
            self.settle_until = time.monotonic() + float(self.table.get("settle_s", 5))
        self.bring_back(available, now)
        self.publish()

    def bring_back(self, available: int, now: float) -> None:
        """Start again each always-on instance the guard stopped, once the memory its start needs has stayed free."""
        instances = self.table.get("instances", {})
        pending = {n: r for n, r in self.state["stops"].items() if r.get("pending") and n in instances}
        if not pending:
            return
        states = unit_states([instances[name]["unit"] for name in pending])
        floor = int(self.table["floor_starting_bytes"])
        for name, record in pending.items():
            spec, state = instances[name], states.get(instances[name]["unit"], {})
            active = state.get("ActiveState", "unknown")
            if active == "active" and state.get("SubState") == "running":
                since = int(state.get("ActiveEnterTimestampMonotonic") or 0) / 1e6
                if since != record.get("stopped_start") and seen_ready(name, since):  # back, whoever started it
                    record.update(pending=False, above_since=None)
                    log(f"memory guard: {spec['unit']} serves again")
                continue
            if active not in {"inactive", "failed"}:  # starting or stopping: judged once it settles
                continue
            if spec.get("on_demand"):
                record.update(pending=False, above_since=None)
                log(f"memory guard: {spec['unit']} is switched on demand: its next request starts it (the door's activator)")
                continue
            if state.get("UnitFileState") not in ("enabled", "enabled-runtime"):
                record.update(pending=False, above_since=None)
                log(f"memory guard: {spec['unit']} is no longer enabled ({state.get('UnitFileState')}): it stays stopped")
                continue
            needed = int(spec["required_available_bytes"]) + floor
            if available < needed:
                record["above_since"] = None
                continue
            record["above_since"] = record.get("above_since") or now
            waited = now - record["above_since"]
            if waited < float(self.table["return_after_s"]):
                continue
            tries = int(self.table["return_tries"])
            if record.get("tries", 0) >= tries:
                record.update(pending=False, above_since=None)
                log(
                    f"memory guard: {spec['unit']} was started {tries} times since the guard stopped it and is not "
                    f"back: it stays stopped; start it with `systemctl start {spec['unit']}` once what took the memory "
                    "is gone"
                )
                continue
            record.update(tries=record.get("tries", 0) + 1, above_since=None, returned_at=now,
                          returns=record.get("returns", 0) + 1)  # fmt: skip
            log(
                f"memory guard: starting {spec['unit']} again (try {record['tries']} of {tries}): MemAvailable "
                f"{gib(available)} has stayed above the {gib(needed)} its start needs (its "
                f"{gib(spec['required_available_bytes'])} and the {gib(floor)} starting floor) for {waited:.0f} s"
            )
            done = subprocess.run(["systemctl", "start", "--no-block", spec["unit"]], capture_output=True, text=True,
                                  check=False)  # fmt: skip
            if done.returncode != 0:
                log(f"memory guard: systemd did not take the start of {spec['unit']}: {done.stderr.strip()}")

    def stop(self, chosen: dict[str, Any] | None, available: int, floor: int, phase: str, now: float) -> None:
        if chosen is None:
            log(
                f"memory guard: MemAvailable {gib(available)} is under the {gib(floor)} {phase} floor and no sparkfleet "
                "instance runs: nothing of ours to stop"
            )
            return
        why = "starting" if chosen["starting"] else "holding the most"
        holders = ", ".join(f"{unit} {gib(held)}" for unit, held in top_holders()) or "none readable"
        log(
            f"memory guard: MemAvailable {gib(available)} is under the {gib(floor)} {phase} floor; stopping "
            f"{chosen['unit']} ({why}: {gib(chosen['held'])}, {chosen['age']:.0f} s since its start). The host's "
            f"largest holders now (host-side memory): {holders}. It is started again once the memory is back "
            "(its start admitted by sparkfleet_memory_guard.py admit)"
        )
        done = subprocess.run(
            ["systemctl", "stop", "--no-block", chosen["unit"]], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            log(f"memory guard: systemd did not take the stop of {chosen['unit']}: {done.stderr.strip()}")
            return
        record = self.state["stops"].setdefault(chosen["name"], {"count": 0})
        if not record.get("pending"):  # a new stop, not one of a return's start: its own tries
            record.update(pending=True, tries=0)
        # The start it stopped: a later start of the unit, answering right, is the instance back.
        record.update(above_since=None, stopped_start=chosen["since"])
        record.update(
            count=record["count"] + 1,
            at=now,
            memavailable_bytes=available,
            floor_bytes=floor,
            phase=phase,
            starting=chosen["starting"],
            unit=chosen["unit"],
        )

    def publish(self) -> None:
        write_atomic(self.state_path, json.dumps(self.state) + "\n")
        if self.textfile and os.path.isdir(os.path.dirname(self.textfile)):
            try:
                write_atomic(self.textfile, metrics_text(self.state, list(self.table.get("instances", {}))))
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EPERM):
                    # Not root: a directory someone else re-owned costs the metrics, never the guard.
                    if not self.textfile_refused:
                        print(f"memory guard: cannot write {self.textfile} ({exc.strerror}); guarding on without it",
                              file=sys.stderr, flush=True)  # fmt: skip
                    self.textfile_refused = True
                    return
                if exc.errno != errno.EROFS:
                    raise
                # node_exporter's directory appeared after this process started (monitoring installed it later):
                # outside its sandbox's writable paths until systemd starts it again, which Restart=always does.
                raise SystemExit(f"memory guard: {self.textfile} is read-only here; restarting to write it") from exc

    def run(self) -> None:
        while True:
            try:
                self.check()
            except (OSError, ValueError, KeyError) as exc:  # one bad reading must not end the guard
                log(f"memory guard: check failed: {type(exc).__name__}: {exc}")
            time.sleep(float(self.table.get("interval_s", 1.0)) if self.table else 1.0)


def cuda_figures() -> tuple[int, int]:
    """(free, total) as CUDA's driver reports them (sparkfleet_cuda_memory.py beside this file)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sparkfleet_cuda_memory  # only GB10 hosts have the driver library it loads

    read = sparkfleet_cuda_memory.read_cuda_memory()
    return int(read["cuda_free_bytes"]), int(read["cuda_total_bytes"])


def admission(table: dict[str, Any], name: str, meminfo: dict[str, int], cuda: tuple[int, int] | None) -> list[str]:
    """Why the instance may not start now ([] when it may): the figures that refuse it and the fix."""
    spec = table["instances"][name]
    problems = []
    cache = meminfo.get("Cached", 0) + meminfo.get("Buffers", 0)
    if cuda is not None:
        free, total = cuda
        need = spec["gpu_memory_utilization"] * total
        if free < need:
            problems.append(
                f"CUDA reports {gib(free)} free of {gib(total)} and vLLM needs utilization "
                f"{spec['gpu_memory_utilization']} x {gib(total)} = {gib(need)}; the page cache holds {gib(cache)}, "
                "which CUDA counts as used on GB10: drop caches (systemctl start sparkfleet-drop-caches), stop what "
                f"else holds memory, or plan gpu_memory_utilization {int(free / total * 100) / 100:.2f} or less"
            )
    available = meminfo.get("MemAvailable", 0)
    after = available - int(spec["required_available_bytes"])
    # A start is held to the starting floor, the one the guard keeps while it starts.
    floor = int(table["floor_starting_bytes"])
    if after < floor:
        problems.append(
            f"MemAvailable {gib(available)} less the {gib(spec['required_available_bytes'])} it takes at start leaves "
            f"{gib(after)}, under the memory guard's {gib(floor)} starting floor (page cache {gib(cache)}): stop another "
            "instance or whatever else holds memory, or plan a smaller footprint"
        )
    return problems


def admit(args: argparse.Namespace) -> None:
    table = load_table(args.table)
    if args.name not in table["instances"]:
        sys.exit(f"{args.name} is not in {args.table}")
    cuda = None
    if table.get("platform") == "gb10":
        try:
            cuda = cuda_figures()
        except Exception as exc:  # a driver that cannot be read refuses the start: vLLM could not start either
            sys.exit(f"sparkfleet: start of {args.name} refused: CUDA's free memory cannot be read ({exc})")
    problems = admission(table, args.name, read_meminfo(args.meminfo), cuda)
    if problems:
        sys.exit(f"sparkfleet: start of {args.name} refused: " + "; ".join(problems))
    print(f"sparkfleet: start of {args.name} admitted")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    watch = sub.add_parser("watch", help="keep MemAvailable above the floor")
    watch.add_argument("table", help="memory-guard.json (the host plan's memory_guard)")
    watch.add_argument("--state", default=f"{STATE_DIR}-memory-guard/state.json", help="what it did, as JSON")
    watch.add_argument("--textfile", help="node_exporter textfile to write its metrics to")
    watch.add_argument("--meminfo", default="/proc/meminfo")
    check = sub.add_parser("admit", help="refuse a start that would squeeze the host")
    check.add_argument("table")
    check.add_argument("name")
    check.add_argument("--meminfo", default="/proc/meminfo")
    args = parser.parse_args()
    if args.command == "admit":
        admit(args)
        return
    Guard(args.table, args.state, args.textfile, args.meminfo).run()


if __name__ == "__main__":
    main()
