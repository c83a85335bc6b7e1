"""DeepSeek-V4's KV pool the way vLLM 0.32 / 0.33 packs it (docs/research/deepseek-v4-kv-layout.md).

Every layer keeps a 64-token-block sliding-window cache; a layer with compress ratio 4 or 128 also keeps a
compressed MLA cache (one 584-byte slot per `ratio` tokens, in 256-token blocks) and an fp32 compressor
state, and a ratio-4 layer an FP8 indexer key cache and its compressor state. Pages differ in size, so vLLM
does not unify them: it buckets layers of one kind, block size and window, splits the balanced buckets into
groups of equal repeats (kv_cache_utils._get_packed_kv_cache_groups), and strides every block of the one pool
by the widest group. tests/vllm/check_kv_geometry.py builds vLLM's own model and KV cache config for a
downscaled real config and compares them with this.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .errors import PlanError
from .kvcache import GroupKind, cdiv
from .models import CompressedMlaShape
from .versions import VllmVersion, kv_tokens_from_concurrency

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


def packed_groups(layers: list[CacheLayer]) -> tuple[PackedGroup, ...]:
    """kv_cache_utils._get_packed_kv_cache_groups, where a balanced bucket of two page sizes exists (DeepSeek-V4's
    ratio-4 compressor and indexer states always make one; without them vLLM does not pack, see packed_geometry)."""
    buckets: dict[tuple[GroupKind, int, int | None], Counter[int]] = {}
    for layer in layers:
        buckets.setdefault((layer.kind, layer.block_size, layer.window), Counter())[layer.page_bytes] += 1
    balanced = {key: len(set(pages.values())) == 1 for key, pages in buckets.items()}
    repeats_of = {key: max(pages.values()) for key, pages in buckets.items()}
    floor = max(repeats_of[k] for k, pages in buckets.items() if balanced[k] and len(pages) > 1)
    repeats = approximate_gcd([repeats_of[k] for k in buckets if balanced[k]], floor)
    groups: list[PackedGroup] = []
    for key, pages in buckets.items():
        kind, block, window = key
        # An unbalanced bucket stays whole; a balanced one splits into groups of `repeats` pattern repeats, group
        # i taking every n-th repeat (one cache of each page size per repeat).
        n = cdiv(repeats_of[key], repeats) if balanced[key] else 1
        for i in range(n):
            count = len(range(i, repeats_of[key], n))
            if n == 1:
                groups.append(PackedGroup(kind, block, window, sum(pages.values()), sum(p * c for p, c in pages.items())))
            else:
                groups.append(PackedGroup(kind, block, window, count * len(pages), count * sum(pages)))
    return tuple(groups)


@dataclass(frozen=True)
class PackedKvGeometry:
    """One rank's pool: every block id of every group costs the widest group's bytes."""

    groups: tuple[PackedGroup, ...]

    @property
    def bytes_per_block(self) -> int:
        return max(group.bytes_per_block for group in self.groups)

    @property
    def block_size(self) -> int:
        return BLOCK_SIZE

    @property
    def bytes_per_token(self) -> float:
        """What one more token of context costs beyond the windows."""
        return self.bytes_per_block / BLOCK_SIZE

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        """Per group: the whole context in 256-token blocks, or the window and the tokens in flight (+1)."""
        total = 0
        for group in self.groups:
            if group.window is None:
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
        return self.num_blocks(kv_bytes) // len(self.groups) * BLOCK_SIZE


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
