"""The link preflight and the link doctor, on sysfs trees and tool outputs (tests/fixtures/link/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.sparkfleet.vllm.plugins.module_utils import link_state
from hypothesis import given
from hypothesis import strategies as st

from sparkfleet.boundary.adapters import link_check
from sparkfleet.errors import PlanError
from sparkfleet.hostconfig.cluster import Interconnect, interconnect_env
from sparkfleet.hostconfig.link import (
    GB10_DEVICE_GBPS,
    LinkFacts,
    LinkMeasurement,
    expected_gbps,
    judge_measurement,
    link_report,
    parse_ib_write_bw,
    parse_iperf3,
)
from sparkfleet.hostconfig.ncclrules import nccl_aarch64_problem, nccl_graphs_problem
from sparkfleet.versions import NEWEST_RELEASE

LINK = Path(__file__).resolve().parents[1] / "fixtures" / "link"
BOTH_HALVES = ["rocep1s0f0", "roceP2p1s0f0"]


def facts(case: str, interfaces: tuple[str, ...] = ()) -> LinkFacts:
    return LinkFacts.model_validate(link_state.read_link(str(LINK / case), list(interfaces)))


def test_link_state_reads_the_ports_and_their_netdevs_from_sysfs() -> None:
    found = facts("gb10-one-cable", ("enp1s0f0np0", "../etc", "missing0"))
    ports = {p.device: p for p in found.rdma_ports}
    assert sorted(ports) == ["roceP2p1s0f0", "roceP2p1s0f1", "rocep1s0f0", "rocep1s0f1"]
    assert ports["rocep1s0f0"].active and ports["rocep1s0f0"].rate_gbps == 200.0
    assert ports["rocep1s0f0"].netdevs == ["enp1s0f0np0"] and ports["rocep1s0f0"].link_layer == "Ethernet"
    assert not ports["roceP2p1s0f1"].active and ports["roceP2p1s0f1"].state_word() == "DOWN"
    assert found.netdevs["enp1s0f0np0"].mtu == 9000 and found.netdevs["enp1s0f0np0"].speed_mbps == 200000
    # A down interface has no speed (sysfs refuses the read); names that are not interfaces are not read.
    assert found.netdevs["enp1s0f1np1"].speed_mbps is None
    assert "../etc" not in found.netdevs and "missing0" not in found.netdevs


def test_a_host_without_rdma_has_no_ports() -> None:
    found = facts("sandbox-veth", ("eth1",))
    assert found.rdma_ports == [] and found.netdevs["eth1"].speed_mbps == 10000


def test_both_halves_at_jumbo_mtu_pass() -> None:
    link = Interconnect(interface="enp1s0f0np0", hcas=BOTH_HALVES)
    report = link_report("spark01", facts("gb10-one-cable", ("enp1s0f0np0",)), link, accept_sockets=False, gb10=True)
    assert report.transport == "rdma" and report.problems == [] and report.warnings == []


def test_one_half_left_out_of_the_hcas_is_refused_naming_the_other() -> None:
    link = Interconnect(interface="enp1s0f0np0", hcas=["rocep1s0f0"])
    report = link_report("spark01", facts("gb10-one-cable"), link, accept_sockets=False, gb10=True)
    assert len(report.problems) == 1
    assert "roceP2p1s0f0 is ACTIVE but not in ray_cluster_hcas" in report.problems[0]
    assert "ray_cluster_hcas: [roceP2p1s0f0, rocep1s0f0]" in report.problems[0]


def test_the_shipped_mtu_is_refused_per_netdev_and_for_the_link() -> None:
    link = Interconnect(interface="enp1s0f0np0", hcas=BOTH_HALVES)
    report = link_report("spark02", facts("gb10-as-shipped", ("enp1s0f0np0",)), link, accept_sockets=False, gb10=True)
    assert len(report.problems) == 2  # the link interface is rocep1s0f0's netdev: named once
    assert all("has MTU 1500" in p and "mtu 9000" in p for p in report.problems)
    assert any("enP2p1s0f0np0 (the netdev of roceP2p1s0f0)" in p for p in report.problems)


def test_a_down_or_unknown_hca_is_refused() -> None:
    link = Interconnect(interface="enp1s0f0np0", hcas=["rocep1s0f0", "roceP2p1s0f0", "rocep1s0f1", "mlx5_9"])
    problems = link_report("spark01", facts("gb10-one-cable"), link, accept_sockets=False, gb10=True).problems
    assert any("rocep1s0f1 port 1 is DOWN (3: Disabled), not ACTIVE" in p for p in problems)
    assert any("mlx5_9 (ray_cluster_hcas) does not exist; the host has roceP2p1s0f0" in p for p in problems)


def test_a_slow_negotiated_rate_warns_on_a_spark() -> None:
    slow = facts("gb10-one-cable")
    slow.rdma_ports[0] = slow.rdma_ports[0].model_copy(update={"rate": "100 Gb/sec (4X EDR)"})
    link = Interconnect(interface="enp1s0f0np0", hcas=BOTH_HALVES)
    report = link_report("spark01", slow, link, accept_sockets=False, gb10=True)
    assert report.problems == [] and "negotiated 100 Gb/s" in report.warnings[0]


def test_tcp_only_is_refused_unless_accepted_with_its_cost() -> None:
    link = Interconnect(interface="eth1")
    refused = link_report("ray-head", facts("sandbox-veth", ("eth1",)), link, accept_sockets=False, gb10=False)
    assert refused.transport == "sockets" and len(refused.problems) == 1
    assert "no RDMA device (TCP only)" in refused.problems[0]
    assert "ray_cluster_accept_sockets: true" in refused.problems[0] and "23.7 GB/s" in refused.problems[0]
    accepted = link_report("ray-head", facts("sandbox-veth", ("eth1",)), link, accept_sockets=True, gb10=False)
    assert accepted.problems == [] and "(accepted: ray_cluster_accept_sockets)" in accepted.warnings[0]
    mtu_warning = next(w for w in accepted.warnings if "MTU 1500" in w)
    assert "RoCE" not in mtu_warning and "sockets" in mtu_warning and "mtu 9000" in mtu_warning


def test_sockets_beside_active_rdma_names_the_devices() -> None:
    report = link_report(
        "spark01", facts("gb10-one-cable"), Interconnect(interface="enp1s0f0np0"), accept_sockets=False, gb10=True
    )
    assert "ACTIVE RDMA devices roceP2p1s0f0, rocep1s0f0 but ray_cluster_hcas is empty" in report.problems[0]


@pytest.mark.parametrize(
    ("version", "refused"),
    [("2.29.7", True), ("2.30.3", True), ("2.30.4", False), ("2.31.0", False), ("2.30.4-1+cuda13.0", False)],
)
def test_nccl_before_2_30_4_is_refused_for_graphs_across_nodes(version: str, refused: bool) -> None:
    problem = nccl_graphs_problem(version, "nvidia-nccl-cu13 in the release lock", ["big"])
    assert (problem is not None) is refused
    if problem:
        assert "big captures CUDA graphs across nodes" in problem and "intent.profile: memory-saver" in problem
    assert nccl_graphs_problem(version, "lock", []) is None  # eager everywhere: no graphs cross a node


@pytest.mark.parametrize(
    ("version", "refused"), [("2.28.9", True), ("2.29.2", True), ("2.29.3", False), ("2.30.7", False), (None, False)]
)
def test_nccl_before_2_29_3_is_refused_for_every_instance_over_nodes_on_aarch64(version: str | None, refused: bool) -> None:
    """Issue 64: nvidia/nccl#2353, a hang on aarch64 whatever the instance captures; eager instances included."""
    problem = nccl_aarch64_problem(version, "libnccl2 on the hosts", ["eager"])
    assert (problem is not None) is refused
    if problem:
        assert problem.startswith(f"NCCL {version} (libnccl2 on the hosts) is older than 2.29.3, and eager runs over nodes")
        assert "NVIDIA/nccl#2353" in problem and "libnccl2 2.29.3 or later" in problem
    assert nccl_aarch64_problem(version, "lock", []) is None


