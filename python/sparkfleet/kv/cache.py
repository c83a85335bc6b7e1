"""KV-cache geometry the way vLLM builds it: pages, groups, blocks, tokens (vllm-semantics §2).

Pure arithmetic. For hybrid models vLLM raises the attention block size until one attention page
holds one state page; where layer kinds differ in page size (Gemma-4's global layers) it raises the
block size of the smaller page, or pads it, until every page is equal. It then splits layers into
groups of equal size that share one block pool, and charges each request blocks in every group.
Capacity in tokens is reported differently before and after 0.21.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from ..models import IndexedPool, ModelProfile, Platform, RingKind, StateLayerKind, StateLayers, cdiv
from ..reading.families import family_of_checkpoint
from ..versions import VllmVersion, kv_tokens_from_concurrency

DEFAULT_BLOCK_SIZE = 16
# vLLM's CPU platform starts from 128-token blocks, and 16 for MLA, whose reference CPU decode kernel only takes 16;
# on an x86 CPU with AMX tiles vLLM runs its AMX MLA kernel instead and keeps 128 (platforms/cpu.py, 0.32).
CPU_BLOCK_SIZE = 128


def base_block_size(platform: Platform, mla: bool, amx: bool = False) -> int:
    """The block size vLLM starts from before any hybrid alignment (tests/vllm/check_kv_geometry.py)."""
    if platform is not Platform.CPU:
        return DEFAULT_BLOCK_SIZE
    return DEFAULT_BLOCK_SIZE if mla and not amx else CPU_BLOCK_SIZE


# Kernel block alignment on the CUDA attention backends used on GB10 (Triton / FlashInfer: 16);
# MLA hybrids need a multiple of 128 (platforms/interface.py _align_hybrid_block_size, 0.32).
KERNEL_BLOCK_ALIGNMENT = 16
MLA_HYBRID_ALIGNMENT = 128


class GroupKind(str, Enum):
    FULL = "full"
    SLIDING = "sliding"
    STATE = "state"
    # A raw-key ring (CircularBufferSpec): one block per request for the request's life.
    RING = "ring"


class KvPool(Protocol):
    """What the budget and the plan read of a rank's pool, however vLLM lays it out (kv.packed for DeepSeek-V4)."""

    @property
    def bytes_per_block(self) -> int: ...

    @property
    def block_size(self) -> int: ...

    def num_blocks(self, kv_bytes: int) -> int: ...

    def bytes_for_requests(self, requests: int, max_model_len: int, max_num_batched_tokens: int) -> int: ...

    def max_concurrency(self, kv_bytes: int, max_model_len: int, max_num_batched_tokens: int) -> float: ...

    def reported_tokens(
        self, kv_bytes: int, max_model_len: int, max_num_batched_tokens: int, version: VllmVersion
    ) -> int: ...


