"""A patched NCCL build as an opt-in (issue 64, deliver 3): declared once, its identity checked on every member, its
version held to the same rules as any NCCL. The links are recorded GB10 link facts (tests/fixtures/link)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from ansible_collections.sparkfleet.vllm.plugins.module_utils import link_state

from sparkfleet.boundary.adapters import cluster_check, cluster_environment, link_check
from sparkfleet.errors import PlanError

LINK = Path(__file__).resolve().parents[1] / "fixtures" / "link"
BUILD = b"\x7fELF a stand-in for libnccl.so.2 built from 2.30.7 with NVIDIA/nccl PR 2393"
SHA = hashlib.sha256(BUILD).hexdigest()
DECLARED = {"path": "/opt/nccl-2393/lib/libnccl.so.2", "sha256": SHA, "version": "2.30.7", "fixes": ["NVIDIA/nccl PR 2393"]}


def env_of(found_sha: str | None, declared: object = DECLARED, host: str = "spark02") -> dict[str, object]:
    return cluster_environment({"interface": "eth1"}, {"custom": declared, "custom_sha256": found_sha}, "custom", host)


def test_the_declared_build_is_preloaded_for_every_process_where_its_bytes_match() -> None:
    planned = env_of(SHA)
    env = {e["name"]: e["value"] for e in planned["env"]}  # type: ignore[attr-defined]
    assert env["LD_PRELOAD"] == env["VLLM_NCCL_SO_PATH"] == DECLARED["path"]
    assert str(planned["nccl"]).startswith(f"the patched NCCL 2.30.7 at {DECLARED['path']} (sha256 {SHA[:12]}, carrying")
    assert "NVIDIA/nccl#2334" in str(planned["nccl"])


def test_a_member_with_other_bytes_or_no_file_is_refused_naming_it() -> None:
    other = hashlib.sha256(b"2.30.7 as released").hexdigest()
    with pytest.raises(PlanError, match=f"ray_cluster_nccl_custom: spark02's {DECLARED['path']} has sha256 {other}, not"):
        env_of(other)
    with pytest.raises(PlanError, match="spark02 has no file at /opt/nccl-2393/lib/libnccl.so.2"):
        env_of(None)


@pytest.mark.parametrize(
    ("declared", "named"),
    [
        (None, "ray_cluster_nccl_custom: is required with ray_cluster_nccl: custom"),
        ({**DECLARED, "sha256": "ABC"}, "ray_cluster_nccl_custom.sha256"),
        ({**DECLARED, "path": "libnccl.so.2"}, "ray_cluster_nccl_custom.path"),
        ({**DECLARED, "version": "latest"}, "ray_cluster_nccl_custom.version"),
        ({**DECLARED, "patched": True}, "ray_cluster_nccl_custom.patched"),
    ],
)
def test_a_bad_declaration_is_refused_naming_the_field(declared: object, named: str) -> None:
    with pytest.raises(PlanError, match=named.replace(".", r"\.")):
        env_of(SHA, declared)


def test_the_declared_version_is_held_to_the_aarch64_and_graph_rules() -> None:
    members = {name: link_state.read_link(str(LINK / "gb10-one-cable"), ["enp1s0f0np0"]) for name in ("s1", "s2")}
    settings = {
        "interface": "enp1s0f0np0",
        "hcas": ["rocep1s0f0", "roceP2p1s0f0"],
        "platform": "gb10",
        "instances": [{"name": "big", "model": "m", "intent": {"nodes": 2, "tensor_parallel_size": 2}}],
    }
    assert link_check(members, {**settings, "nccl": {"custom": DECLARED}})["problems"] == []
    older = link_check(members, {**settings, "nccl": {"custom": {**DECLARED, "version": "2.28.9"}}})["problems"]
    assert older[0].startswith(
        "NCCL 2.28.9 (the patched build ray_cluster_nccl_custom at /opt/nccl-2393/lib/libnccl.so.2) is older than 2.29.3"
    )


def test_members_on_different_builds_are_refused_by_the_cluster_preflight() -> None:
    node = {"release_id": "r", "versions": {"ray": "2.52.0"}, "nccl_build": f"custom {DECLARED['path']} sha256:{SHA}"}
    problems = cluster_check({"s1": node, "s2": {**node, "nccl_build": "pip libnccl.so.2 sha256:00"}}, "s1", "eth1")
    assert any("s2" in p and "NCCL" in p for p in problems)