def test_ib_write_bw_results_parse_in_gbits_and_mbytes() -> None:
    assert parse_ib_write_bw((LINK / "ib_write_bw-gb10-healthy.txt").read_text()) == pytest.approx(97.28)
    assert parse_ib_write_bw((LINK / "ib_write_bw-gb10-degraded.txt").read_text()) == pytest.approx(13.23)
    # perftest's MB/s table (a row from openucx/ucx#8851's ib_read_bw run).
    table = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
    table += " 65536      1000             23000.10           22950.00             0.350188\n"
    assert parse_ib_write_bw(table) == pytest.approx(22950.0 * 8 / 1000)
    with pytest.raises(ValueError, match="no ib_write_bw result table"):
        parse_ib_write_bw(" Couldn't connect to 10.0.0.2:18515\n")


def test_iperf3_json_parses_and_its_error_is_named() -> None:
    assert parse_iperf3((LINK / "iperf3-loopback.json").read_text()) > 1.0
    with pytest.raises(ValueError, match="Connection refused"):
        parse_iperf3((LINK / "iperf3-refused.json").read_text())
    with pytest.raises(ValueError, match="did not print JSON"):
        parse_iperf3("iperf3: error - unable to connect")


def test_the_doctor_is_red_below_half_of_a_sparks_device() -> None:
    found = facts("gb10-one-cable")
    expected = expected_gbps("ib_write_bw", found, "rocep1s0f0", gb10=True)
    assert expected == GB10_DEVICE_GBPS
    healthy = LinkMeasurement(
        peer="spark02", device="rocep1s0f0", tool="ib_write_bw", output=(LINK / "ib_write_bw-gb10-healthy.txt").read_text()
    )
    degraded = healthy.model_copy(update={"output": (LINK / "ib_write_bw-gb10-degraded.txt").read_text()})
    assert judge_measurement(healthy, expected)[0] == "green"
    status, detail = judge_measurement(degraded, expected)
    assert status == "red" and detail.startswith("13.2 Gb/s (ib_write_bw), below half of the expected 100")
    assert "#108" in detail
    failed = healthy.model_copy(update={"rc": 1, "output": "Couldn't connect"})
    assert judge_measurement(failed, expected) == (
        "red",
        "ib_write_bw exited 1: Couldn't connect",
    )


