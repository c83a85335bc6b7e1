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


class DecodeReads(Strict):
    """What a checkpoint's safetensors headers say a decode step reads, by tensor class (sparkfleet.reading.tensors).

    Bytes as stored (packed FP4 and INT4 with their scales), over every layer: the output head (read whole each step;
    the embedding when tied), the dense rest (attention, norms, dense MLPs, state layers, routers, read each step),
    the shared experts (each step), the routed experts (a step reads those its tokens route to), the input embedding
    (one row a token) and what a text decode step never reads (MTP layers, vision and audio towers)."""

    head_bytes: Annotated[int, Field(gt=0)]
    dense_bytes: Annotated[int, Field(ge=0)]
    shared_expert_bytes: Annotated[int, Field(ge=0)] = 0
    routed_expert_bytes: Annotated[int, Field(ge=0)] = 0
    embedding_bytes: Annotated[int, Field(ge=0)] = 0
    unread_bytes: Annotated[int, Field(ge=0)] = 0
    # Weights (packed values unpacked, scales not counted) a token's matrix products touch, for prefill's FLOPs.
    active_params: Annotated[int, Field(gt=0)]
    total_params: Annotated[int, Field(gt=0)]
    experts: Annotated[int, Field(gt=1)] | None = None
    experts_per_token: Annotated[int, Field(gt=0)] | None = None
    tied_embeddings: bool = False
    source: str

    @model_validator(mode="after")
    def _experts_go_together(self) -> DecodeReads:
        if (self.experts is None) != (self.experts_per_token is None) or (self.experts is None) != (
            self.routed_expert_bytes == 0
        ):
            raise ValueError("routed expert bytes, experts and experts_per_token go together (all absent when dense)")
        if self.experts is not None and self.experts_per_token is not None and self.experts_per_token >= self.experts:
            raise ValueError(f"experts_per_token {self.experts_per_token} must be under experts {self.experts}")
        return self

    def parameters(self) -> Parameters:
        """The parameter counts the speed model reads, as the headers give them."""
        return Parameters(
            total_b=self.total_params / 1e9,
            active_b=self.active_params / 1e9,
            experts=self.experts,
            experts_per_token=self.experts_per_token,
            tied_embeddings=self.tied_embeddings,
        )


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
