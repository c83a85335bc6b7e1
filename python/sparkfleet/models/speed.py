"""What a plan predicts of its speed on a Spark: decode, aggregate and prefill, each with its error band."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from .base import Strict

Positive = Annotated[float, Field(gt=0)]


class Parameters(Strict):
    """The parameter counts a speed prediction reads: how many weights one decode step touches."""

    # Billions, as the publisher counts them (embeddings and the output head included).
    total_b: Positive
    active_b: Positive
    # Routed experts per MoE layer and how many each token takes; both absent for a dense model.
    experts: Annotated[int, Field(gt=1)] | None = None
    experts_per_token: Annotated[int, Field(gt=0)] | None = None
    # The output head shares the embedding matrix (tie_word_embeddings): one vocab x hidden matrix, not two.
    tied_embeddings: bool = False
    # Bytes per weight of the output head, which every step reads whole: NVFP4 and FP8 checkpoints mostly keep it
    # in BF16 (their quantization configs exclude lm_head); some quantize it (0.5625 for NVFP4 with its scales).
    head_bytes_per_param: Annotated[float, Field(gt=0, le=4)] = 2.0

    @model_validator(mode="after")
    def _consistent(self) -> Parameters:
        if self.active_b > self.total_b:
            raise ValueError(f"active_b {self.active_b} exceeds total_b {self.total_b}")
        if (self.experts is None) != (self.experts_per_token is None):
            raise ValueError("experts and experts_per_token go together (both absent for a dense model)")
        if self.experts is not None and self.experts_per_token is not None and self.experts_per_token >= self.experts:
            raise ValueError(f"experts_per_token {self.experts_per_token} must be under experts {self.experts}")
        return self


class Band(Strict):
    """A predicted figure and the range its calibration's leave-one-out error gives it."""

    value: Positive
    low: Positive
    high: Positive


class ConcurrencyPoint(Strict):
    concurrency: Annotated[int, Field(gt=0)]
    aggregate_tps: Positive
    per_user_tps: Positive


class TtftPoint(Strict):
    prompt_tokens: Annotated[int, Field(gt=0)]
    ttft_s: Positive


class SpeedPrediction(Strict):
    """GB10 speed of one planned instance, from the bytes each step reads and factors fitted to the seeds."""

    # Single-stream decode, tokens/s, at `context_tokens` already in the sequence.
    decode: Band
    # Aggregate decode over `concurrency` streams (the plan's max_num_seqs), tokens/s.
    aggregate: Band
    concurrency: Annotated[int, Field(gt=0)]
    curve: list[ConcurrencyPoint]
    prefill: Band
    ttft: list[TtftPoint]
    context_tokens: Annotated[int, Field(gt=0)]
    # Single-stream decode with the plan's speculative method, and what the gain assumes.
    speculative: Band | None = None
    speculative_basis: str | None = None
    # GB read per single-stream step (weights, output head, KV at the context) and how the figures were made.
    bytes_per_step_gb: Positive
    basis: list[str]