def test_tcp_is_judged_against_the_interface_speed_or_yellow_without_one() -> None:
    found = facts("sandbox-veth", ("eth1",))
    assert expected_gbps("iperf3", found, "eth1", gb10=False) == 10.0
    run = LinkMeasurement(
        peer="ray-worker", device="eth1", tool="iperf3", output=(LINK / "iperf3-loopback.json").read_text()
    )
    assert judge_measurement(run, 10.0)[0] == "green"
    assert judge_measurement(run, None)[0] == "yellow"


@given(measured=st.floats(min_value=0.01, max_value=400), expected=st.floats(min_value=1, max_value=400))
def test_the_verdict_follows_the_share_of_the_expected_rate(measured: float, expected: float) -> None:
    output = json.dumps({"end": {"sum_received": {"bits_per_second": measured * 1e9}}})
    status, _ = judge_measurement(LinkMeasurement(peer="p", device="eth1", tool="iperf3", output=output), expected)
    share = measured / expected
    assert status == ("red" if share < 0.5 else "yellow" if share < 0.8 else "green")


def test_the_preflight_refuses_the_gb10_lock_nccl_for_a_graph_instance_over_two_sparks() -> None:
    lock = (LINK.parent / "locks" / "gb10-vllm-0.32.0.lock").read_text()
    version = lock.split("nvidia-nccl-cu13==", 1)[1].split()[0]
    assert version == "2.29.7"
    members = {name: link_state.read_link(str(LINK / "gb10-one-cable"), ["enp1s0f0np0"]) for name in ("s1", "s2")}
    instances = [
        {"name": "big", "model": "m", "intent": {"nodes": 2, "tensor_parallel_size": 2}},
        {"name": "eager", "model": "m", "intent": {"nodes": 2, "profile": "memory-saver"}},
        {"name": "one", "model": "m", "intent": {"nodes": 1}},
    ]
    settings = {
        "interface": "enp1s0f0np0",
        "hcas": BOTH_HALVES,
        "platform": "gb10",
        "nccl": {"version": version, "where": "nvidia-nccl-cu13 in the release lock"},
        "instances": instances,
    }
    result = link_check(members, settings)
    assert result["warnings"] == [] and len(result["problems"]) == 1
    assert result["problems"][0].startswith("NCCL 2.29.7 (nvidia-nccl-cu13 in the release lock)")
    assert ", and big captures CUDA graphs across nodes" in result["problems"][0]  # not the eager one
    # Before 2.29.3 the eager instance is refused too: NCCL itself hangs on aarch64 (nvidia/nccl#2353).
    older = link_check(members, {**settings, "nccl": {"version": "2.28.9", "where": "libnccl2"}})
    assert len(older["problems"]) == 2 and older["problems"][0].startswith(
        "NCCL 2.28.9 (libnccl2) is older than 2.29.3, and big, eager run over nodes on aarch64"
    )
    # The cpu platform captures no graphs; the sandbox's TCP link passes once accepted.
    sandbox = {"h": link_state.read_link(str(LINK / "sandbox-veth"), ["eth1"])}
    cpu = link_check(sandbox, {"interface": "eth1", "platform": "cpu", "accept_sockets": True, "instances": instances})
    assert cpu["problems"] == [] and len(cpu["warnings"]) == 2
    with pytest.raises(PlanError, match="ray_cluster_accept_sockets"):
        link_check(sandbox, {"interface": "eth1", "accept_sockets": "yes"})


