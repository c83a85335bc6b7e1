"""A stand-in for the GPU driver's allocations on a GB10: memory taken outside every instance's cgroup.

Run in a transient unit of its own (systemd-run), it takes memory in 128 MiB steps (each page touched) until one
of the watched units is no longer active (the memory guard stopped it) or it holds --cap-mib, then keeps what it
holds until it is stopped. It writes what it saw to --result as JSON: when MemAvailable first fell under --floor,
which unit went and how long after the crossing, and how much it held.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time

STEP = 128 << 20


def available() -> int:
    with open("/proc/meminfo", encoding="ascii") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("MemAvailable:"))


def inactive(units: list[str]) -> list[str]:
    states = subprocess.run(["systemctl", "is-active", *units], capture_output=True, text=True, check=False).stdout
    return [unit for unit, state in zip(units, states.split(), strict=False) if state != "active"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--floor", type=int, required=True)
    parser.add_argument("--cap-mib", type=int, default=3072)
    parser.add_argument("--result", required=True)
    parser.add_argument("units", nargs="+")
    args = parser.parse_args()
    held: list[bytearray] = []
    began = time.monotonic()
    crossed = stopped = None
    gone: list[str] = []
    while time.monotonic() - began < 120:
        now = time.monotonic()
        if crossed is None and available() < args.floor:
            crossed = now
        gone = inactive(args.units)
        if gone:
            stopped = now
            break
        if len(held) * STEP < args.cap_mib << 20:
            block = bytearray(STEP)
            block[::4096] = b"\1" * len(block[::4096])
            held.append(block)
        # Read at once and then every 5 ms: the step that crosses the floor is seen when it does. Read only at the top,
        # a crossing could go unseen behind a `systemctl is-active` slowed by the scenarios beside this one while the
        # guard (polling each second) stopped an instance whose freed memory lifted MemAvailable back (CI45).
        for _ in range(10):
            if crossed is None and available() < args.floor:
                crossed = time.monotonic()
            time.sleep(0.005)
    result = {
        "held_mib": len(held) * STEP >> 20,
        "stopped": gone,
        "crossed_after_s": round(crossed - began, 2) if crossed is not None else None,
        "stopped_after_crossing_s": round(stopped - crossed, 2) if stopped is not None and crossed is not None else None,
    }
    with open(args.result, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    while True:  # keep what it holds: the stopped instance's next start must be refused while it does
        time.sleep(1)


if __name__ == "__main__":
    main()