@dataclass(frozen=True)
class KvGeometry:
    """How one rank's KV pool is laid out for a model, dtype and parallel layout."""

    # Per layer per token on this rank, for each attention kind the model has (FULL, SLIDING).
    bytes_per_token_by_kind: dict[GroupKind, int]
    # Layers of each kind on this rank (one pipeline stage).
    layers_by_kind: dict[GroupKind, int]
    state_bytes_per_layer: int
    # Tokens per block of each attention kind after page unification.
    block_size_by_kind: dict[GroupKind, int]
    page_bytes: int
    group_size: int
    groups: tuple[GroupKind, ...]
    sliding_window: int | None
    state_blocks_per_request: int
    # Indexer keys beyond the layers' pages, per token on this rank: those of a sparse MLA whose layers do not all keep
    # one (sparse_mla_geometry); every block id holds them beside its pages (vLLM's UniformTypeKVCacheSpecs).
    indexer_bytes_per_token: int = 0

    @property
    def block_size(self) -> int:
        """The block size vLLM logs: that of the full-attention layers, else the first attention kind."""
        return self.block_size_by_kind.get(GroupKind.FULL) or next(iter(self.block_size_by_kind.values()))

    @property
    def attention_bytes_per_token_per_layer(self) -> int:
        return max(self.bytes_per_token_by_kind.values())

    @property
    def bytes_per_token(self) -> int:
        """KV bytes one token costs on this rank, over every attention layer (state layers excluded)."""
        layers = sum(self.bytes_per_token_by_kind[kind] * self.layers_by_kind[kind] for kind in self.bytes_per_token_by_kind)
        return layers + self.indexer_bytes_per_token

    @property
    def bytes_per_block(self) -> int:
        """One block id in the shared pool backs `group_size` layers of one page each (and any indexer keys)."""
        return self.group_size * self.page_bytes + self.block_size * self.indexer_bytes_per_token

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        total = 0
        for kind in self.groups:
            if kind is GroupKind.FULL:
                total += cdiv(max_model_len, self.block_size_by_kind[kind])
            elif kind is GroupKind.SLIDING:
                window = self.sliding_window or max_model_len
                span = min(window - 1 + max_num_batched_tokens, max_model_len)
                total += cdiv(span, self.block_size_by_kind[kind]) + 1
            else:
                total += self.state_blocks_per_request
        return total

    def num_blocks(self, kv_bytes: int) -> int:
        return kv_bytes // self.bytes_per_block

    def bytes_for_requests(self, requests: int, max_model_len: int, max_num_batched_tokens: int) -> int:
        blocks = requests * self.blocks_per_request(max_model_len, max_num_batched_tokens)
        return blocks * self.bytes_per_block

    def max_concurrency(self, kv_bytes: int, max_model_len: int, max_num_batched_tokens: int) -> float:
        per_request = self.blocks_per_request(max_model_len, max_num_batched_tokens)
        return self.num_blocks(kv_bytes) / per_request

    def reported_tokens(self, kv_bytes: int, max_model_len: int, max_num_batched_tokens: int, version: VllmVersion) -> int:
        """The "KV cache size: N tokens" figure vLLM logs at start-up for this pool."""
        if kv_tokens_from_concurrency(version):
            concurrency = self.max_concurrency(kv_bytes, max_model_len, max_num_batched_tokens)
            return int(concurrency * max_model_len)
        return self.num_blocks(kv_bytes) // len(self.groups) * self.block_size


def kv_dtype_bytes(kv_cache_dtype: str) -> int:
    """fp8 variants store one byte per element; "auto" follows the bf16 / fp16 model dtype (§2.3)."""
    return 1 if kv_cache_dtype.startswith("fp8") else 2