def test_two_sparks_on_the_default_release_pass_the_preflight_with_no_pin_of_the_users() -> None:
    # The default gb10 release (vLLM 0.33.0) locks torch 2.14.0's NCCL 2.30.7 (resolved 2026-11-25).
    lock = (LINK.parent / "locks" / f"gb10-vllm-{NEWEST_RELEASE['gb10']}.lock").read_text()
    version = lock.split("nvidia-nccl-cu13==", 1)[1].split()[0]
    members = {name: link_state.read_link(str(LINK / "gb10-one-cable"), ["enp1s0f0np0"]) for name in ("s1", "s2")}
    settings = {
        "interface": "enp1s0f0np0",
        "hcas": BOTH_HALVES,
        "platform": "gb10",
        "nccl": {"version": version, "where": "nvidia-nccl-cu13 in the release lock"},
        "instances": [{"name": "big", "model": "m", "intent": {"nodes": 2, "tensor_parallel_size": 2}}],
    }
    assert version == "2.30.7" and link_check(members, settings) == {"problems": [], "warnings": []}


def test_the_doctor_reports_the_preflight_and_each_measurement_of_the_link() -> None:
    from sparkfleet.doctor import Status, diagnose

    degraded = (LINK / "ib_write_bw-gb10-degraded.txt").read_text()
    healthy = (LINK / "ib_write_bw-gb10-healthy.txt").read_text()
    link = {
        "interface": "enp1s0f0np0",
        "hcas": BOTH_HALVES,
        "platform": "gb10",
        "facts": link_state.read_link(str(LINK / "gb10-one-cable"), ["enp1s0f0np0"]),
        "measurements": [
            {"peer": "spark02", "device": "rocep1s0f0", "tool": "ib_write_bw", "output": healthy},
            {"peer": "spark02", "device": "roceP2p1s0f0", "tool": "ib_write_bw", "output": degraded},
        ],
    }
    findings = {f"{f.area}: {f.check}": f for f in diagnose({"link": link}, "spark01")}
    assert findings["link: preflight"].status is Status.GREEN
    assert findings["link: bandwidth to spark02 over rocep1s0f0"].status is Status.GREEN
    assert findings["link: bandwidth to spark02 over roceP2p1s0f0"].status is Status.RED
    shipped = {**link, "facts": link_state.read_link(str(LINK / "gb10-as-shipped"), []), "measurements": []}
    reds = [f for f in diagnose({"link": shipped}, "spark01") if f.status is Status.RED]
    assert len(reds) == 2 and all("MTU 1500" in f.detail for f in reds)


