from __future__ import annotations

import pytest

from sparkfleet.errors import PlanError
from sparkfleet.hostconfig.directives import NVIDIA_DEVICES, ip_policy
from sparkfleet.hostconfig.hardening import UnitKind, check_clients, sandbox
from sparkfleet.models import Platform

SOCKET = "/run/sparkfleet-vllm-chat/api.sock"


def as_dict(kind: UnitKind, platform: Platform = Platform.CPU, **kw: object) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for d in sandbox(kind, platform, **kw):  # type: ignore[arg-type]
        assert d.reason, f"{d.name} has no reason"
        out.setdefault(d.name, []).append(d.value)
    return out


@pytest.mark.parametrize("kind", [k for k in UnitKind if k is not UnitKind.FRONT_DOOR])
def test_every_unit_drops_privileges_and_locks_the_file_system(kind: UnitKind) -> None:
    peer = {"link_subnet": "10.0.0.2"} if kind is UnitKind.LINK_TEST else {}
    d = as_dict(kind, writable=["/var/cache/sparkfleet"], **peer)
    # Its only job is writing /proc/sys/vm/drop_caches.
    tunables = "no" if kind is UnitKind.DROP_CACHES else "yes"
    # Their only job is loading their nftables table.
    capabilities = "CAP_NET_ADMIN" if kind in (UnitKind.METRICS_GATE, UnitKind.DOOR_GATE) else ""
    for name, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "ProtectKernelTunables": tunables,
        "ProtectKernelModules": "yes",
        "ProtectKernelLogs": "yes",
        "ProtectControlGroups": "yes",
        "RestrictSUIDSGID": "yes",
        "LockPersonality": "yes",
        "RestrictNamespaces": "yes",
        "CapabilityBoundingSet": capabilities,
        "UMask": "0077",
        "SystemCallArchitectures": "native",
    }.items():
        assert d[name] == [value], name
    assert d["ReadWritePaths"] == ["-/var/cache/sparkfleet"]
    assert "RestrictAddressFamilies" in d and "SystemCallFilter" in d


def test_the_door_keeps_only_the_capabilities_a_root_master_needs() -> None:
    d = as_dict(UnitKind.FRONT_DOOR)
    assert d["CapabilityBoundingSet"] == ["CAP_NET_BIND_SERVICE CAP_SETUID CAP_SETGID CAP_CHOWN CAP_KILL CAP_DAC_OVERRIDE"]
    assert d["ReadWritePaths"] == ["/var/log/nginx /var/lib/nginx"]
    for name in ("NoNewPrivileges", "ProtectHome", "PrivateTmp", "PrivateDevices", "MemoryDenyWriteExecute"):
        assert d[name] == ["yes"], name
    assert d["ProtectSystem"] == ["strict"]
    assert "IPAddressDeny" not in d  # clients reach it from anywhere; the key is the gate


def test_vllm_relaxes_only_what_its_jit_needs_and_says_so() -> None:
    cpu = sandbox(UnitKind.VLLM, Platform.CPU)
    mdwe = next(d for d in cpu if d.name == "MemoryDenyWriteExecute")
    assert mdwe.value == "no" and mdwe.reason.startswith("relaxed:")
    assert as_dict(UnitKind.WATCHDOG)["MemoryDenyWriteExecute"] == ["yes"]


def test_gb10_closes_devices_but_the_gpus_nodes_and_cpu_has_none() -> None:
    gb10 = as_dict(UnitKind.VLLM, Platform.GB10)
    assert gb10["DevicePolicy"] == ["closed"] and "PrivateDevices" not in gb10
    assert gb10["DeviceAllow"] == [f"{node} rw" for node in NVIDIA_DEVICES]
    assert as_dict(UnitKind.VLLM)["PrivateDevices"] == ["yes"]


