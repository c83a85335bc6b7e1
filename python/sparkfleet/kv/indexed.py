"""GLM-5-Next's and Qwen4-Exp's KV pool on GB10, the way vLLM 0.32 / 0.33 sizes and packs it.

Each indexed layer keeps three caches: its attention (GLM-5-Next's NoPE MLA latent, Qwen4-Exp's QSA keys and values),
the indexer's keys (one entry per group of tokens) and a ring of the raw keys still to be grouped. The ring's backend
asks for a block-outermost layout, so vLLM does not pad every page to one size: it packs them
(sparkfleet.kv.packed). The linear layers keep a state, padded to the attention page, and Qwen4-Exp's n-gram layers a
short convolution every rank holds whole.

vLLM first raises the block size until one attention page holds the largest state page
(platforms/interface.py _align_hybrid_block_size), in steps its backends take. tests/vllm/kv_indexed.py checks
this against vLLM's own block alignment, cache classes and packing on downscaled configs.
"""

from __future__ import annotations

import math

from ..errors import PlanError
from ..models import IndexedPool, ModelProfile, RingCache, RingKind, cdiv
from .cache import (
    MLA_HYBRID_ALIGNMENT,
    NO_CHECKPOINTS,
    GroupKind,
    StateCheckpoints,
    attention_bytes_per_token,
    kv_dtype_bytes,
    layer_state_bytes,
)
from .packed import CacheLayer, PackedKvGeometry, packed_groups

# The default cache block (config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE), kept where every backend takes it.
DEFAULT_CACHE_BLOCK = 16
# Smallest kernel block of the attention backend GB10 (SM 12.x) runs each family on: FlashInfer's sparse MLA for SM120
# (flashinfer_mla_sparse.py FlashInferMLASparseSM120Backend, multiples of 64), and Qwen4-Exp's QSA, which reads the
# manager's pages itself (models/qwen4_exp/nvidia/qsa.py, multiples of 16).
ATTENTION_KERNEL_BLOCK = {RingKind.KPOOL: 64, RingKind.QSA: 16}
# DeepGEMM's paged MQA logits take 64-entry pages on compute capability family 120 (utils/deep_gemm.py
# get_paged_mqa_page_sizes), so GLM-5-Next's indexer backend needs blocks of 64 pools (Glm5NextIndexerBackend).
PAGED_MQA_ENTRIES_GB10 = 64
RING_DTYPE_BYTES = 2  # the rings are bfloat16 whatever the KV cache dtype


def ring_tokens(ring: RingCache, speculative_tokens: int) -> int:
    """The ring holds the open group and every draft a speculative step stores before acceptance: whole groups, a
    power of two of them for GLM-5-Next (Glm5NextTailCache / QSAKeyStateCache.get_kv_cache_spec)."""
    groups = cdiv(ring.group_tokens + speculative_tokens, ring.group_tokens)
    if ring.kind is RingKind.KPOOL:
        groups = 1 << (groups - 1).bit_length()
    return ring.group_tokens * groups


def ring_page_bytes(ring: RingCache, speculative_tokens: int) -> int:
    """GLM-5-Next keeps a raw key and its gate score per token, Qwen4-Exp the raw key (and its M-RoPE positions)."""
    heads = 2 if ring.kind is RingKind.KPOOL else 1
    return heads * ring_tokens(ring, speculative_tokens) * ring.head_size * RING_DTYPE_BYTES


def hybrid_block_size(
    profile: ModelProfile, ring: RingCache, attention_per_token: int, state_page: int, checkpoint_alignment: int = 1
) -> int:
    """platforms/interface.py update_block_size_for_backend: first a block every backend takes (the default 16 where
    all take it, else the least common one), then _align_hybrid_block_size: the smallest multiple of the larger of
    that and the first backend's kernel block (and of 128 for MLA) whose attention page holds the state page, rounded
    up to a multiple of every backend's kernel block."""
    kernel = ATTENTION_KERNEL_BLOCK[ring.kind]
    every_backend = math.lcm(kernel, PAGED_MQA_ENTRIES_GB10 * ring.group_tokens if ring.kind is RingKind.KPOOL else 1)
    first = max(DEFAULT_CACHE_BLOCK, every_backend)
    step = max(kernel, first, MLA_HYBRID_ALIGNMENT if profile.mla is not None else 0)
    # Prefill checkpoints land on block boundaries (vLLM 0.33, align mode).
    step = math.lcm(step, checkpoint_alignment)
    block = step * max(1, cdiv(state_page, step * attention_per_token))
    return every_backend * cdiv(block, every_backend)


def indexed_geometry(
    profile: ModelProfile,
    *,
    kv_cache_dtype: str,
    tensor_parallel: int = 1,
    speculative_tokens: int = 0,
    draft_layers: int = 0,
    prefix_caching: bool = True,
    checkpoints: StateCheckpoints = NO_CHECKPOINTS,
) -> PackedKvGeometry:
    """One rank's packed pool (pipeline stages are refused by the planner, as for DeepSeek-V4); `checkpoints` as
    kv.cache.state_checkpoints gives them for the platform and vLLM release."""
    if not isinstance(profile.kv_layout, IndexedPool):
        raise ValueError(f"{profile.id} keeps no raw-key ring: plan it with sparkfleet.kv.cache.geometry")
    ring = profile.kv_layout.ring
    # The attention head alone: the indexer's keys are a cache of their own.
    head = attention_bytes_per_token(profile, kv_dtype_bytes(kv_cache_dtype), tensor_parallel, GroupKind.FULL)
    head -= profile.indexer_bytes_per_token
    state = layer_state_bytes(profile.state_layers, tensor_parallel, speculative_tokens)
    replicated = layer_state_bytes(profile.replicated_state_layers, 1, speculative_tokens)
    exported = checkpoints if prefix_caching else NO_CHECKPOINTS
    block = hybrid_block_size(profile, ring, head, max(state, replicated), exported.alignment)
    tokens = ring_tokens(ring, speculative_tokens)
    # vLLM asserts both when it builds the caches (qsa_cache.py _QSAStateCache, Glm5NextTailCache / QSAKeyStateCache).
    if block % ring.group_tokens:
        raise PlanError(
            "model",
            f"{profile.id}: its indexer groups {ring.group_tokens} tokens, which does not divide the {block}-token block "
            "vLLM picks for it: vLLM refuses to start",
        )
    if block % tokens:
        raise PlanError(
            "intent.num_speculative_tokens",
            f"{speculative_tokens} speculative tokens: {profile.id}'s raw-key ring of {tokens} tokens (groups of "
            f"{ring.group_tokens}) does not divide its {block}-token block, which vLLM refuses at start",
            ("fewer speculative tokens",),
        )
    attention_page = block * head
    indexer_page = block // ring.group_tokens * ring.indexer_entry_bytes
    indexed_layer = [
        CacheLayer(GroupKind.FULL, block, None, attention_page),
        CacheLayer(GroupKind.FULL, block, None, indexer_page),
        CacheLayer(GroupKind.RING, tokens, None, ring_page_bytes(ring, speculative_tokens)),
    ]
    layers = indexed_layer * (profile.full_attention_layers + draft_layers)
    # Every state page is padded to the attention page (mamba_page_size_padded).
    for states, whole in ((profile.state_layers, False), (profile.replicated_state_layers, True)):
        if states is not None:
            layers += [CacheLayer(GroupKind.STATE, block, None, attention_page, replicated=whole)] * states.count
    live = 2 + exported.blocks if prefix_caching else 1
    return PackedKvGeometry(packed_groups(layers), block_size=block, state_blocks_per_request=live + speculative_tokens)
