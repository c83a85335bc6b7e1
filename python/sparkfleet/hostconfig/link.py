"""The cluster link between Sparks: what the link preflight refuses before a cluster change, and how the
link doctor judges a measured bandwidth.

A Spark cluster lives or dies by its link. NCCL over RoCE on both PCIe halves of a ConnectX-7 port is
10-20x faster than over TCP sockets (seed 002 §13); a port left out of NCCL_IB_HCA or at MTU 1500 costs
most of it (dgx-spark-playbooks#103: 3 -> 23.7 GB/s busbw); a badly initialised port caps near 13 Gb/s
with every link check green (dgx-spark-playbooks#108). Nothing here touches a host: link_facts reads
the ports from sysfs, the ray_cluster role runs the bandwidth tools, this module judges.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Literal

from pydantic import Field, ValidationError

from ..errors import PlanError, from_validation
from ..models import Strict
from ..sources import SEED_GUIDE
from .cluster import RING_MEMBERS, RING_NCCL_MIN, SOURCE_RING, Interconnect
from .ncclrules import nccl_version_tuple

JUMBO_MTU = 9000
# The QSFP port of a Spark negotiates 200 Gb/s (ibstat on GB10: geerlingguy/sbc-reviews#92).
GB10_PORT_GBPS = 200.0
# Each RDMA device of that port is one PCIe Gen5 x4 endpoint: about half the port each.
GB10_DEVICE_GBPS = 100.0
SOURCE_HALVES = "NVIDIA/dgx-spark-playbooks#103 (NCCL_IB_HCA on both halves and MTU 9000: 3 -> 23.7 GB/s busbw)"
SOURCE_DEGRADED = (
    "NVIDIA/dgx-spark-playbooks#108 (a CX-7 that initialised badly caps near 13 Gb/s; healthy devices "
    "measure 92.6-97.3 Gb/s)"
)
# perftest's RC WRITE fails above 64 KiB messages on GB10 while NCCL is fine (linux-rdma/perftest#394).
IB_WRITE_BW_MESSAGE_BYTES = 65536
SOURCE_PERFTEST = "linux-rdma/perftest#394 (ib_write_bw RC WRITE fails above 64 KiB on GB10)"
SOCKETS_COST = (
    f"NCCL over TCP sockets runs at a tenth to a twentieth of RoCE ({SEED_GUIDE} §13; a Spark pair measured "
    "3 GB/s busbw against 23.7 GB/s on both RoCE halves, dgx-spark-playbooks#103)"
)

SOURCE_CMA = (
    "NVIDIA/NV-Kernels#590 (default-on Kexec HandOver on 7.0 arm64-nvidia kernels hands ~9.3 GiB out as CMA: "
    "CmaTotal 0, CmaFree ~9.7 GiB) and luxingcom/aicad-nccl-optimization#1 (ibv_reg_mr fails with ENOMEM on "
    "7.0.0-1019-nvidia; 6.17.0-1031-nvidia with driver 580.173.02 runs)"
)
SOURCE_NCCL_CONF = (
    "luxingcom/aicad-nccl-optimization#1 (an /etc/nccl.conf with NCCL_IB_USE_INLINE=1 and "
    "NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS=1 froze the first 4-byte all-reduce: GPU at 96 % and ~16 W)"
)
SOURCE_GID = (
    "MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#47 (the RoCE v2 GIDs sit at index 5 on some kits, 3 on most); "
    "NCCL reads ports/N/gid_attrs/types for 'RoCE v2' (src/transport/net_ib/connect.cc)"
)
# What NCCL's own file must not turn on (both off by default in NCCL), and what it should not quietly set.
NCCL_CONF_FREEZES = {"NCCL_IB_USE_INLINE", "NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS"}
NCCL_CONF_SHADOWS = {"NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_SOCKET_IFNAME", "NCCL_NET", "NCCL_IB_DISABLE"}

_RATE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/sec")


class Gid(Strict):
    """One address of a port's GID table (ports/N/gids/I) and its type (ports/N/gid_attrs/types/I)."""

    index: Annotated[int, Field(ge=0, le=65535)]
    type: str = ""  # "RoCE v2", "IB/RoCE v1"
    gid: str = ""

    @property
    def roce_v2(self) -> bool:
        return self.type.strip().lower() == "roce v2"

    @property
    def link_local(self) -> bool:
        return self.gid.lower().startswith("fe80:")


