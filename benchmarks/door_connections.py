"""What idle connections cost the front door, and whether a flood of them from one address keeps others out.

Runs inside a converged sandbox host (default spark01, `scripts/site`), as an attacker on that host would: every
connection comes from the host's own loopback addresses, which Linux gives the whole of 127.0.0.0/8, so one
process can be many client addresses.

1. **Cost.** From `--sources` addresses, `--per-source` connections each to the door's port are opened and held:
   bare TCP connections that never send a byte (what a flood of half-open TLS holds), connections that send a
   ClientHello, read the server's answer and go silent mid-handshake, and connections that finish their handshake
   (HTTP/1.1, then HTTP/2 by ALPN) and send nothing more. nginx's memory (the RSS of its processes, and its
   cgroup's memory.current where the host keeps one for it) is read before and while they are held; the difference
   over the connections accepted is the cost of one. nginx closes each kind at header_timeout_s, so each is read
   within a second of opening. nginx reuses the heap an earlier run grew: the figures are a first run's on a freshly
   started nginx (`systemctl restart nginx` on the host first).
2. **Flood.** From one address, connections to one door port are opened as fast as they are refused or closed and
   held for `--flood-s` seconds (up to 1,600: the issue's 1,530 silent connections, and more), while another client
   on the same address asks the other port every 100 ms (`GET /health` with the sandbox key): its answers, failures
   and latency are what a tenant sees during the flood. Then the same with the ports swapped. This is the default
   scenario's own check (`extensions/molecule/default/files/door_flood.py`), its figures printed.

The gate's table (nftables `inet sparkfleet_door`) is read before the floods: its counters say how many connections
it reset. Run with the gate stopped (`systemctl stop sparkfleet-door-gate`) for the figures without it. These are CPU
sandbox numbers on this machine, not DGX Spark figures; what nginx holds for a connection does not depend on the
accelerator.

Run: uv run python benchmarks/door_connections.py [--host spark01] [--sources 8] [--per-source 200] [--flood-s 15]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The flood is the default scenario's own check (verify_exposure.yml), run here with the figures printed.
FLOOD = ROOT / "extensions" / "molecule" / "default" / "files" / "door_flood.py"

# Runs on the sandbox host with its system Python: stdlib only. Reads the client key from a file there.
CLIENT = r"""
import json, os, re, socket, ssl, subprocess, sys, time
sources, per_source = int(sys.argv[1]), int(sys.argv[2])
tls = ssl.create_default_context(cafile="/etc/nginx/sparkfleet/tls/door.crt")
tls.check_hostname = False
conf = open("/etc/nginx/conf.d/sparkfleet-door.conf").read()
ports = sorted({int(p) for p in re.findall(r"listen\s+[\d.]*:?(\d+)\s+ssl", conf)})
door, ui = ports[0], (ports[1] if len(ports) > 1 else None)

def unit(prop, name="nginx"):
    return subprocess.run(["systemctl", "show", "-P", prop, name], capture_output=True, text=True).stdout.strip()

def memory():
    rss = 0
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and open(f"/proc/{pid}/comm").read().strip() == "nginx":
                rss += int(re.search(r"VmRSS:\s+(\d+) kB", open(f"/proc/{pid}/status").read()).group(1)) * 1024
        except (OSError, AttributeError):
            pass
    current = unit("MemoryCurrent")
    if not current.isdigit():  # cgroup v1 (the sandbox's hybrid layout): the memory controller's own count
        try:
            current = open("/sys/fs/cgroup/memory/system.slice/nginx.service/memory.usage_in_bytes").read().strip()
        except OSError:
            current = ""
    return {"cgroup": int(current) if current.isdigit() else None, "rss": rss}

halves = []
h2 = ssl.create_default_context(cafile="/etc/nginx/sparkfleet/tls/door.crt")
h2.check_hostname = False
h2.set_alpn_protocols(["h2"])

# handshake: False (bare TCP), "hello" (a ClientHello sent, the server's answer read, never finished), True (a finished
# TLS handshake, HTTP/1.1) or "h2" (finished, HTTP/2 by ALPN).
def connect(address, port, handshake):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.bind((address, 0))
        s.connect(("127.0.0.1", port))
        if handshake == "hello":
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            half = tls.wrap_bio(incoming, outgoing, server_hostname="localhost")
            try:
                half.do_handshake()
            except ssl.SSLWantReadError:
                pass
            s.sendall(outgoing.read())
            s.recv(16384)
            halves.append(half)  # kept alive with the socket
        elif handshake:
            s = (h2 if handshake == "h2" else tls).wrap_socket(s, server_hostname="localhost")
        return s
    except OSError:
        s.close()
        return None

