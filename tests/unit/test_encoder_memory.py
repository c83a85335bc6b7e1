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


def test_a_qwen_plan_holds_one_whole_image_beyond_its_activation_peak() -> None:
    with_it, without = planned(QWEN, max_context=65536), without_encoder(QWEN, max_context=65536)
    image = 65536 * 1152 * encoder.BYTES_PER_POSITION_PER_HIDDEN["qwen3_vl"] / GIB
    cache = 16384 * get_profile(QWEN).hidden_size * 2 / GIB
    assert with_it.memory.encoder == pytest.approx(image - with_it.memory.activation + cache, abs=0.01)
    assert with_it.memory.encoder > 1.0
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
    assert video.peak_gib == pytest.approx(65536 * 1280 * encoder.BYTES_PER_POSITION_PER_HIDDEN["radio"] / GIB)
    whole = profile.model_copy(update={"encoders": (video.shape.model_copy(update={"call_positions": None}),)})
    assert encoder.calls(whole, 32768, 65536, 4)[0].peak_gib == pytest.approx(4 * video.peak_gib)
    # 65,536 tokens of audio (14.6 minutes) fill the budget, in one Parakeet batch: the largest call.
    assert audio.positions == 65536
    assert encoder.largest(profile, 32768, 65536, 4, activation_gib=4.4) == audio
    served = planned(OMNI)
    assert served.memory.encoder == pytest.approx(audio.held_beyond(served.memory.activation), abs=0.01)


@pytest.mark.parametrize(
    ("context", "seqs", "positions"),
    [
        (32768, 4, 32768),  # the budget binds: 32,768 tokens of audio
        (65536, 4, 65536),
        (262144, 4, 180480),  # four requests of an hour each bind before the budget
        (262144, 1, 45120),
    ],
)
def test_the_omnis_audio_follows_the_budget_and_what_requests_carry(context: int, seqs: int, positions: int) -> None:
    (audio,) = [call for call in encoder.calls(get_profile(OMNI), 32768, context, seqs) if call.shape.modality == "audio"]
    assert audio.positions == positions
    assert audio.cache_gib == pytest.approx(max(32768, context) * get_profile(OMNI).hidden_size * 2 / GIB)


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
    assert shorter.memory.encoder < encoder.CAUTION_GIB
    assert not [w for w in shorter.warnings if "encoder's largest call" in w]
