"""How much memory the front door's nginx takes for the worst bodies it accepts, and whether it still answers.

Runs inside a converged sandbox host (default spark01, `scripts/site`). It reads the door's body limit and
nginx's MemoryMax there, then for each worst shape sends, with the sandbox client key, `--concurrency`
requests at once whose bodies are that limit minus a little, the model field last so the router scans all
of it:
  - nested: deeply nested arrays (what made a full JSON parse grow nginx by 151 MiB for 2 MiB);
  - keys: many short top-level keys (each parsed key cost the old router 33 bytes per body byte);
  - chat: an ordinary long conversation;
  - escaped: one string of escaped quotes (a backslash and a quote, repeated), which the router once skipped as
    one step, holding the worker for seconds (issue 61);
The model is one the host does not serve, so the router answers 404 itself and what is measured is nginx
alone (buffer and scan), not vLLM. While they are in flight a keyed `GET /v1/models` is sent every 50 ms
on its own connection: its latency is what any other client of the door sees meanwhile. Last, one body a
little over the limit, which the door must refuse with 413.

With `--webui` the same bodies go, without an account, to the chat UI (port 8443): to its sign-in, or with
`--path` to any of its paths (`/api/v1/chats/new` reads its JSON body before it asks for a session); what is
sampled is Open WebUI's memory and its /health latency.

It samples the resident memory of every nginx process (or the UI's) every 20 ms. These are CPU sandbox
numbers on this machine, not DGX Spark figures; nginx's own memory does not depend on the accelerator.

Run: uv run python benchmarks/door_memory.py [--host spark01] [--concurrency 8] [--webui] [--path PATH]
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
import http.client, json, os, re, ssl, subprocess, sys, threading, time
concurrency, client_key_file, model, target, send_path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
key = open(client_key_file).read().strip()
conf = open("/etc/nginx/conf.d/sparkfleet-door.conf").read()
limits = [int(m) for m in re.findall(r"client_max_body_size (\d+)m;", conf)]
limit = (limits[0] if target == "door" else limits[-1]) * 1024 * 1024
port = 443 if target == "door" else 8443
tls = ssl.create_default_context(cafile="/etc/nginx/sparkfleet/tls/door.crt")

def pids():
    if target == "door":
        found = []
        for pid in os.listdir("/proc"):
            try:
                if pid.isdigit() and open(f"/proc/{pid}/comm").read().strip() == "nginx":
                    found.append(pid)
            except OSError:
                pass
        return found
    main = subprocess.run(["systemctl", "show", "-P", "MainPID", "sparkfleet-webui"], capture_output=True, text=True)
    return [main.stdout.strip()]

def rss():
    total = 0
    for pid in pids():
        try:
            total += int(re.search(r"VmRSS:\s+(\d+) kB", open(f"/proc/{pid}/status").read()).group(1)) * 1024
        except (OSError, AttributeError):
            pass
    return total

def memory_max():
    unit = "nginx" if target == "door" else "sparkfleet-webui"
    out = subprocess.run(["systemctl", "show", "-P", "MemoryMax", unit], capture_output=True, text=True).stdout.strip()
    return int(out) if out.isdigit() else None

def body(shape, size):
    tail = json.dumps({"model": model})[1:]  # '"model": "..."}'
    room = size - len(tail) - 16
    if shape == "nested":
        depth = (room - 14) // 2
        return ('{"messages": ' + "[" * depth + "]" * depth + ", " + tail).encode()
    if shape == "keys":
        return ("{" + "".join('"k%06d":0,' % (i % 1000000) for i in range(room // 12)) + " " + tail).encode()
    if shape == "escaped":
        return ('{"prompt": "' + '\\"' * (room // 2 - 8) + '", ' + tail).encode()
    turn = json.dumps({"role": "user", "content": "Tell me about unified memory on the GB10. " * 8}) + ", "
    return ('{"messages": [' + turn * (room // len(turn)) + '{"role": "user", "content": "go"}], ' + tail).encode()

def request(method, path, payload=None, authorized=True):
    c = http.client.HTTPSConnection("127.0.0.1", port, context=tls, timeout=300)
    headers = {"Content-Type": "application/json"}
    if authorized:
        headers["Authorization"] = "Bearer " + key
    c.request(method, path, body=payload, headers=headers)
    reply = c.getresponse()
    reply.read()
    c.close()
    return reply.status

probe = ("GET", "/v1/models", True) if target == "door" else ("GET", "/health", False)

def run(shape):
    payload = body(shape, limit - 4096)
    samples, probes, statuses, stop = [], [], [], threading.Event()
    def sample():
        while not stop.is_set():
            samples.append(rss())
            time.sleep(0.02)
    def probing():
        while not stop.is_set():
            began = time.perf_counter()
            status = request(probe[0], probe[1], authorized=probe[2])
            probes.append((time.perf_counter() - began, status))
            time.sleep(0.05)
    rest = rss()
    threads = [threading.Thread(target=sample), threading.Thread(target=probing)]
    for t in threads: t.start()
    senders = [threading.Thread(target=lambda: statuses.append(request("POST", send_path, payload, target == "door")))
               for _ in range(concurrency)]
    began = time.perf_counter()
    for s in senders: s.start()
    for s in senders: s.join()
    elapsed = time.perf_counter() - began
    stop.set()
    for t in threads: t.join()
    time.sleep(1)
    latencies = sorted(p[0] for p in probes)
    return {"shape": shape, "body_bytes": len(payload), "rest_bytes": rest, "peak_bytes": max(samples + [rest]),
            "after_bytes": rss(), "statuses": sorted(statuses), "seconds": elapsed,
            "probe_max_s": latencies[-1] if latencies else None,
            "probe_p50_s": latencies[len(latencies) // 2] if latencies else None,
            "probe_statuses": sorted({p[1] for p in probes})}

shapes = sys.argv[6].split(",") if len(sys.argv) > 6 else ["nested", "keys", "chat", "escaped"]
results = [run(shape) for shape in shapes]
over = body("chat", limit + 65536)
print(json.dumps({"limit_bytes": limit, "concurrency": concurrency, "memory_max": memory_max(), "results": results,
                  "over_limit_status": request("POST", send_path, over, target == "door")}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="spark01")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--webui", action="store_true", help="send the bodies to the chat UI instead")
    parser.add_argument("--path", default="", help="the path the bodies go to (default: the door's chat, the UI's sign-in)")
    parser.add_argument("--shapes", default="nested,keys,chat,escaped", help="which bodies, comma-separated")
    args = parser.parse_args()
    key = ROOT / ".cache" / "sandbox-client-key"
    # The key travels as a file, never on an argv.
    subprocess.run(["podman", "cp", str(key), f"{args.host}:/root/.sandbox-client-key"], check=True)
    target = "webui" if args.webui else "door"
    path = args.path or ("/api/v1/auths/signin" if args.webui else "/v1/chat/completions")
    argv = ["podman", "exec", "-i", args.host, "python3", "-", str(args.concurrency), "/root/.sandbox-client-key"]
    run = subprocess.run(
        [*argv, "sparkfleet-benchmark/no-such-model", target, path, args.shapes],
        input=CLIENT,
        capture_output=True,
        text=True,
        check=False,
        timeout=1200,
    )
    subprocess.run(["podman", "exec", args.host, "rm", "-f", "/root/.sandbox-client-key"], check=False)
    if run.returncode != 0:
        print(run.stderr, file=sys.stderr)
        return 1
    r = json.loads(run.stdout)
    mib = 1024 * 1024
    limit = r["memory_max"] / mib if r["memory_max"] else None
    what = f"chat UI (Open WebUI, {path} without an account)" if args.webui else "front door (nginx, all processes)"
    print(f"{what} memory on {args.host} (CPU sandbox, not Spark figures)")
    print(
        f"  body limit {r['limit_bytes'] / mib:.1f} MiB, {r['concurrency']} in flight; MemoryMax "
        + (f"{limit:.0f} MiB" if limit else "none")
    )
    for s in r["results"]:
        rest, peak = s["rest_bytes"] / mib, s["peak_bytes"] / mib
        per = (peak - rest) / r["concurrency"]
        probe = "GET /v1/models" if not args.webui else "GET /health"
        waits = (
            f"{probe} max {s['probe_max_s'] * 1000:.0f} ms, p50 {s['probe_p50_s'] * 1000:.0f} ms {s['probe_statuses']}"
            if s["probe_max_s"] is not None
            else f"{probe}: no answer"
        )
        print(
            f"  {s['shape']:6} {s['body_bytes'] / mib:.2f} MiB: RSS {rest:.1f} -> peak {peak:.1f} MiB "
            f"(+{per:.2f} MiB = {per / (s['body_bytes'] / mib):.1f} bodies per request), "
            f"after {s['after_bytes'] / mib:.1f}; "
            f"answers {sorted(set(s['statuses']))} in {s['seconds']:.1f} s; {waits}"
        )
    print(f"  a body over the limit: {r['over_limit_status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
