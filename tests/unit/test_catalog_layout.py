"""Catalog models one Spark cannot hold: planned on the Sparks their recipes serve them on, and each such profile
held to its published config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import spark
from pydantic import ValidationError

from sparkfleet.catalog import get_profile, load_catalog, recipe_intent
from sparkfleet.cli import main
from sparkfleet.errors import InfeasibleError, PlanError
from sparkfleet.models import CheckpointFormat, Intent, RecipeLayout
from sparkfleet.planning.catalogspeed import catalog_speed
from sparkfleet.planning.planner import plan
from sparkfleet.planning.speedplan import catalog_decode
from sparkfleet.reading.config import checkpoint_format, profile_from_config

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
GLM = "local-inference-lab/GLM-5.3-NVFP4-Spark"
# Each catalog model whose published config is a fixture: the fixture holding its text model, and the checkpoint's
# size (its index's total_size). GLM-5.3-NVFP4-Spark's config (lil testdata, 7629ec8) has the same text fields as
# GLM-5.3-NVFP4's; only its quantization_config differs (ModelOpt MIXED_PRECISION against plain NVFP4).
PUBLISHED = {
    GLM: ("zai-org--GLM-5.3-NVFP4", 435_548_900_560),
    "local-inference-lab/GLM-5.3-Flash-NVFP4": ("zai-org--GLM-5.3-Flash-NVFP4", 198_042_331_512),
}
# What decides the KV a token, the layers and the weights a plan holds.
READ_FIELDS = (
    "architecture",
    "model_type",
    "hidden_size",
    "vocab_size",
    "num_layers",
    "full_attention_layers",
    "kv_heads",
    "head_dim",
    "mla",
    "kv_layout",
    "state_layers",
    "indexer_bytes_per_token",
    "indexer_layers",
    "index_topk",
    "native_max_context",
    "checkpoint_format",
    "moe",
)


@pytest.mark.parametrize("model", sorted(PUBLISHED))
def test_each_profile_with_a_published_config_reads_as_that_config(model: str) -> None:
    fixture, size = PUBLISHED[model]
    profile = load_catalog()[model]
    read = profile_from_config(model, json.loads((CONFIGS / f"{fixture}.json").read_text()), size, fixture)
    assert {f: getattr(profile, f) for f in READ_FIELDS} == {f: getattr(read, f) for f in READ_FIELDS}
    assert profile.weights_gib == round(read.weights_gib, 1)
    assert profile.speculative.mtp_layers == read.speculative.mtp_layers


def test_a_profile_names_the_sparks_its_recipe_uses_exactly_when_one_spark_cannot_hold_it() -> None:
    for profile in load_catalog().values():
        try:
            plan(
                spark(max(profile.min_vllm, "0.33.0")),
                profile,
                Intent(trust_remote_code=True, max_context=8192, concurrency=1),
            )
        except InfeasibleError:
            assert profile.layout is not None, profile.id
            continue
        except PlanError:
            continue  # refused for a reason other than memory (a release, a loader): not what this checks
        assert profile.layout is None, profile.id


def test_on_one_spark_the_refusal_names_the_layout_its_recipe_serves_it_on() -> None:
    with pytest.raises(InfeasibleError) as refused:
        plan(spark("0.33.0"), get_profile(GLM), Intent(max_context=32768, concurrency=1))
    assert "nodes 4 with tensor_parallel_size 4, decode_context_parallel_size 4 and cluster_backend ray" in str(
        refused.value
    )


def test_on_its_recipes_sparks_glm_5_3_plans_its_context_with_its_speed_across_them() -> None:
    profile = get_profile(GLM)
    assert profile.layout is not None
    asked = Intent.model_validate(recipe_intent(profile))
    served = plan(spark("0.33.0"), profile, asked)
    argv = " ".join(served.argv)
    assert "--tensor-parallel-size 4 --decode-context-parallel-size 4" in argv
    assert served.kv_cache_dtype == "fp8_ds_mla" and served.max_model_len == 65536
    # Decode context parallel 4: each rank keeps a quarter of a sequence's latent, so the pool holds 4 x the tokens
    # its bytes would hold whole (vLLM's 656-byte record over 78 layers plus 21 indexers' 132-byte keys).
    assert served.kv_tokens * (78 * 656 + 21 * 132) == served.kv_cache_memory_bytes * 4
    assert served.gpu_memory_utilization <= 0.87
    assert served.speed is not None and any("tensor parallel" in line for line in served.speed.basis)
    # The recipes' 131,072 tokens run on smaller checkpoints; this one is refused there by the 0.82 ceiling.
    with pytest.raises(InfeasibleError):
        plan(spark("0.33.0"), profile, asked.model_copy(update={"max_context": 131072}))


def test_the_command_line_plans_it_on_its_recipes_sparks_unless_told_otherwise(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", GLM, "--json", "--platform", "gb10"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["argv"][data["argv"].index("--tensor-parallel-size") + 1] == "4"
    assert main(["plan", GLM, "--platform", "gb10"]) == 0
    assert "planned on the 4 Sparks its recipe serves it on" in capsys.readouterr().err
    assert main(["plan", GLM, "--platform", "gb10", "--nodes", "2", "--tp", "2", "--cluster-backend", "ray"]) == 2
    assert "nodes 4 with tensor_parallel_size 4" in capsys.readouterr().err


def test_a_layout_spans_one_gpu_a_spark() -> None:
    with pytest.raises(ValidationError, match="must equal nodes"):
        RecipeLayout(nodes=4, tensor_parallel_size=2, max_context=8192)
    with pytest.raises(ValidationError, match="must divide"):
        RecipeLayout(nodes=4, tensor_parallel_size=4, decode_context_parallel_size=3, max_context=8192)


def test_a_modelopt_mixed_precision_checkpoint_is_fp4_where_its_experts_are() -> None:
    # vLLM 0.33 reads MIXED_PRECISION as modelopt_mixed, each layer by its own algorithm (GLM-5.3-NVFP4-Spark's).
    layers = {"model.layers.3.mlp.experts": {"quant_algo": "NVFP4", "group_size": 16}}
    mixed = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": layers}
    assert checkpoint_format({"quantization_config": mixed}) is CheckpointFormat.MODELOPT_NVFP4
    layers = {"model.layers.3.mlp.experts": {"quant_algo": "MXFP8", "group_size": 32}}
    fp8 = mixed | {"quantized_layers": layers}
    assert checkpoint_format({"quantization_config": fp8}) is CheckpointFormat.FP8


def test_the_catalogs_decode_figure_is_the_plans_on_its_recipes_sparks_not_one_sparks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for profile in load_catalog().values():
        if profile.layout is None:
            continue
        across = catalog_speed(profile)
        assert main(["plan", profile.id, "--json", "--platform", "gb10"]) == 0
        planned = json.loads(capsys.readouterr().out)["speed"]["decode"]
        assert across is not None and across.model_dump() == planned, profile.id
        one = catalog_decode(profile)
        assert one is not None and across.value > one.value, profile.id
