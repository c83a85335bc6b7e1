"""The memory guard's stop and return on a sandbox host: a timeline of one squeeze by memory no instance holds.

Runs against a converged sandbox host (default spark01, `scripts/site`). A stand-in for GPU allocations (the
fleet scenario's memory_hog.py, in a transient unit outside every instance's cgroup) takes memory until the
guard stops the always-on instance; the stand-in then lets go, and the guard brings the instance back through its
start admission once the memory its start needs has stayed free for the table's return_after_s (shortened here to
--return-after, 60 s by default). The guard's floors are set 1 GiB under MemAvailable for the squeeze and put
back after it. Prints when MemAvailable crossed the floor, when the guard stopped the instance, when the memory
came back, when the guard started it again and when it answered right again, from the guard's and the unit's
journals. These are CPU sandbox figures on this machine, not DGX Spark ones.

Run: uv run python benchmarks/guard_return.py [--host spark01] [--instance tiny] [--return-after 10]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TABLE = "/etc/sparkfleet/memory-guard.json"
RESULT = "/run/sparkfleet-benchmark-hog.json"


def on_host(host: str, *argv: str, check: bool = True) -> str:
    return subprocess.run(["podman", "exec", host, *argv], capture_output=True, text=True, check=check).stdout


def journal(host: str, unit: str, since: str) -> list[tuple[float, str]]:
    """(seconds since the epoch, message) of a unit's journal lines since `since`."""
    out = on_host(host, "journalctl", "-u", unit, "--since", since, "-o", "json", "--no-pager")
    lines = []
    for line in out.splitlines():
        entry = json.loads(line)
        lines.append((int(entry["__REALTIME_TIMESTAMP"]) / 1e6, str(entry.get("MESSAGE", ""))))
    return lines


def first(lines: list[tuple[float, str]], needle: str) -> tuple[float, str] | None:
    return next((line for line in lines if needle in line[1]), None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="spark01")
    parser.add_argument("--instance", default="tiny")
    parser.add_argument("--return-after", type=float, default=10.0)
    args = parser.parse_args()
    unit = f"sparkfleet-vllm-{args.instance}.service"
    table: dict[str, Any] = json.loads(on_host(args.host, "cat", TABLE))
    since = on_host(args.host, "date", "+%Y-%m-%d %H:%M:%S").strip()
    available = int(next(row.split()[1] for row in on_host(args.host, "cat", "/proc/meminfo").splitlines()
                         if row.startswith("MemAvailable:"))) * 1024  # fmt: skip
    floor = available - (1 << 30)
    squeeze = table | {"floor_starting_bytes": floor, "floor_serving_bytes": floor, "return_after_s": args.return_after}
    subprocess.run(["podman", "cp", str(ROOT / "extensions/molecule/fleet/files/memory_hog.py"),
                    f"{args.host}:/root/memory_hog.py"], check=True)  # fmt: skip
    try:
        subprocess.run(["podman", "exec", "-i", args.host, "sh", "-c", f"cat > {TABLE}"],
                       input=json.dumps(squeeze), text=True, check=True)  # fmt: skip
        time.sleep(3)
        on_host(args.host, "systemd-run", "--unit=sparkfleet-benchmark-hog", "--collect", "/usr/bin/python3",
                "/root/memory_hog.py", "--floor", str(floor), "--cap-mib", "3072", "--result", RESULT, unit)  # fmt: skip
        for _ in range(150):
            if subprocess.run(["podman", "exec", args.host, "test", "-f", RESULT], check=False).returncode == 0:
                break
            time.sleep(1)
        hog = json.loads(on_host(args.host, "cat", RESULT))
    finally:
        on_host(args.host, "systemctl", "stop", "sparkfleet-benchmark-hog.service", check=False)
        freed = time.time()
        # The guard's own floors again, with the short return wait.
        subprocess.run(["podman", "exec", "-i", args.host, "sh", "-c", f"cat > {TABLE}"],
                       input=json.dumps(table | {"return_after_s": args.return_after}), text=True, check=True)  # fmt: skip
    # Back: the guard started it again (a new start, not the one it stopped) and its watchdog saw it answer right.
    stopped_start = on_host(args.host, "systemctl", "show", "-P", "ActiveEnterTimestampMonotonic", unit, check=False)
    back = None
    for _ in range(600):
        state = on_host(args.host, "systemctl", "show", "-P", "ActiveEnterTimestampMonotonic", unit, check=False)
        ready = on_host(args.host, "cat", f"/run/sparkfleet/watchdog-{args.instance}.json", check=False)
        seen = json.loads(ready) if ready else {}
        if state != stopped_start and seen.get("ready_seen") and seen.get("since") == int(state or 0) / 1e6:
            back = time.time()
            break
        time.sleep(1)
    subprocess.run(["podman", "exec", "-i", args.host, "sh", "-c", f"cat > {TABLE}"],
                   input=json.dumps(table), text=True, check=True)  # fmt: skip
    on_host(args.host, "rm", "-f", RESULT, "/root/memory_hog.py", check=False)
    guard = journal(args.host, "sparkfleet-memory-guard.service", since)
    stop, start = first(guard, "; stopping " + unit), first(guard, f"starting {unit} again")
    served = first(guard, f"{unit} serves again")
    t0 = stop[0] if stop else freed
    print(f"memory guard on {args.host}: stop and return of {unit} (CPU sandbox, not Spark figures)")
    print(f"  the stand-in took {hog.get('held_mib')} MiB; MemAvailable crossed the floor, the guard stopped "
          f"{hog.get('stopped')} {hog.get('stopped_after_crossing_s')} s later")  # fmt: skip
    for label, line in (("stop", stop), ("memory free", (freed, "the stand-in stopped")), ("start again", start),
                        ("serves again (guard)", served)):  # fmt: skip
        if line:
            print(f"  {line[0] - t0:7.1f} s  {label}: {line[1][:220]}")
    print(f"  {(back - t0) if back else float('nan'):7.1f} s  answered right again (its watchdog's state)")
    return 0 if start and back else 1


if __name__ == "__main__":
    sys.exit(main())
