"""The speed model: bytes per step, the fit, its error, the plan's prediction and the per-user decode floor."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import cpu_host, spark
from hypothesis import given
from hypothesis import strategies as st

from sparkfleet.catalog import get_profile, load_catalog
from sparkfleet.errors import PlanError
from sparkfleet.models import Intent
from sparkfleet.models.speed import Parameters
from sparkfleet.planning import calibration, speed
from sparkfleet.planning.planner import plan
from sparkfleet.planning.speed import Factors, StepFacts

QWEN36 = "nvidia/Qwen3.6-35B-A3B-NVFP4"
FACTORS = Factors(step_s=0.004, bandwidth_efficiency=0.7, eager_s_per_layer=1e-4, prefill_start_s=0.05, flops=40e12)


def moe(**changes: object) -> StepFacts:
    facts = StepFacts(
        weights_bytes=18e9,
        parameters=Parameters(total_b=30, active_b=3, experts=128, experts_per_token=8),
        expert_bytes_per_param=0.5625,
        vocab=131072,
        hidden=2048,
        layers=48,
        full_kv_bytes_per_token=20_000,
    )
    return dataclasses.replace(facts, **changes)  # type: ignore[arg-type]


def test_parameters_are_consistent() -> None:
    with pytest.raises(ValueError, match="active_b 5.0 exceeds total_b 3.0"):
        Parameters(total_b=3, active_b=5)
    with pytest.raises(ValueError, match="go together"):
        Parameters(total_b=30, active_b=3, experts=128)
    with pytest.raises(ValueError, match="must be under experts"):
        Parameters(total_b=30, active_b=3, experts=8, experts_per_token=8)


def test_a_step_reads_the_experts_its_tokens_route_to_and_never_more_than_the_checkpoint() -> None:
    facts = moe()
    one, four, all_of_them = (facts.weight_bytes_read(n) for n in (1, 4, 100_000))
    assert one < four < all_of_them <= facts.weights_bytes
    # Every expert is read once enough tokens route; what is left is the untouched input embedding.
    assert all_of_them == pytest.approx(facts.weights_bytes - 2 * facts.head_params, rel=1e-3)
    # Bytes the counts cannot place (a vision tower, an MTP layer) are not read: the rest is at most BF16 wide.
    wide = moe(weights_bytes=30e9)
    assert wide.weight_bytes_read(100_000) < wide.weights_bytes - 2 * wide.head_params
    # A dense model reads the same weights whatever the batch.
    dense = moe(parameters=Parameters(total_b=30, active_b=30))
    assert dense.weight_bytes_read(1) == dense.weight_bytes_read(64)


def test_the_dense_rest_is_read_at_its_own_width() -> None:
    """A quantized MoE's attention stays BF16: one step reads more than the average width times the active count."""
    facts = moe()
    average = facts.weights_bytes / 30e9 * 3e9
    assert facts.weight_bytes_read(1) > average


def test_kv_is_read_per_sequence_and_a_window_caps_it() -> None:
    facts = moe(window_kv_bytes_per_token=10_000, window=1024)
    assert facts.cache_bytes_read(4096) - facts.cache_bytes_read(2048) == pytest.approx(2048 * 20_000)
    assert facts.step_bytes(4, 1, 2048) - facts.weight_bytes_read(4) == pytest.approx(4 * facts.cache_bytes_read(2048))


@given(st.integers(min_value=1, max_value=255))
def test_more_streams_never_lower_the_total_nor_raise_each_one(n: int) -> None:
    facts = moe()
    now = speed.aggregate_tps(facts, FACTORS, concurrency=n, context=1024, eager=False)
    more = speed.aggregate_tps(facts, FACTORS, concurrency=n + 1, context=1024, eager=False)
    assert more >= now
    assert more / (n + 1) <= now / n


def test_speculation_yields_its_expected_tokens() -> None:
    assert speed.tokens_per_step(0.8, 3) == pytest.approx(1 + 0.8 + 0.64 + 0.512)
    assert speed.tokens_per_step(1.0, 3) == 4


def test_the_fit_recovers_the_factors_that_made_the_data() -> None:
    """Rows made by known factors are fitted back to them: the fit is what it says, not a table of constants."""
    rows = [
        dataclasses.replace(r, value=calibration.predict(r, FACTORS))
        for r in calibration.MEASUREMENTS
        if r.kind in ("decode", "prefill")
    ]
    fitted = calibration.fit(rows)
    assert fitted.bandwidth_efficiency == pytest.approx(FACTORS.bandwidth_efficiency, rel=1e-6)
    assert fitted.step_s == pytest.approx(FACTORS.step_s, rel=1e-6)
    assert fitted.eager_s_per_layer == pytest.approx(FACTORS.eager_s_per_layer, rel=1e-6)
    assert fitted.flops == pytest.approx(FACTORS.flops, rel=1e-6)
    assert fitted.prefill_start_s == pytest.approx(FACTORS.prefill_start_s, rel=1e-6)


