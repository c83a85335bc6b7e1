"""The Sparks a model's source recipe serves it on."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .base import Strict


class RecipeLayout(Strict):
    """The Sparks and parallel sizes a model's source recipe serves it on: one GPU a Spark, so tensor parallel across
    all of them, optionally with decode context parallel (a catalog profile's `layout`, named where a plan on fewer
    Sparks is refused)."""

    nodes: Annotated[int, Field(ge=2, le=64)]
    tensor_parallel_size: Annotated[int, Field(ge=2, le=64)]
    decode_context_parallel_size: Annotated[int, Field(ge=1, le=64)] = 1
    # How the recipe's ranks meet (intent.cluster_backend's values).
    cluster_backend: Literal["ray", "native"] = "ray"
    # The context and streams a plan on this layout takes when none are asked for: what the field serves, within
    # what the planner's own ceilings give the checkpoint (its source says which).
    max_context: Annotated[int, Field(ge=256)]
    concurrency: Annotated[int, Field(ge=1, le=1024)] = 1

    @model_validator(mode="after")
    def _one_gpu_a_spark(self) -> RecipeLayout:
        if self.tensor_parallel_size != self.nodes:
            raise ValueError(f"layout: tensor_parallel_size {self.tensor_parallel_size} must equal nodes {self.nodes}")
        if self.tensor_parallel_size % self.decode_context_parallel_size:
            raise ValueError("layout: decode_context_parallel_size must divide tensor_parallel_size")
        return self

    def as_intent(self) -> dict[str, int | str]:
        """The intent fields a plan on this layout sets (the context and streams only where none are asked)."""
        return dict(self.model_dump(exclude={"max_context", "concurrency"}))
