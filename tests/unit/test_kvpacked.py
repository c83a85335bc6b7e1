"""DeepSeek-V4's packed KV pool (issue 32): read from its config as vLLM reads it, sized as vLLM packs it.

The figures below are vLLM 0.32's own, printed by tests/vllm/check_kv_geometry.py for the same schedules
(vLLM builds the model on the meta device and its KV cache config; 4 GiB pool, 2,048-token context and
2,048 tokens in flight).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import spark

from sparkfleet.catalog import get_profile
from sparkfleet.errors import InfeasibleError, PlanError
from sparkfleet.kv.cache import GroupKind
from sparkfleet.kv.packed import PackedGroup, packed_geometry
from sparkfleet.models import CompressedMlaShape, Intent, NodePlacement, PackedMlaPool, Platform
from sparkfleet.planning.choices import concurrent_batches
from sparkfleet.planning.planner import plan
from sparkfleet.reading.config import profile_from_config
from sparkfleet.versions import VllmVersion

FLASH = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "deepseek-ai--DeepSeek-V4-Flash-Base.json").read_text()
)
GIB = 2**30
POOL = 4 * GIB


def shape(config: dict[str, Any]) -> CompressedMlaShape:
    layout = profile_from_config("deepseek-ai/DeepSeek-V4-Flash", config, 150 * GIB, "fixture").kv_layout
    assert isinstance(layout, PackedMlaPool)
    return layout.shape


def test_flash_packs_as_vllm_does() -> None:
    geo = packed_geometry(shape(FLASH), kv_cache_dtype="auto")
    window, full = GroupKind.SLIDING, GroupKind.FULL
    assert geo.groups == (
        PackedGroup(window, 64, 128, 22, 823_680),
        PackedGroup(window, 64, 128, 21, 786_240),
        PackedGroup(full, 256, None, 62, 1_002_240),
        PackedGroup(window, 4, 8, 42, 870_912),
        PackedGroup(window, 8, 128, 20, 656_640),
    )
    assert geo.bytes_per_block == 1_002_240
    assert geo.bytes_per_token == 3915.0  # the "about 3.9 KB per token beyond its windows"
    assert geo.num_blocks(POOL) == 4285
    assert round(geo.max_concurrency(POOL, 2048, 2048), 6) == 5.077014


def test_a_schedule_with_as_many_ratio_4_as_ratio_128_layers_repeats_its_mla_bucket() -> None:
    config = {**FLASH, "num_hidden_layers": 8, "compress_ratios": [4, 128] * 4 + [0]}
    geo = packed_geometry(shape(config), kv_cache_dtype="fp8")
    assert geo.bytes_per_block == 191_232
    assert geo.num_blocks(POOL) == 22459
    assert round(geo.max_concurrency(POOL, 2048, 2048), 5) == 26.61019


def test_layer_types_read_as_vllm_0_33_reads_them_give_the_same_schedule() -> None:
    named = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
    config = {k: v for k, v in FLASH.items() if k != "compress_ratios"}
    config["layer_types"] = [named[r] for r in FLASH["compress_ratios"][:43]]
    assert shape(config) == shape(FLASH)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"compress_ratios": None}, "needs compress_ratios or layer_types"),
        ({"compress_ratios": [0, 2] * 22}, "vLLM takes only 0, 4 and 128"),
        ({"layer_types": ["full_attention"] * 43}, "layer_types ['full_attention']"),
        ({"layer_types": ["sliding_attention"] * 43}, "compress_ratios and layer_types disagree"),
    ],
)
def test_a_schedule_vllm_would_build_otherwise_is_refused(change: dict[str, Any], says: str) -> None:
    config = copy.deepcopy(FLASH)
    config.update(change)
    with pytest.raises(PlanError) as refused:
        shape(config)
    assert says in refused.value.problem


def test_a_schedule_without_an_indexer_is_refused_as_vllm_refuses_it() -> None:
    config = {**FLASH, "num_hidden_layers": 4, "compress_ratios": [0, 128, 128, 0, 0]}
    with pytest.raises(PlanError, match="without a ratio-4 layer"):
        packed_geometry(shape(config), kv_cache_dtype="auto")


TWO_SPARKS = NodePlacement(rank=0, master_addr="192.168.100.10", host_ip="192.168.100.10")


@pytest.mark.parametrize(
    ("intent", "variable"),
    [
        ({"kv_cache_dtype": "bf16"}, "intent.kv_cache_dtype"),  # vLLM keeps fp8_ds_mla or refuses
        ({"tensor_parallel_size": 1, "pipeline_parallel_size": 2}, "intent.pipeline_parallel_size"),  # not proved
        ({"speculative": "eagle3", "drafter": "org/eagle", "drafter_weights_gib": 1.0}, "intent.speculative"),
    ],
)
def test_what_the_packed_pool_is_not_proved_for_is_refused_naming_the_variable(
    intent: dict[str, Any], variable: str
) -> None:
    profile = profile_from_config("deepseek-ai/DeepSeek-V4-Flash", FLASH, 150 * GIB, "fixture")
    fields = {"nodes": 2, "tensor_parallel_size": 2, "max_context": 32768, "concurrency": 1, **intent}
    with pytest.raises(PlanError) as refused:
        plan(spark("0.33.0"), profile, Intent(**fields), model_ref="deepseek-ai/DeepSeek-V4-Flash", placement=TWO_SPARKS)
    assert refused.value.variable == variable


def test_flash_on_two_sparks_plans_its_packed_pool_not_the_dense_bound() -> None:
    """The dense bound (88 KB per token) refused two 128K sequences on two Sparks (21.5 GiB of KV); the packed pool
    holds them in 14.8 GiB, each charged its windows for the two 8K chunks async scheduling keeps in flight."""
    profile = profile_from_config("deepseek-ai/DeepSeek-V4-Flash", FLASH, 150 * GIB, "fixture")
    assert not any("not proved" in quirk for quirk in profile.quirks)
    p = plan(
        spark("0.33.0"),
        profile,
        Intent(nodes=2, tensor_parallel_size=2, max_context=131072, concurrency=2),
        model_ref="deepseek-ai/DeepSeek-V4-Flash",
        placement=TWO_SPARKS,
    )
    assert p.block_size == 256
    assert p.max_concurrency_at_context >= 2
    # DeepSeek-V4 picks a backend per cache; forcing TRITON_MLA on it would not build its sparse caches.
    assert "--attention-backend" not in [flag.name for flag in p.flags]


@pytest.mark.parametrize(
    ("platform", "version", "intent", "batches"),
    [
        ("gb10", "0.33.0", {}, 2),  # async scheduling overlaps two steps
        ("gb10", "0.25.0", {}, 1),  # before 0.26 a window held one chunk beside it
        ("cpu", "0.32.0", {}, 1),  # the CPU platform turns async scheduling off
        ("gb10", "0.33.0", {"speculative": "ngram"}, 1),
        ("gb10", "0.33.0", {"speculative": "mtp"}, 2),
        ("gb10", "0.33.0", {"nodes": 2, "pipeline_parallel_size": 2}, 3),  # V2 runner: stages + 1
        ("gb10", "0.33.0", {"nodes": 2, "tensor_parallel_size": 2, "cluster_backend": "ray"}, 1),
    ],
)
def test_windows_are_reserved_for_the_steps_vllm_keeps_in_flight(
    platform: str, version: str, intent: dict[str, Any], batches: int
) -> None:
    """VllmConfig.max_concurrent_batches as vLLM 0.26+ computes it (config/vllm.py)."""
    fields = {"trust_remote_code": True, **intent}
    assert concurrent_batches(Platform(platform), VllmVersion.parse(version), Intent(**fields)) == batches


def test_a_chunk_sparkfleet_chose_gives_way_when_the_windows_in_flight_would_not_fit() -> None:
    """Gemma-4-31B's default intent (4 x 65536, seed 002 §7.2.1's recipe) needs 73.2 GiB of KV with its windows
    reserved for two 8K chunks; with 4K chunks it fits, and the plan says why. A chunk the user names stays."""
    gemma = get_profile("nvidia/Gemma-4-31B-IT-NVFP4")
    p = plan(spark("0.33.0"), gemma, Intent())
    assert p.max_num_batched_tokens == 4096
    assert p.max_concurrency_at_context >= 4
    assert any(r.item == "max_num_batched_tokens 4096, not 8192" for r in p.reasons)
    with pytest.raises(InfeasibleError, match="max_num_batched_tokens 4096"):
        plan(spark("0.33.0"), gemma, Intent(max_num_batched_tokens=8192))