class RdmaPort(Strict):
    """One port of an RDMA device as sysfs shows it (/sys/class/infiniband/DEV/ports/N)."""

    device: str
    port: Annotated[int, Field(ge=1, le=255)] = 1
    state: str = ""  # "4: ACTIVE"
    phys_state: str = ""  # "5: LinkUp"
    rate: str = ""  # "200 Gb/sec (4X HDR)"
    link_layer: str = ""  # "Ethernet" (RoCE) or "InfiniBand"
    netdevs: list[str] = Field(default_factory=list)
    gids: list[Gid] = Field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.state.rsplit(":", maxsplit=1)[-1].strip().upper() == "ACTIVE"

    @property
    def rate_gbps(self) -> float | None:
        found = _RATE.match(self.rate)
        return float(found[1]) if found else None

    def state_word(self) -> str:
        return self.state.rsplit(":", maxsplit=1)[-1].strip() or "unknown"


class NetDev(Strict):
    """A network interface as sysfs shows it (/sys/class/net/NAME)."""

    mtu: int | None = None
    operstate: str = ""
    # Mb/s; None where the driver does not know it (sysfs answers -1 or refuses the read).
    speed_mbps: int | None = None


class Cma(Strict):
    total_kb: int | None = None
    free_kb: int | None = None


class NcclConf(Strict):
    path: str
    settings: dict[str, str] = Field(default_factory=dict)


class LinkFacts(Strict):
    """What link_facts read of a member's link: its RDMA ports and the interfaces they and the link use, the
    kernel's CMA figures and NCCL's own configuration file (None where they were not read or are absent)."""

    rdma_ports: list[RdmaPort] = Field(default_factory=list)
    netdevs: dict[str, NetDev] = Field(default_factory=dict)
    cma: Cma | None = None
    nccl_conf: NcclConf | None = None


class LinkReport(Strict):
    transport: Literal["rdma", "sockets"]
    problems: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


def link_facts(raw: object, label: str = "sparkfleet_link") -> LinkFacts:
    try:
        return LinkFacts.model_validate(raw or {})
    except ValidationError as exc:
        raise from_validation(exc, label) from exc


def _mtu_problem(host: str, name: str, dev: NetDev | None, why: str, rdma: bool) -> str | None:
    if dev is None or dev.mtu is None or dev.mtu >= JUMBO_MTU:
        return None
    needs = (
        f"RoCE between Sparks needs {JUMBO_MTU} on every port NCCL uses"
        if rdma
        else f"NCCL's sockets carry each tensor in six times as many packets as at {JUMBO_MTU}, the MTU both ends "
        "of a Spark link are set to"
    )
    return f"{host}: {name} ({why}) has MTU {dev.mtu}: {needs} (ip link set dev {name} mtu {JUMBO_MTU}; {SOURCE_HALVES})"


def nccl_conf_findings(host: str, conf: NcclConf | None, rdma: bool) -> tuple[list[str], list[str]]:
    """NCCL's own file: settings known to freeze its warm-up refuse (on RoCE), the link's own settings there warn."""
    if conf is None:
        return [], []
    problems: list[str] = []
    warnings: list[str] = []
    frozen = sorted(k for k in NCCL_CONF_FREEZES if conf.settings.get(k, "0").strip() not in ("0", ""))
    if frozen and rdma:
        problems.append(
            f"{host}: {conf.path} sets {', '.join(f'{k}={conf.settings[k]}' for k in frozen)}, which every NCCL process "
            f"on the host reads: it froze NCCL's first all-reduce on a Spark's RoCE link ({SOURCE_NCCL_CONF}); "
            "remove them from the file (NCCL's defaults are off)"
        )
    shadowed = sorted(k for k in NCCL_CONF_SHADOWS if k in conf.settings)
    if shadowed:
        warnings.append(
            f"{host}: {conf.path} sets {', '.join(shadowed)}: the cluster's units set their own (a process's environment "
            "wins), but any other NCCL program on the host takes the file's"
        )
    return problems, warnings


def cma_problem(host: str, facts: LinkFacts) -> str | None:
    """The kernel that hands Kexec HandOver pageblocks out as CMA: RDMA registration fails under memory pressure."""
    cma = facts.cma
    if cma is None or cma.total_kb is None or cma.free_kb is None or cma.free_kb <= cma.total_kb:
        return None
    return (
        f"{host}: the kernel reports CmaFree {cma.free_kb} kB above CmaTotal {cma.total_kb} kB, the sign of Kexec "
        "HandOver: NCCL's memory registration (ibv_reg_mr) fails with ENOMEM once the GPU holds most of the memory "
        f"({SOURCE_CMA}); boot with kho=off, or a 6.17 nvidia kernel with its paired driver"
    )


