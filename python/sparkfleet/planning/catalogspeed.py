"""A catalog model's predicted single-stream decode where its recipes serve it: on one Spark, or planned on the
Sparks its profile's layout names, so that the link's cost is in the figure."""

from __future__ import annotations

from ..catalog import recipe_intent
from ..errors import PlanError
from ..models import GIB, HostFacts, Intent, ModelProfile, Platform
from ..models.speed import Band
from .choices import DEFAULT_VLLM
from .memory import GB10_REFERENCE_TOTAL_GIB
from .planner import plan
from .speedplan import catalog_decode


def reference_spark() -> HostFacts:
    """A DGX Spark as vLLM sees it, on the default release: what a plan made away from one assumes."""
    return HostFacts(
        platform=Platform.GB10,
        compute_capability="12.1",
        mem_total_bytes=int(GB10_REFERENCE_TOTAL_GIB * GIB),
        vllm_version=DEFAULT_VLLM[Platform.GB10],
    )


def catalog_speed(profile: ModelProfile) -> Band | None:
    """Single-stream decode at 1,024 tokens with CUDA graphs and the recipe's KV dtype; None where not predicted."""
    if profile.layout is None:
        return catalog_decode(profile)
    try:
        served = plan(reference_spark(), profile, Intent.model_validate(recipe_intent(profile)))
    except PlanError:
        return None
    return served.speed.decode if served.speed else None
