"""What the doctor playbook observed on a host, and the finding each judgement returns."""

from __future__ import annotations

import re
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..hostconfig.link import LinkFacts, LinkMeasurement
from ..models import GIB

KV_TOLERANCE = 0.10  # beyond this the plan and vLLM disagree enough to look at


class Status(str, Enum):
    GREEN = "green"
    YELLOW = "yellow"
    RED = "red"


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True)

    area: str
    check: str
    status: Status
    detail: str


class Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Policy(Loose):
    driver_branches: list[str] = ["580"]
    driver_override: bool = False
    cuda_major: int = 13
    headless: bool = True
    sysctl: dict[str, str] = Field(default_factory=dict)
    sysctl_apply: bool = True
    sysctl_file: str = "/etc/sysctl.d/90-sparkfleet.conf"


class HostObservation(Loose):
    facts: dict[str, Any]
    policy: Policy
    sysctl: dict[str, str] = Field(default_factory=dict)
    sysctl_file: str | None = None
    default_target: str = ""
    meminfo: str = ""
    kernel_log: str = ""  # this boot's NVRM Xid lines (journalctl -k)

    @property
    def page_cache_bytes(self) -> int:
        found = re.search(r"^Cached:\s+(\d+) kB", self.meminfo, re.M)
        return int(found.group(1)) * 1024 if found else 0


class InstanceObservation(Loose):
    name: str
    unit: dict[str, str] = Field(default_factory=dict)
    ready: dict[str, Any] = Field(default_factory=dict)
    applied_plan: dict[str, Any] | None = None
    wanted_plan: dict[str, Any] | None = None
    model: dict[str, Any] = Field(default_factory=dict)
    journal: str = ""
    # Switched by the front door: stopped is its normal state between uses.
    on_demand: bool = False
    # The model directory's read of its largest weight file (roles/vllm_serve/files/read_speed.py).
    read_speed: dict[str, Any] = Field(default_factory=dict)
    start_timeout_s: int | None = None
    # Its last start as the probe recorded it (sparkfleet_start.py), and its watchdog's state (an overrun's phase).
    start: dict[str, Any] | None = None
    watchdog: dict[str, Any] | None = None
    # The benchmark playbook's last verdict on this instance against its predicted speed (benchmark-<name>.json).
    benchmark: dict[str, Any] | None = None
    # The long-reply check's probe output, when the doctor was asked to run it (vllm_serve_doctor_long_reply_tokens).
    long_reply: dict[str, Any] | None = None


class ServeObservation(Loose):
    release: dict[str, Any] | None = None
    # The releases installed beside current (host_facts' side_releases): an instance whose plan names one runs on it.
    side_releases: list[dict[str, Any]] = Field(default_factory=list)
    host_plan: dict[str, Any] | None = None
    plan_error: str | None = None
    instances: list[InstanceObservation] = Field(default_factory=list)
    # The memory guard's state file and its unit's ActiveState.
    memory_guard: dict[str, Any] | None = None
    memory_guard_state: str | None = None


class LinkObservation(Loose):
    """A cluster member's link (ray_cluster's doctor): what the preflight judges, and the bandwidth measured
    from the head to every other member."""

    interface: str
    hcas: list[str] = Field(default_factory=list)
    gid_index: int = 3
    accept_sockets: bool = False
    platform: str = "cpu"
    facts: LinkFacts = Field(default_factory=LinkFacts)
    measurements: list[LinkMeasurement] = Field(default_factory=list)
    # The doctor tasks' loop results as Ansible registers them: item [peer, device index], stdout, rc.
    tool: Literal["ib_write_bw", "iperf3"] = "iperf3"
    devices: list[str] = Field(default_factory=list)
    runs: list[dict[str, Any]] = Field(default_factory=list)
    # NCCL's RAS polls on this member and its GPU's utilisation and power (roles/ray_cluster/files/sparkfleet_ras_poll.py).
    ras: dict[str, Any] | None = None

    def measured(self) -> list[LinkMeasurement]:
        out = list(self.measurements)
        for run in self.runs:
            peer, index = run["item"]
            output = run.get("stdout") or run.get("stderr") or run.get("msg") or ""
            out.append(
                LinkMeasurement(peer=peer, device=self.devices[index], tool=self.tool, output=output, rc=run.get("rc", 1))
            )
        return out


class Observations(Loose):
    host: HostObservation | None = None
    serve: ServeObservation | None = None
    link: LinkObservation | None = None
    services: dict[str, dict[str, str]] = Field(default_factory=dict)
    alerts: dict[str, Any] = Field(default_factory=dict)


def gib_text(value: float) -> str:
    return f"{value / GIB:.1f} GiB"
