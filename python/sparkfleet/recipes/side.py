"""Releases installed beside the main one (vllm_install_releases): each a stock version, an older loader, a fork at
a commit or a nightly, with a name instances use. Each takes the main release's inputs and replaces what it names;
its lock, id and directory are its own, and nothing about it moves `current`."""

from __future__ import annotations

import re
from typing import Any

from ..errors import PlanError
from ..models import RELEASE_NAME_PATTERN
from ..release import Lock
from .inputs import patch_entries
from .steps import inputs_from, recipe

VARIABLE = "vllm_install_releases"
_NAME = re.compile(RELEASE_NAME_PATTERN)
# A side release's keys, as the role spells them, and the install input each replaces.
SIDE_KEYS = {
    "vllm_version": "vllm_version",
    "source": "vllm_source",
    "git_repo": "vllm_git_repo",
    "git_ref": "vllm_git_ref",
    "precompiled_wheel": "precompiled_wheel",
    "torch_version": "torch_version",
    "torchvision_version": "torchvision_version",
    "flashinfer_version": "flashinfer_version",
    "extra_packages": "extra_packages",
    "excludes": "excludes",
    "capabilities": "capabilities",
    # A nightly's own wheel index (vLLM's per-commit index): the release locks from it beside PyPI.
    "index_urls": "index_urls",
    # Its own patches (a fork's local fixes), their content in its release id; none of the main release's.
    "patches": "patches",
}
# What follows the source: a side release from PyPI carries none of the main release's fork fields, and the reverse.
_SOURCE_FIELDS = ("vllm_git_repo", "vllm_git_ref", "precompiled_wheel", "capabilities")


def side_release_inputs(
    main: dict[str, Any], releases: list[Any], patch_sha256s: dict[str, list[str]] | None = None
) -> list[dict[str, Any]]:
    """Each side release as {name, inputs}: the main release's inputs with the keys it names replaced, checked. Its
    patches' contents (`patch_sha256s`, by release name, read on the controller) make them part of its id."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, item in enumerate(releases or []):
        label = f"{VARIABLE}[{index}]"
        if not isinstance(item, dict):
            raise PlanError(label, "each release is a mapping with a name and a vllm_version (or a git source)")
        name = item.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise PlanError(f"{label}.name", f"{name!r}: lower-case letters, digits, '.' and '-', at most 40 characters")
        if name in seen:
            raise PlanError(f"{label}.name", f"{name!r} names two releases")
        seen.add(name)
        unknown = sorted(set(item) - set(SIDE_KEYS) - {"name"})
        if unknown:
            raise PlanError(
                f"{label}.{unknown[0]}",
                f"is not a key of a side release; it takes {', '.join(sorted(SIDE_KEYS))} "
                "(a committed lock file is the main release's)",
            )
        if "vllm_version" not in item and item.get("source") != "git":
            raise PlanError(f"{label}.vllm_version", "a side release names its vLLM version (or source: git)")
        inputs = dict(main) | {"patches": []}
        if item.get("source", main.get("vllm_source")) != main.get("vllm_source"):
            inputs |= {field: None for field in _SOURCE_FIELDS} | {"capabilities": []}
        inputs |= {SIDE_KEYS[key]: value for key, value in item.items() if key not in ("name", "patches")}
        if item.get("patches"):
            if not isinstance(item["patches"], list):
                raise PlanError(f"{label}.patches", "a list of patches, each with src (as vllm_install_patches)")
            hashes = (patch_sha256s or {}).get(name, [])
            inputs["patches"] = patch_entries(item["patches"], hashes, f"{label}.patches")
        inputs_from(inputs)  # refuses what the main release's variables would refuse, here by this release's keys
        out.append({"name": name, "inputs": inputs})
    return out


def side_recipe(side: dict[str, Any], root: str, lock: Lock) -> dict[str, Any]:
    """A side release's install recipe from its lock, with its name."""
    return {"name": side["name"]} | recipe(inputs_from(side["inputs"]), lock, root).model_dump(mode="json")


def side_releases(recipes: list[dict[str, Any]], records: dict[str, Any]) -> list[dict[str, Any]]:
    """The side releases as the planner reads them (planning/releases.py's SideRelease): each recipe's name, version,
    id and directory, and the record its build wrote where it has one (by directory)."""
    return [
        {
            "name": r["name"],
            "vllm_version": r["vllm_version"],
            "id": r["release_id"],
            "path": r["release_dir"],
            "capabilities": list(r.get("capabilities") or []),
            "prebuilt_kernels": (r.get("lock") or {}).get("prebuilt_kernels"),
            "record": (records or {}).get(r["release_dir"]),
        }
        for r in recipes or []
    ]