def test_single_stream_decode_is_within_its_target_error() -> None:
    """Issue 50's target: single-stream decode within 20 % leave-one-model-out over the seeds' Spark figures."""
    errors = calibration.error_by_kind()
    assert errors["decode"] < 0.20
    assert set(errors) == {"decode", "aggregate", "prefill", "speculative"}
    # Each model is held out of its own prediction: a model's rows never fit themselves.
    checks = calibration.leave_one_model_out()
    assert len(checks) == len(calibration.MEASUREMENTS)
    assert any(abs(c.held_out - c.predicted) > 1e-6 for c in checks)


def test_every_row_names_a_seed_and_every_model_can_be_read() -> None:
    for row in calibration.MEASUREMENTS:
        assert row.source.startswith("seed 00"), row
        calibration.facts_of(row.model)
    assert all(p.parameters is not None for p in load_catalog().values())


def test_a_gb10_plan_carries_its_speed_with_bands() -> None:
    served = plan(spark("0.33.0"), get_profile(QWEN36), Intent(concurrency=4))
    s = served.speed
    assert s is not None
    assert s.decode.low < s.decode.value < s.decode.high
    assert [p.concurrency for p in s.curve] == [1, 2, 4]
    assert s.curve[0].aggregate_tps == s.decode.value
    assert s.aggregate.value == s.curve[-1].aggregate_tps
    assert [t.prompt_tokens for t in s.ttft] == [1024, 8192, 32768]
    assert s.speculative is None
    with_mtp = plan(spark("0.33.0"), get_profile(QWEN36), Intent(concurrency=4, speculative="mtp")).speed
    assert with_mtp is not None and with_mtp.speculative is not None
    assert with_mtp.speculative.value > s.decode.value
    assert "tokens per step" in (with_mtp.speculative_basis or "")


def test_no_spark_speed_is_claimed_for_a_cpu_host() -> None:
    profile = get_profile(QWEN36)
    assert plan(cpu_host(), profile, Intent(concurrency=2, max_context=4096)).speed is None


def test_a_decode_floor_caps_the_concurrency_and_says_so() -> None:
    served = plan(spark("0.33.0"), get_profile(QWEN36), Intent(concurrency=8, min_decode_tps=50))
    assert served.max_num_seqs == 2
    assert served.speed is not None and served.speed.curve[-1].per_user_tps >= 50
    assert served.reasons[0].item == "concurrency 2, not 8"
    assert "3 would fall below it" in served.reasons[0].reason
    assert any(w.startswith("concurrency 2, not 8") for w in served.warnings)
    # A floor the plan already keeps changes nothing.
    kept = plan(spark("0.33.0"), get_profile(QWEN36), Intent(concurrency=2, min_decode_tps=10))
    assert (
        kept.max_num_seqs == 2 and kept.reasons == plan(spark("0.33.0"), get_profile(QWEN36), Intent(concurrency=2)).reasons
    )


def test_a_floor_above_one_stream_is_refused_naming_the_variable() -> None:
    with pytest.raises(PlanError) as refused:
        plan(spark("0.33.0"), get_profile("nvidia/Gemma-4-31B-IT-NVFP4"), Intent(min_decode_tps=20))
    assert refused.value.variable == "intent.min_decode_tps"
    assert "one stream is predicted to decode" in str(refused.value)
    with pytest.raises(PlanError, match="needs the speed model"):
        plan(cpu_host(), get_profile(QWEN36), Intent(concurrency=2, max_context=4096, min_decode_tps=5))


def test_clients_of_a_reasoning_model_are_told_the_max_tokens_it_needs() -> None:
    """Seed 002 §7.3.1: a low max_tokens truncates Nemotron-3-Nano's reasoning and breaks tool calls; seed 004 gives
    the general floor (512, 1024 with tool calling) for reasoning models whose recipe says nothing."""
    nano = plan(spark("0.33.0"), get_profile("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"), Intent())
    assert nano.min_max_tokens == 10000
    assert any(r.item == "clients: max_tokens 10000 or more" and "seed 002 §7.3.1" in r.source for r in nano.reasons)
    gpt = plan(spark("0.33.0"), get_profile("openai/gpt-oss-120b"), Intent())
    assert gpt.min_max_tokens == 1024 and any("seed 004" in r.source for r in gpt.reasons if r.item.startswith("clients"))
    coder = get_profile("Qwen/Qwen3-Coder-Next-FP8")
    assert coder.reasoning_parser is None and plan(spark("0.33.0"), coder, Intent()).min_max_tokens is None
