"""The weights of one decoder layer's token mixer, by its kind, as vLLM 0.32 builds it: attention (standard, gated or
MLA), a sparse-attention indexer beside it, Gated-DeltaNet and Kimi Delta Attention. Pure; for config arithmetic
(sparkfleet.reading.arithmetic), where no safetensors header was read. A kind it cannot count raises KeyError
naming it."""

from __future__ import annotations

from typing import Any

from ..models import StateLayerKind, StateLayers

# Model types whose full-attention query projection also yields a sigmoid output gate, the width of the query again,
# where the config does not say (models/qwen3_next.py: getattr(config, "attn_output_gate", True); Qwen3.5 reuses it).
OUTPUT_GATED_TYPES = ("qwen3_next", "qwen3_5")


def positive(text: dict[str, Any], *keys: str) -> int:
    """The first of `keys` the config gives as a positive integer, else 0: the one reading of a size field the config
    arithmetic uses (sparkfleet.reading.arithmetic, hybrid)."""
    for key in keys:
        value = text.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def attention(text: dict[str, Any], hidden: int, heads: int) -> int:
    """One attention layer's projections: MLA's low-rank query and latent (models/deepseek_v2.py), or query, key,
    value and output, the query doubled where it carries an output gate."""
    rank = positive(text, "kv_lora_rank")
    if rank:
        nope, rope, value = (positive(text, k) for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
        q_rank = positive(text, "q_lora_rank")
        query = hidden * q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        return query + hidden * (rank + rope) + rank * heads * (nope + value) + heads * value * hidden
    kv_heads = positive(text, "num_key_value_heads", "num_kv_heads") or heads
    head_dim = positive(text, "head_dim") or hidden // heads
    gated = text.get("attn_output_gate", str(text.get("model_type", "")).startswith(OUTPUT_GATED_TYPES))
    return (3 if gated else 2) * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim


def indexer(text: dict[str, Any], hidden: int) -> int:
    """A sparse-attention indexer's weights (DeepSeek-V3.2 / GLM-5.x, models/deepseek_v32/attention.py; GLM-5-Next,
    models/glm5next/common/attention.py): its query from the MLA's low-rank query (wq_b), one key and one weight a
    head from the hidden state (wk_weights_proj), and GLM-5-Next's pooling gate where keys are pooled."""
    if not text.get("index_topk"):
        return 0
    heads, width = positive(text, "index_n_heads"), positive(text, "index_head_dim") or 128
    q_rank = positive(text, "q_lora_rank") or hidden
    gate = width * hidden if positive(text, "index_kpool") > 1 else 0
    return q_rank * heads * width + hidden * (width + heads) + gate


def state_mixer(state: StateLayers, text: dict[str, Any], hidden: int) -> int:
    """One linear-attention layer's weights, from the state reader's shape (sparkfleet.reading.states)."""
    if state.kind is StateLayerKind.GATED_DELTANET:
        # models/../mamba/gdn/qwen_gdn_linear_attn.py: q, k, v and the output gate z from the hidden state, b and a a
        # value head each, the convolution over q, k and v, then the value width back to the hidden size.
        heads, value_width = state.state_shape[0], state.state_shape[1]
        value = heads * value_width
        return hidden * (state.conv_dim + value) + hidden * 2 * heads + state.conv_dim * state.conv_kernel + value * hidden
    if state.kind is StateLayerKind.KDA:
        # models/glm5next/common/kda.py: q, k, v (heads x width each), beta a head, the forget and output gates'
        # low-rank pairs (hidden -> width -> heads x width), three convolutions, and the output projection.
        heads, width = state.state_shape[0], state.state_shape[1]
        projection = heads * width
        return (
            hidden * (3 * projection + heads + 2 * width)
            + 2 * width * projection
            + state.conv_dim * state.conv_kernel
            + projection * hidden
        )
    raise KeyError(f"{state.kind.value} state layers")


def compressed_attention(text: dict[str, Any], hidden: int, ratio: int) -> int:
    """One DeepSeek-V4 attention layer (transformers' and vLLM's deepseek_v4): a low-rank query, one KV head, a
    grouped low-rank output and a sink a head; a layer that compresses every `ratio` tokens adds its compressor's key
    and gate projections (overlapping windows at ratio 4 double their width) with a position bias a slot, and at
    ratio 4 an indexer of its own (keys and gates the same way, a query from the low-rank query, a weight a head)."""
    heads, width, q_rank = positive(text, "num_attention_heads"), positive(text, "head_dim"), positive(text, "q_lora_rank")
    groups, out_rank = positive(text, "o_groups"), positive(text, "o_lora_rank")
    total = hidden * q_rank + q_rank * heads * width + hidden * width + heads
    total += groups * out_rank * (heads * width // groups) + hidden * groups * out_rank
    if not ratio:
        return total
    overlap = 2 if ratio == 4 else 1
    total += 2 * overlap * width * hidden + ratio * overlap * width
    if ratio == 4:
        index_width, index_heads = positive(text, "index_head_dim") or 128, positive(text, "index_n_heads")
        total += 2 * overlap * index_width * hidden + ratio * overlap * index_width
        total += index_heads * index_width * q_rank + index_heads * hidden
    return total


def hyper_connections(text: dict[str, Any], hidden: int) -> int:
    """A decoder layer's manifold hyper-connections (GLM-5-Next's mhc, models/glm5next/common/model.py): before
    attention and before the MLP, a float32 mix of (2 + n) x n weights over the n residual streams, with its base and
    three scales."""
    streams = positive(text, "hc_mult")
    # GLM-5-Next says mhc; DeepSeek-V4 builds them wherever it names hc_mult.
    if not (text.get("mhc", True) and streams):
        return 0
    mix = (2 + streams) * streams
    return 2 * (mix * streams * hidden + mix + 3)
