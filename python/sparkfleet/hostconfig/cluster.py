"""One model over several Sparks: the interconnect environment every Ray and vLLM process needs, the
choice of one NCCL library, and the cluster preflight that refuses mismatched nodes.

Seed 004's multi-node section lists what silently hangs without explicit settings (NCCL_IB_HCA
unset, a random interface for Gloo, Ray's memory monitor on unified memory); field-anchors lists the
pip-NCCL next to a system-NCCL build that hangs collectives every ~20 minutes.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator

from ..errors import PlanError, from_validation
from ..models import Strict
from ..sources import SEED_GUIDE, SEED_SM121
from .ncclrules import SOURCE_PATCHED, CustomNccl, custom_identity

_IFNAME = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")
_TOKEN_PATH = re.compile(r"/[A-Za-z0-9_./-]{1,254}")
_HCA = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
# Ray's token authentication (RAY_AUTH_MODE=token) appeared in 2.52; an older Ray ignores the variable
# and serves every RPC (job submission is code execution) to anyone on the link.
RAY_TOKEN_AUTH = (2, 52)
RAY_TOKEN_DOCS = "docs.ray.io ray-security/token-auth (Ray 2.52+)"
NCCL_HANG = "field-anchors.md (vllm-project/vllm#42354: pip NCCL next to the system build hangs collectives ~20 min)"


# Three or more Sparks cabled to each other without a switch: each cable a subnet of its own, from port 0 to port 1.
RING_MEMBERS = 3
RING_NCCL_MIN = (2, 30, 7)
SOURCE_RING = (
    "NVIDIA/nccl 5c1c4288 (v2.30.7-1: subnet-aware routing for a DGX Spark multi-node ring, off by default); "
    "luxingcom/aicad-nccl-optimization#1 (a three-Spark ring ran once every cable joined p0 to p1 with it on)"
)


class Interconnect(Strict):
    """The direct link between Sparks (QSFP / ConnectX-7), as the ray_cluster role's variables give it."""

    interface: str
    hcas: list[str] = Field(default_factory=list)
    gid_index: Annotated[int, Field(ge=0, le=255)] = 3
    roce_version: Annotated[int, Field(ge=1, le=2)] = 2
    ib_timeout: Annotated[int, Field(ge=1, le=31)] = 22
    # The cluster's members: three or more Sparks cabled without a switch form a ring of /24s that NCCL must route.
    members: Annotated[int, Field(ge=1, le=256)] = 2

    @field_validator("interface")
    @classmethod
    def _ifname(cls, value: str) -> str:
        if not _IFNAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a network interface name (ip -br link lists them)")
        return value

    @field_validator("hcas")
    @classmethod
    def _hcas(cls, value: list[str]) -> list[str]:
        for hca in value:
            if not _HCA.fullmatch(hca):
                raise ValueError(f"{hca!r} is not an RDMA device name (ibdev2netdev lists them)")
        return value


class EnvVar(Strict):
    name: str
    value: str
    reason: str
    source: str


def interconnect_env(link: Interconnect) -> list[EnvVar]:
    """The environment of every Ray and vLLM process of the cluster, each with why and where from."""
    iface = link.interface
    out = [
        EnvVar(
            name="NCCL_SOCKET_IFNAME",
            value=iface,
            reason="NCCL bootstrap and socket transport on the direct link; an Ethernet fallback costs 10-20x",
            source=f"{SEED_GUIDE} §13",
        ),
        EnvVar(
            name="GLOO_SOCKET_IFNAME",
            value=iface,
            reason="Ray's Gloo rendezvous must use the direct interface, not a random one",
            source=f"{SEED_SM121} multi-node",
        ),
        EnvVar(name="UCX_NET_DEVICES", value=iface, reason="UCX transports on the same link", source="field-anchors.md"),
        EnvVar(
            name="TP_SOCKET_IFNAME",
            value=iface,
            reason="tensorpipe (torch RPC) on the same link",
            source="field-anchors.md",
        ),
        EnvVar(
            name="NCCL_NET_PLUGIN",
            value="none",
            reason="no external net plugin (an AWS OFI plugin falls back to TCP)",
            source=f"{SEED_SM121} multi-node",
        ),
        EnvVar(
            name="RAY_memory_monitor_refresh_ms",
            value="0",
            reason="Ray's memory monitor kills inference processes mid-run on unified memory",
            source=f"{SEED_SM121} multi-node",
        ),
    ]
    if not link.hcas:
        out.append(
            EnvVar(
                name="NCCL_IB_DISABLE",
                value="1",
                reason="no RDMA devices given: NCCL uses sockets on the interface above",
                source="ray_cluster_hcas empty",
            )
        )
        return out
    out += [
        EnvVar(
            name="NCCL_IB_HCA",
            value=",".join(link.hcas),
            reason="pin NCCL to the RoCE devices; unset, NCCL on SM121 can deadlock silently",
            source=f"{SEED_SM121} multi-node",
        ),
        EnvVar(name="NCCL_IB_DISABLE", value="0", reason="RoCE on the given devices", source=f"{SEED_SM121} multi-node"),
        EnvVar(
            name="NCCL_IB_GID_INDEX",
            value=str(link.gid_index),
            reason="RoCEv2 + IPv4 GID (check show_gids on the hardware)",
            source=f"{SEED_SM121} multi-node",
        ),
        EnvVar(
            name="NCCL_IB_ROCE_VERSION_NUM",
            value=str(link.roce_version),
            reason="RoCE version of the link",
            source=f"{SEED_SM121} multi-node",
        ),
        EnvVar(
            name="NCCL_IB_TIMEOUT",
            value=str(link.ib_timeout),
            reason="IB verbs timeout exponent",
            source=f"{SEED_SM121} multi-node",
        ),
    ]
    return out + ring_env(link)


