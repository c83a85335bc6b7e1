"""Which NCCL a multi-node instance may run on, by version: the rules the link preflight refuses by. Pure.

NCCL older than 2.29.3 hangs on aarch64 (a Spark) whatever the instance captures: a weak compare-and-swap leaks
proxy-op slots until a rank spins silently (nvidia/nccl#2353); CUDA graphs that span nodes need 2.30.4
(vllm-project/vllm#52504).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, StringConstraints, ValidationError

from ..errors import PlanError, from_validation
from ..models import Strict
from ..release import NCCL_GRAPHS_MIN

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
SOURCE_GRAPHS = "vllm-project/vllm#52504 (CUDA graphs across nodes need NCCL 2.30.4 or later)"
NCCL_AARCH64_MIN = (2, 29, 3)
SOURCE_AARCH64 = (
    "NVIDIA/nccl#2353 (before 2.29.3 a weak compare-and-swap on aarch64 leaks proxy-op slots until a rank spins "
    "silently: a multi-node job hangs with nothing in its logs)"
)


def multinode_instances(instances: list[dict[str, Any]]) -> list[str]:
    """Every instance over more than one node, eager or not."""
    return [
        str(item.get("name"))
        for item in instances
        if isinstance(item.get("intent"), dict) and int(item["intent"].get("nodes") or 1) > 1
    ]


def nccl_aarch64_problem(version: str | None, where: str, instances: list[str]) -> str | None:
    """A multi-node instance on a Spark (aarch64) with an NCCL older than 2.29.3: refused, naming the way out."""
    parsed = nccl_version_tuple(version) if version else None
    if not instances or parsed is None or parsed >= NCCL_AARCH64_MIN:
        return None
    need = ".".join(map(str, NCCL_AARCH64_MIN))
    return (
        f"NCCL {version} ({where}) is older than {need}, and {', '.join(instances)} run{'s' if len(instances) == 1 else ''} "
        f"over nodes on aarch64, where it hangs ({SOURCE_AARCH64}): re-run vllm_install with ray_cluster_head set (a "
        f"multi-node gb10 release overrides NCCL), or ray_cluster_nccl: system with libnccl2 {need} or later"
    )


def nccl_version_tuple(version: str) -> tuple[int, int, int] | None:
    found = _VERSION.search(version)
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def nccl_graphs_problem(version: str | None, where: str, graph_instances: list[str]) -> str | None:
    """CUDA graphs that span nodes on an NCCL older than 2.30.4: refused, naming the instances and the way out."""
    if not graph_instances or not version:
        return None
    parsed = nccl_version_tuple(version)
    if parsed is None or parsed >= NCCL_GRAPHS_MIN:
        return None
    return (
        f"NCCL {version} ({where}) is older than {'.'.join(map(str, NCCL_GRAPHS_MIN))}, and "
        f"{', '.join(graph_instances)} capture{'s' if len(graph_instances) == 1 else ''} CUDA graphs across nodes "
        f"({SOURCE_GRAPHS}): re-run vllm_install with ray_cluster_head set (a multi-node gb10 release overrides "
        f"NCCL), or ray_cluster_nccl: system "
        f"with libnccl2 2.30.4 or later, or intent.profile: memory-saver (eager, no graphs) on "
        f"{'it' if len(graph_instances) == 1 else 'them'}"
    )


def graph_instances(instances: list[dict[str, Any]], gb10: bool) -> list[str]:
    """The multi-node instances whose CUDA graphs span nodes: every one but memory-saver's eager plans (the
    planner captures graphs on gb10 unless the profile is memory-saver; the cpu platform has none)."""
    if not gb10:
        return []
    out = []
    for item in instances:
        intent = item.get("intent") or {}
        if isinstance(intent, dict) and int(intent.get("nodes") or 1) > 1 and intent.get("profile") != "memory-saver":
            out.append(str(item.get("name")))
    return out


# --------------------------------------------------------------------------- a patched build, opted into

SOURCE_PATCHED = (
    "NVIDIA/nccl#2334 (a RoCE receiver deadlock on 4 Sparks, open on 2.28.9 to 2.30.7; candidate fix NVIDIA/nccl PR "
    "2393): no release carries the fix, so a cluster that needs it runs a build of its own"
)


class CustomNccl(Strict):
    """A patched NCCL build the user opts into (ray_cluster_nccl: custom): the library every member loads, by path and
    by the sha256 of its bytes, the NCCL version it was built from (the version rules hold it like any other) and the
    upstream fixes it carries (reported with the choice)."""

    path: Annotated[str, StringConstraints(pattern=r"^/[A-Za-z0-9_.+/-]*libnccl\.so(\.[0-9]+)*$")]
    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    version: Annotated[str, StringConstraints(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+([-+.][A-Za-z0-9.+-]*)?$")]
    fixes: list[Annotated[str, StringConstraints(min_length=1, max_length=200)]] = Field(default_factory=list)


def custom_nccl(raw: Any, label: str = "ray_cluster_nccl_custom") -> CustomNccl:
    """The declared build, validated: errors name the field (ray_cluster_nccl_custom.sha256) and the rule it broke."""
    if not isinstance(raw, dict) or not raw:
        raise PlanError(
            label,
            "is required with ray_cluster_nccl: custom",
            ("{path: /opt/nccl/lib/libnccl.so.2, sha256: <64 hex>, version: 2.30.7, fixes: [NVIDIA/nccl PR 2393]}",),
        )
    try:
        return CustomNccl.model_validate(raw)
    except ValidationError as exc:
        raise from_validation(exc, label, sep=".") from exc


def custom_identity(host: str, declared: CustomNccl, found_sha256: str | None) -> None:
    """Every member loads the declared build or the cluster does not start: one NCCL version can be different builds,
    and ranks on different builds hang (vllm-project/vllm#41725)."""
    if not found_sha256:
        raise PlanError(
            "ray_cluster_nccl_custom",
            f"{host} has no file at {declared.path}: copy the declared NCCL build to that path on every member",
        )
    if found_sha256.lower() != declared.sha256:
        raise PlanError(
            "ray_cluster_nccl_custom",
            f"{host}'s {declared.path} has sha256 {found_sha256.lower()}, not the declared build's {declared.sha256}: "
            "every member must load the same patched NCCL (copy the one build everywhere, or declare its sha256)",
        )
