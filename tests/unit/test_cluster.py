from __future__ import annotations

import pytest

from sparkfleet.boundary.adapters import cluster_environment
from sparkfleet.errors import PlanError
from sparkfleet.hostconfig.cluster import (
    NcclLibraries,
    NodeFacts,
    cluster_problems,
    has_token_auth,
    interconnect,
    interconnect_env,
    nccl_choice,
    ray_auth_env,
)


def env_of(raw: dict[str, object]) -> dict[str, str]:
    return {e.name: e.value for e in interconnect_env(interconnect(raw))}


def test_roce_link_sets_every_variable_seed_004_names() -> None:
    env = env_of({"interface": "enp1s0f1np1", "hcas": ["rocep1s0f1", "roceP2p1s0f1"]})
    assert env == {
        "NCCL_SOCKET_IFNAME": "enp1s0f1np1",
        "GLOO_SOCKET_IFNAME": "enp1s0f1np1",
        "UCX_NET_DEVICES": "enp1s0f1np1",
        "TP_SOCKET_IFNAME": "enp1s0f1np1",
        "NCCL_NET_PLUGIN": "none",
        "RAY_memory_monitor_refresh_ms": "0",
        "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1",
        "NCCL_IB_DISABLE": "0",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_IB_ROCE_VERSION_NUM": "2",
        "NCCL_IB_TIMEOUT": "22",
    }


def test_a_link_without_rdma_devices_disables_ib_and_keeps_the_interface() -> None:
    env = env_of({"interface": "eth0"})
    assert env["NCCL_IB_DISABLE"] == "1"
    assert "NCCL_IB_HCA" not in env
    assert env["GLOO_SOCKET_IFNAME"] == "eth0"


def test_every_variable_carries_its_reason_and_source() -> None:
    for var in interconnect_env(interconnect({"interface": "eth0", "hcas": ["mlx5_0"]})):
        assert var.reason and var.source


@pytest.mark.parametrize(
    ("raw", "variable", "text"),
    [
        ({"interface": "eth0; rm -rf /"}, "ray_cluster_interface", "not a network interface name"),
        ({"interface": "eth0", "hcas": ["a b"]}, "ray_cluster_hcas", "not an RDMA device name"),
        ({"interface": "eth0", "gid_index": 300}, "ray_cluster_gid_index", "less than or equal to 255"),
        ({}, "ray_cluster_interface", "Field required"),
    ],
)
def test_bad_link_settings_name_the_variable(raw: dict[str, object], variable: str, text: str) -> None:
    with pytest.raises(PlanError) as err:
        interconnect(raw)
    assert err.value.variable == variable
    assert text in str(err.value)


def test_one_nccl_is_chosen_and_preloaded_for_every_process() -> None:
    found = NcclLibraries(
        pip="/opt/r/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
        pip_version="2.28.9",
        system="/usr/lib/aarch64-linux-gnu/libnccl.so.2",
        system_version="2.28.9",
    )
    report, env = nccl_choice(found, "system", "spark02")
    assert {e.name: e.value for e in env} == {
        "LD_PRELOAD": "/usr/lib/aarch64-linux-gnu/libnccl.so.2",
        "VLLM_NCCL_SO_PATH": "/usr/lib/aarch64-linux-gnu/libnccl.so.2",
        # No NVLink between Sparks: NVLS stays off (NVIDIA/nccl#2167).
        "NCCL_NVLS_ENABLE": "0",
    }
    assert "system NCCL 2.28.9" in report and "not the pip build" in report


def test_choosing_a_missing_nccl_names_the_host_and_the_other_build() -> None:
    with pytest.raises(PlanError) as err:
        nccl_choice(NcclLibraries(pip="/p/libnccl.so.2"), "system", "spark02")
    assert err.value.variable == "ray_cluster_nccl"
    assert "spark02 has no system NCCL library; the pip build is at /p/libnccl.so.2" in str(err.value)
    assert "ray_cluster_nccl: pip" in str(err.value)


def _node(release: str = "cpu-0.32.0-aaa", **kw: object) -> NodeFacts:
    base: dict[str, object] = {
        "release_id": release,
        "versions": {"vllm": "0.32.0", "torch": "2.13.0", "ray": "2.60.0"},
        "models": {"sandbox/tiny-llama": True},
    }
    base.update(kw)
    return NodeFacts.model_validate(base)


def test_a_matching_cluster_has_no_problems() -> None:
    assert cluster_problems("spark01", {"spark01": _node(), "spark02": _node()}, "eth0") == []


def test_a_worker_with_another_release_is_named() -> None:
    problems = cluster_problems("spark01", {"spark01": _node(), "spark02": _node("cpu-0.32.0-bbb")}, "eth0")
    assert problems == ["spark02 runs release cpu-0.32.0-bbb, the head spark01 runs cpu-0.32.0-aaa"]


def test_versions_models_interfaces_and_peers_are_each_named() -> None:
    worker = _node(
        versions={"vllm": "0.32.0", "torch": "2.13.0", "ray": "2.59.0"},
        models={},
        interface=False,
        peers={"spark01": False},
    )
    problems = cluster_problems("spark01", {"spark01": _node(), "spark02": worker}, "enp1s0f1np1")
    assert "spark02: interface enp1s0f1np1 does not exist (ray_cluster_interface)" in problems
    assert "spark02: spark01 does not answer on enp1s0f1np1" in problems
    assert "spark02 has ray 2.59.0, the head spark01 has 2.60.0" in problems
    assert any(p.startswith("spark02 does not have sandbox/tiny-llama staged") for p in problems)