def ring_env(link: Interconnect) -> list[EnvVar]:
    """Three or more Sparks cabled without a switch: each cable is a subnet of its own, which NCCL must route."""
    if link.members < RING_MEMBERS or not link.hcas:
        return []
    return [
        EnvVar(
            name="NCCL_IB_SUBNET_AWARE_ROUTING",
            value="1",
            reason=f"{link.members} Sparks in a switchless ring put each cable on a subnet of its own: NCCL picks "
            "the device on the peer's subnet per connection (off by default; without it ibv_modify_qp times out)",
            source=SOURCE_RING,
        )
    ]


def ray_auth_env(token_path: str) -> list[EnvVar]:
    """Ray's token authentication for every Ray and vLLM process of the cluster, the token read from a file."""
    if not _TOKEN_PATH.fullmatch(token_path) or "/../" in f"{token_path}/":
        raise PlanError("sparkfleet_config_dir", f"{token_path!r} is not an absolute path of plain names for Ray's token")
    return [
        EnvVar(
            name="RAY_AUTH_MODE",
            value="token",
            reason="every Ray RPC and HTTP entry point demands the cluster's token: without it a process on "
            "the link could submit jobs (run code) as the service user on every node",
            source=RAY_TOKEN_DOCS,
        ),
        EnvVar(
            name="RAY_AUTH_TOKEN_PATH",
            value=token_path,
            reason="the token comes from a root-owned file the service user may read but not change; "
            "never from a command line or an environment value",
            source=RAY_TOKEN_DOCS,
        ),
    ]


def has_token_auth(ray_version: str) -> bool:
    numbers = re.match(r"(\d+)\.(\d+)", ray_version)
    return numbers is not None and (int(numbers[1]), int(numbers[2])) >= RAY_TOKEN_AUTH


def interconnect(raw: Any, label: str = "ray_cluster") -> Interconnect:
    try:
        return Interconnect.model_validate(raw)
    except ValidationError as exc:
        raise from_validation(exc, label) from exc


# --------------------------------------------------------------------------- NCCL


class NcclLibraries(Strict):
    """The NCCL builds a host has: the one torch's wheels bring and the system's (DGX OS), each with its version."""

    pip: str | None = None
    pip_version: str | None = None
    system: str | None = None
    system_version: str | None = None
    # The sha256 of the file at the declared patched build's path on this host (ray_cluster_nccl: custom), or None.
    custom_sha256: str | None = None


# NVIDIA/nccl#2167 reported NCCL 2.30.4 hanging MoE weight loading on 8 Sparks and NCCL_NVLS_ENABLE=0 fixing it; its
# reporter later retracted the fix (2026-05-10): the hang was intermittent (2 of 3 boots with NVLS on, 0 of 1 with it
# off, never on the apt NCCL 2.29.7 in a week of production), so the data do not show that disabling NVLS cures it.
NCCL_NVLS = (
    "NVIDIA/nccl#2167 (an intermittent NCCL 2.30.4 hang of MoE weight loading on 8 Sparks; its reporter retracted the "
    "claim that NCCL_NVLS_ENABLE=0 fixes it)"
)


