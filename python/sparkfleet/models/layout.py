"""The Sparks a model's source recipe serves it on."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from pydantic import Field, model_validator

from .base import Strict


class ClusterBackend(str, Enum):
    """How the ranks of a multi-node instance find each other: vLLM's own launch (one unit per node, the mp
    executor) or a Ray cluster; auto takes native where the release has it."""

    AUTO = "auto"
    NATIVE = "native"
    RAY = "ray"


class RecipeLayout(Strict):
    """The Sparks and parallel sizes a model's source recipe serves it on: one GPU a Spark, so tensor parallel across
    all of them, optionally with decode context parallel (a catalog profile's `layout`, named where a plan on fewer
    Sparks is refused)."""

    nodes: Annotated[int, Field(ge=2, le=64)]
    tensor_parallel_size: Annotated[int, Field(ge=2, le=64)]
    decode_context_parallel_size: Annotated[int, Field(ge=1, le=64)] = 1
    # How the recipe's ranks meet: one it names (auto is the intent's, not a recipe's).
    cluster_backend: ClusterBackend = ClusterBackend.RAY
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
        if self.cluster_backend is ClusterBackend.AUTO:
            raise ValueError("layout: cluster_backend names the recipe's, ray or native")
        return self

    def as_intent(self) -> dict[str, int | str]:
        """The Sparks and parallel sizes a plan on this layout sets; catalog.recipe_intent adds the context and
        streams where none are asked."""
        return dict(self.model_dump(mode="json", exclude={"max_context", "concurrency"}))
