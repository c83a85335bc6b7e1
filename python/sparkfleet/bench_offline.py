"""The benchmark's offline run: `vllm bench throughput` with an instance's engine arguments (seed 002 §10: the engine
without the server in front of it), the instance stopped meanwhile (roles/vllm_serve/tasks/benchmark_offline.yml).
Nothing here reads files or runs anything: the words of the run, the words that give it the instance unit's
environment and limits, and what a summary keeps of vLLM's result.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from .bench import digest
from .errors import PlanError

# `vllm serve`'s front-end flags the planner emits, which the offline `vllm bench throughput` does not take: its parser
# is the bench's own arguments and the engine's (vllm/benchmarks/throughput.py add_cli_args, 0.32 and 0.33 alike).
# tests/vllm/check_argv_with_vllm.py holds every catalog plan's offline argv to both releases' parsers and each of these
# to being unknown there, so no engine argument is ever dropped.
SERVE_ONLY_FLAGS = frozenset(
    {
        "--host",
        "--port",
        "--uds",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "--default-chat-template-kwargs",
        "--chat-template",
    }
)


def offline_argv(
    plan: Mapping[str, Any], *, input_len: int, output_len: int, num_prompts: int, output_json: str
) -> list[str]:
    """The `vllm` words of an offline throughput run of the instance's engine: random prompts of the serve run's
    lengths, the plan's engine arguments in its order, its front-end flags left out.

    Refused for an instance served across nodes (its engine is the cluster's) and for a pooling model (no output)."""
    if int(plan.get("nodes") or 1) > 1:
        raise PlanError(
            "vllm_serve_benchmark_offline",
            f"{plan.get('served_name')} is served across {plan.get('nodes')} nodes: the offline run starts one node's "
            "engine; measure the cluster with vllm bench serve",
            ("false",),
        )
    if plan.get("runner", "generate") != "generate":
        raise PlanError(
            "vllm_serve_benchmark_offline",
            f"{plan.get('served_name')} is a {plan.get('runner')} model: vllm bench throughput measures generation",
            ("false",),
        )
    engine = [
        word
        for flag in plan.get("flags", [])
        if flag["name"] not in SERVE_ONLY_FLAGS
        for word in (str(flag["name"]), *(str(v) for v in flag.get("values", [])))
    ]
    return [
        "bench",
        "throughput",
        "--backend",
        "vllm",
        "--model",
        str(plan["model"]),
        "--dataset-name",
        "random",
        # The random dataset's own lengths: its defaults win over --input-len/--output-len when both are set
        # (vllm/benchmarks/throughput.py validate_args), so these are the ones that hold.
        "--random-input-len",
        str(input_len),
        "--random-output-len",
        str(output_len),
        "--num-prompts",
        str(num_prompts),
        "--seed",
        "0",
        "--output-json",
        output_json,
        *engine,
    ]


# What the offline run takes over from the instance's unit (`systemctl show` of it): its environment (the caches of
# its release, HF_HOME, the plan's variables) and its limits, so the engine runs as the instance's would.
OFFLINE_UNIT_PROPERTIES = ("Environment", "MemoryMax", "MemoryHigh", "LimitNOFILE")


def offline_unit_words(show: str) -> list[str]:
    """The `systemd-run` words that give the offline run the instance unit's environment and limits, from
    `systemctl show -p Environment -p MemoryMax -p MemoryHigh -p LimitNOFILE UNIT` (one KEY=VALUE a line; systemd
    quotes an assignment with a space as a shell would)."""
    values = dict(line.partition("=")[::2] for line in show.splitlines() if "=" in line)
    words = [w for assignment in shlex.split(values.get("Environment", "")) for w in ("--setenv", assignment)]
    for name in OFFLINE_UNIT_PROPERTIES[1:]:
        if values.get(name):
            words += ["--property", f"{name}={values[name]}"]
    return words


def offline_result(argv: Sequence[str], result: Mapping[str, Any], output_len: int) -> dict[str, Any]:
    """What a summary keeps of an offline run: vLLM's figures, output tokens a second (the random prompts each
    generate output_len tokens) and the argv's fingerprint."""
    try:
        elapsed = float(result["elapsed_time"])
        requests = int(result["num_requests"])
        kept = {
            "requests_per_second": float(result["requests_per_second"]),
            "tokens_per_second": float(result["tokens_per_second"]),
            "output_tokens_per_second": requests * output_len / elapsed if elapsed else 0.0,
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError("vllm_serve_benchmark_offline", f"vllm bench throughput wrote no readable result ({exc!r})") from exc
    return {**kept, "elapsed_s": elapsed, "num_requests": requests, "argv": list(argv), "argv_sha256": digest(list(argv))}