def nccl_choice(
    found: NcclLibraries, wanted: Literal["pip", "system", "custom"], host: str, declared: CustomNccl | None = None
) -> tuple[str, list[EnvVar]]:
    """One NCCL for every process: the chosen library is preloaded and handed to vLLM's own NCCL wrapper. A patched
    build (custom) is loaded only where its bytes are the declared build's."""
    if wanted == "custom":
        if declared is None:
            raise PlanError("ray_cluster_nccl_custom", "is required with ray_cluster_nccl: custom")
        custom_identity(host, declared, found.custom_sha256)
        fixes = f", carrying {', '.join(declared.fixes)}" if declared.fixes else ""
        report = (
            f"the patched NCCL {declared.version} at {declared.path} (sha256 {declared.sha256[:12]}{fixes}; "
            f"{SOURCE_PATCHED})"
        )
        return report, nccl_env(declared.path)
    path = found.pip if wanted == "pip" else found.system
    if not path:
        other = "system" if wanted == "pip" else "pip"
        have = f"; the {other} build is at {getattr(found, other)}" if getattr(found, other) else ""
        raise PlanError(
            "ray_cluster_nccl",
            f"{host} has no {wanted} NCCL library{have}",
            (f"ray_cluster_nccl: {other}",) if getattr(found, other) else ("install NCCL (libnccl2)",),
        )
    version = found.pip_version if wanted == "pip" else found.system_version
    both = found.pip and found.system
    report = f"{wanted} NCCL {version or '?'} at {path}" + (
        f" (not the {'system' if wanted == 'pip' else 'pip'} build, so every process loads the same one)" if both else ""
    )
    return report, nccl_env(path)


def nccl_env(path: str) -> list[EnvVar]:
    """The one library, preloaded for torch and handed to vLLM's pynccl; NVLS off."""
    env = [
        EnvVar(name="LD_PRELOAD", value=path, reason="torch and NCCL users load this one NCCL", source=NCCL_HANG),
        EnvVar(name="VLLM_NCCL_SO_PATH", value=path, reason="vLLM's pynccl loads the same library", source=NCCL_HANG),
        EnvVar(
            name="NCCL_NVLS_ENABLE",
            value="0",
            reason="Sparks have no NVLink, so NVLS has nothing to do on them; it stays off as a precaution, not a "
            "cure: the one report of it hanging Sparks was not confirmed by its own retests",
            source=NCCL_NVLS,
        ),
    ]
    return env


# --------------------------------------------------------------------------- preflight


class StagedModel(Strict):
    """A model as a node's model_facts report it (their other keys are not compared)."""

    model_config = Strict.model_config | {"extra": "ignore"}

    complete: bool = False
    # sha256 of the manifest model_stage verified the snapshot against: equal digests, the same bytes.
    manifest_digest: str | None = None
    failing: list[dict[str, str]] = Field(default_factory=list)


class NodeFacts(Strict):
    """What the cluster preflight compares across nodes."""

    release_id: str | None = None
    # The release lock's packages (name -> version): equal ids should mean equal sets; this proves it.
    packages: dict[str, str] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)  # vllm, torch, ray, nccl
    # The NCCL library every process loads, by content: 'pip libnccl.so.2 sha256:...' or 'system libnccl2
    # 2.30.7-1+cuda13.0'. pip's and the system's NCCL of one version are different builds (vllm-project/vllm#41725).
    nccl_build: str | None = None
    # model id -> staged and complete, or what model_facts reports of it (complete, manifest_digest, failing)
    models: dict[str, bool | StagedModel] = Field(default_factory=dict)
    interface: bool = True
    addressed: bool = True  # the interface has an IPv4 address (Ray binds it; the units admit its subnet)
    peers: dict[str, bool] = Field(default_factory=dict)  # peer -> answers on the interface
    # The releases beside the main one (vllm_install_releases), name -> release id (a digest of its lock and patches).
    side_releases: dict[str, str | None] = Field(default_factory=dict)
    # The head's: the side releases its multi-node instances name, which every member must carry as the head does.
    spanning_releases: list[str] = Field(default_factory=list)


