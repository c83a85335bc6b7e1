"""How much memory the front door's nginx takes for the worst bodies it accepts, and what it refuses.

Runs inside a converged sandbox host (default spark01, `scripts/site`). It reads the door's body limit
from its configuration, then sends, with the sandbox client key:
  - `--concurrency` requests at once whose bodies are that limit minus a little, built as deeply nested
    arrays (what made a full JSON parse in the router grow nginx by 151 MiB for 2 MiB before), with the
    model field last so the router has to scan all of it; the model is one the host does not serve, so
    the router answers 404 itself and what is measured is nginx alone (buffer and scan), not vLLM;
  - one body a little over the limit, which the door must refuse with 413.
It samples the resident memory of every nginx process (the master and its workers, summed) every 20 ms
and prints it at rest, at the peak and after. These are CPU sandbox numbers on this machine, not DGX
Spark figures; nginx's own memory does not depend on the accelerator.

Run: uv run python benchmarks/door_memory.py [--host spark01] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Runs on the sandbox host with its system Python: stdlib only. Reads the client key from a file there.
CLIENT = r"""
import http.client, json, os, re, ssl, sys, threading, time
concurrency, client_key_file, model = int(sys.argv[1]), sys.argv[2], sys.argv[3]
key = open(client_key_file).read().strip()
conf = open("/etc/nginx/conf.d/sparkfleet-door.conf").read()
limit = int(re.search(r"client_max_body_size (\d+)m;", conf).group(1)) * 1024 * 1024
tls = ssl.create_default_context(cafile="/etc/nginx/sparkfleet/tls/door.crt")

def nginx_rss():
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "nginx":
                    continue
            with open(f"/proc/{pid}/status") as f:
                total += int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) * 1024
        except (OSError, AttributeError):
            pass
    return total

def body(size):
    tail = json.dumps({"model": model})[1:]  # '"model": "..."}'
    head = '{"messages": '
    depth = (size - len(head) - len(tail) - 2) // 2
    return (head + "[" * depth + "]" * depth + ", " + tail).encode()

def send(payload):
    c = http.client.HTTPSConnection("127.0.0.1", 443, context=tls, timeout=120)
    c.request("POST", "/v1/chat/completions", body=payload,
              headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    reply = c.getresponse()
    reply.read()
    c.close()
    return reply.status

samples, stop = [], threading.Event()
def sample():
    while not stop.is_set():
        samples.append(nginx_rss())
        time.sleep(0.02)

rest = nginx_rss()
big = body(limit - 4096)
statuses = []
sampler = threading.Thread(target=sample)
sampler.start()
workers = [threading.Thread(target=lambda: statuses.append(send(big))) for _ in range(concurrency)]
began = time.perf_counter()
for w in workers: w.start()
for w in workers: w.join()
elapsed = time.perf_counter() - began
stop.set(); sampler.join()
time.sleep(1)
print(json.dumps({"limit_bytes": limit, "body_bytes": len(big), "concurrency": concurrency, "rest_bytes": rest,
                  "peak_bytes": max(samples + [rest]), "after_bytes": nginx_rss(), "statuses": sorted(statuses),
                  "seconds": elapsed, "over_limit_status": send(body(limit + 65536))}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="spark01")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    key = ROOT / ".cache" / "sandbox-client-key"
    # The key travels as a file, never on an argv.
    subprocess.run(["podman", "cp", str(key), f"{args.host}:/root/.sandbox-client-key"], check=True)
    argv = ["podman", "exec", "-i", args.host, "python3", "-", str(args.concurrency), "/root/.sandbox-client-key"]
    run = subprocess.run(
        [*argv, "sparkfleet-benchmark/no-such-model"], input=CLIENT, capture_output=True, text=True, check=False, timeout=600
    )
    subprocess.run(["podman", "exec", args.host, "rm", "-f", "/root/.sandbox-client-key"], check=False)
    if run.returncode != 0:
        print(run.stderr, file=sys.stderr)
        return 1
    r = json.loads(run.stdout)
    mib = 1024 * 1024
    limit, body, n = r["limit_bytes"] / mib, r["body_bytes"] / mib, r["concurrency"]
    rest, peak, after = r["rest_bytes"] / mib, r["peak_bytes"] / mib, r["after_bytes"] / mib
    print(f"front door memory on {args.host} (CPU sandbox, not Spark figures)")
    print(f"  body limit {limit:.1f} MiB; {n} nested-array bodies of {body:.2f} MiB")
    print(f"  nginx RSS at rest {rest:.1f} MiB, peak {peak:.1f} MiB, after {after:.1f} MiB")
    print(f"  peak growth {peak - rest:.1f} MiB = {(peak - rest) / n:.2f} MiB per request in flight")
    print(f"  answers {r['statuses']} in {r['seconds']:.1f} s; a body over the limit: {r['over_limit_status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
