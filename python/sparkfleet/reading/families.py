"""The architecture families sparkfleet reads, one entry each: the single place a family is named.

Pure data. Enters: a config's model_type. Leaves: its `Family`, which says how its layers are laid out, which
transformers class fills in what the file leaves out, which reader gives its per-sequence state, which KV-pool rule
applies to it, and what proves the planner reads it as vLLM builds it (tests/vllm/check_kv_geometry.py for the
layers, tests/vllm/kv_indexed.py for the pools vLLM's CPU build cannot build). A new family is one entry here, a
reader in reading.states or reading.blocks if none fits, and one proof fixture.

A model_type with no entry is still read, from whichever fields its config has, and its plan carries the
unproved-layout warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..models import RingKind


class LayerRule(Enum):
    """Where a family's cache layers are, beyond the fields every family may use (reading.states.layer_kinds)."""

    FIELDS = "layer_types and the other per-layer fields"
    # models/jamba.py: attention where i % attn_layer_period == attn_layer_offset, Mamba-1 between.
    PERIODIC = "attn_layer_period / attn_layer_offset"
    # models/falcon_h1.py: every decoder layer runs attention and Mamba-2 side by side.
    PARALLEL = "attention and Mamba-2 in every layer"
    # models/zamba2.py: a shared attention block beside some Mamba-2 layers, each with its own KV cache.
    SHARED_ATTENTION = "a shared attention block"
    # models/nemotron_nas.py: one block per layer in block_configs.
    NAS_BLOCKS = "block_configs (DeciLM / Nemotron-NAS)"
    # models/nemotron_h.py with block_configs: one block per layer, sliding attention.
    PUZZLE_BLOCKS = "block_configs (Nemotron-H Puzzle)"
    # models/deepseek_v4: compressed sparse MLA, its windows in the packed pool (sparkfleet.kv.packed).
    COMPRESSED_MLA = "compress_ratios / layer_types of DeepSeek-V4"


class ClassDefaults(Enum):
    """The transformers config class whose defaults vLLM reads where config.json leaves a field out
    (reading.defaults)."""

    NEMOTRON_H = "NemotronHConfig"
    OLMO_HYBRID = "OlmoHybridConfig"
    GLM5_NEXT = "Glm5NextTextConfig"


class StateReader(Enum):
    """The reader of a family's per-sequence state (reading.states), named by the vLLM model file it follows."""

    GATED_DELTANET = "qwen3_next.py / qwen3_5.py"
    KDA = "glm5next/common/model.py, kimi_k3/amd/linear.py"
    NEMOTRON_MAMBA2 = "nemotron_h.py"
    GRANITE_MAMBA2 = "granitemoehybrid.py / falcon_h1.py"
    ZAMBA_MAMBA2 = "zamba2.py"
    JAMBA_MAMBA1 = "jamba.py"
    SHORT_CONV = "lfm2.py"


@dataclass(frozen=True)
class Family:
    name: str
    # The text config's model_type (the language model's, for a multimodal or wrapped checkpoint); the first is the
    # one its proof's tiny model has.
    text_types: tuple[str, ...]
    # The check_kv_geometry.py family whose tiny model proves the layers, or the kv_indexed.py family that checks the
    # pool where vLLM's CPU build cannot build the layers; neither for a family read from vLLM's source alone.
    proof: str | None = None
    pool_check: str | None = None
    layers: LayerRule = LayerRule.FIELDS
    defaults: ClassDefaults | None = None
    state: StateReader | None = None
    # vLLM builds attention with hidden_size / num_attention_heads per head, whatever head_dim says
    # (models/olmo_hybrid.py OlmoHybridAttention).
    head_size_from_hidden: bool = False
    # The raw-key ring an indexed layer keeps beside its pooled indexer keys (reading.indexers.ring_cache).
    pooled_ring: RingKind | None = None
    # A family whose layers neither proof can build (no sparse MLA backend in vLLM's CPU build): the vLLM files its
    # caches are read from, which the plan's warning names.
    read_from: str | None = None
    # Its Gated-DeltaNet is vLLM's QwenGatedDeltaNetAttention, which can run FlashInfer's prefill and so exports
    # state checkpoints on a grid (sparkfleet.kv.cache.state_checkpoints); OLMo-Hybrid's always runs Triton.
    qwen_gated_deltanet: bool = False


