"""systemd-analyze security exposure of every unit sparkfleet runs, and what listens, on a sandbox host.

Prints one line per unit (systemd's overall exposure, 0 = locked down, 10 = unsafe) and every TCP
listener with its owner, for a host converged by scripts/site (default spark01). The scores are
computed by the host's systemd from the unit files; the listeners are the live sockets.

Run: uv run python benchmarks/exposure.py [--host spark01]
"""

from __future__ import annotations

import argparse
import re
import subprocess

UNITS = (
    "sparkfleet-*.service",
    "prometheus-node-exporter.service",
    "prometheus.service",
    "nginx.service",
)


def run(host: str, *argv: str) -> str:
    return subprocess.run(["podman", "exec", host, *argv], capture_output=True, text=True, check=False).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="spark01")
    args = parser.parse_args()
    listed = run(args.host, "systemctl", "list-units", "--type=service", "--all", "--no-legend", "--plain", *UNITS)
    units = sorted({line.split()[0] for line in listed.splitlines() if line.strip()})
    print(f"systemd-analyze security on {args.host} (exposure 0-10, lower is safer)")
    for unit in units:
        text = run(args.host, "systemd-analyze", "security", "--no-pager", unit)
        score = re.search(r"exposure level for \S+: ([0-9.]+) (\S+)", text)
        print(f"  {unit:<48} {score.group(1) + ' ' + score.group(2) if score else '?'}")
    users = {line.split(":")[2]: line.split(":")[0] for line in run(args.host, "getent", "passwd").splitlines()}
    print("TCP listeners (address, owner)")
    listeners = []
    for line in run(args.host, "ss", "-ltnHe").splitlines():
        fields = line.split()
        uid = next((f[4:] for f in fields if f.startswith("uid:")), "0")
        listeners.append((fields[3], users.get(uid, uid)))
    # Sorted: ss lists them in the kernel's hash order, which differs from one boot to the next.
    for address, owner in sorted(listeners):
        print(f"  {address:<24} {owner}")


if __name__ == "__main__":
    main()