def test_the_doctor_reads_the_loop_results_ansible_registered() -> None:
    from sparkfleet.doctor import Status, diagnose

    link = {
        "interface": "eth1",
        "accept_sockets": True,
        "facts": link_state.read_link(str(LINK / "sandbox-veth"), ["eth1"]),
        "tool": "iperf3",
        "devices": ["eth1"],
        "runs": [
            {"item": ["ray-worker", 0], "rc": 0, "stdout": (LINK / "iperf3-loopback.json").read_text(), "cmd": ["x"]},
            {"item": ["ray-other", 0], "rc": 1, "stdout": (LINK / "iperf3-refused.json").read_text()},
        ],
    }
    findings = {f"{f.area}: {f.check}": f for f in diagnose({"link": link}, "ray-head")}
    assert findings["link: preflight"].status is Status.YELLOW  # TCP only, accepted
    assert findings["link: bandwidth to ray-worker over eth1"].status is Status.GREEN
    refused = findings["link: bandwidth to ray-other over eth1"]
    assert refused.status is Status.RED and "Connection refused" in refused.detail


def spark_tree(tmp_path: Path, gids: dict[int, tuple[str, str]]) -> Path:
    """A sysfs tree of one ACTIVE RoCE port at MTU 9000 with the given GID table (index: (type, address))."""
    port = tmp_path / "class" / "infiniband" / "rocep1s0f0" / "ports" / "1"
    for name, text in (("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"), ("rate", "200 Gb/sec (4X HDR)"), ("link_layer", "Ethernet")):  # fmt: skip
        (port / name).parent.mkdir(parents=True, exist_ok=True)
        (port / name).write_text(text + "\n")
    (port / "gids").mkdir()
    (port / "gid_attrs" / "types").mkdir(parents=True)
    for index in range(8):
        kind, address = gids.get(index, ("", link_state.ZERO_GID))
        (port / "gids" / str(index)).write_text(address + "\n")
        if kind:
            (port / "gid_attrs" / "types" / str(index)).write_text(kind + "\n")
    net = tmp_path / "class" / "infiniband" / "rocep1s0f0" / "device" / "net" / "enp1s0f0np0"
    net.mkdir(parents=True)
    (tmp_path / "class" / "net" / "enp1s0f0np0").mkdir(parents=True)
    (tmp_path / "class" / "net" / "enp1s0f0np0" / "mtu").write_text("9000\n")
    return tmp_path


V4 = "0000:0000:0000:0000:0000:ffff:0a00:0001"
LOCAL = "fe80:0000:0000:0000:5a48:aa00:0001:0002"
SHIPPED = {0: ("IB/RoCE v1", LOCAL), 1: ("RoCE v2", LOCAL), 2: ("IB/RoCE v1", V4), 3: ("RoCE v2", V4)}


def test_the_gid_index_must_be_roce_v2_on_an_address_on_every_port(tmp_path: Path) -> None:
    """MiaAI-Lab GLM-5.3-Flash#47: the RoCE v2 GIDs sit at index 5 on some kits, where index 3 is empty."""
    shifted = {0: SHIPPED[0], 1: SHIPPED[1], 4: ("IB/RoCE v1", V4), 5: ("RoCE v2", V4)}
    cases = ((SHIPPED, 3, None), (shifted, 3, "is empty"), (SHIPPED, 2, "is IB/RoCE v1"), (SHIPPED, 1, "(link-local)"))
    for case, (table, index, expect) in enumerate(cases):
        raw = link_state.read_link(str(spark_tree(tmp_path / str(case), table)), ["enp1s0f0np0"])
        found = LinkFacts.model_validate(raw)
        assert [g.index for g in found.rdma_ports[0].gids] == sorted(table)
        report = link_report(
            "s1", found, Interconnect(interface="enp1s0f0np0", hcas=["rocep1s0f0"], gid_index=index), False, True
        )
        if expect is None:
            assert report.problems == []
            continue
        assert len(report.problems) == 1 and expect in report.problems[0]
        good = 5 if table is shifted else 3
        assert f"set ray_cluster_gid_index: {good}" in report.problems[0] and "(ray_cluster_gid_index)" in report.problems[0]