def test_ip_filtering_follows_the_bind() -> None:
    loopback = as_dict(UnitKind.VLLM, bind_host="127.0.0.1", allowed_clients=["10.0.0.0/24"])
    assert loopback["IPAddressDeny"] == ["any"] and loopback["IPAddressAllow"] == ["localhost"]
    lan = as_dict(UnitKind.VLLM, bind_host="0.0.0.0", allowed_clients=["10.0.0.0/24", "192.168.1.7"])
    assert lan["IPAddressAllow"] == ["localhost 10.0.0.0/24 192.168.1.7"]
    assert "IPAddressDeny" not in as_dict(UnitKind.VLLM, bind_host="0.0.0.0")
    assert ip_policy("127.0.0.1", (), "10.89.0.0/24")[1].value == "localhost 10.89.0.0/24"
    watchdog = as_dict(UnitKind.WATCHDOG, bind_host="10.0.0.11")
    assert watchdog["IPAddressAllow"] == ["localhost 10.0.0.11"]


def test_client_networks_are_checked_naming_the_variable() -> None:
    assert check_clients(["10.0.0.0/24", "::1"], "vllm_serve_allowed_clients") == ("10.0.0.0/24", "::1")
    with pytest.raises(PlanError) as err:
        check_clients(["10.0.0.0/24", "office"], "vllm_serve_allowed_clients")
    assert err.value.variable == "vllm_serve_allowed_clients[1]"


def test_ray_talks_only_to_this_host_and_the_cluster_link() -> None:
    d = as_dict(UnitKind.RAY, bind_host="192.168.100.1", link_subnet="192.168.100.0/24")
    assert d["IPAddressDeny"] == ["any"]
    assert d["IPAddressAllow"] == ["localhost 192.168.100.0/24"]
    unknown = as_dict(UnitKind.RAY)  # the link's subnet is not known: loopback only, never everything
    assert unknown["IPAddressDeny"] == ["any"] and unknown["IPAddressAllow"] == ["localhost"]


def test_the_drop_caches_oneshot_has_no_network() -> None:
    d = as_dict(UnitKind.DROP_CACHES)
    assert d["PrivateNetwork"] == ["yes"] and d["IPAddressDeny"] == ["any"] and d["RestrictAddressFamilies"] == ["AF_UNIX"]
    assert d["CapabilityBoundingSet"] == [""]


def test_a_multi_node_instance_also_admits_its_cluster_link() -> None:
    public = ip_policy("0.0.0.0", ["192.168.1.0/24"], "10.89.0.0/24")
    assert public[1].value == "localhost 192.168.1.0/24 10.89.0.0/24"


RDMA = ["/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1", "/dev/infiniband/rdma_cm"]
LINK = "192.168.100.0/24"


@pytest.mark.parametrize("kind", [UnitKind.RAY, UnitKind.VLLM])
def test_a_gb10_cluster_member_opens_exactly_the_verbs_nodes_with_unlimited_memlock(kind: UnitKind) -> None:
    d = as_dict(kind, Platform.GB10, bind_host="192.168.100.1", link_subnet=LINK, rdma_devices=RDMA)
    assert d["DevicePolicy"] == ["closed"]
    assert d["DeviceAllow"] == [f"{node} rw" for node in NVIDIA_DEVICES] + [f"{node} rw" for node in sorted(RDMA)]
    assert d["LimitMEMLOCK"] == ["infinity"]
    assert not [v for v in d["DeviceAllow"] if "umad" in v or "issm" in v or v.startswith("/dev/infiniband ")]


def test_a_single_node_instance_and_the_cpu_platform_keep_the_closed_policy() -> None:
    single = as_dict(UnitKind.VLLM, Platform.GB10, rdma_devices=RDMA)  # no link subnet: one node
    assert "LimitMEMLOCK" not in single and not [v for v in single["DeviceAllow"] if "infiniband" in v]
    cpu = as_dict(UnitKind.RAY, Platform.CPU, link_subnet=LINK, rdma_devices=RDMA)
    assert cpu["PrivateDevices"] == ["yes"] and "DeviceAllow" not in cpu and "LimitMEMLOCK" not in cpu
    bare = as_dict(UnitKind.RAY, Platform.GB10, link_subnet=LINK)  # a host without RDMA nodes
    assert "LimitMEMLOCK" not in bare


