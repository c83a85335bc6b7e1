"""Issue 62: DeepSeek-style sparse attention planned as vLLM builds it on GB10 (sparkfleet.kv.sparse).

The specification: vLLM 0.32.0 / 0.33.0's source (the record layouts in v1/attention/backends/mla/flashmla_sparse.py,
656 bytes for fp8_ds_mla and 352 for its SM100-only nvfp4_ds_mla; FlashInfer's SM120 sparse backend, which serves auto
and fp8 as fp8_ds_mla in 64-token blocks; models/deepseek_v2.py, which builds an indexer only where index_topk_freq
says), and the field's figures for a GLM-5.2-class model: 54,728 bytes a token with fp8_ds_mla against 37,032 with
local-inference-lab/vllm PR 82's 432-byte nvfp4_ds_mla, over 79 layers (78 and the MTP layer) and 22 indexers
(../shared/reference/field-anchors.md, "Frontier layouts"). GLM-5.3's config.json is verbatim from
local-inference-lab/lil's testdata (tests/fixtures/configs/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import spark

from sparkfleet.errors import PlanError
from sparkfleet.kv.cache import KvGeometry
from sparkfleet.models import HostFacts, Intent, ModelProfile, Platform
from sparkfleet.planning import speed
from sparkfleet.planning.choices import resolve
from sparkfleet.planning.contextparallel import kv_pool
from sparkfleet.planning.planner import plan
from sparkfleet.reading.arithmetic import speed_reading
from sparkfleet.reading.config import profile_from_config
from sparkfleet.versions import VllmVersion

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
GIB = 2**30
# local-inference-lab/lil testdata, GLM-5.3-NVFP4-Spark/model.safetensors.index.json: metadata.total_size.
GLM_5_3_SPARK_BYTES = 435_548_900_560
# The field's GLM-5.2-class figures, a token over every layer and indexer with the MTP layer drafting.
FIELD_FP8_DS_MLA = 54_728
FIELD_NVFP4_DS_MLA = 37_032


def glm_5_3() -> ModelProfile:
    config = json.loads((CONFIGS / "zai-org--GLM-5.3-NVFP4.json").read_text())
    return profile_from_config("local-inference-lab/GLM-5.3-NVFP4-Spark", config, GLM_5_3_SPARK_BYTES, "lil testdata")


def four_sparks(**more: object) -> Intent:
    settings = {"max_context": 32768, "concurrency": 1, "nodes": 4, "tensor_parallel_size": 4, "cluster_backend": "ray"}
    return Intent.model_validate(settings | more)


def per_token(host: HostFacts, profile: ModelProfile, intent: Intent) -> int:
    """KV bytes a token on one rank, from the pool the planner sizes the plan with."""
    pool = kv_pool(profile, intent, resolve(host, profile, intent, None), host)
    assert isinstance(pool, KvGeometry)
    return pool.bytes_per_token


def test_glm_5_3_keeps_an_indexer_on_21_of_its_78_layers() -> None:
    profile = glm_5_3()
    # index_topk_freq 4 from index_skip_topk_offset 3: layers 0, 1, 2, then every fourth from 6 to 74 (its indexer_types).
    config = json.loads((CONFIGS / "zai-org--GLM-5.3-NVFP4.json").read_text())
    assert profile.indexer_layers == config["indexer_types"].count("full") == 21
    assert profile.indexer_bytes_per_token == 128 + 4
    assert profile.mla is not None and (profile.mla.kv_lora_rank, profile.mla.qk_rope_head_dim) == (512, 64)
    assert "not proved" in profile.quirks[0] and "read from vLLM's source" in profile.quirks[0]


def test_the_fp8_ds_mla_record_and_indexers_are_the_fields_figure() -> None:
    profile = glm_5_3()
    # The field's 54,728 B: 79 records of 656 B and 22 indexer keys of 132 B (the MTP layer builds its own).
    assert per_token(spark(), profile, four_sparks(speculative="mtp")) == FIELD_FP8_DS_MLA == 79 * 656 + 22 * 132
    assert per_token(spark(), profile, four_sparks()) == 78 * 656 + 21 * 132
    plain = plan(spark(), profile, four_sparks(), model_ref="x/glm")
    # auto is served as fp8_ds_mla on GB10, named in the argv with its reason; FlashInfer's SM120 kernels: 64-token blocks.
    assert plain.argv[plain.argv.index("--kv-cache-dtype") + 1] == "fp8_ds_mla"
    assert plain.block_size == 64
    assert any("FLASHINFER_MLA_SPARSE_SM120" in r.reason for r in plain.reasons if r.item.startswith("--kv-cache-dtype"))


def test_a_4bit_record_only_from_a_build_that_serves_it_on_gb10() -> None:
    profile = glm_5_3()
    with pytest.raises(PlanError, match="SM100 only") as refused:
        plan(spark(), profile, four_sparks(kv_cache_dtype="nvfp4"), model_ref="x/glm")
    assert refused.value.variable == "intent.kv_cache_dtype"
    assert "nvfp4-ds-mla-sm12x" in str(refused.value)
    fork = spark().model_copy(update={"vllm_capabilities": ("nvfp4-ds-mla-sm12x",)})
    four_bit_mtp = four_sparks(kv_cache_dtype="nvfp4", speculative="mtp")
    assert per_token(fork, profile, four_bit_mtp) == FIELD_NVFP4_DS_MLA == 79 * 432 + 22 * 132
    four_bit = plan(fork, profile, four_bit_mtp, model_ref="x/glm")
    assert four_bit.argv[four_bit.argv.index("--kv-cache-dtype") + 1] == "nvfp4_ds_mla"


def test_a_bfloat16_cache_is_refused_where_the_sparse_backend_refuses_it() -> None:
    with pytest.raises(PlanError, match="refuses a bfloat16 one") as refused:
        plan(spark(), glm_5_3(), four_sparks(kv_cache_dtype="bf16"), model_ref="x/glm")
    assert refused.value.variable == "intent.kv_cache_dtype"


def test_nvfp4_is_refused_for_a_dense_model_and_off_gb10() -> None:
    config = json.loads((CONFIGS / "meta-llama--Llama-3.1-8B-Instruct.json").read_text())
    llama = profile_from_config("x/llama", config, 16 * GIB, "fixture")
    with pytest.raises(PlanError, match="only as a sparse MLA's nvfp4_ds_mla record"):
        plan(spark(), llama, Intent(max_context=8192, concurrency=1, kv_cache_dtype="nvfp4"), model_ref="x/llama")
    cpu = HostFacts.model_validate(spark().model_dump() | {"platform": Platform.CPU.value})
    with pytest.raises(PlanError, match="on cpu is not one"):
        plan(cpu, glm_5_3(), four_sparks(kv_cache_dtype="nvfp4"), model_ref="x/glm")


def test_decode_context_parallel_divides_the_record_and_the_indexers() -> None:
    profile = glm_5_3()
    dcp = four_sparks(decode_context_parallel_size=4)
    assert per_token(spark(), profile, dcp) == (78 * 656 + 21 * 132) // 4
    whole = plan(spark(), profile, four_sparks(), model_ref="x/glm")
    split = plan(spark(), profile, dcp, model_ref="x/glm")
    assert split.block_size == 4 * whole.block_size


def test_glm_5_3_flash_reads_its_deepseek_sparse_attention_layers() -> None:
    """Its published config spells the sparse layers deepseek_sparse_attention (transformers before 5.18), which vLLM
    0.32 / 0.33 count as full attention (config/model.py _ATTENTION_LAYER_TYPES); they were refused before."""
    config = json.loads((CONFIGS / "zai-org--GLM-5.3-Flash-NVFP4.json").read_text())
    profile = profile_from_config("x/glm-flash", config, 100 * GIB, "lil testdata")
    assert profile.full_attention_layers == 11 and profile.state_layers is not None
    assert profile.state_layers.count == 34
    transcribed = json.loads((CONFIGS / "zai-org--GLM-5.3-Flash.json").read_text())
    before = profile_from_config("x/glm-flash", transcribed, 100 * GIB, "transcription")
    assert (before.full_attention_layers, before.kv_layout) == (profile.full_attention_layers, profile.kv_layout)


def test_a_decode_step_reads_the_top_k_records_and_every_indexer_key() -> None:
    """DeepSeek-V3.2's sparse decode attends to index_topk (2,048) tokens a layer, chosen by an indexer that scores every
    token's key (models/deepseek_v2.py Indexer; sparse_attn_indexer.py): what a step reads grows with the context by the
    indexers' keys alone, not by the records."""
    config = json.loads((CONFIGS / "zai-org--GLM-5.3-NVFP4.json").read_text())
    profile = speed_reading(glm_5_3(), config, None, "no headers in the fixture")
    assert profile.index_topk == 2048
    facts = speed.step_facts(profile, 1, 656)
    assert facts is not None
    context = 131_072
    assert facts.cache_bytes_read(context) == context * 21 * 132 + 2048 * 78 * 656
    # Read as a dense MLA it would be every fp8 latent and key of the context: 15 times more at 131K.
    dense = speed.step_facts(profile, 1)
    assert dense is not None and dense.cache_bytes_read(context) == context * 78 * (576 + 132) > 15 * 468_123_648


@pytest.mark.parametrize(("speculative", "reported"), [("none", 202_944), ("mtp", 200_064)])
def test_the_pool_is_the_one_vllm_logged_for_glm_5_3_on_four_sparks(speculative: str, reported: int) -> None:
    """tonyd2wild/GLM-5.3-Int4-Int8Mix-TP4-4x-DGX-Spark README (commit 4d625f1): TP4 on 4 Sparks, --kv-cache-dtype
    fp8_ds_mla, --kv-cache-memory-bytes 10950000000, --max-model-len 200000; vLLM logged "GPU KV cache: 202,944 tokens"
    bare and 200,064 with the MTP layer drafting. 3,171 and 3,126 blocks of 64 tokens, to the token."""
    intent = four_sparks(max_context=200_000, speculative=speculative)
    pool = kv_pool(glm_5_3(), intent, resolve(spark(), glm_5_3(), intent, None), spark())
    assert pool.block_size == 64
    assert pool.reported_tokens(10_950_000_000, 200_000, 4096, VllmVersion.parse("0.23.1")) == reported
