"""Planning one model across several Sparks: what each node holds (vllm-semantics §2)."""

from __future__ import annotations

import pytest
from conftest import spark

from sparkfleet.catalog import get_profile
from sparkfleet.errors import InfeasibleError, PlanError
from sparkfleet.kvcache import geometry
from sparkfleet.models import Intent
from sparkfleet.planner import plan

GQA = "openai/gpt-oss-120b"  # 8 KV heads: shards cleanly over TP 2 and 4
MLA = "mistralai/Mistral-Small-4-119B-2603-NVFP4"  # one latent per token, replicated on every TP rank
HYBRID = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"


def cluster(model: str, tp: int = 1, pp: int = 1, **intent: object):  # type: ignore[no-untyped-def]
    nodes = tp * pp
    return plan(
        spark(),
        get_profile(model),
        Intent(trust_remote_code=True, nodes=nodes, tensor_parallel_size=tp, pipeline_parallel_size=pp, **intent),  # type: ignore[arg-type]
        model_ref=model,
    )


@pytest.mark.parametrize("tp", [2, 4])
def test_weights_and_gqa_kv_shard_across_tensor_parallel_ranks(tp: int) -> None:
    one, many = cluster(GQA, max_context=65536), cluster(GQA, tp=tp, max_context=65536)
    assert many.memory.weights == pytest.approx(one.memory.weights / tp, rel=0.01)
    profile = get_profile(GQA)
    per_rank = geometry(profile, kv_cache_dtype="auto", tensor_parallel=tp).attention_bytes_per_token_per_layer
    whole = geometry(profile, kv_cache_dtype="auto").attention_bytes_per_token_per_layer
    assert per_rank * tp == whole
    # Same requests, a tp-th of the bytes per token on each node.
    assert many.kv_cache_memory_bytes == pytest.approx(one.kv_cache_memory_bytes / tp, rel=0.05)
    assert many.max_model_len == one.max_model_len


def test_mla_latents_do_not_shard_across_tensor_parallel_ranks() -> None:
    one, two = cluster(MLA, max_context=65536), cluster(MLA, tp=2, max_context=65536)
    profile = get_profile(MLA)
    assert (
        geometry(profile, kv_cache_dtype="auto", tensor_parallel=2).attention_bytes_per_token_per_layer
        == geometry(profile, kv_cache_dtype="auto").attention_bytes_per_token_per_layer
    )
    assert two.kv_cache_memory_bytes == pytest.approx(one.kv_cache_memory_bytes, rel=0.02)
    assert two.memory.weights == pytest.approx(one.memory.weights / 2, rel=0.01)


def test_pipeline_parallel_splits_layers_and_weights_per_stage() -> None:
    one, two = cluster(GQA, max_context=65536), cluster(GQA, pp=2, max_context=65536)
    assert two.memory.weights == pytest.approx(one.memory.weights / 2, rel=0.01)
    assert two.kv_cache_memory_bytes == pytest.approx(one.kv_cache_memory_bytes / 2, rel=0.05)
    assert "--pipeline-parallel-size" in two.argv


def test_multi_node_argv_uses_ray_and_the_sizes() -> None:
    p = cluster(HYBRID, tp=2, max_context=131072)
    argv = " ".join(p.argv)
    assert "--tensor-parallel-size 2" in argv
    assert "--distributed-executor-backend ray" in argv
    assert "VLLM_SKIP_P2P_CHECK" not in p.env  # a single-GPU shortcut only


def test_a_model_that_fits_only_across_nodes_is_planned_and_refused_on_one() -> None:
    big = get_profile(GQA).model_copy(update={"weights_gib": 150.0})
    with pytest.raises(InfeasibleError) as err:
        plan(spark(), big, Intent(trust_remote_code=True, max_context=32768), model_ref=GQA)
    assert "nodes 2 (tensor parallel)" in str(err.value)
    two = plan(
        spark(), big, Intent(trust_remote_code=True, nodes=2, tensor_parallel_size=2, max_context=32768), model_ref=GQA
    )
    assert two.memory.weights == pytest.approx(75.0, rel=0.01)


def test_a_share_that_still_does_not_fit_per_node_is_refused_with_more_nodes_suggested() -> None:
    huge = get_profile(GQA).model_copy(update={"weights_gib": 400.0})
    with pytest.raises(InfeasibleError) as err:
        plan(
            spark(), huge, Intent(trust_remote_code=True, nodes=2, tensor_parallel_size=2, max_context=32768), model_ref=GQA
        )
    assert err.value.variable == "intent"
    assert "nodes 4 (tensor parallel)" in str(err.value)


def test_nodes_must_match_tensor_times_pipeline_parallel() -> None:
    with pytest.raises(PlanError) as err:
        plan(spark(), get_profile(GQA), Intent(trust_remote_code=True, nodes=2), model_ref=GQA)
    assert err.value.variable == "intent.nodes"
    with pytest.raises(PlanError, match="a DGX Spark has one GPU"):
        plan(spark(), get_profile(GQA), Intent(trust_remote_code=True, tensor_parallel_size=2), model_ref=GQA)


def test_a_multi_node_plan_on_cpu_warns_that_vllm_cannot_run_it() -> None:
    from conftest import cpu_host

    p = plan(
        cpu_host(),
        get_profile(GQA),
        Intent(trust_remote_code=True, nodes=2, pipeline_parallel_size=2, max_context=8192),
        model_ref=GQA,
    )
    assert any("CPU platform has no Ray device" in w for w in p.warnings)
    assert p.nodes == 2