def attention_bytes_per_token(profile: ModelProfile, dtype_bytes: int, tensor_parallel: int, kind: GroupKind) -> int:
    """Per attention layer of one kind on one rank (§2.1, §2.2): MLA keeps one latent, replicated across TP.

    Full-attention layers may have a shape of their own (Gemma-4's global layers). Layers whose V is K
    (attention_k_eq_v) still hold a K and a V page: vLLM 0.32's gemma4.py writes K into both slots.
    """
    indexer = profile.indexer_bytes_per_token if kind is GroupKind.FULL else 0
    if profile.mla is not None:
        return (profile.mla.kv_lora_rank + profile.mla.qk_rope_head_dim) * dtype_bytes + indexer
    shape = profile.full_attention_shape if kind is GroupKind.FULL else None
    kv_heads = shape.kv_heads if shape else profile.kv_heads
    head_dim = shape.head_dim if shape else profile.head_dim
    heads_per_rank = max(1, kv_heads // tensor_parallel)
    return 2 * heads_per_rank * head_dim * dtype_bytes + indexer


def state_bytes(profile: ModelProfile, tensor_parallel: int, speculative_tokens: int) -> int:
    """Per state layer per sequence on one rank (§2.5): conv state + recurrent state."""
    return layer_state_bytes(profile.state_layers, tensor_parallel, speculative_tokens)


def layer_state_bytes(layers: StateLayers | None, tensor_parallel: int, speculative_tokens: int) -> int:
    """One state layer's conv state + recurrent state per sequence, on one of `tensor_parallel` ranks."""
    if layers is None:
        return 0
    window = layers.conv_kernel - 1 + (speculative_tokens if layers.conv_holds_speculative_tokens else 0)
    conv = cdiv(layers.conv_dim, tensor_parallel) * window
    recurrent = 0
    if layers.state_shape:
        first, *rest = layers.state_shape
        recurrent = cdiv(first, tensor_parallel) * math.prod(rest)
    return conv * layers.conv_dtype_bytes + recurrent * layers.state_dtype_bytes


def _group_layout(buckets: dict[GroupKind, int]) -> tuple[int, tuple[GroupKind, ...]]:
    """vLLM's uniform-page grouping (kv_cache_utils, 0.32): equal-sized groups, padded."""
    counts = [n for n in buckets.values() if n > 0]
    group_size = min(counts)
    if max(counts) < group_size * 1.5:
        group_size = max(counts)
    groups: list[GroupKind] = []
    for kind, count in buckets.items():
        groups.extend([kind] * cdiv(count, group_size) if count else [])
    return group_size, tuple(groups)


@dataclass(frozen=True)
class StateCheckpoints:
    """What a state group's prefill checkpoints cost in align mode (prefix caching): blocks per request beyond the
    live states, and the token grid the hybrid block then keeps."""

    blocks: int = 0
    alignment: int = 1


NO_CHECKPOINTS = StateCheckpoints()
# MambaMixer2 exports its block-boundary state from inside a prefill on every platform from vLLM 0.32.0 on
# (layers/mamba/mamba_mixer2.py get_kv_cache_spec; read in the 0.17.0 .. 0.33.0 wheels on PyPI).
MAMBA2_CHECKPOINTS_FROM = "0.32.0"
# FlashInfer's Gated-DeltaNet prefill emits states every 64 tokens (vLLM 0.33 v1/attention/backends/gdn_attn.py).
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64


def state_checkpoints(profile: ModelProfile, platform: Platform, version: VllmVersion) -> StateCheckpoints:
    """- Mamba-2: one block, any token, on every platform (vLLM 0.32 on).
    - Qwen's Gated-DeltaNet with 128-wide key heads, vLLM 0.33 on GB10 (CUDA 13, SM 12.x): FlashInfer's prefill exports
      one block on a 64-token grid the hybrid block then keeps (layers/mamba/gdn/qwen_gdn_linear_attn.py
      _resolve_gdn_prefill_backend, get_kv_cache_spec; platforms/interface.py _align_hybrid_block_size). Qwen4-Exp's
      n-gram convolution exports one on the same grid (models/qwen4_exp/nvidia/ple_layer.py).
    - GLM-5-Next's KDA on GB10, bf16 with 128-wide heads: FlashKDA exports one block and asks for no grid
      (models/glm5next/common/kda.py _resolve_kda_prefill_backend, get_kv_cache_spec); its gate lower bound is always
      set (Glm5NextTextConfig gives -5.0).
    """
    state = profile.state_layers
    if state is None:
        return NO_CHECKPOINTS
    if state.kind is StateLayerKind.MAMBA2 and version.at_least(MAMBA2_CHECKPOINTS_FROM):
        return StateCheckpoints(blocks=1)
    gb10 = platform is Platform.GB10
    family = family_of_checkpoint(profile.model_type)
    qwen = family is not None and family.qwen_gated_deltanet and version.at_least("0.33.0")
    if gb10 and qwen and state.kind is StateLayerKind.GATED_DELTANET and state.state_shape[2:] == (128,):
        return StateCheckpoints(blocks=1, alignment=FLASHINFER_GDN_CHECKPOINT_ALIGNMENT)
    glm = isinstance(profile.kv_layout, IndexedPool) and profile.kv_layout.ring.kind is RingKind.KPOOL
    if (
        gb10
        and glm
        and state.kind is StateLayerKind.KDA
        and state.state_shape[1:2] == (128,)
        and profile.dtype == "bfloat16"
    ):
        return StateCheckpoints(blocks=1)
    return NO_CHECKPOINTS


def _unified_blocks(
    attention: dict[GroupKind, int],
    state: int,
    base_block_size: int,
    mla: bool,
    head_bytes: dict[GroupKind, int],
    *,
    checkpoint_alignment: int = 1,
) -> tuple[dict[GroupKind, int], int]:
    """Tokens per block of each attention kind and the one page size every layer then has (§2.5, §2.6).

    A hybrid raises the block size until the attention page holds the state page (the state page is
    padded to it), sized from `head_bytes`, the attention bytes per token without an indexer's keys; kinds
    with a smaller page get a block size raised by the ratio when it divides the
    largest page, else their page is padded.
    """
    block = base_block_size
    if state:
        # The hybrid alignment sizes blocks from the model's main attention shape (ModelConfig's heads).
        main = head_bytes.get(GroupKind.SLIDING) or head_bytes[GroupKind.FULL]
        alignment = math.lcm(
            max(MLA_HYBRID_ALIGNMENT if mla else KERNEL_BLOCK_ALIGNMENT, base_block_size), checkpoint_alignment
        )
        block = max(block, alignment * cdiv(state, alignment * main))
    pages = {kind: block * per_token for kind, per_token in attention.items()}
    page = max([*pages.values(), state])
    sizes = {kind: block * page // pages[kind] if page % pages[kind] == 0 else block for kind in pages}
    return sizes, page


def geometry(
    profile: ModelProfile,
    *,
    kv_cache_dtype: str,
    tensor_parallel: int = 1,
    pipeline_parallel: int = 1,
    speculative_tokens: int = 0,
    draft_layers: int = 0,
    prefix_caching: bool = True,
    state_align_mode: bool = True,
    base_block_size: int = DEFAULT_BLOCK_SIZE,
    checkpoints: StateCheckpoints = NO_CHECKPOINTS,
) -> KvGeometry:
    """One rank's pool; `checkpoints` as state_checkpoints gives them for the platform and vLLM release."""
    dtype_bytes = kv_dtype_bytes(kv_cache_dtype)
    state = state_bytes(profile, tensor_parallel, speculative_tokens)

    def per_stage(layers: int) -> int:
        return cdiv(layers, pipeline_parallel) if layers else 0

    layers = {
        GroupKind.FULL: per_stage(profile.full_attention_layers + draft_layers),
        GroupKind.SLIDING: per_stage(profile.sliding_attention_layers),
    }
    attention = {
        kind: attention_bytes_per_token(profile, dtype_bytes, tensor_parallel, kind)
        for kind, count in layers.items()
        if count
    }
    # vLLM aligns a hybrid's block on the attention head alone (platforms/interface.py _align_hybrid_block_size): the
    # indexer's keys are a cache of their own.
    indexer = profile.indexer_bytes_per_token
    head_bytes = {kind: per_token - (indexer if kind is GroupKind.FULL else 0) for kind, per_token in attention.items()}
    # With prefix caching on, hybrid state uses "align" mode: two live states, a prefill checkpoint where the layer
    # exports one, plus speculative ones.
    align = prefix_caching and state_align_mode
    exported = checkpoints if align else NO_CHECKPOINTS
    block_sizes, page = _unified_blocks(
        attention,
        state,
        base_block_size,
        profile.mla is not None,
        head_bytes,
        checkpoint_alignment=exported.alignment,
    )
    buckets = {
        **layers,
        GroupKind.STATE: per_stage(profile.state_layers.count if profile.state_layers else 0),
    }
    group_size, groups = _group_layout(buckets)
    state_blocks = (2 + exported.blocks if align else 1) + speculative_tokens
    return KvGeometry(
        bytes_per_token_by_kind=attention,
        layers_by_kind={kind: count for kind, count in layers.items() if count},
        state_bytes_per_layer=state,
        block_size_by_kind=block_sizes,
        page_bytes=page,
        group_size=group_size,
        groups=groups,
        sliding_window=profile.sliding_window,
        state_blocks_per_request=state_blocks,
    )


def sparse_mla_geometry(
    profile: ModelProfile, *, record_bytes: int, block_size: int, pipeline_parallel: int = 1, draft_layers: int = 0
) -> KvGeometry:
    """One rank's pool of a sparse MLA on GB10 (sparkfleet.kv.sparse): one `record_bytes` record a token in every
    full-attention layer and an indexer key in each layer that keeps one, MTP layers included; all of them full
    attention in one block table, each layer with a page of its own size (UniformTypeKVCacheSpecs), every rank holding
    the whole latent."""
    layers = cdiv(profile.full_attention_layers + draft_layers, pipeline_parallel)
    indexers = cdiv(profile.indexers + draft_layers, pipeline_parallel)
    return KvGeometry(
        bytes_per_token_by_kind={GroupKind.FULL: record_bytes},
        layers_by_kind={GroupKind.FULL: layers},
        state_bytes_per_layer=0,
        block_size_by_kind={GroupKind.FULL: block_size},
        page_bytes=block_size * record_bytes,
        group_size=layers,
        groups=(GroupKind.FULL,),
        sliding_window=None,
        state_blocks_per_request=0,
        indexer_bytes_per_token=indexers * profile.indexer_bytes_per_token,
    )