def test_a_kernel_that_hands_kexec_pages_out_as_cma_and_a_stray_nccl_conf_are_refused(tmp_path: Path) -> None:
    """NV-Kernels#590: CmaFree above CmaTotal is Kexec HandOver, whose ibv_reg_mr fails under load;
    aicad-nccl-optimization#1: inline sends and preposted receives in /etc/nccl.conf froze the first all-reduce."""
    tree = spark_tree(tmp_path, SHIPPED)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       127535604 kB\nCmaTotal:              0 kB\nCmaFree:          940604 kB\n")
    conf = tmp_path / "nccl.conf"
    conf.write_text(
        "# left by an image\nNCCL_IB_USE_INLINE=1\nNCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS = 1\nNCCL_IB_HCA=mlx5_0\n"
    )
    raw = link_state.read_link(str(tree), ["enp1s0f0np0"], str(meminfo), str(conf))
    assert raw["cma"] == {"total_kb": 0, "free_kb": 940604} and raw["nccl_conf"]["settings"]["NCCL_IB_HCA"] == "mlx5_0"
    link = Interconnect(interface="enp1s0f0np0", hcas=["rocep1s0f0"])
    report = link_report("s1", LinkFacts.model_validate(raw), link, False, True)
    assert [p.split(":", 2)[1].strip()[:20] for p in report.problems] == [
        "the kernel reports C",
        f"{conf} sets NCCL_IB"[:20],
    ]
    assert "kho=off" in report.problems[0]
    assert "NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS=1, NCCL_IB_USE_INLINE=1" in report.problems[1]
    assert report.warnings == [f"s1: {conf} sets NCCL_IB_HCA: the cluster's units set their own (a process's environment wins), but any other NCCL program on the host takes the file's"]  # fmt: skip
    # CMA at zero alone is how newer kernels ship (NV-Kernels#403); no file, no finding; both off is NCCL's default.
    meminfo.write_text("CmaTotal:              0 kB\nCmaFree:               0 kB\n")
    conf.write_text("NCCL_IB_USE_INLINE=0\n")
    clean = link_report(
        "s1", LinkFacts.model_validate(link_state.read_link(str(tree), [], str(meminfo), str(conf))), link, False, True
    )
    assert clean.problems == [] and clean.warnings == []
    assert link_state.read_link(str(tree), [], str(tmp_path / "none"), str(tmp_path / "none"))["nccl_conf"] is None


def test_a_ring_of_three_sparks_routes_by_subnet_and_needs_the_nccl_that_can() -> None:
    members = {name: link_state.read_link(str(LINK / "gb10-one-cable"), ["enp1s0f0np0"]) for name in ("s1", "s2", "s3")}
    settings = {"interface": "enp1s0f0np0", "hcas": BOTH_HALVES, "platform": "gb10", "nccl": {"version": "2.29.7"}}
    old = link_check(members, settings)
    assert old["problems"] == [old["problems"][0]] and "first in 2.30.7" in old["problems"][0]
    assert "port 0 of one to port 1 of the next" in old["warnings"][0]
    new = link_check(members, {**settings, "nccl": {"version": "2.30.7"}})
    assert new["problems"] == [] and len(new["warnings"]) == 1
    assert link_check(dict(list(members.items())[:2]), {**settings, "nccl": {"version": "2.30.7"}})["warnings"] == []
    env = {e.name: e.value for e in interconnect_env(Interconnect(interface="enp1s0f0np0", hcas=BOTH_HALVES, members=3))}
    assert env["NCCL_IB_SUBNET_AWARE_ROUTING"] == "1"
    two = {e.name for e in interconnect_env(Interconnect(interface="enp1s0f0np0", hcas=BOTH_HALVES))}
    assert "NCCL_IB_SUBNET_AWARE_ROUTING" not in two