@pytest.mark.parametrize("node", ["/dev/infiniband", "/dev/infiniband/umad0", "/dev/infiniband/issm0", "/dev/sda"])
def test_any_other_node_is_refused(node: str) -> None:
    with pytest.raises(PlanError, match="RDMA verbs nodes"):
        sandbox(UnitKind.RAY, Platform.GB10, link_subnet=LINK, rdma_devices=[node])


def test_an_instance_on_its_socket_has_no_network_of_the_hosts() -> None:
    directives = {d.name: d.value for d in sandbox(UnitKind.VLLM, Platform.GB10, writable=["/var/cache/x"], socket=SOCKET)}
    assert directives["PrivateNetwork"] == "yes" and directives["IPAddressDeny"] == "any"
    assert directives["IPAddressAllow"] == "localhost"  # the namespace's own loopback, nothing of the host's
    assert directives["ReadWritePaths"] == "-/var/cache/x -/run/sparkfleet-vllm-chat"


def test_a_watchdog_reaches_its_instances_socket_through_the_doors_group_only() -> None:
    """It runs as the supervisors' account (not root): the door's group opens the socket, systemd-journal its log."""
    directives = {
        d.name: d.value for d in sandbox(UnitKind.WATCHDOG, Platform.CPU, socket=SOCKET, socket_group="sparkfleet-door")
    }
    assert directives["SupplementaryGroups"] == "systemd-journal sparkfleet-door"
    on_tcp = {d.name: d.value for d in sandbox(UnitKind.WATCHDOG, Platform.CPU)}
    assert on_tcp["SupplementaryGroups"] == "systemd-journal" and on_tcp["CapabilityBoundingSet"] == ""
    assert directives["RestrictAddressFamilies"] == "AF_UNIX"
    assert directives["PrivateNetwork"] == "yes" and "IPAddressAllow" not in directives
    with pytest.raises(PlanError, match="socket directory's group"):
        sandbox(UnitKind.WATCHDOG, Platform.CPU, socket=SOCKET)


def test_an_activator_whose_instances_are_all_on_sockets_has_no_network() -> None:
    directives = {
        d.name: d.value for d in sandbox(UnitKind.DOOR_ACTIVATOR, Platform.CPU, socket=SOCKET, socket_group="www-data")
    }
    assert directives["PrivateNetwork"] == "yes" and directives["SupplementaryGroups"] == "systemd-journal www-data"


def test_a_link_test_talks_to_its_one_peer_and_opens_only_the_verbs_nodes() -> None:
    rdma = ["/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm"]
    d = as_dict(UnitKind.LINK_TEST, Platform.GB10, link_subnet="10.0.0.2", rdma_devices=rdma)
    assert d["IPAddressDeny"] == ["any"] and d["IPAddressAllow"] == ["10.0.0.2"]
    assert d["DevicePolicy"] == ["closed"] and d["LimitMEMLOCK"] == ["infinity"]
    assert sorted(d["DeviceAllow"]) == sorted(f"{n} rw" for n in rdma)
    assert as_dict(UnitKind.LINK_TEST, link_subnet="10.0.0.2")["PrivateDevices"] == ["yes"]
    with pytest.raises(PlanError, match="address of its peer"):
        sandbox(UnitKind.LINK_TEST, Platform.CPU)


@pytest.mark.parametrize("kind", [UnitKind.METRICS_GATE, UnitKind.DOOR_GATE])
def test_the_nft_gates_have_the_hosts_network_and_netlink_only_with_network_admin_alone(kind: UnitKind) -> None:
    d = as_dict(kind)
    assert d["CapabilityBoundingSet"] == ["CAP_NET_ADMIN"] and d["AmbientCapabilities"] == [""]
    assert d["PrivateNetwork"] == ["no"] and d["IPAddressDeny"] == ["any"]
    assert d["RestrictAddressFamilies"] == ["AF_UNIX AF_NETLINK"]
    assert d["SystemCallFilter"] == ["@system-service", "~@privileged @resources"]
    assert d["PrivateDevices"] == ["yes"] and d["MemoryDenyWriteExecute"] == ["yes"] and d["ProcSubset"] == ["pid"]
