"""Pools vLLM 0.32 / 0.33 packs from pages of several sizes, and DeepSeek-V4's (docs/research/deepseek-v4-kv-layout.md).

Every layer keeps a 64-token-block sliding-window cache; a layer with compress ratio 4 or 128 also keeps a
compressed MLA cache (one 584-byte slot per `ratio` tokens, in 256-token blocks) and an fp32 compressor
state, and a ratio-4 layer an FP8 indexer key cache and its compressor state. Pages differ in size, so vLLM
does not unify them: it buckets layers of one kind, block size and window, splits the balanced buckets into
groups of equal repeats (kv_cache_utils._get_packed_kv_cache_groups), and strides every block of the one pool
by the widest group. tests/vllm/check_kv_geometry.py builds vLLM's own model and KV cache config for a
downscaled real config and compares them with this. sparkfleet.kv.indexed lays out GLM-5-Next's and Qwen4-Exp's caches
for the same packing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..errors import PlanError
from ..models import CompressedMlaShape, cdiv
from ..versions import VllmVersion, kv_tokens_from_concurrency
from .cache import GroupKind

# The sparse MLA and indexer backends take only 256-token blocks (CUDA and CPU alike; the CPU platform forces it).
BLOCK_SIZE = 256
# DeepseekV4SWACache's own block size, and fp8_ds_mla's slot: 448 B NoPE + 128 B RoPE + 8 B scales, in pages
# aligned to the decode kernel's 576-byte stride.
WINDOW_BLOCK_SIZE = 64
SLOT_BYTES = 584
PAGE_ALIGNMENT = 576
STATE_DTYPE_BYTES = 4  # the compressor states are float32
INDEXER_WINDOW = 8
INDEXER_STATE_BLOCK = 4


def round_up(value: int, multiple: int) -> int:
    return cdiv(value, multiple) * multiple


@dataclass(frozen=True)
class CacheLayer:
    """One registered KV cache of one decoder layer."""

    kind: GroupKind
    block_size: int
    window: int | None
    page_bytes: int
    # A state every tensor-parallel rank holds whole (MambaSpec.tp_replicated): vLLM never groups it with sharded ones.
    replicated: bool = False


@dataclass(frozen=True)
class PackedGroup:
    kind: GroupKind
    block_size: int
    window: int | None
    layers: int
    bytes_per_block: int


def _compressor_state(ratio: int, width: int) -> CacheLayer:
    """CompressorStateCache: a window of coff * ratio tokens (coff 2 for the overlapping ratio-4 compressor)."""
    coff = 2 if ratio == 4 else 1
    block = 4 if ratio == 4 else 8
    page = round_up(block * 2 * coff * width * STATE_DTYPE_BYTES, PAGE_ALIGNMENT)
    return CacheLayer(GroupKind.SLIDING, block, coff * ratio, page)


def cache_layers(shape: CompressedMlaShape, ratios: tuple[int, ...], draft_layers: int) -> list[CacheLayer]:
    """The caches vLLM registers, layer by layer (DeepseekV4Attention and the caches it builds)."""
    window = CacheLayer(
        GroupKind.SLIDING, WINDOW_BLOCK_SIZE, shape.sliding_window, round_up(WINDOW_BLOCK_SIZE * SLOT_BYTES, PAGE_ALIGNMENT)
    )
    # The FP8 indexer key: index_head_dim values and one fp32 scale per 128 of them.
    indexer_bytes = shape.index_head_dim + shape.index_head_dim // 128 * 4
    layers: list[CacheLayer] = []
    for ratio in ratios:
        layers.append(window)
        if ratio == 1:
            continue
        mla = round_up(BLOCK_SIZE // ratio * SLOT_BYTES, PAGE_ALIGNMENT)
        layers += [CacheLayer(GroupKind.FULL, BLOCK_SIZE, None, mla), _compressor_state(ratio, shape.head_dim)]
        if ratio == 4:
            indexer = round_up(BLOCK_SIZE // 4 * indexer_bytes, PAGE_ALIGNMENT)
            state = round_up(INDEXER_STATE_BLOCK * 2 * 2 * shape.index_head_dim * STATE_DTYPE_BYTES, PAGE_ALIGNMENT)
            layers += [
                CacheLayer(GroupKind.FULL, BLOCK_SIZE, None, indexer),
                CacheLayer(GroupKind.SLIDING, INDEXER_STATE_BLOCK, INDEXER_WINDOW, state),
            ]
    # A multi-token-prediction layer of the drafter keeps a window cache only (compress ratio 1).
    return layers + [window] * draft_layers


def approximate_gcd(values: list[int], lower_bound: int) -> int:
    """kv_cache_utils._approximate_gcd: the repeats per group that pad the buckets least; ties take the larger."""
    best, best_pad = lower_bound, None
    for d in range(max(1, lower_bound), max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad <= best_pad:
            best, best_pad = d, pad
    return best


BucketKey = tuple[GroupKind, int, int | None, bool, int | None]


def _bucket_key(layer: CacheLayer) -> BucketKey:
    """UniformTypeKVCacheSpecs.is_uniform_type: one block size and spec family; a state bucket also one page size."""
    page = layer.page_bytes if layer.kind is GroupKind.STATE else None
    return layer.kind, layer.block_size, layer.window, layer.replicated, page


def packed_groups(layers: list[CacheLayer]) -> tuple[PackedGroup, ...]:
    """kv_cache_utils._get_packed_kv_cache_groups (0.32; kv_cache_planning.py in 0.33).

    Layers of one kind, block size and window form a bucket. A bucket with as many layers of each page size is a
    repeating pattern; balanced buckets split into groups of the same number of repeats (the approximate gcd, at
    least the largest mixed-page bucket's). State and ring buckets (and windows, where nothing repeats) then split
    further, so that no group of them is wider than the widest group the others need.
    """
    buckets: dict[BucketKey, Counter[int]] = {}
    for layer in layers:
        buckets.setdefault(_bucket_key(layer), Counter())[layer.page_bytes] += 1
    balanced = {key: len(set(pages.values())) == 1 for key, pages in buckets.items()}
    repeats_of = {key: max(pages.values()) for key, pages in buckets.items()}
    floor = max((repeats_of[k] for k, pages in buckets.items() if balanced[k] and len(pages) > 1), default=0)
    repeats = approximate_gcd([repeats_of[k] for k in buckets if balanced[k]], floor) if floor else None

    def split(key: BucketKey) -> int:
        return cdiv(repeats_of[key], repeats) if balanced[key] and repeats else 1

    def is_state(key: BucketKey) -> bool:
        return key[0] in {GroupKind.STATE, GroupKind.RING} or (repeats is None and key[0] is GroupKind.SLIDING)

    def widest(pages: Counter[int], n: int) -> int:
        return sum(cdiv(count, n) * page for page, count in pages.items())

    anchor = max(widest(pages, pages.total() if is_state(key) else split(key)) for key, pages in buckets.items())
    groups: list[PackedGroup] = []
    for key, pages in buckets.items():
        kind, block, window = key[:3]
        n = split(key)
        if is_state(key):
            per_block = max(anchor // next(iter(pages)), 1)
            n = max(n, cdiv(pages.total(), per_block))
        if n == 1:
            groups.append(PackedGroup(kind, block, window, pages.total(), sum(p * c for p, c in pages.items())))
            continue
        # Group i takes every n-th repeat of the pattern (one cache of each page size per repeat).
        pattern = min(pages.values())
        for i in range(n):
            count = len(range(i, pattern, n))
            groups.append(PackedGroup(kind, block, window, count * len(pages), count * sum(pages)))
    return tuple(groups)


@dataclass(frozen=True)
class PackedKvGeometry:
    """One rank's pool: every block id of every group costs the widest group's bytes."""

    groups: tuple[PackedGroup, ...]
    # The attention layers' tokens per block, the block size vLLM logs.
    block_size: int = BLOCK_SIZE
    # Blocks a state group holds per request: two live states in align mode (prefix caching), one otherwise, and
    # one per speculative token.
    state_blocks_per_request: int = 0

    @property
    def bytes_per_block(self) -> int:
        return max(group.bytes_per_block for group in self.groups)

    @property
    def bytes_per_token(self) -> float:
        """What one more token of context costs beyond the windows and states."""
        return self.bytes_per_block / self.block_size

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        """Per group: the whole context in blocks, the window and the tokens in flight (+1), the states, or the
        ring's one block (CircularBufferSpec.max_memory_usage_bytes)."""
        total = 0
        for group in self.groups:
            if group.kind is GroupKind.STATE:
                total += self.state_blocks_per_request
            elif group.kind is GroupKind.RING:
                total += 1
            elif group.window is None:
                total += cdiv(max_model_len, group.block_size)
            else:
                span = min(group.window - 1 + max_num_batched_tokens, max_model_len)
                total += cdiv(span, group.block_size) + 1
        return total

    def num_blocks(self, kv_bytes: int) -> int:
        return kv_bytes // self.bytes_per_block

    def bytes_for_requests(self, requests: int, max_model_len: int, max_num_batched_tokens: int) -> int:
        return requests * self.blocks_per_request(max_model_len, max_num_batched_tokens) * self.bytes_per_block

    def max_concurrency(self, kv_bytes: int, max_model_len: int, max_num_batched_tokens: int) -> float:
        return self.num_blocks(kv_bytes) / self.blocks_per_request(max_model_len, max_num_batched_tokens)

    def reported_tokens(self, kv_bytes: int, max_model_len: int, max_num_batched_tokens: int, version: VllmVersion) -> int:
        if kv_tokens_from_concurrency(version):
            return int(self.max_concurrency(kv_bytes, max_model_len, max_num_batched_tokens) * max_model_len)
        return self.num_blocks(kv_bytes) // len(self.groups) * self.block_size


def packed_geometry(shape: CompressedMlaShape, *, kv_cache_dtype: str, draft_layers: int = 0) -> PackedKvGeometry:
    """One rank's pool: tensor parallelism replicates every cache (pipeline stages are refused by the planner)."""
    if kv_cache_dtype != "auto" and not kv_cache_dtype.startswith("fp8"):
        raise PlanError(
            "intent.kv_cache_dtype",
            f"{kv_cache_dtype}: DeepSeek-V4 keeps its KV cache in fp8_ds_mla; vLLM refuses any other cache dtype "
            "on GB10 and CPU (models/deepseek_v4/attention.py _resolve_dsv4_kv_cache_dtype)",
            ("auto", "fp8"),
        )
    if 4 not in shape.compress_ratios:
        # Only the indexer's backend asks for the block-outermost layout that packing needs.
        raise PlanError(
            "model",
            "a deepseek_v4 schedule without a ratio-4 layer has no indexer, so vLLM lays its pool out layer by layer "
            "and cannot unify its compressed MLA pages: it refuses to start (NotImplementedError, "
            "tests/vllm/check_kv_geometry.py)",
        )
    return PackedKvGeometry(packed_groups(cache_layers(shape, shape.compress_ratios, draft_layers)))