def gid_problem(host: str, port: RdmaPort, index: int) -> str | None:
    """The GID index the link sets (NCCL_IB_GID_INDEX) against the port's table: it must be RoCE v2 on an address."""
    if not port.gids:
        return None
    chosen = next((g for g in port.gids if g.index == index), None)
    if chosen is not None and chosen.roce_v2 and not chosen.link_local:
        return None
    good = [g.index for g in port.gids if g.roce_v2 and not g.link_local]
    what = (
        "empty"
        if chosen is None
        else f"{chosen.type or 'of no type'}{' (link-local)' if chosen.link_local else ''} ({chosen.gid})"
    )
    fix = f"set ray_cluster_gid_index: {good[0]}" if good else "give the port an IPv4 address on the link"
    return (
        f"{host}: {port.device} port {port.port} GID index {index} (ray_cluster_gid_index) is {what}; "
        f"RoCE v2 on an address is at {', '.join(map(str, good)) or 'no index'}: {fix} ({SOURCE_GID})"
    )


def ring_findings(members: int, rdma: bool, nccl_version: str | None) -> tuple[list[str], list[str]]:
    """Three or more Sparks without a switch: NCCL must route by subnet, which needs 2.30.7, and every cable must
    join port 0 of one to port 1 of the next."""
    if members < RING_MEMBERS or not rdma:
        return [], []
    warning = (
        f"{members} Sparks in a switchless ring: every cable must join port 0 of one to port 1 of the next "
        f"(p0 to p0 times out in ibv_modify_qp); the units set NCCL_IB_SUBNET_AWARE_ROUTING=1 ({SOURCE_RING})"
    )
    found = nccl_version_tuple(nccl_version) if nccl_version else None
    if found is not None and found < RING_NCCL_MIN:
        need = ".".join(map(str, RING_NCCL_MIN))
        return [f"NCCL {nccl_version} routes no ring of {members} Sparks by subnet (first in {need}): {SOURCE_RING}"], [
            warning
        ]
    return [], [warning]


def link_report(host: str, facts: LinkFacts, link: Interconnect, accept_sockets: bool, gb10: bool) -> LinkReport:
    """Every way this member's link would silently cost the cluster its bandwidth, as refusals (problems) or
    warnings the user accepted."""
    problems: list[str] = []
    warnings: list[str] = []
    by_device = {p.device: p for p in facts.rdma_ports}
    active = sorted(p.device for p in facts.rdma_ports if p.active and p.link_layer.lower() != "infiniband")
    if not link.hcas:
        if active:
            message = (
                f"{host} has ACTIVE RDMA devices {', '.join(active)} but ray_cluster_hcas is empty, so NCCL would "
                f"use TCP sockets on {link.interface}: {SOCKETS_COST}; set ray_cluster_hcas: [{', '.join(active)}]"
            )
        else:
            message = (
                f"{host}: the link {link.interface} has no RDMA device (TCP only), so NCCL would use sockets: {SOCKETS_COST}"
            )
        if accept_sockets:
            warnings.append(f"{message} (accepted: ray_cluster_accept_sockets)")
        else:
            problems.append(f"{message}; to run on sockets anyway set ray_cluster_accept_sockets: true")
        iface_mtu = _mtu_problem(host, link.interface, facts.netdevs.get(link.interface), "the cluster link", False)
        if iface_mtu:
            warnings.append(iface_mtu)
        warnings += nccl_conf_findings(host, facts.nccl_conf, False)[1]
        return LinkReport(transport="sockets", problems=problems, warnings=warnings)

    for hca in link.hcas:
        port = by_device.get(hca)
        if port is None:
            have = ", ".join(sorted(by_device)) or "none"
            problems.append(f"{host}: RDMA device {hca} (ray_cluster_hcas) does not exist; the host has {have}")
            continue
        if not port.active:
            problems.append(
                f"{host}: {hca} port {port.port} is {port.state_word()} ({port.phys_state or 'no physical state'}), "
                "not ACTIVE: NCCL would hang on it or fall back to sockets; check the cable and ibstat"
            )
            continue
        rate = port.rate_gbps
        if gb10 and rate is not None and rate < GB10_PORT_GBPS:
            warnings.append(
                f"{host}: {hca} negotiated {rate:g} Gb/s, a Spark's QSFP port runs at {GB10_PORT_GBPS:g}: "
                "check the cable (a 100G cable or a port forced down)"
            )
        for name in port.netdevs:
            mtu = _mtu_problem(host, name, facts.netdevs.get(name), f"the netdev of {hca}", True)
            if mtu:
                problems.append(mtu)
        gid = gid_problem(host, port, link.gid_index)
        if gid:
            problems.append(gid)
    missing = [d for d in active if d not in link.hcas]
    if missing:
        problems.append(
            f"{host}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} ACTIVE but not in ray_cluster_hcas: "
            f"NCCL would use only part of the link ({SOURCE_HALVES}); set ray_cluster_hcas: "
            f"[{', '.join(sorted(set(link.hcas) | set(missing)))}]"
        )
    judged = {name for hca in link.hcas if hca in by_device for name in by_device[hca].netdevs}
    iface_mtu = _mtu_problem(host, link.interface, facts.netdevs.get(link.interface), "the cluster link", True)
    if iface_mtu and link.interface not in judged:
        problems.append(iface_mtu)
    cma = cma_problem(host, facts)
    if cma:
        problems.append(cma)
    conf_problems, conf_warnings = nccl_conf_findings(host, facts.nccl_conf, True)
    return LinkReport(transport="rdma", problems=problems + conf_problems, warnings=warnings + conf_warnings)


