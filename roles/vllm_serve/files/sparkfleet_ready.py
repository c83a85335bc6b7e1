"""Wait until a sparkfleet vLLM instance is ready: /health answers AND a real inference succeeds.

A server whose /health answers but whose first request still JIT-compiles (or hangs) is not ready.
Stops early when the unit fails; prints one JSON line with the timings (seconds since the unit's
last start) and the reply, or the reason and the last journal lines on failure (exit 1).
The API key is read from the instance's environment file (root, 0600), never from argv.
"""

import argparse
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request


def unit_state(unit):
    out = subprocess.run(
        ["systemctl", "show", unit, "-p", "ActiveState", "-p", "ActiveEnterTimestampMonotonic", "-p", "NRestarts"],
        capture_output=True, text=True, check=False,
    ).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return values.get("ActiveState", "unknown"), int(values.get("ActiveEnterTimestampMonotonic") or 0) / 1e6


def api_key(env_file):
    try:
        with open(env_file, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("VLLM_API_KEY="):
                    value = line.split("=", 1)[1].strip()
                    if len(value) >= 2 and value[0] == value[-1] == '"':
                        value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
                    return value
    except FileNotFoundError:
        pass
    return None


def request(url, body=None, key=None, timeout=10.0):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, resp.read().decode("utf-8", "replace")


def journal(unit, lines=30):
    return subprocess.run(
        ["journalctl", "-u", unit, "-n", str(lines), "--no-pager", "-o", "cat"], capture_output=True, text=True, check=False
    ).stdout


def fail(unit, reason):
    print(json.dumps({"unit": unit, "ready": False, "reason": reason, "journal": journal(unit)}))
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unit", required=True)
    parser.add_argument("--url", required=True, help="base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--plan", required=True, help="the instance's plan.json (holds the warm-up request)")
    parser.add_argument("--env-file", required=True)
    parser.add_argument("--timeout", type=float, default=1200)
    args = parser.parse_args()

    with open(args.plan, encoding="utf-8") as handle:
        warmup = json.load(handle)["warmup"]
    key = api_key(args.env_file)
    began = time.monotonic()
    deadline = began + args.timeout
    health_at = None
    while time.monotonic() < deadline:
        state, since = unit_state(args.unit)
        if state in ("failed", "inactive"):
            fail(args.unit, f"the unit is {state}")
        try:
            if health_at is None:
                status = request(f"{args.url}/health", timeout=5)[0]
                if status == 200:
                    health_at = time.monotonic()
            if health_at is not None:
                status, text = request(f"{args.url}{warmup['path']}", warmup["body"], key, timeout=max(deadline - time.monotonic(), 1))
                reply = json.loads(text)
                if status == 200 and reply.get("choices"):
                    now = time.monotonic()
                    message = reply["choices"][0].get("message") or {}
                    print(json.dumps({
                        "unit": args.unit,
                        "ready": True,
                        "health_s": round(health_at - since, 1) if since else None,
                        "ready_s": round(now - since, 1) if since else None,
                        "first_inference_s": round(now - health_at, 2),
                        "waited_s": round(now - began, 1),
                        "reply": message.get("content") or message.get("reasoning_content") or "",
                    }))
                    return
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                fail(args.unit, f"the warm-up request was refused ({exc.code}): the API key in {args.env_file} does not match")
            if exc.code == 400:
                fail(args.unit, f"the warm-up request was rejected (400): {exc.read().decode('utf-8', 'replace')[:500]}")
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            pass
        time.sleep(2)
    fail(args.unit, f"not ready after {args.timeout:.0f} s (health {'answered' if health_at else 'never answered'})")


if __name__ == "__main__":
    main()
