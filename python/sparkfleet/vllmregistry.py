"""What a vLLM release implements, read from its released wheel (scripts/read_vllm_registry.py).

Two questions are answered here and nowhere else:
- does the target vLLM implement an architecture at all, and if it dropped it, which release last served it;
- does it read a model_type's config without the repository's own code: its own config registry
  (`vllm/transformers_utils/config.py` `_CONFIG_REGISTRY`) or the transformers its lock resolves.

Releases between two sampled ones take the older sample's facts; a release newer than the table takes
the newest (the planner warns that its rules were proved on that release).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from .versions import VllmVersion

SOURCE = "vLLM's released wheels: model_executor/models/registry.py and transformers_utils/config.py (vllm_registry.json)"


@dataclass(frozen=True)
class Registry:
    releases: dict[str, dict[str, str]]
    architectures: dict[str, tuple[str, str | None]]
    native_config_types: dict[str, tuple[str, str | None]]
    dropped: dict[str, str]
    plugins: frozenset[str]

    @property
    def sampled(self) -> list[VllmVersion]:
        return sorted(VllmVersion.parse(v) for v in self.releases)


@cache
def registry() -> Registry:
    data: dict[str, Any] = json.loads(resources.files("sparkfleet").joinpath("vllm_registry.json").read_text("utf-8"))
    return Registry(
        releases=data["releases"],
        architectures={k: (v[0], v[1]) for k, v in data["architectures"].items()},
        native_config_types={k: (v[0], v[1]) for k, v in data["native_config_types"].items()},
        dropped=data["dropped"],
        plugins=frozenset(data["plugins"]),
    )


def rules_release(version: VllmVersion) -> VllmVersion:
    """The sampled release whose registry stands for `version`: the newest at or below it (else the oldest)."""
    sampled = registry().sampled
    below = [v for v in sampled if v <= version]
    return below[-1] if below else sampled[0]


def beyond_table(version: VllmVersion) -> bool:
    """A release newer than every sampled one (in minor): the registry cannot know what it added."""
    newest = registry().sampled[-1]
    return (version.major, version.minor) > (newest.major, newest.minor)


def transformers_of(version: VllmVersion) -> str:
    return registry().releases[str(rules_release(version))]["transformers"]


def _present(history: tuple[str, str | None] | None, version: VllmVersion) -> bool:
    if history is None:
        return False
    first, gone = history
    at = rules_release(version)
    return VllmVersion.parse(first) <= at and (gone is None or at < VllmVersion.parse(gone))


def reads_config_natively(version: VllmVersion, model_type: str) -> bool:
    return _present(registry().native_config_types.get(model_type), version)


@dataclass(frozen=True)
class ArchitectureSupport:
    implemented: bool
    # The last release that served it, when vLLM dropped it (vLLM's _PREVIOUSLY_SUPPORTED_MODELS).
    last_release: str | None = None
    # Served only by an out-of-tree plugin now.
    plugin: bool = False
    # The first sampled release that has it, when the target is older.
    first_release: str | None = None


def architecture_support(version: VllmVersion, architecture: str) -> ArchitectureSupport:
    reg = registry()
    history = reg.architectures.get(architecture)
    if _present(history, version):
        return ArchitectureSupport(implemented=True)
    first = history[0] if history and VllmVersion.parse(history[0]) > rules_release(version) else None
    gone = history[1] if history and history[1] and VllmVersion.parse(history[1]) <= rules_release(version) else None
    last_sampled = None
    if gone is not None:
        before = [v for v in reg.sampled if v < VllmVersion.parse(gone)]
        last_sampled = str(before[-1]) if before else None
    return ArchitectureSupport(
        implemented=False,
        last_release=reg.dropped.get(architecture) or last_sampled,
        plugin=architecture in reg.plugins,
        first_release=first,
    )