def test_a_worker_whose_lock_differs_under_the_same_id_is_named_with_the_packages() -> None:
    head = _node(packages={"torch": "2.13.0", "transformers": "5.19.0", "triton": "3.7.1"})
    worker = _node(packages={"torch": "2.13.0", "transformers": "5.19.1"})
    problems = cluster_problems("spark01", {"spark01": head, "spark02": worker}, "eth0")
    assert problems == [
        "spark02's release lock differs from the head spark01's: transformers 5.19.0 != 5.19.1, triton 3.7.1 != absent"
    ]


def test_a_head_whose_ray_has_no_token_authentication_is_refused_naming_the_variable() -> None:
    old = _node(versions={"vllm": "0.32.0", "torch": "2.13.0", "ray": "2.51.1"})
    problems = cluster_problems("spark01", {"spark01": old, "spark02": old}, "eth0")
    assert problems == [
        "the head spark01's release has Ray 2.51.1, which has no token authentication (2.52 or later): "
        "set vllm_install_ray_version to 2.52.0 or later"
    ]
    planned = NodeFacts.model_validate({"release_id": "r", "packages": {"ray": "2.48.0"}})
    assert "Ray 2.48.0" in cluster_problems("spark01", {"spark01": planned}, "eth0")[0]
    assert has_token_auth("2.52.0") and has_token_auth("2.60.0") and has_token_auth("3.0.0")
    assert not has_token_auth("2.9.3") and not has_token_auth("nightly")


def test_an_interface_without_an_address_is_named() -> None:
    problems = cluster_problems("spark01", {"spark01": _node(), "spark02": _node(addressed=False)}, "eth1")
    assert problems == ["spark02: interface eth1 has no IPv4 address (ray_cluster_interface)"]


def test_every_process_gets_ray_token_authentication_from_a_file() -> None:
    env = cluster_environment({"interface": "eth1"}, {}, "none", "spark01", "/etc/sparkfleet/ray-auth-token")["env"]
    by_name = {e["name"]: e["value"] for e in env}
    assert by_name["RAY_AUTH_MODE"] == "token"
    assert by_name["RAY_AUTH_TOKEN_PATH"] == "/etc/sparkfleet/ray-auth-token"
    assert "RAY_AUTH_TOKEN" not in by_name  # the secret itself is never an environment value
    without = cluster_environment({"interface": "eth1"}, {}, "none", "spark01")["env"]
    assert not any(e["name"].startswith("RAY_AUTH") for e in without)


@pytest.mark.parametrize("path", ["relative/token", "/etc/../root/token", "/etc/sparkfleet/tok\nen", "/etc/a b"])
def test_a_token_path_that_is_not_plain_is_refused(path: str) -> None:
    with pytest.raises(PlanError, match="not an absolute path"):
        ray_auth_env(path)


def test_ranks_that_load_different_nccl_builds_of_one_version_are_named() -> None:
    pip = "pip libnccl.so.2 sha256:" + "a" * 64
    same = {"nccl": "2.30.7"}
    head = _node(nccl_build=pip, versions={**_node().versions, **same})
    rebuilt = _node(nccl_build="pip libnccl.so.2 sha256:" + "b" * 64, versions={**_node().versions, **same})
    system = _node(nccl_build="system libnccl2 2.30.7-1+cuda13.0", versions={**_node().versions, **same})
    assert (
        cluster_problems("spark01", {"spark01": head, "spark02": _node(nccl_build=pip, versions=head.versions)}, "eth0")
        == []
    )
    for other in (rebuilt, system):
        problems = cluster_problems("spark01", {"spark01": head, "spark02": other}, "eth0")
        assert len(problems) == 1 and problems[0].startswith(f"spark02 loads NCCL {other.nccl_build}, the head spark01")
        assert "vllm-project/vllm#41725" in problems[0]
    # A head whose build is unknown (no NCCL found) compares nothing.
    assert cluster_problems("spark01", {"spark01": _node(), "spark02": system}, "eth0") == []


def test_a_member_carries_the_side_release_the_heads_multi_node_instances_run_from_as_one_build() -> None:
    head = _node(side_releases={"nightly": "gb10-0.34.0-aaa", "older": "gb10-0.30.0-ccc"}, spanning_releases=["nightly"])
    lacking = _node(side_releases={"older": "gb10-0.30.0-ccc"})
    assert cluster_problems("spark01", {"spark01": head, "spark02": lacking}, "eth0") == [
        "spark02 lacks release nightly (gb10-0.34.0-aaa), which spark01's multi-node instances run from: name it in "
        "the member's vllm_install_releases as on the head"
    ]
    other_build = _node(side_releases={"nightly": "gb10-0.34.0-bbb"})
    assert cluster_problems("spark01", {"spark01": head, "spark02": other_build}, "eth0") == [
        "spark02's release nightly is gb10-0.34.0-bbb, the head spark01's is gb10-0.34.0-aaa"
    ]
    same = _node(side_releases={"nightly": "gb10-0.34.0-aaa"})
    assert cluster_problems("spark01", {"spark01": head, "spark02": same}, "eth0") == []
