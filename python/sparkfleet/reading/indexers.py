"""What an indexed (sparse) attention layer keeps beside its KV cache: the indexer's own keys, and the ring of raw keys
still to be pooled or compressed. Pure; read as vLLM 0.32 builds the caches (the files named in each reader)."""

from __future__ import annotations

from typing import Any

from ..errors import PlanError
from ..models import RingCache, RingKind, cdiv
from .families import family_of


def indexer_bytes_per_token(text: dict[str, Any]) -> int:
    """The key cache a sparse-attention indexer keeps beside each full-attention layer, per token (rounded up).

    - GLM-5-Next and DeepSeek-V3.2 (index_topk): index_head_dim fp8 values and one float32 scale per 128 of them,
      one entry per index_kpool tokens (GLM-5-Next pools them; models/glm5next/common/attention.py
      Glm5NextIndexerCache over deepseek_v2.py DeepseekV32IndexerCache).
    - Qwen4-Exp (indexer_n_heads): one bfloat16 key of indexer_head_dim per indexer_compress_ratio tokens
      (models/qwen4_exp/common/qsa_cache.py QSACompressedKeyCache).
    The raw keys GLM-5-Next and Qwen4-Exp keep beside them are a ring (ring_cache).
    """
    # DeepSeek-V4 (and vLLM 0.32's V4.1) keep their indexer in the packed pool (sparkfleet.kv.packed).
    if text.get("index_topk") and not str(text.get("model_type")).startswith("deepseek_v4"):
        width = int(text.get("index_head_dim") or 128)
        return cdiv(width + width // 128 * 4, int(text.get("index_kpool") or 1))
    if text.get("indexer_n_heads") and text.get("indexer_head_dim"):
        return cdiv(int(text["indexer_head_dim"]) * 2, int(text.get("indexer_compress_ratio") or 1))
    return 0


def indexer_layer_count(text: dict[str, Any], layers: int) -> int | None:
    """The layers that build an indexer, when index_topk_freq or index_topk_pattern skips some: a layer reuses the
    previous top-k when max(i - index_skip_topk_offset + 1, 0) % index_topk_freq != 0 (the offset 2 where the config
    leaves it out), or its pattern letter is "S" (vLLM 0.32 / 0.33 models/deepseek_v2.py DeepseekV2MLAAttention, which
    builds no indexer and no DeepseekV32IndexerCache for it; MTP layers always build one). None: every layer builds one,
    or the model keeps its indexer elsewhere (DeepSeek-V4's packed pool, GLM-5-Next's pooled keys)."""
    model_type = str(text.get("model_type"))
    if not text.get("index_topk") or model_type.startswith(("deepseek_v4", "glm5_next")):
        return None
    freq = int(text.get("index_topk_freq") or 1)
    offset = text.get("index_skip_topk_offset")
    offset = 2 if offset is None else int(offset)
    pattern = text.get("index_topk_pattern")
    if isinstance(pattern, str):
        kept = sum(1 for i in range(layers) if not (i < len(pattern) and pattern[i] == "S"))
    else:
        kept = sum(1 for i in range(layers) if max(i - offset + 1, 0) % freq == 0)
    return None if kept == layers else kept


def ring_cache(text: dict[str, Any], full: int, multimodal: bool) -> RingCache | None:
    """The raw keys each indexed layer keeps until its group of tokens is pooled or compressed:
    - GLM-5-Next's layers with an indexer (models/glm5next/common/attention.py Glm5NextTailCache): index_head_dim wide,
      index_kpool tokens a group;
    - Qwen4-Exp's QSA layers (qsa_cache.py QSAKeyStateCache): indexer_head_dim wide, indexer_compress_ratio tokens a
      group. A multimodal model keeps its three M-RoPE positions after the key, as four bfloat16 each (vLLM strips the
      rope sections of the text-only class, models/config.py _strip_qwen4_exp_mrope).
    DeepSeek-V3.2's indexer keeps none."""
    if not full:
        return None
    family = family_of(text.get("model_type"))
    if family and family.pooled_ring is RingKind.KPOOL and text.get("index_topk"):
        width = int(text.get("index_head_dim") or 128)
        kind, group, entry = RingKind.KPOOL, text.get("index_kpool"), width + width // 128 * 4
    elif text.get("indexer_n_heads") and text.get("indexer_head_dim"):
        kind, group, width = RingKind.QSA, text.get("indexer_compress_ratio"), int(text["indexer_head_dim"])
        entry = width * 2
        rope = text.get("rope_parameters") or text.get("rope_scaling") or {}
        if multimodal and isinstance(rope, dict) and rope.get("mrope_section"):
            width = cdiv(width, 4) * 4 + 3 * 4
    else:
        return None
    field = "index_kpool" if kind is RingKind.KPOOL else "indexer_compress_ratio"
    if not (isinstance(group, int) and not isinstance(group, bool) and group > 1):
        # Both caches assert a group of more than one token (Glm5NextTailCache, QSAKeyStateCache's ring).
        raise PlanError("model", f"{field} {group!r}: an indexed layer's raw-key ring groups at least 2 tokens")
    return RingCache(kind=kind, layers=full, head_size=width, group_tokens=group, indexer_entry_bytes=entry)