def gate():
    out = subprocess.run(["nft", "-j", "list", "table", "inet", "sparkfleet_door"], capture_output=True, text=True)
    if out.returncode != 0:
        return None
    resets = []
    for item in json.loads(out.stdout)["nftables"]:
        rule = item.get("rule")
        if rule:
            resets += [e["counter"]["packets"] for e in rule["expr"] if "counter" in e]
    return resets

def cost(handshake):
    time.sleep(1)
    before = memory()
    held = []
    for i in range(sources):
        for _ in range(per_source):
            s = connect(f"127.0.0.{10 + i}", door, handshake)
            if s is not None:
                held.append(s)
    time.sleep(0.3)
    during = memory()
    for s in held:
        s.close()
    return {"asked": sources * per_source, "held": len(held), "before": before, "during": during}

events = open("/etc/nginx/nginx.conf").read()
result = {"ports": ports, "worker_connections": re.findall(r"worker_connections\s+(\d+);", events),
          "limit_nofile": unit("LimitNOFILE"), "memory_max": unit("MemoryMax"), "gate_before": gate()}
result["bare"] = cost(False)
result["hello"] = cost("hello")
result["tls"] = cost(True)
result["h2"] = cost("h2")
result["gate"] = gate()
print(json.dumps(result))
"""


def flood(host: str, seconds: float) -> list[dict[str, object]]:
    """Each door port flooded from one address while the same address asks the other (door_flood.py on the host)."""
    key = ROOT / ".cache" / "sandbox-client-key"
    # The key travels as a file, never on an argv.
    subprocess.run(["podman", "cp", str(key), f"{host}:/root/.door-flood-key"], check=True)
    subprocess.run(["podman", "cp", str(FLOOD), f"{host}:/root/door_flood.py"], check=True)
    floods = []
    for flooded, asked in ((8443, 443), (443, 8443)):
        argv = ["python3", "/root/door_flood.py", str(flooded), str(asked), str(seconds), "/root/.door-flood-key"]
        run = subprocess.run(["podman", "exec", host, *argv], capture_output=True, text=True, check=True, timeout=600)
        floods.append({"flooded": flooded, "asked": asked, **json.loads(run.stdout)})
    subprocess.run(["podman", "exec", host, "rm", "-f", "/root/.door-flood-key", "/root/door_flood.py"], check=False)
    return floods


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="spark01")
    parser.add_argument("--sources", type=int, default=8)
    parser.add_argument("--per-source", type=int, default=200)
    parser.add_argument("--flood-s", type=float, default=15.0)
    args = parser.parse_args()
    run = subprocess.run(
        ["podman", "exec", "-i", args.host, "python3", "-", str(args.sources), str(args.per_source)],
        input=CLIENT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if run.returncode != 0:
        print(run.stderr, file=sys.stderr)
        return 1
    floods = [] if '"ports": [443]' in run.stdout else flood(args.host, args.flood_s)
    r = json.loads(run.stdout)
    print(f"front door connections on {args.host} (CPU sandbox, not Spark figures)")
    print(
        f"  ports {r['ports']}; worker_connections {r['worker_connections']}; LimitNOFILE {r['limit_nofile']}; "
        f"MemoryMax {r['memory_max']}; gate {'loaded' if r['gate_before'] is not None else 'not loaded'}"
    )
    for kind in ("bare", "hello", "tls", "h2"):
        c = r[kind]
        rss = c["during"]["rss"] - c["before"]["rss"]
        line = f"  {kind:5} {c['held']:5} of {c['asked']} held from {args.sources} addresses: RSS +{rss / 2**20:.1f} MiB "
        line += f"({rss / max(c['held'], 1) / 1024:.1f} KiB each)"
        if c["before"]["cgroup"] is not None and c["during"]["cgroup"] is not None:
            cgroup = c["during"]["cgroup"] - c["before"]["cgroup"]
            line += f", cgroup +{cgroup / 2**20:.1f} MiB ({cgroup / max(c['held'], 1) / 1024:.1f} KiB each)"
        print(line)
    for f in floods:
        seconds = sorted(a["s"] for a in f["answers"] if a["status"] == "HTTP/1.1 200 OK")
        p50 = f"{seconds[len(seconds) // 2] * 1000:.0f} ms" if seconds else "-"
        worst = f"{seconds[-1] * 1000:.0f} ms" if seconds else "-"
        print(
            f"  flood of {f['flooded']} from one address for {args.flood_s:.0f} s: {f['opened']} opened, {f['refused']} "
            f"refused, at most {f['established']} established on the door's side; {f['asked']} from the same address: "
            f"{len(seconds)} answered, {len(f['answers']) - len(seconds)} failed, p50 {p50}, max {worst}"
        )
    print(f"  the gate's resets (per rule) before the floods: {r['gate']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