# --------------------------------------------------------------------------- the link doctor


def parse_ib_write_bw(text: str) -> float:
    """The average bandwidth of an ib_write_bw run in Gb/s, from its result table (--report_gbits or MB/s)."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        header = re.search(r"BW average\[(Gb|MB)/sec\]", line)
        if not header:
            continue
        columns = re.sub(r"BW (peak|average)", r"BW_\1", line).split()
        column = next(i for i, word in enumerate(columns) if word.startswith("BW_average"))
        for row in lines[index + 1 :]:
            words = row.split()
            if len(words) > column and words[0].isdigit():
                value = float(words[column])
                return value if header[1] == "Gb" else value * 8 / 1000
        break
    raise ValueError("no ib_write_bw result table (BW average) in the output")


def parse_iperf3(text: str) -> float:
    """The received bandwidth of an iperf3 run in Gb/s, from its JSON (-J) output."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"iperf3 did not print JSON: {text[:200]!r}") from exc
    if data.get("error"):
        raise ValueError(f"iperf3: {data['error']}")
    try:
        return float(data["end"]["sum_received"]["bits_per_second"]) / 1e9
    except (KeyError, TypeError) as exc:
        raise ValueError("iperf3's JSON has no end.sum_received.bits_per_second") from exc


def expected_gbps(tool: Literal["ib_write_bw", "iperf3"], facts: LinkFacts, device: str, gb10: bool) -> float | None:
    """What one measurement should reach: an RDMA device's port rate (a Spark's device: half the port), a TCP
    link's interface speed; None where sysfs does not say."""
    if tool == "ib_write_bw":
        port = next((p for p in facts.rdma_ports if p.device == device), None)
        rate = port.rate_gbps if port else None
        if gb10:
            return GB10_DEVICE_GBPS if rate is None else min(rate, GB10_DEVICE_GBPS)
        return rate
    dev = facts.netdevs.get(device)
    return dev.speed_mbps / 1000 if dev and dev.speed_mbps and dev.speed_mbps > 0 else None


class LinkMeasurement(Strict):
    """One bandwidth test from this member to a peer over one device (an RDMA device, or the link interface)."""

    peer: str
    device: str
    tool: Literal["ib_write_bw", "iperf3"]
    output: str = ""
    rc: int = 0


def judge_measurement(m: LinkMeasurement, expected: float | None) -> tuple[str, str]:
    """(green|yellow|red, detail): red below half the expected rate or when the test failed."""
    try:
        if m.rc != 0:
            raise ValueError(f"{m.tool} exited {m.rc}: {m.output.strip()[-300:] or 'no output'}")
        measured = parse_ib_write_bw(m.output) if m.tool == "ib_write_bw" else parse_iperf3(m.output)
    except ValueError as exc:
        return "red", str(exc)
    what = f"{measured:.1f} Gb/s ({m.tool})"
    if expected is None:
        return "yellow", f"{what}; the expected rate is unknown (the interface reports no speed)"
    share = measured / expected
    if share < 0.5:
        cause = f" ({SOURCE_DEGRADED})" if m.tool == "ib_write_bw" else ""
        return "red", f"{what}, below half of the expected {expected:g} Gb/s{cause}"
    if share < 0.8:
        return "yellow", f"{what}, {share:.0%} of the expected {expected:g} Gb/s"
    return "green", f"{what}, expected {expected:g} Gb/s"


def measurements(raw: object, label: str = "ray_cluster_doctor.measurements") -> list[LinkMeasurement]:
    try:
        return [LinkMeasurement.model_validate(item) for item in raw or []]  # type: ignore[attr-defined]
    except ValidationError as exc:
        raise from_validation(exc, label) from exc
    except TypeError as exc:
        raise PlanError(label, "a list of measurements") from exc
