"""Which installed release an instance runs from: the one it names, else the host's main release, else the newest
release installed beside it that loads its model (vllm_install_releases).

The main release comes first so that a nightly or a fork installed for one model never takes the others; a model
the main release refuses (the planner's `vllm_version` refusals: an architecture, a loader, a capability, a layer
kind or a KV dtype the build lacks) moves to the newest side release that plans it, and the plan says why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..errors import PlanError
from ..models import ClusterBackend, HostFacts, ReleaseChoice, ServePlan, SideRelease
from ..versions import VllmVersion

# The planner names a refusal that another build could lift by this variable (planning/choices.py, buildcheck.py).
RELEASE_REFUSAL = "vllm_version"
NAMED = "named by the instance (release)"


def on_release(host: HostFacts, release: SideRelease) -> HostFacts:
    """The host as an instance on `release` sees it: that build's version, capabilities, kernels and record."""
    data = host.model_dump() | {
        "vllm_version": release.vllm_version,
        "vllm_capabilities": release.capabilities,
        "flashinfer_kernels": release.prebuilt_kernels,
        "release_record": release.record,
    }
    return HostFacts.model_validate(data)


def _choice(release: SideRelease, why: str) -> ReleaseChoice:
    return ReleaseChoice(name=release.name, id=release.id, path=release.path, vllm_version=release.vllm_version, why=why)


def newest_first(releases: Mapping[str, SideRelease]) -> list[SideRelease]:
    return sorted(releases.values(), key=lambda r: (VllmVersion.parse(r.vllm_version), r.name), reverse=True)


def _one_node(served: ServePlan, release: SideRelease, why: str) -> ServePlan:
    """A side release serves no Ray instance across nodes: its workers are the Ray cluster's processes, which every
    member starts from its main release (ray_cluster), so they would run another build than the one planned. Ranks
    of their own (the native backend) run from the release's venv on each member; the cluster check compares its id."""
    if served.nodes == 1 or served.cluster_backend is not ClusterBackend.RAY:
        return served
    raise PlanError(
        "release",
        f"{release.name} (vLLM {release.vllm_version}, {why}) would serve a Ray instance on {served.nodes} nodes, "
        "but Ray's workers run from the main release every member starts its Ray cluster from",
        (
            f"vllm_install_vllm_version {release.vllm_version} on every member, so the cluster's main release loads it",
            "intent.cluster_backend native, whose ranks run from the side release on every member",
        ),
    )


def plan_on_release(
    host: HostFacts,
    named: str | None,
    releases: Mapping[str, SideRelease],
    plan_one: Callable[[HostFacts], ServePlan],
) -> ServePlan:
    """The instance's plan on the release it names, else on the main release, else on the newest side release
    that loads it; a refusal no release lifts is the main release's, naming the releases tried."""
    if named is not None:
        release = releases.get(named)
        if release is None:
            known = ", ".join(sorted(releases)) or "none"
            raise PlanError(
                "release",
                f"{named!r} is not a release of this host (vllm_install_releases names {known})",
                ("a name from vllm_install_releases", "no release: the main one, else the newest that loads the model"),
            )
        return _one_node(plan_one(on_release(host, release)), release, NAMED).model_copy(
            update={"release": _choice(release, NAMED)}
        )
    try:
        return plan_one(host)
    except PlanError as refused:
        if refused.variable != RELEASE_REFUSAL or not releases:
            raise
        main_refusal = refused
    for release in newest_first(releases):
        try:
            served = plan_one(on_release(host, release))
        except PlanError as exc:
            if exc.variable == RELEASE_REFUSAL:
                continue
            raise
        why = (
            f"the main release (vLLM {host.vllm_version}) does not load it ({main_refusal.problem}); {release.name} "
            f"(vLLM {release.vllm_version}) is the newest release beside it that does"
        )
        return _one_node(served, release, why).model_copy(update={"release": _choice(release, why)})
    tried = ", ".join(f"{r.name} (vLLM {r.vllm_version})" for r in newest_first(releases))
    raise PlanError(
        main_refusal.variable,
        f"{main_refusal.problem}; no release beside the main one loads it either ({tried})",
        main_refusal.suggestions,
    )
