"""The shipped model catalog: one YAML file per Hugging Face repo id under catalog/."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import resources

import yaml

from ..errors import PlanError
from ..models import ModelProfile


@cache
def load_catalog() -> dict[str, ModelProfile]:
    profiles: dict[str, ModelProfile] = {}
    for entry in sorted(resources.files("sparkfleet.catalog").iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yml"):
            continue
        data = yaml.safe_load(entry.read_text(encoding="utf-8"))
        profile = ModelProfile.model_validate(data)
        if profile.id in profiles:
            raise ValueError(f"catalog: {profile.id} is defined twice")
        profiles[profile.id] = profile
    return profiles


def recipe_intent(profile: ModelProfile, asked: Mapping[str, object] | None = None) -> dict[str, object]:
    """The intent fields that put a plan on the Sparks the model's recipe serves it on, with the recipe's context and
    streams where `asked` (the fields a caller sets) names neither; none for a model one Spark holds."""
    layout = profile.layout
    if layout is None:
        return {}
    fields: dict[str, object] = dict(layout.as_intent())
    if all((asked or {}).get(name) is None for name in ("max_context", "concurrency")):
        fields |= {"max_context": layout.max_context, "concurrency": layout.concurrency}
    return fields


def get_profile(model_id: str) -> ModelProfile:
    catalog = load_catalog()
    if model_id in catalog:
        return catalog[model_id]
    lowered = {key.lower(): key for key in catalog}
    if model_id.lower() in lowered:
        return catalog[lowered[model_id.lower()]]
    raise PlanError(
        "model",
        f"{model_id!r} is not in the catalog and is not a model directory",
        ("sparkfleet catalog to list ids", "a local directory holding config.json"),
    )
