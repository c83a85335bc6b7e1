"""The scheduler's peak: max_num_batched_tokens drives activation memory and sliding-window KV (issue 11 part 6)."""

from __future__ import annotations

import re

import pytest
from conftest import spark

from sparkfleet.catalog import get_profile
from sparkfleet.errors import InfeasibleError
from sparkfleet.models import Intent
from sparkfleet.planning.planner import plan

QWEN = "nvidia/Qwen3.6-35B-A3B-NVFP4"
GEMMA = "nvidia/Gemma-4-31B-IT-NVFP4"


def scheduler_warnings(batched: int) -> list[str]:
    intent = Intent(
        trust_remote_code=True, profile="throughput", max_num_batched_tokens=batched, concurrency=8, max_context=65536
    )
    return [w for w in plan(spark(), get_profile(QWEN), intent).warnings if w.startswith("max_num_batched_tokens")]


def test_activation_follows_batched_tokens() -> None:
    small, large = (
        plan(
            spark(), get_profile(QWEN), Intent(trust_remote_code=True, max_num_batched_tokens=n, max_context=65536)
        ).memory.activation
        for n in (8192, 65536)
    )
    assert large > 7 * small


def test_far_past_calibration_with_little_headroom_warns_naming_a_count_that_fits() -> None:
    (warning,) = scheduler_warnings(65536)
    suggested = int(re.search(r"max_num_batched_tokens (\d+) keeps", warning)[1])  # type: ignore[index]
    assert suggested < 65536
    assert scheduler_warnings(suggested) == [], "the count the warning names must plan without the warning"


@pytest.mark.parametrize("batched", [8192, 16384])
def test_calibrated_range_is_quiet(batched: int) -> None:
    assert scheduler_warnings(batched) == []


def test_refusal_names_a_batched_count_when_that_is_what_would_fit() -> None:
    # Gemma-4's sliding layers reserve window + max_num_batched_tokens per request (vllm-semantics §2.4).
    intent = Intent(trust_remote_code=True, max_context=131072, concurrency=2, max_num_batched_tokens=65536)
    with pytest.raises(InfeasibleError) as refused:
        plan(spark(), get_profile(GEMMA), intent)
    suggested = int(re.search(r"max_num_batched_tokens (\d+)", str(refused.value))[1])  # type: ignore[index]
    assert suggested < 65536
    fitted = plan(spark(), get_profile(GEMMA), intent.model_copy(update={"max_num_batched_tokens": suggested}))
    assert fitted.max_num_batched_tokens == suggested


def test_refusal_does_not_name_a_batched_count_that_would_not_help() -> None:
    with pytest.raises(InfeasibleError) as refused:
        plan(
            spark(),
            get_profile(GEMMA),
            Intent(trust_remote_code=True, max_context=262144, concurrency=4, max_num_batched_tokens=65536),
        )
    assert "max_num_batched_tokens" not in str(refused.value)