def package_differences(head: dict[str, str], node: dict[str, str], most: int = 8) -> str:
    """The packages two locks disagree on, as 'name head-version != node-version' (the first few)."""
    names = sorted(set(head) | set(node))
    diffs = [f"{n} {head.get(n, 'absent')} != {node.get(n, 'absent')}" for n in names if head.get(n) != node.get(n)]
    more = f" (+{len(diffs) - most} more)" if len(diffs) > most else ""
    return ", ".join(diffs[:most]) + more


def cluster_problems(head: str, nodes: dict[str, NodeFacts], interface: str) -> list[str]:
    """Every way the nodes differ from the head or cannot reach each other, naming the node."""
    problems: list[str] = []
    reference = nodes[head]
    ray = reference.versions.get("ray") or reference.packages.get("ray")
    if ray and not has_token_auth(ray):
        problems.append(
            f"the head {head}'s release has Ray {ray}, which has no token authentication (2.52 or later): "
            "set vllm_install_ray_version to 2.52.0 or later"
        )
    for name, node in sorted(nodes.items()):
        if not node.interface:
            problems.append(f"{name}: interface {interface} does not exist (ray_cluster_interface)")
        elif not node.addressed:
            problems.append(f"{name}: interface {interface} has no IPv4 address (ray_cluster_interface)")
        for peer, answers in sorted(node.peers.items()):
            if not answers:
                problems.append(f"{name}: {peer} does not answer on {interface}")
        if name == head:
            continue
        if node.release_id != reference.release_id:
            problems.append(f"{name} runs release {node.release_id or 'none'}, the head {head} runs {reference.release_id}")
        if node.packages and reference.packages and node.packages != reference.packages:
            differences = package_differences(reference.packages, node.packages)
            problems.append(f"{name}'s release lock differs from the head {head}'s: {differences}")
        for key, value in sorted(reference.versions.items()):
            if node.versions.get(key) != value:
                problems.append(f"{name} has {key} {node.versions.get(key) or 'none'}, the head {head} has {value}")
        if reference.nccl_build and node.nccl_build != reference.nccl_build:
            problems.append(
                f"{name} loads NCCL {node.nccl_build or 'unknown'}, the head {head} loads {reference.nccl_build}: one "
                "version can be different builds (vllm-project/vllm#41725); every rank must load the same library"
            )
        problems += model_differences(name, node.models, head, reference.models)
        problems += side_release_differences(name, node, head, reference)
    return problems


def side_release_differences(name: str, node: NodeFacts, head: str, reference: NodeFacts) -> list[str]:
    """A release both carry is one build on both (its id digests its lock and patches); a member lacks none the
    head's multi-node instances run from, so every rank runs the build that was planned."""
    problems = []
    for release in sorted(set(reference.side_releases) | set(reference.spanning_releases)):
        wanted, found = reference.side_releases.get(release), node.side_releases.get(release)
        if release not in node.side_releases and release in reference.spanning_releases:
            problems.append(
                f"{name} lacks release {release} ({wanted or 'unbuilt'}), which {head}'s multi-node instances run "
                "from: name it in the member's vllm_install_releases as on the head"
            )
        elif release in node.side_releases and found != wanted:
            problems.append(f"{name}'s release {release} is {found or 'unbuilt'}, the head {head}'s is {wanted or 'none'}")
    return problems


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "none (never verified)"


def _staged(found: bool | StagedModel | None) -> StagedModel:
    return found if isinstance(found, StagedModel) else StagedModel(complete=bool(found))


def model_differences(
    name: str, models: dict[str, bool | StagedModel], head: str, reference: dict[str, bool | StagedModel]
) -> list[str]:
    """Each model the head has staged completely that this node has not, or has as other bytes (another
    manifest digest, or none where the other has one; the bare booleans of older facts compare completeness
    alone), naming the node and its failing files."""
    problems = []
    for model, theirs in sorted(reference.items()):
        wanted, found = _staged(theirs), _staged(models.get(model))
        reported = isinstance(theirs, StagedModel) and isinstance(models.get(model), StagedModel)
        if not wanted.complete:
            continue
        if not found.complete:
            failing = ", ".join(f"{f.get('path')} ({f.get('why')})" for f in found.failing[:5])
            problems.append(
                f"{name} does not have {model} staged completely (every node loads its own copy)"
                + (f": {failing} failed verification" if failing else "")
            )
        elif reported and wanted.manifest_digest != found.manifest_digest:
            problems.append(
                f"{name} has {model} staged as manifest {_short(found.manifest_digest)}, the head {head} as "
                f"{_short(wanted.manifest_digest)} (other files or another commit): stage every node from one pin"
            )
    return problems
