"""Issue 62: decode context parallel over Sparks, as vLLM 0.32 checks and sizes it (planning/contextparallel.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import spark

from sparkfleet.errors import InfeasibleError, PlanError
from sparkfleet.models import Intent, ModelProfile
from sparkfleet.planning.planner import plan
from sparkfleet.reading.config import profile_from_config

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
GIB = 2**30


def from_fixture(name: str, weights_gib: float) -> ModelProfile:
    config = json.loads((CONFIGS / f"{name}.json").read_text())
    return profile_from_config(name, config, int(weights_gib * GIB), f"tests/fixtures/configs/{name}.json")


def four_sparks(**more: object) -> Intent:
    settings: dict[str, object] = {"max_context": 65536, "concurrency": 4, "nodes": 4, "tensor_parallel_size": 4}
    return Intent.model_validate(settings | {"cluster_backend": "ray"} | more)


def test_mla_latent_is_whole_on_every_rank_and_dcp_divides_it() -> None:
    """DeepSeek-V3's MLA: (512 + 64) values a token a layer on every TP rank; DCP 4 keeps a quarter of the tokens each,
    in attention blocks of four times the tokens (kv_cache_utils.py resolve_kv_cache_block_sizes)."""
    profile = from_fixture("deepseek-ai--DeepSeek-V3", 360)
    per_token = (512 + 64) * 2 * 61
    # Whole on each rank, 4 x 65536 tokens need 17.2 GiB of KV beside 94 GiB of weights and runtime: no room.
    with pytest.raises(InfeasibleError, match=f"needs {4 * 65536 * per_token / GIB:.1f} GiB KV"):
        plan(spark(), profile, four_sparks(), model_ref="deepseek-ai/DeepSeek-V3")
    split = plan(spark(), profile, four_sparks(decode_context_parallel_size=4), model_ref="deepseek-ai/DeepSeek-V3")
    assert 4 * 65536 * per_token / 4 <= split.kv_cache_memory_bytes < 4 * 65536 * per_token / 3
    whole = plan(spark(), profile, four_sparks(concurrency=2), model_ref="deepseek-ai/DeepSeek-V3")
    assert split.block_size == 4 * whole.block_size
    assert split.argv[split.argv.index("--decode-context-parallel-size") + 1] == "4"
    assert "--decode-context-parallel-size" not in whole.argv
    assert any("vllm#41623" in w for w in split.warnings)


def test_dcp_must_divide_tensor_parallel() -> None:
    profile = from_fixture("deepseek-ai--DeepSeek-V3", 360)
    with pytest.raises(PlanError, match="does not divide tensor_parallel_size 4") as refused:
        plan(spark(), profile, four_sparks(decode_context_parallel_size=3), model_ref="deepseek-ai/DeepSeek-V3")
    assert refused.value.variable == "intent.decode_context_parallel_size"
    assert "decode_context_parallel_size 2" in str(refused.value)


def test_gqa_and_unproved_pools_are_refused_with_the_reason() -> None:
    llama = from_fixture("meta-llama--Llama-3.1-8B-Instruct", 15)
    intent = Intent(max_context=8192, concurrency=1, nodes=2, tensor_parallel_size=2, cluster_backend="ray")
    with pytest.raises(PlanError, match="8 KV heads.*more TP ranks than KV heads"):
        plan(spark(), llama, intent.model_copy(update={"decode_context_parallel_size": 2}), model_ref="x/llama")
    v4 = from_fixture("deepseek-ai--DeepSeek-V4-Flash-Base", 150)
    with pytest.raises(PlanError, match="not proved"):
        plan(spark(), v4, intent.model_copy(update={"decode_context_parallel_size": 2}), model_ref="x/v4")
