"""The planner reproduces the published Spark start-up figures within 10 % (issue: planner foundation)."""

from __future__ import annotations

import pytest
from conftest import spark

from sparkfleet.catalog import get_profile
from sparkfleet.errors import InfeasibleError
from sparkfleet.models import GIB, Intent
from sparkfleet.planner import plan

NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
SEED3_TOTAL = int(121.6 * GIB)  # 0.2 x total = 24.3 GB and 0.9 x total = 109.4 GB in seed 003's table


def within(predicted: float, published: float, tolerance: float = 0.10) -> bool:
    return abs(predicted - published) <= tolerance * published


def seed3_intent(util: float, profile: str) -> Intent:
    # seed 003: --max-num-seqs 1 --max-model-len 8192 --kv-cache-dtype fp8, vLLM 0.18.1 batch defaults
    return Intent(
        max_context=8192,
        concurrency=1,
        profile=profile,
        kv_cache_dtype="fp8",
        gpu_memory_utilization=util,
        max_num_batched_tokens=8192,
    )


@pytest.mark.parametrize("util", [0.05, 0.15])
def test_seed3_low_utilizations_refuse_to_start(util: float) -> None:
    with pytest.raises(InfeasibleError, match="refuse to start"):
        plan(spark("0.18.1", SEED3_TOTAL), get_profile(NANO), seed3_intent(util, "memory-saver"))


@pytest.mark.parametrize(
    ("util", "profile", "kv_gib", "tokens"),
    [
        (0.20, "memory-saver", 4.2, 292_000),
        (0.30, "interactive", 15.9, 1_100_000),
        (0.90, "interactive", 89.4, 6_200_000),
    ],
)
def test_seed3_kv_cache_and_tokens(util: float, profile: str, kv_gib: float, tokens: int) -> None:
    result = plan(spark("0.18.1", SEED3_TOTAL), get_profile(NANO), seed3_intent(util, profile))
    assert within(result.memory.kv, kv_gib)
    assert within(result.kv_tokens, tokens)


def test_seed2_qwen36_startup_log() -> None:
    # seed 002: 0.85 utilization, fp8 KV, 65536 context, MTP-3, vLLM 0.23 -> 21.94 GiB weights, 76.49 GiB KV,
    # 4,843,965 tokens
    intent = Intent(max_context=65536, concurrency=4, kv_cache_dtype="fp8", speculative="mtp", gpu_memory_utilization=0.85)
    result = plan(spark("0.23.0"), get_profile("nvidia/Qwen3.6-35B-A3B-NVFP4"), intent)
    assert within(result.memory.weights, 21.94)
    assert within(result.memory.kv, 76.49)
    assert within(result.kv_tokens, 4_843_965)


def test_seed0_mistral_small_4() -> None:
    # seed 000: --gpu-memory-utilization 0.8, 262144 context, 128 seqs, 16384 batched tokens -> ~66 GiB weights, ~13 GiB KV
    intent = Intent(max_context=262144, concurrency=128, max_num_batched_tokens=16384, gpu_memory_utilization=0.8)
    result = plan(spark("0.20.0"), get_profile("mistralai/Mistral-Small-4-119B-2603-NVFP4"), intent)
    assert within(result.memory.weights, 66.0)
    assert within(result.memory.kv, 13.0)
