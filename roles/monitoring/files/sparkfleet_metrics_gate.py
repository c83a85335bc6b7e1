"""Load the nftables table that lets only the metrics' readers reach Prometheus and node_exporter on this host.

Run by sparkfleet-metrics-gate.service (monitoring role) at boot and after each change of its settings file
(JSON: the TCP ports, the accounts that read them). A local connection to one of those ports from any other
account is reset before it reaches the listener: the metrics hold every instance's and every client's figures.
Accounts that do not exist (yet) are left out and named; root always reads. The table replaces the one loaded
before in one transaction, so the ports are never open between two rule sets.
"""

from __future__ import annotations

import json
import pwd
import subprocess
import sys

TABLE = "sparkfleet_metrics"


def ruleset(ports: list[int], uids: list[int]) -> str:
    """The table: with no ports, an empty one (the gate open)."""
    rules = ""
    if ports:
        port_set = ", ".join(str(p) for p in sorted(set(ports)))
        uid_set = ", ".join(str(u) for u in sorted({0, *uids}))
        rules = (
            f"    tcp dport {{ {port_set} }} fib daddr type local meta skuid != {{ {uid_set} }} "
            "counter reject with tcp reset\n"
        )
    return (
        f"table inet {TABLE}\n"
        f"delete table inet {TABLE}\n"
        f"table inet {TABLE} {{\n"
        "  chain output {\n"
        "    type filter hook output priority filter; policy accept;\n"
        f"{rules}"
        "  }\n"
        "}\n"
    )


def reader_uids(names: list[str]) -> tuple[list[int], list[str]]:
    uids, missing = [], []
    for name in names:
        try:
            uids.append(pwd.getpwnam(name).pw_uid)
        except KeyError:
            missing.append(name)
    return uids, missing


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: sparkfleet_metrics_gate.py SETTINGS.json", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        settings = json.load(handle)
    ports = [int(p) for p in settings["ports"]]
    uids, missing = reader_uids([str(n) for n in settings["readers"]])
    if missing:
        print(f"not among the readers (no such account yet): {', '.join(missing)}", file=sys.stderr)
    done = subprocess.run(["nft", "-f", "-"], input=ruleset(ports, uids), text=True, check=False)
    if done.returncode == 0:
        print(f"ports {sorted(set(ports)) or 'none'}: readers uid {sorted({0, *uids})}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
