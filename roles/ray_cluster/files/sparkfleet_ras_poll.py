"""Ask NCCL's RAS on this member for its communicators, a few seconds apart, and read the GPU's utilisation and power.

Usage: sparkfleet_ras_poll.py POLLS INTERVAL_S

NCCL (2.24 and later) answers `verbose status` on localhost:28028 while a process of it runs (NCCL docs,
troubleshooting/ras.rst). Prints JSON: {"polls": [text, ...], "error": null or why none answered, "gpu": null or
{"utilization": 0-1, "watts": W}}. Read only; standard library only.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time

ADDRESS = ("127.0.0.1", 28028)


def poll() -> str:
    chunks = []
    with socket.create_connection(ADDRESS, timeout=5) as conn:
        conn.sendall(b"verbose status\n")
        conn.settimeout(3)
        while True:
            try:
                data = conn.recv(65536)
            except TimeoutError:
                break
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", errors="replace")


def gpu():
    if not shutil.which("nvidia-smi"):
        return None
    query = ["nvidia-smi", "--query-gpu=utilization.gpu,power.draw", "--format=csv,noheader,nounits"]
    try:
        first = subprocess.run(query, capture_output=True, text=True, timeout=20, check=True).stdout.splitlines()[0]
        util, watts = (float(v) for v in first.split(","))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    return {"utilization": util / 100, "watts": watts}


def main() -> int:
    count, interval = int(sys.argv[1]), float(sys.argv[2])
    polls, error = [], None
    for index in range(count):
        if index:
            time.sleep(interval)
        try:
            polls.append(poll())
        except OSError as exc:
            error = f"NCCL's RAS does not answer on {ADDRESS[0]}:{ADDRESS[1]} ({exc.strerror or exc})"
            break
    print(json.dumps({"polls": polls, "error": error, "gpu": gpu()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
