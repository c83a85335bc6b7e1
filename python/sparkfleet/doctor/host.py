"""Judging the host: memory, swap, drivers and sysctls."""

from __future__ import annotations

from ..sources import SEED_NANO, SEED_SM121
from .observations import Finding, HostObservation, Status, gib_text
from .serving import log_findings


def host_findings(host: HostObservation) -> list[Finding]:
    facts, policy = host.facts, host.policy
    out: list[Finding] = []
    platform = facts.get("platform", "?")
    if platform == "gb10":
        driver = str(facts.get("driver_version") or "")
        branch_ok = driver.split(".", maxsplit=1)[0] in policy.driver_branches
        if branch_ok:
            out.append(Finding(area="host", check="driver", status=Status.GREEN, detail=f"{driver} (GB10)"))
        else:
            why = f"590.x has a CUDAGraph deadlock on GB10 ({SEED_SM121})" if driver.startswith("590") else "untested"
            status = Status.YELLOW if policy.driver_override else Status.RED
            accepted = ", ".join(f"{b}.x" for b in policy.driver_branches)
            out.append(
                Finding(
                    area="host",
                    check="driver",
                    status=status,
                    detail=f"{driver or 'none'}: not {accepted}; {why}"
                    + ("; accepted by host_prep_driver_override" if policy.driver_override else ""),
                )
            )
        cuda = str(facts.get("cuda_version") or "")
        ptxas = facts.get("ptxas_path")
        cuda_ok = cuda.split(".", maxsplit=1)[0] == str(policy.cuda_major) and bool(ptxas)
        out.append(
            Finding(
                area="host",
                check="cuda",
                status=Status.GREEN if cuda_ok else Status.RED,
                detail=f"CUDA {cuda or 'missing'}, ptxas {ptxas or 'missing'}"
                + ("" if cuda_ok else f"; sm_121 needs CUDA {policy.cuda_major}'s ptxas ({SEED_SM121})"),
            )
        )
    elif platform == "cpu":
        out.append(Finding(area="host", check="platform", status=Status.GREEN, detail="cpu (no GPU checks)"))
    else:
        out.append(Finding(area="host", check="platform", status=Status.RED, detail=f"{platform}: not a GB10 or cpu host"))

    total, available = int(facts.get("mem_total_bytes") or 0), int(facts.get("mem_available_bytes") or 0)
    out.append(
        Finding(
            area="host",
            check="memory",
            status=Status.GREEN,
            detail=f"MemAvailable {gib_text(available)} of {gib_text(total)}; page cache {gib_text(host.page_cache_bytes)}",
        )
    )
    if policy.headless:
        target_ok = host.default_target == "multi-user.target"
        out.append(
            Finding(
                area="host",
                check="default target",
                status=Status.GREEN if target_ok else Status.YELLOW,
                detail=host.default_target
                + ("" if target_ok else f"; host_prep sets multi-user.target (a desktop costs 2-3 GB, {SEED_NANO})"),
            )
        )
    out += sysctl_findings(host)
    out += log_findings("host", host.kernel_log, {})
    return out


def _sysctl_file_values(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.lstrip().startswith(("#", ";")))
    return {key.strip(): value.strip() for key, value in pairs}


def sysctl_findings(host: HostObservation) -> list[Finding]:
    """The persisted file must hold what host_prep sets; the live kernel must too, where host_prep applies it."""
    policy = host.policy
    wanted = {key: str(value) for key, value in policy.sysctl.items()}
    out: list[Finding] = []
    if host.sysctl_file is None:
        out.append(Finding(area="host", check="sysctl file", status=Status.RED, detail=f"{policy.sysctl_file} is missing"))
    else:
        written = _sysctl_file_values(host.sysctl_file)
        drifted = [
            f"{k} = {written.get(k, 'missing')} (host_prep sets {v})" for k, v in wanted.items() if written.get(k) != v
        ]
        out.append(
            Finding(
                area="host",
                check="sysctl file",
                status=Status.RED if drifted else Status.GREEN,
                detail=f"{policy.sysctl_file}: " + ("; ".join(drifted) if drifted else "as host_prep writes it"),
            )
        )
    live = [
        f"{k} is {host.sysctl.get(k, 'unreadable')} (host_prep sets {v})"
        for k, v in wanted.items()
        if host.sysctl.get(k) != v
    ]
    if not live:
        detail, status = ", ".join(f"{k}={v}" for k, v in wanted.items()), Status.GREEN
    elif policy.sysctl_apply:
        detail, status = "; ".join(live), Status.RED
    else:
        detail, status = "; ".join(live) + " - not applied here (host_prep_sysctl_apply: false)", Status.YELLOW
    out.append(Finding(area="host", check="sysctl live", status=status, detail=detail))
    return out