FAMILIES = (
    Family("llama", ("llama",), proof="llama (dense GQA)"),
    Family("qwen3_moe", ("qwen3_moe",), proof="qwen3_moe (MoE GQA)"),
    Family("glm4_moe", ("glm4_moe",), proof="glm4_moe (MoE GQA, partial rotary)"),
    Family("gpt_oss", ("gpt_oss",), proof="gpt_oss (sliding + sinks, MoE)"),
    Family("gemma3", ("gemma3_text",), proof="gemma3 (5:1 sliding, same shape)"),
    Family("gemma4", ("gemma4_text",), proof="gemma4 (per-layer-type shapes, K=V)"),
    Family("deepseek_v3", ("deepseek_v3",), proof="deepseek_v3 (MLA)"),
    Family(
        "deepseek_v32",
        ("deepseek_v32", "glm_moe_dsa"),
        read_from="vLLM 0.32 / 0.33 models/deepseek_v2.py (indexers by index_topk_freq), "
        "layers/attention/mla_attention.py and flashinfer_mla_sparse.py (the fp8_ds_mla record on GB10; "
        "sparkfleet.kv.sparse)",
    ),
    Family(
        "deepseek_v4",
        ("deepseek_v4",),
        proof="deepseek_v4 (compressed sparse MLA, windows, indexer)",
        layers=LayerRule.COMPRESSED_MLA,
    ),
    Family(
        "nemotron_h",
        ("nemotron_h",),
        proof="nemotron_h (Mamba-2 hybrid)",
        defaults=ClassDefaults.NEMOTRON_H,
        state=StateReader.NEMOTRON_MAMBA2,
    ),
    Family(
        "nemotron_h_puzzle",
        ("nemotron_h_puzzle",),
        proof="nemotron_h_puzzle (per-layer blocks, sliding attention)",
        layers=LayerRule.PUZZLE_BLOCKS,
        defaults=ClassDefaults.NEMOTRON_H,
        state=StateReader.NEMOTRON_MAMBA2,
    ),
    Family(
        "nemotron_nas",
        ("nemotron-nas",),
        proof="nemotron_nas (per-layer blocks, no-op attention)",
        layers=LayerRule.NAS_BLOCKS,
    ),
    Family(
        "qwen3_next",
        ("qwen3_next",),
        proof="qwen3_next (Gated-DeltaNet hybrid)",
        state=StateReader.GATED_DELTANET,
        qwen_gated_deltanet=True,
    ),
    Family(
        "qwen3_5",
        ("qwen3_5_text",),
        proof="qwen3_5_text (Gated-DeltaNet hybrid, float32 state)",
        state=StateReader.GATED_DELTANET,
        qwen_gated_deltanet=True,
    ),
    Family(
        "qwen3_5_moe",
        ("qwen3_5_moe_text",),
        proof="qwen3_5_moe_text (Gated-DeltaNet hybrid, MoE, float32 state)",
        state=StateReader.GATED_DELTANET,
        qwen_gated_deltanet=True,
    ),
    Family(
        "qwen4_exp",
        ("qwen4_exp_text",),
        pool_check="qwen4_exp (QSA, compressed keys, raw-key ring, Gated-DeltaNet, n-gram state)",
        state=StateReader.GATED_DELTANET,
        qwen_gated_deltanet=True,
    ),
    Family(
        "olmo_hybrid",
        ("olmo_hybrid",),
        proof="olmo_hybrid (Gated-DeltaNet hybrid, head size from hidden size)",
        defaults=ClassDefaults.OLMO_HYBRID,
        state=StateReader.GATED_DELTANET,
        head_size_from_hidden=True,
    ),
    Family(
        "glm5_next",
        ("glm5_next_text", "glm5_next"),
        pool_check="glm5_next (sparse NoPE MLA, pooled indexer, tail ring, KDA)",
        defaults=ClassDefaults.GLM5_NEXT,
        state=StateReader.KDA,
        pooled_ring=RingKind.KPOOL,
    ),
    Family(
        "granitemoehybrid",
        ("granitemoehybrid",),
        proof="granitemoehybrid (Mamba-2 hybrid, layer_types)",
        state=StateReader.GRANITE_MAMBA2,
    ),
    Family(
        "jamba",
        ("jamba",),
        proof="jamba (Mamba-1 hybrid, attention period)",
        layers=LayerRule.PERIODIC,
        state=StateReader.JAMBA_MAMBA1,
    ),
    Family(
        "falcon_h1",
        ("falcon_h1",),
        proof="falcon_h1 (parallel attention + Mamba-2)",
        layers=LayerRule.PARALLEL,
        state=StateReader.GRANITE_MAMBA2,
    ),
    Family("lfm2", ("lfm2",), proof="lfm2 (short-convolution hybrid)", state=StateReader.SHORT_CONV),
    Family("lfm2_moe", ("lfm2_moe",), proof="lfm2_moe (short-convolution hybrid, MoE)", state=StateReader.SHORT_CONV),
    Family(
        "zamba2",
        ("zamba2",),
        proof="zamba2 (Mamba-2 with shared attention blocks)",
        layers=LayerRule.SHARED_ATTENTION,
        state=StateReader.ZAMBA_MAMBA2,
    ),
)

_BY_TEXT_TYPE = {model_type: family for family in FAMILIES for model_type in family.text_types}
if len(_BY_TEXT_TYPE) != sum(len(family.text_types) for family in FAMILIES):
    raise AssertionError("a model_type is in two families")

# The views tests/vllm/check_kv_geometry.py compares with the families it checks.
PROVED_LAYOUTS = {family.text_types[0]: family.proof for family in FAMILIES if family.proof}
POOL_CHECKED_LAYOUTS = {family.text_types[0]: family.pool_check for family in FAMILIES if family.pool_check}


def family_of(model_type: object) -> Family | None:
    """The family of a text config's model_type; None for one sparkfleet has no entry for."""
    return _BY_TEXT_TYPE.get(str(model_type)) if isinstance(model_type, str) else None


def family_of_checkpoint(model_type: str | None) -> Family | None:
    """The family of a checkpoint's own model_type: its text config's where it wraps a language model (qwen3_5_moe
    holds qwen3_5_moe_text)."""
    if model_type is None:
        return None
    return family_of(model_type) or family_of(f"{model_type}_text")


def layer_rule(text: dict[str, object]) -> LayerRule:
    family = family_of(text.get("model_type"))
    return family.layers if family else LayerRule.FIELDS
