"""Predicted vs published DGX Spark start-up figures (seeds 000, 002, 003). Prints a table with the error.

Run: uv run python benchmarks/planner_vs_published.py
"""

from __future__ import annotations

from sparkfleet.catalog import get_profile
from sparkfleet.errors import PlanError
from sparkfleet.models import GIB, HostFacts, Intent
from sparkfleet.planner import plan

NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"


def spark(version: str, total_gib: float) -> HostFacts:
    return HostFacts(platform="gb10", compute_capability="12.1", mem_total_bytes=int(total_gib * GIB), vllm_version=version)


def nano(util: float, profile: str) -> Intent:
    return Intent(
        max_context=8192,
        concurrency=1,
        profile=profile,
        kv_cache_dtype="fp8",
        gpu_memory_utilization=util,
        max_num_batched_tokens=8192,
    )


CASES = [
    ("seed 003 nano util 0.05", NANO, spark("0.18.1", 121.6), nano(0.05, "memory-saver"), {"starts": "no"}),
    ("seed 003 nano util 0.15", NANO, spark("0.18.1", 121.6), nano(0.15, "memory-saver"), {"starts": "no"}),
    (
        "seed 003 nano util 0.20",
        NANO,
        spark("0.18.1", 121.6),
        nano(0.20, "memory-saver"),
        {"kv_gib": 4.2, "tokens": 292_000},
    ),
    (
        "seed 003 nano util 0.30",
        NANO,
        spark("0.18.1", 121.6),
        nano(0.30, "interactive"),
        {"kv_gib": 15.9, "tokens": 1_100_000},
    ),
    (
        "seed 003 nano util 0.90",
        NANO,
        spark("0.18.1", 121.6),
        nano(0.90, "interactive"),
        {"kv_gib": 89.4, "tokens": 6_200_000},
    ),
    (
        "seed 002 qwen3.6-35b util 0.85",
        "nvidia/Qwen3.6-35B-A3B-NVFP4",
        spark("0.23.0", 121.69),
        Intent(max_context=65536, concurrency=4, kv_cache_dtype="fp8", speculative="mtp", gpu_memory_utilization=0.85),
        {"weights_gib": 21.94, "kv_gib": 76.49, "tokens": 4_843_965},
    ),
    (
        "seed 000 mistral-small-4 util 0.80 (in-sample)",
        "mistralai/Mistral-Small-4-119B-2603-NVFP4",
        spark("0.20.0", 121.69),
        Intent(max_context=262144, concurrency=128, max_num_batched_tokens=16384, gpu_memory_utilization=0.8),
        {"weights_gib": 66.0, "kv_gib": 13.0},
    ),
]


def main() -> None:
    print(f"{'case':<48} {'quantity':<12} {'published':>12} {'predicted':>12} {'error':>8}")
    worst = 0.0
    for name, model, host, intent, published in CASES:
        try:
            result = plan(host, get_profile(model), intent)
        except PlanError:
            result = None
        for quantity, value in published.items():
            if quantity == "starts":
                predicted = "no" if result is None else "yes"
                print(f"{name:<48} {quantity:<12} {value:>12} {predicted:>12} {'ok' if predicted == value else 'WRONG':>8}")
                continue
            assert result is not None, name
            got = {"kv_gib": result.memory.kv, "tokens": result.kv_tokens, "weights_gib": result.memory.weights}[quantity]
            error = (got - float(value)) / float(value)
            worst = max(worst, abs(error))
            print(f"{name:<48} {quantity:<12} {value:>12,} {got:>12,.2f} {error:>+7.1%}")
    print(f"worst absolute error: {worst:.1%}")


if __name__ == "__main__":
    main()
