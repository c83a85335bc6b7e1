"""The whole verdict on one host, and how it reads."""

from __future__ import annotations

from typing import Any

from ..hostconfig.monitoring import thresholds
from .host import host_findings
from .observations import Finding, Observations, Status
from .serving import link_findings, serve_findings, service_findings


def diagnose(raw: Any, host: str = "") -> list[Finding]:
    obs = Observations.model_validate(raw)
    findings: list[Finding] = []
    if obs.host is not None:
        findings += host_findings(obs.host)
    if obs.serve is not None:
        findings += serve_findings(obs.serve, obs.host, thresholds(obs.alerts).memory_floor_fraction)
    if obs.link is not None:
        findings += link_findings(host or "this host", obs.link)
    findings += service_findings(obs.services)
    return findings


def render(host: str, findings: list[Finding]) -> str:
    marks = {Status.GREEN: "ok  ", Status.YELLOW: "warn", Status.RED: "RED "}
    width = max((len(f"{f.area}: {f.check}") for f in findings), default=10)
    lines = [f"sparkfleet doctor: {host}"]
    lines += [f"  {marks[f.status]}  {f'{f.area}: {f.check}':<{width}}  {f.detail}" for f in findings]
    reds = sum(f.status is Status.RED for f in findings)
    lines.append(f"  {reds} red, {sum(f.status is Status.YELLOW for f in findings)} yellow, {len(findings)} checks")
    return "\n".join(lines)
