"""A heavy tenant and a light one, on the sandbox host (issue 61): prints one JSON line of what each saw.

door    the key in --heavy-key-file: its clients keep --heavy long completions in flight through the door (each
        retries a 429 after its Retry-After, as OpenAI's clients do) for --seconds; the chat UI's own door key
        (OPENAI_API_KEY of --light-env-file), another tenant, sends a 4-token chat every second, and five before
        the load as its baseline.
socket  --heavy long completions straight at the instance's socket with its own key (VLLM_API_KEY of --env-file),
        past the door's admission, so the engine is full and its queue long: what the watchdog must call busy.
Keys come from root's files, never argv or the environment (sudo logs a command's environment).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import ssl
import statistics
import threading
import time
from typing import Any

MODEL = "sandbox/tiny-llama"
# Set by --stop-file: the load ends early once that file exists.
STOP_FILE = ""


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


def read_env(path: str, name: str) -> str:
    """A value of a systemd environment file (sparkfleet writes them quoted)."""
    with open(path, encoding="utf-8") as handle:
        return next(line.split("=", 1)[1].strip().strip('"') for line in handle if line.startswith(f"{name}="))


def connect(target: str) -> http.client.HTTPConnection:
    if target.startswith("/"):
        return UnixConnection(target, 600)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the sandbox door's own certificate; the load is what is tested here
    return http.client.HTTPSConnection(target, context=context, timeout=600)


def post(target: str, key: str, path: str, body: dict[str, Any]) -> tuple[int, str, float]:
    """(status, Retry-After, seconds) of one request."""
    began = time.monotonic()
    conn = connect(target)
    try:
        conn.request("POST", path, json.dumps(body), {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        reply = conn.getresponse()
        reply.read()
        return reply.status, reply.getheader("Retry-After") or "", time.monotonic() - began
    except OSError:
        return 0, "", time.monotonic() - began
    finally:
        conn.close()


def heavy(target: str, key: str, until: float, body: dict[str, Any], seen: dict[str, Any], *, lock: threading.Lock) -> None:
    while time.monotonic() < until and not (STOP_FILE and os.path.exists(STOP_FILE)):
        status, retry_after, _ = post(target, key, "/v1/completions", body)
        with lock:
            seen["statuses"][str(status)] = seen["statuses"].get(str(status), 0) + 1
            if retry_after:
                seen["retry_after"] = retry_after
        if status == 429:
            time.sleep(float(retry_after or 1))
        elif status != 200:
            time.sleep(1)


def answered(seen: dict[str, Any], lock: threading.Lock) -> bool:
    with lock:
        return bool(seen["statuses"].get("200"))


def light(target: str, key: str) -> tuple[int, float]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    status, _, seconds = post(target, key, "/v1/chat/completions", body)
    return status, seconds


def summary(samples: list[tuple[int, float]]) -> dict[str, Any]:
    seconds = [s for _, s in samples]
    return {
        "statuses": sorted({status for status, _ in samples}),
        "count": len(samples),
        "p50_s": round(statistics.median(seconds), 3) if seconds else None,
        "max_s": round(max(seconds), 3) if seconds else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["door", "socket"])
    parser.add_argument("--target", default="127.0.0.1:443", help="host:port of the door, or the instance's socket")
    parser.add_argument("--env-file", help="socket: the instance's env file (its VLLM_API_KEY)")
    parser.add_argument("--light-env-file", help="door: the chat UI's env file (its door key, OPENAI_API_KEY)")
    parser.add_argument("--heavy-key-file", help="door: a file holding the heavy tenant's door key")
    parser.add_argument("--heavy", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=480)
    parser.add_argument("--seconds", type=float, default=25)
    parser.add_argument("--stop-file", default="", help="end the load once this file exists, dropping what is in flight")
    args = parser.parse_args()
    global STOP_FILE  # noqa: PLW0603 - the workers' one switch
    STOP_FILE = args.stop_file
    if args.mode == "socket":
        key = read_env(args.env_file, "VLLM_API_KEY")
    else:
        with open(args.heavy_key_file, encoding="utf-8") as handle:
            key = handle.read().strip()
    light_key = read_env(args.light_env_file, "OPENAI_API_KEY") if args.mode == "door" else ""
    result: dict[str, Any] = {"mode": args.mode, "heavy_clients": args.heavy}
    if args.mode == "door":
        result["light_before"] = summary([light(args.target, light_key) for _ in range(5)])
    seen: dict[str, Any] = {"statuses": {}}
    lock = threading.Lock()
    until = time.monotonic() + args.seconds
    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": args.max_tokens, "ignore_eos": True}
    workers = [
        threading.Thread(target=heavy, args=(args.target, key, until, body, seen), kwargs={"lock": lock}, daemon=True)
        for _ in range(args.heavy)
    ]
    for worker in workers:
        worker.start()
    if args.mode == "door":
        time.sleep(3)
        samples = []
        while time.monotonic() < until:
            samples.append(light(args.target, light_key))
            time.sleep(1)
        result["light_during"] = summary(samples)
    if STOP_FILE:
        # A stopped load leaves once one request has been answered: the requests still in flight go with the process
        # (vLLM aborts a request whose client has gone), so the engine is idle again without decoding up to
        # --heavy x --max-tokens more tokens, and the result still shows what the engine answered.
        while any(worker.is_alive() for worker in workers) and not (os.path.exists(STOP_FILE) and answered(seen, lock)):
            time.sleep(0.2)
    else:
        for worker in workers:
            worker.join()
    with lock:
        result["heavy"] = json.loads(json.dumps(seen))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
