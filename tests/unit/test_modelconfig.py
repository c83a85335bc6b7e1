"""Every architecture family read from a real config.json alone (tests/fixtures/configs, with provenance)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkfleet.catalog import get_profile
from sparkfleet.errors import PlanError
from sparkfleet.kv.cache import GroupKind, StateCheckpoints, geometry, state_checkpoints
from sparkfleet.models import IndexedPool, ModelProfile, Platform, RingCache, RingKind, StateLayerKind, UnifiedPool
from sparkfleet.reading.config import profile_from_config
from sparkfleet.versions import VllmVersion

V032, V033 = VllmVersion.parse("0.32.0"), VllmVersion.parse("0.33.0")

CONFIGS = Path(__file__).parents[1] / "fixtures" / "configs"
GIB = 1024**3


def from_fixture(name: str, weights: int = 10 * GIB) -> ModelProfile:
    config = json.loads((CONFIGS / f"{name}.json").read_text())
    return profile_from_config(name.replace("--", "/"), config, weights, name)


def bf16_bytes_per_token(profile: ModelProfile) -> int:
    return geometry(profile, kv_cache_dtype="auto").bytes_per_token


def test_dense_gqa_llama_3_1_8b_is_128_kib_per_token() -> None:
    # 32 layers x 2 (K, V) x 8 KV heads x 128 x 2 bytes: the widely quoted 128 KiB per token.
    assert bf16_bytes_per_token(from_fixture("meta-llama--Llama-3.1-8B-Instruct")) == 128 * 1024


def test_moe_gqa_qwen3_30b_a3b() -> None:
    profile = from_fixture("Qwen--Qwen3-30B-A3B")
    assert profile.moe and profile.head_dim == 128
    assert bf16_bytes_per_token(profile) == 48 * 2 * 4 * 128 * 2


def test_gpt_oss_alternates_sliding_and_full() -> None:
    profile = from_fixture("openai--gpt-oss-120b")
    assert (profile.full_attention_layers, profile.sliding_attention_layers, profile.sliding_window) == (18, 18, 128)
    assert profile.checkpoint_format.value == "mxfp4"


def test_mla_deepseek_v3_keeps_one_latent_per_layer() -> None:
    profile = from_fixture("deepseek-ai--DeepSeek-V3")
    assert profile.mla is not None and profile.kv_heads == 1
    # 61 layers x (512 + 64) x 2 bytes = 70,272 bytes (~69 KiB) per token, the figure DeepSeek's MLA is known for.
    assert bf16_bytes_per_token(profile) == 61 * 576 * 2
    assert profile.speculative.mtp and profile.speculative.mtp_layers == 1
    assert profile.config_auto_map and profile.model_type == "deepseek_v3"


def test_nemotron_nas_super_49b_caches_its_49_attention_blocks_not_80() -> None:
    # Its 80 layers are block_configs; 31 have attention no_op and num_key_value_heads is null. 49 x 2 (K, V)
    # x 64 / 8 KV heads x 128 x 2 bytes = 200,704 bytes per token, 6.125 GiB for one 32,768-token request.
    profile = from_fixture("nvidia--Llama-3_3-Nemotron-Super-49B-v1", weights=93 * GIB)
    assert (profile.num_layers, profile.full_attention_layers, profile.kv_heads, profile.head_dim) == (80, 49, 8, 128)
    assert bf16_bytes_per_token(profile) == 200_704
    assert profile.config_auto_map and profile.model_type == "nemotron-nas" and not profile.quirks


def test_gemma3_global_every_sixth_layer_from_the_pattern() -> None:
    profile = from_fixture("google--gemma-3-27b-it")
    assert (profile.full_attention_layers, profile.sliding_attention_layers) == (10, 52)
    assert profile.multimodal and profile.full_attention_shape is None


def test_gemma4_global_layers_have_their_own_shape_and_page() -> None:
    profile = from_fixture("google--gemma-4-31B-it")
    assert profile.full_attention_shape is not None
    assert (profile.full_attention_shape.kv_heads, profile.full_attention_shape.head_dim) == (4, 512)
    geo = geometry(profile, kv_cache_dtype="auto")
    # Sliding pages (16 x 256) are twice the global ones (4 x 512): vLLM doubles the global block size.
    assert geo.block_size_by_kind == {GroupKind.FULL: 32, GroupKind.SLIDING: 16}
    assert geo.bytes_per_token == 10 * 2 * 4 * 512 * 2 + 50 * 2 * 16 * 256 * 2


def test_nemotron_h_mamba2_state_from_the_pattern() -> None:
    profile = from_fixture("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    assert profile.full_attention_layers == 6 and profile.state_layers is not None
    assert profile.state_layers.kind is StateLayerKind.MAMBA2 and profile.state_layers.count == 23
    assert profile.state_layers.conv_dim == 64 * 64 + 2 * 8 * 128
    assert profile.state_layers.state_dtype_bytes == 4
    assert not profile.force_attention_backend


@pytest.mark.parametrize("name", ["Qwen--Qwen3-Next-80B-A3B-Instruct", "Qwen--Qwen3.6-35B-A3B"])
def test_gated_deltanet_hybrids(name: str) -> None:
    profile = from_fixture(name)
    assert profile.state_layers is not None and profile.state_layers.kind is StateLayerKind.GATED_DELTANET
    assert profile.state_layers.state_shape == (32, 128, 128)
    assert profile.state_layers.count == 3 * profile.full_attention_layers


def test_lfm2_short_convolutions_from_full_attn_idxs() -> None:
    # transformers' Lfm2Config turns this file's full_attn_idxs into layer_types the same way.
    profile = from_fixture("LiquidAI--LFM2-1.2B", weights=2_340_697_936)
    layers = profile.state_layers
    assert (profile.full_attention_layers, profile.kv_heads, profile.head_dim) == (6, 8, 64)
    assert layers is not None and layers.kind is StateLayerKind.SHORT_CONV and layers.count == 10
    assert (layers.conv_dim, layers.conv_kernel, layers.state_shape) == (2048, 3, ())
    # Two convolution inputs of 2048 bf16 values per layer and sequence; no recurrent state.
    assert geometry(profile, kv_cache_dtype="auto").state_bytes_per_layer == 2 * 2048 * 2
    assert profile.quirks == ()


def hybrid(**fields: object) -> ModelProfile:
    config = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, **fields}
    return profile_from_config("org/hybrid", config, 10 * GIB, "hybrid")


def test_jamba_attention_every_period_at_its_offset_with_mamba1_state() -> None:
    # AI21-Jamba-Mini's shape: 32 layers, attention at offset 4 of every 8, Mamba-1 of expand 2 and d_state 16.
    profile = hybrid(
        model_type="jamba",
        num_hidden_layers=32,
        attn_layer_period=8,
        attn_layer_offset=4,
        mamba_expand=2,
        mamba_d_state=16,
        mamba_d_conv=4,
    )
    layers = profile.state_layers
    assert profile.full_attention_layers == 4 and layers is not None and layers.count == 28
    assert layers.kind is StateLayerKind.MAMBA1 and layers.state_shape == (8192, 16)
    # Mamba-1's convolution window does not grow with speculative tokens; at TP 2 both halves split.
    plain = geometry(profile, kv_cache_dtype="auto", tensor_parallel=2).state_bytes_per_layer
    assert plain == (4096 * 3 + 4096 * 16) * 2
    assert geometry(profile, kv_cache_dtype="auto", tensor_parallel=2, speculative_tokens=3).state_bytes_per_layer == plain


def test_falcon_h1_runs_mamba2_beside_attention_in_every_layer() -> None:
    profile = hybrid(
        model_type="falcon_h1",
        num_hidden_layers=44,
        head_dim=128,
        mamba_d_ssm=6144,
        mamba_n_heads=96,
        mamba_d_head=64,
        mamba_d_state=256,
        mamba_n_groups=1,
        mamba_d_conv=4,
    )
    layers = profile.state_layers
    assert profile.full_attention_layers == 44 and layers is not None and layers.count == 44
    assert layers.conv_dim == 6144 + 2 * 256 and layers.state_dtype_bytes == 2


def test_granite_hybrid_inner_size_is_expand_times_hidden() -> None:
    profile = hybrid(
        model_type="granitemoehybrid",
        num_hidden_layers=4,
        layer_types=["mamba", "mamba", "mamba", "attention"],
        mamba_expand=2,
        mamba_n_heads=128,
        mamba_d_head=64,
        mamba_d_state=128,
        mamba_n_groups=1,
        mamba_d_conv=4,
    )
    layers = profile.state_layers
    assert layers is not None and layers.kind is StateLayerKind.MAMBA2 and layers.count == 3
    assert layers.conv_dim == 8192 + 2 * 128 and layers.state_shape == (128, 64, 128)


def test_zamba2_shares_attention_blocks_with_their_own_caches_beside_mamba2_everywhere() -> None:
    # A large Zamba2 shape, 13 of 81 layers 'hybrid' (Mamba-2 plus a shared attention block). With no
    # attention_head_dim in the file, Zamba2Config's 2 x hidden / heads applies, with as many KV heads as heads.
    types = ["hybrid" if i % 6 == 5 else "mamba" for i in range(78)] + ["mamba"] * 3
    profile = hybrid(
        model_type="zamba2",
        num_hidden_layers=81,
        hidden_size=3584,
        num_attention_heads=32,
        layers_block_type=types,
        n_mamba_heads=112,
        mamba_headdim=64,
        mamba_d_state=64,
        mamba_ngroups=2,
        mamba_d_conv=4,
        mamba_expand=2,
    )
    layers = profile.state_layers
    assert (profile.full_attention_layers, profile.kv_heads, profile.head_dim) == (13, 32, 224)
    assert layers is not None and layers.count == 81 and layers.conv_dim == 2 * 3584 + 2 * 2 * 64


@pytest.mark.parametrize(
    ("model_type", "fields", "says"),
    [
        ("granitemoehybrid", {"mamba_n_heads": 8, "mamba_d_state": 64}, "lacks mamba_d_head"),
        # A model_type with no family is read by whichever reader finds its fields: here Nemotron-H's.
        ("mamba2_hybrid", {"mamba_num_heads": 8, "mamba_head_dim": 64}, "lacks ssm_state_size"),
        ("granitemoehybrid", {"mamba_n_heads": "eight", "mamba_d_head": 64, "mamba_d_state": 64}, "not a number"),
        ("granitemoehybrid", {"conv_L_cache": 1}, "state shape this config does not give"),
        ("mamba2_hybrid", {"conv_L_cache": 1}, "conv_kernel is not valid"),
        # A known family is read by its own reader only (the family table): Granite's fields, not Nemotron-H's.
        ("granitemoehybrid", {"mamba_num_heads": 8, "mamba_head_dim": 64, "ssm_state_size": 64}, "does not give"),
    ],
)
def test_a_state_shape_missing_or_malformed_is_refused_naming_the_field(
    model_type: str, fields: dict[str, object], says: str
) -> None:
    with pytest.raises(PlanError, match=says):
        hybrid(model_type=model_type, num_hidden_layers=2, layer_types=["mamba", "attention"], **fields)


def test_jamba_period_fields_are_refused_outside_jamba() -> None:
    config = json.loads((CONFIGS / "meta-llama--Llama-3.1-8B-Instruct.json").read_text())
    with pytest.raises(PlanError, match="attn_layer_period"):
        profile_from_config("x", {**config, "attn_layer_period": 8}, GIB, "x")
    with pytest.raises(PlanError, match="attn_layer_period 0"):
        hybrid(model_type="jamba", num_hidden_layers=8, attn_layer_period=0, mamba_d_state=16)


# Catalog profiles and the profile their own published config.json gives must lay KV out the same way.
CATALOG_CONFIGS = {
    "openai/gpt-oss-120b": "openai--gpt-oss-120b",
    "nvidia/Gemma-4-31B-IT-NVFP4": "google--gemma-4-31B-it",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4": "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "nvidia/Qwen3.6-35B-A3B-NVFP4": "Qwen--Qwen3.6-35B-A3B",
}


@pytest.mark.parametrize("catalog_id", sorted(CATALOG_CONFIGS))
@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
def test_catalog_agrees_with_its_config(catalog_id: str, kv_cache_dtype: str) -> None:
    curated = geometry(get_profile(catalog_id), kv_cache_dtype=kv_cache_dtype)
    derived = geometry(from_fixture(CATALOG_CONFIGS[catalog_id]), kv_cache_dtype=kv_cache_dtype)
    assert curated == derived


def test_unknown_layer_kind_is_refused_naming_it() -> None:
    config = json.loads((CONFIGS / "meta-llama--Llama-3.1-8B-Instruct.json").read_text())
    config["layer_types"] = ["full_attention", "lightning_attention"] * 16
    with pytest.raises(PlanError, match="lightning_attention"):
        profile_from_config("x", config, GIB, "x")


def test_state_layers_without_their_shape_are_refused() -> None:
    config = json.loads((CONFIGS / "meta-llama--Llama-3.1-8B-Instruct.json").read_text())
    config["layer_types"] = ["linear_attention", "full_attention"] * 16
    with pytest.raises(PlanError, match="state shape"):
        profile_from_config("x", config, GIB, "x")


def test_glm45_air_is_gqa_with_an_mtp_layer() -> None:
    profile = from_fixture("zai-org--GLM-4.5-Air")
    assert profile.moe and (profile.kv_heads, profile.head_dim, profile.full_attention_layers) == (8, 128, 46)
    assert profile.speculative.mtp_layers == 1
    assert bf16_bytes_per_token(profile) == 46 * 2 * 8 * 128 * 2


def test_olmo_hybrid_heads_are_hidden_size_wide_and_its_layout_proved() -> None:
    # OlmoHybridConfig's own default layout (full attention where i % 4 == 3) and value heads twice the key width.
    # vLLM builds its attention with hidden_size / heads per head (models/olmo_hybrid.py): a head_dim beside it is
    # not what the KV cache holds.
    profile = hybrid(
        model_type="olmo_hybrid",
        architectures=["OlmoHybridForCausalLM"],
        num_hidden_layers=8,
        head_dim=64,
        layer_types=["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3 + ["full_attention"],
        linear_num_key_heads=32,
        linear_num_value_heads=32,
        linear_key_head_dim=96,
        linear_value_head_dim=192,
        linear_conv_kernel_dim=4,
    )
    layers = profile.state_layers
    assert (profile.full_attention_layers, profile.kv_heads, profile.head_dim) == (2, 8, 128)
    assert layers is not None and layers.kind is StateLayerKind.GATED_DELTANET and layers.count == 6
    assert layers.state_shape == (32, 192, 96) and layers.conv_dim == 96 * 32 * 2 + 192 * 32
    # tests/vllm/check_kv_geometry.py's olmo_hybrid family proves the layout: no unproved-layout warning.
    assert profile.quirks == ()


def test_olmo_hybrid_fields_a_config_leaves_out_are_its_config_class_defaults() -> None:
    # OlmoHybridConfig: full attention where i % 4 == 3, Gated-DeltaNet of heads x (0.75 hidden / heads) keys and
    # twice as wide values, and as many KV heads as heads; OLMo-Hybrid-7B's shape.
    profile = profile_from_config(
        "org/olmo",
        {"model_type": "olmo_hybrid", "hidden_size": 3840, "num_hidden_layers": 32, "num_attention_heads": 30},
        10 * GIB,
        "olmo",
    )
    layers = profile.state_layers
    assert (profile.full_attention_layers, profile.kv_heads, profile.head_dim) == (8, 30, 128)
    assert layers is not None and layers.count == 24 and layers.state_shape == (30, 192, 96)


# Qwen4-Exp and GLM-5-Next at the shapes third-party transcriptions of their config.json give (no official file was
# reachable; docs/research): what the planner reads, by vLLM 0.32's formulas. vLLM's CPU build cannot build their layers,
# so both keep a warning; their pool is checked by tests/vllm/kv_indexed.py (and tests/unit/test_kvindexed.py).
def test_qwen4_exp_indexed_layers_hold_their_kv_and_compressed_keys_beside_gated_deltanet() -> None:
    profile = hybrid(
        model_type="qwen4_exp_text",
        architectures=["Qwen4ExpForCausalLM"],
        hidden_size=2560,
        num_hidden_layers=48,
        num_attention_heads=24,
        num_key_value_heads=2,
        head_dim=256,
        layer_types=(["linear_attention"] * 3 + ["indexed_attention"]) * 12,
        linear_num_key_heads=16,
        linear_num_value_heads=48,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
        mamba_ssm_dtype="float32",
        indexer_n_heads=4,
        indexer_kv_heads=1,
        indexer_head_dim=128,
        indexer_compress_ratio=4,
        hc_count=4,
        ple_layer_ids=[2],
        ple_conv_kernel_size=4,
        ngram_size=3,
    )
    layers = profile.state_layers
    assert profile.full_attention_layers == 12 and layers is not None and layers.count == 36
    assert layers.kind is StateLayerKind.GATED_DELTANET and layers.state_dtype_bytes == 4
    # Per indexed layer: K and V of 2 heads x 256 in bf16 (2,048 B), and a 128-wide bf16 key every 4 tokens (64 B).
    assert profile.indexer_bytes_per_token == 64
    assert bf16_bytes_per_token(profile) == 12 * (2 * 2 * 256 * 2 + 64) == 25_344
    assert len(profile.quirks) == 1 and "qwen4_exp_text" in profile.quirks[0] and "kv_indexed.py" in profile.quirks[0]
    # Each QSA layer keeps its raw 128-wide key until a group of 4 is compressed.
    ring = RingCache(kind=RingKind.QSA, layers=12, head_size=128, group_tokens=4, indexer_entry_bytes=256)
    assert profile.kv_layout == IndexedPool(ring=ring)
    # The n-gram layer: a convolution over 4 copies of the hidden state, kernel 4 dilated by the n-gram size 3, so a
    # window of 9 past positions (10 taps), whole on every rank.
    ple = profile.replicated_state_layers
    assert ple is not None and (ple.kind, ple.count, ple.conv_dim, ple.conv_kernel) == (
        StateLayerKind.SHORT_CONV,
        1,
        4 * 2560,
        10,
    )


def test_qwen4_exp_multimodal_ring_keeps_the_m_rope_positions_after_the_key() -> None:
    config = {
        "model_type": "qwen4_exp",
        "architectures": ["Qwen4ExpForConditionalGeneration"],
        "vision_config": {"depth": 2},
        "text_config": {
            "model_type": "qwen4_exp_text",
            "hidden_size": 256,
            "num_hidden_layers": 4,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 128,
            "layer_types": ["linear_attention"] * 3 + ["indexed_attention"],
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 4,
            "linear_key_head_dim": 64,
            "linear_value_head_dim": 64,
            "indexer_n_heads": 4,
            "indexer_head_dim": 126,
            "indexer_compress_ratio": 4,
            "rope_parameters": {"mrope_section": [11, 11, 10], "rope_theta": 1e7},
        },
    }
    layout = profile_from_config("org/vl", config, GIB, "vl").kv_layout
    ring = layout.ring if isinstance(layout, IndexedPool) else None
    # QSAKeyStateCache with cache_rope_positions: the key rounded up to 4 bf16, then 3 int64 positions (4 bf16 each).
    assert ring is not None and ring.head_size == 128 + 12 and ring.indexer_entry_bytes == 126 * 2


def test_glm5_next_nope_latent_pooled_indexer_and_kda_state() -> None:
    profile = hybrid(
        model_type="glm5_next",
        architectures=["Glm5NextForCausalLM"],
        num_hidden_layers=45,
        num_attention_heads=64,
        num_key_value_heads=64,
        layer_types=["indexed_attention" if i % 4 == 3 else "linear_attention" for i in range(45)],
        kv_lora_rank=512,
        q_lora_rank=1536,
        qk_nope_head_dim=256,
        v_head_dim=256,
        index_topk=2048,
        index_head_dim=128,
        index_n_heads=32,
        index_kpool=4,
        linear_attn_config={"num_heads": 64, "head_dim": 128, "short_conv_kernel_size": 4},
    )
    mla, layers = profile.mla, profile.state_layers
    # qk_rope_head_dim left out: Glm5NextTextConfig's default is 0 (NoPE), not DeepSeek's 64.
    assert mla is not None and (mla.kv_lora_rank, mla.qk_rope_head_dim) == (512, 0)
    assert profile.full_attention_layers == 11 and layers is not None and layers.count == 34
    # The fp8 indexer key (128 values + one float32 scale) pooled over 4 tokens: 33 B per token and layer.
    assert profile.indexer_bytes_per_token == 33
    assert bf16_bytes_per_token(profile) == 11 * (512 * 2 + 33) == 11_627
    # KDA: a convolution over q, k and v (3 x 64 x 128, 3 positions) and a float32 64 x 128 x 128 state.
    assert layers.kind is StateLayerKind.KDA and layers.state_shape == (64, 128, 128)
    assert geometry(profile, kv_cache_dtype="auto").state_bytes_per_layer == 3 * 64 * 128 * 3 * 2 + 64 * 128 * 128 * 4
    assert len(profile.quirks) == 1 and "glm5_next" in profile.quirks[0]
    # The tail ring: a raw 128-wide key and its gate score for the open pool of 4 tokens.
    ring = RingCache(kind=RingKind.KPOOL, layers=11, head_size=128, group_tokens=4, indexer_entry_bytes=132)
    assert profile.kv_layout == IndexedPool(ring=ring)


def test_glm5_next_fields_a_config_leaves_out_are_its_config_class_defaults() -> None:
    # Glm5NextTextConfig: KDA where i % 4 != 3, a NoPE latent of 512, keys pooled over 16 tokens, KDA 64 x 128 (its
    # linear_attn_config, here 32 heads, overriding the flat field).
    profile = hybrid(
        model_type="glm5_next_text",
        num_hidden_layers=8,
        num_attention_heads=64,
        linear_num_heads=64,
        linear_attn_config={"num_heads": 32},
    )
    mla, layers = profile.mla, profile.state_layers
    assert mla is not None and (mla.kv_lora_rank, mla.qk_rope_head_dim) == (512, 0)
    assert profile.full_attention_layers == 2 and layers is not None and layers.count == 6
    assert profile.indexer_bytes_per_token == 9  # 132 B over 16 tokens, rounded up
    assert layers.state_shape == (32, 128, 128)


def test_deepseek_v3_2_indexer_keys_join_its_latent() -> None:
    profile = hybrid(
        model_type="deepseek_v32",
        num_hidden_layers=61,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        index_topk=2048,
        index_head_dim=128,
    )
    # 576 bf16 latent values and the indexer's 132-byte fp8 key per layer and token (DeepseekV32IndexerCache).
    assert profile.indexer_bytes_per_token == 132
    assert bf16_bytes_per_token(profile) == 61 * (576 * 2 + 132)
    # A sparse MLA is never given a dense attention backend: vLLM refuses one whose sparsity differs.
    assert not profile.force_attention_backend
    assert profile.kv_layout == UnifiedPool()


def test_kimi_linear_kda_layers_from_linear_attn_config_beside_mla() -> None:
    # Kimi-Linear-48B-A3B's schedule: KDA in three of every four layers (1-based kda_layers), MLA in the fourth.
    profile = hybrid(
        model_type="kimi_linear",
        architectures=["KimiLinearForCausalLM"],
        hidden_size=2304,
        num_hidden_layers=8,
        num_attention_heads=32,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        linear_attn_config={
            "kda_layers": [1, 2, 3, 5, 6, 7],
            "full_attn_layers": [4, 8],
            "num_heads": 32,
            "head_dim": 128,
            "short_conv_kernel_size": 4,
        },
    )
    layers = profile.state_layers
    assert profile.full_attention_layers == 2 and profile.mla is not None and profile.indexer_bytes_per_token == 0
    assert layers is not None and layers.kind is StateLayerKind.KDA and layers.count == 6
    assert (layers.conv_dim, layers.conv_kernel, layers.state_shape) == (3 * 32 * 128, 4, (32, 128, 128))
    assert len(profile.quirks) == 1 and "kimi_linear" in profile.quirks[0]


def test_bailing_v2_5_mla_every_group_with_lightning_state_between() -> None:
    profile = hybrid(
        architectures=["BailingMoeV2_5ForCausalLM"],
        model_type="bailing_hybrid",
        num_hidden_layers=10,
        num_attention_heads=32,
        head_dim=128,
        layer_group_size=4,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
    )
    layers = profile.state_layers
    # MLA on layers 4 and 8 ((i + 1) % 4 == 0); lightning attention on the other eight, trailing ones included.
    assert profile.full_attention_layers == 2 and profile.mla is not None
    assert layers is not None and layers.kind is StateLayerKind.LINEAR and layers.count == 8
    # One bf16 32 x 128 x 128 state per layer and sequence, no convolution, at any speculative depth.
    assert geometry(profile, kv_cache_dtype="auto", speculative_tokens=3).state_bytes_per_layer == 32 * 128 * 128 * 2
    assert len(profile.quirks) == 1 and "bailing_hybrid" in profile.quirks[0]


def test_bailing_v3_trailing_layers_past_the_last_group_are_mla() -> None:
    profile = hybrid(
        architectures=["BailingMoeV3ForCausalLM"],
        model_type="bailing_moe_v3",
        num_hidden_layers=10,
        num_attention_heads=32,
        head_dim=128,
        layer_group_size=4,
        short_conv_kernel_size=4,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
    )
    layers = profile.state_layers
    # MLA on layers 4 and 8 and on 9 and 10, past the last whole group of four (bailing_moe_v3.py _is_kda_layer).
    assert profile.full_attention_layers == 4 and layers is not None and layers.count == 6
    assert layers.kind is StateLayerKind.KDA and (layers.conv_dim, layers.state_shape) == (3 * 32 * 128, (32, 128, 128))


def test_alice_ai_linear_layers_are_kda_with_a_float32_state_not_gated_deltanet() -> None:
    # vLLM 0.33's alice_ai.py builds its linear_attention layers as Kimi's KDA from Gated-DeltaNet's field names.
    profile = hybrid(
        architectures=["AliceAIForCausalLM"],
        model_type="alice_ai",
        num_hidden_layers=4,
        head_dim=128,
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        linear_num_key_heads=16,
        linear_num_value_heads=16,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
    )
    layers = profile.state_layers
    assert profile.full_attention_layers == 1 and layers is not None and layers.count == 3
    assert layers.kind is StateLayerKind.KDA and layers.state_dtype_bytes == 4
    assert (layers.conv_dim, layers.state_shape) == (3 * 16 * 128, (16, 128, 128))


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        # Kimi-Linear: layer numbers that are not integers, and a KDA without its convolution kernel.
        (
            {"model_type": "kimi_linear", "linear_attn_config": {"kda_layers": ["1"], "num_heads": 8, "head_dim": 64}},
            "kda_layers must list layer numbers",
        ),
        (
            {"model_type": "kimi_linear", "linear_attn_config": {"kda_layers": [1], "num_heads": 8, "head_dim": 64}},
            "lacks short_conv_kernel_size",
        ),
        # OLMo-Hybrid's defaults derive from hidden_size: without it the config is refused as any other would be.
        ({"model_type": "olmo_hybrid", "hidden_size": None}, "lacks num_hidden_layers / num_attention_heads / hidden_size"),
    ],
)
def test_a_new_hybrid_config_that_cannot_be_read_is_refused_naming_the_field(fields: dict[str, object], says: str) -> None:
    config = {"hidden_size": 1024, "num_attention_heads": 8, "num_hidden_layers": 2, "kv_lora_rank": 128, **fields}
    with pytest.raises(PlanError, match=says):
        profile_from_config("org/hybrid", config, 10 * GIB, "hybrid")


def test_vllm_0_33_on_gb10_gives_qwen3_6_gated_deltanet_a_prefill_checkpoint_block() -> None:
    # FlashInfer's Gated-DeltaNet prefill (SM 12.x, 128-wide key heads, CUDA 13) exports a checkpoint per state group in
    # align mode, on a 64-token grid; 0.32 and the CPU platform run the Triton prefill, which exports none.
    profile = from_fixture("Qwen--Qwen3.6-35B-A3B")
    assert state_checkpoints(profile, Platform.GB10, V033) == StateCheckpoints(blocks=1, alignment=64)
    assert state_checkpoints(profile, Platform.GB10, V032) == StateCheckpoints()
    assert state_checkpoints(profile, Platform.CPU, V033) == StateCheckpoints()
    plain = geometry(profile, kv_cache_dtype="auto")
    exported = geometry(profile, kv_cache_dtype="auto", checkpoints=state_checkpoints(profile, Platform.GB10, V033))
    # 16-token steps until a page holds the state: 1056; on the 64-token grid: 1088.
    assert (plain.block_size, exported.block_size) == (1056, 1088)
    states = sum(1 for kind in exported.groups if kind is GroupKind.STATE)
    # Per state group: two live states and the checkpoint.
    assert exported.blocks_per_request(32768, 8192) == -(-32768 // 1088) + states * 3
    assert plain.blocks_per_request(32768, 8192) == -(-32768 // 1056) + states * 2
    # Without prefix caching nothing is exported.
    unaligned = geometry(profile, kv_cache_dtype="auto", checkpoints=StateCheckpoints(1, 64), prefix_caching=False)
    assert (unaligned.block_size, unaligned.state_blocks_per_request) == (1056, 1)


def test_mamba_2_keeps_a_prefill_checkpoint_block_in_align_mode_from_vllm_0_32() -> None:
    profile = from_fixture("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    for platform in Platform:
        assert state_checkpoints(profile, platform, V032) == StateCheckpoints(blocks=1)
        assert state_checkpoints(profile, platform, VllmVersion.parse("0.31.0")) == StateCheckpoints()
    checkpoints = StateCheckpoints(blocks=1)
    assert geometry(profile, kv_cache_dtype="auto", checkpoints=checkpoints).state_blocks_per_request == 3
    assert (
        geometry(profile, kv_cache_dtype="auto", checkpoints=checkpoints, prefix_caching=False).state_blocks_per_request == 1
    )


def test_olmo_hybrid_gated_deltanet_runs_triton_on_every_release_and_exports_no_checkpoint() -> None:
    # OlmoHybridGatedDeltaNetAttention always takes the Triton prefill (vLLM 0.33 olmo_gdn_linear_attn.py), even with
    # the 128-wide keys that put Qwen's on FlashInfer.
    profile = hybrid(model_type="olmo_hybrid", num_hidden_layers=8, num_attention_heads=8, linear_key_head_dim=128)
    assert profile.state_layers is not None and profile.state_layers.state_shape[2:] == (128,)
    assert state_checkpoints(profile, Platform.GB10, V033) == StateCheckpoints()
