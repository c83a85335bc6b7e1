"""Parameter counts from a config alone, for a checkpoint whose safetensors headers were not read (a directory with
only its config.json and a size given by --weights-gib): the attention and MLP arithmetic of decoder-only layouts,
standard and MLA attention, dense and MoE MLPs with shared experts. Pure; a layout it cannot count is named."""

from __future__ import annotations

from typing import Any

from ..errors import PlanError
from ..models import ModelProfile
from ..models.speed import DecodeReads, Parameters
from .config import EXPERTS_KEYS, LAYERS_KEYS, TOP_K_KEYS, text_config

# How a profile's parameters read when no header was: its speed prediction says so.
CONFIG_ARITHMETIC = "config arithmetic"
# Layer kinds whose weights this arithmetic does not count (their shapes live in per-family code).
COUNTED_KINDS = frozenset({"attention", "full_attention", "sliding_attention", "global", "local", "sliding"})


def _int(text: dict[str, Any], *keys: str) -> int:
    for key in keys:
        value = text.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def _attention(text: dict[str, Any], hidden: int, heads: int) -> int:
    """Weights of one attention layer's projections."""
    rank = _int(text, "kv_lora_rank")
    if rank:
        nope, rope, value = (_int(text, k) for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
        q_rank = _int(text, "q_lora_rank")
        query = hidden * q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        return query + hidden * (rank + rope) + rank * heads * (nope + value) + heads * value * hidden
    kv_heads = _int(text, "num_key_value_heads", "num_kv_heads") or heads
    head_dim = _int(text, "head_dim") or hidden // heads
    return 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim


def _uncounted_kinds(text: dict[str, Any]) -> set[str]:
    kinds = text.get("layer_types") or text.get("layers_block_type") or ()
    pattern = text.get("hybrid_override_pattern")
    found = {str(kind) for kind in kinds} - COUNTED_KINDS
    if isinstance(pattern, str) and set(pattern) - {"*", "-"}:
        found.add(f"hybrid_override_pattern {pattern[:12]}...")
    if text.get("linear_num_value_heads") or text.get("ssm_cfg") or text.get("mamba_d_state"):
        found.add("linear attention / state-space")
    return found


def parameters_from_config(config: dict[str, Any], source: str) -> Parameters:
    """Total and active weights of a decoder-only checkpoint by its config's arithmetic (MTP layers and towers not
    counted: a text decode step does not read them)."""
    text = text_config(config)
    hidden, layers = _int(text, "hidden_size", "d_model", "dim"), _int(text, *LAYERS_KEYS)
    heads, vocab = _int(text, "num_attention_heads", "n_heads"), _int(text, "vocab_size")
    if not (hidden and layers and heads and vocab):
        raise PlanError("model", f"{source}: config arithmetic needs hidden_size, num_hidden_layers, heads and vocab_size")
    uncounted = _uncounted_kinds(text)
    if uncounted:
        raise PlanError("model", f"{source}: config arithmetic does not count {', '.join(sorted(uncounted))} layers")
    experts, top_k = _int(text, *EXPERTS_KEYS), _int(text, *TOP_K_KEYS)
    dense_width = _int(text, "intermediate_size", "ffn_dim")
    expert_width = _int(text, "moe_intermediate_size", "expert_intermediate_size") or dense_width
    if not dense_width and not (experts and expert_width):
        raise PlanError("model", f"{source}: config arithmetic needs intermediate_size or moe_intermediate_size")
    moe_layers = 0
    if experts:
        if not top_k or top_k >= experts:
            raise PlanError("model", f"{source}: {experts} experts but no top-k under it ({' / '.join(TOP_K_KEYS)})")
        only_dense = text.get("mlp_only_layers") or []
        moe_layers = layers - _int(text, "first_k_dense_replace") - len(only_dense)
    expert = 3 * hidden * expert_width
    shared = _int(text, "n_shared_experts") * expert + 3 * hidden * _int(text, "shared_expert_intermediate_size")
    tied = bool(text.get("tie_word_embeddings", False))
    total = vocab * hidden * (1 if tied else 2) + layers * _attention(text, hidden, heads)
    total += (layers - moe_layers) * 3 * hidden * dense_width
    total += moe_layers * (experts * expert + shared + experts * hidden)
    idle = moe_layers * (experts - top_k) * expert
    return Parameters(
        total_b=total / 1e9,
        active_b=(total - idle) / 1e9,
        experts=experts or None,
        experts_per_token=top_k or None,
        tied_embeddings=tied,
    )


def speed_reading(profile: ModelProfile, config: dict[str, Any], reads: DecodeReads | None, gap: str) -> ModelProfile:
    """The profile with what its speed prediction reads: the headers' reading, else the config's arithmetic (marked
    so in its source), else why neither is known."""
    if reads is not None:
        return profile.model_copy(update={"decode_reads": reads})
    try:
        counted = parameters_from_config(config, profile.id)
    except PlanError as exc:
        return profile.model_copy(update={"decode_reads_gap": f"{gap}; {exc.problem}"})
    source = f"{CONFIG_ARITHMETIC} over {profile.id}'s config.json ({gap})"
    return profile.model_copy(update={"parameters": counted, "sources": profile.sources | {"parameters": source}})
