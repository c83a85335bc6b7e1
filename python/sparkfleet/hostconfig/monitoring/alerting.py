"""Prometheus recording rules and alerts, each with its threshold and the reason it fires."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...sources import SEED_GUIDE, SEED_SM121, SEED_VLLM_BLOG
from .thresholds import BY, GPU_HANGS, HEAT_REASONS, NODE_JOB, SLOWDOWN_REASONS, VLLM_JOB, Thresholds


@dataclass(frozen=True)
class Recording:
    record: str
    expr: str


def _rate(metric: str, window: str) -> str:
    return f"sum by ({BY}) (rate({metric}[{window}]))"


def _quantile(q: float, histogram: str) -> str:
    return f"histogram_quantile({q}, sum by (le, {BY}) (rate({histogram}_bucket[5m])))"


RECORDINGS: tuple[Recording, ...] = (
    Recording("sparkfleet:vllm_prompt_tokens:rate1m", _rate("vllm:prompt_tokens_total", "1m")),
    Recording("sparkfleet:vllm_generation_tokens:rate1m", _rate("vllm:generation_tokens_total", "1m")),
    *(
        Recording(f"sparkfleet:vllm_ttft_seconds:p{int(q * 100)}_5m", _quantile(q, "vllm:time_to_first_token_seconds"))
        for q in (0.5, 0.95, 0.99)
    ),
    *(
        Recording(f"sparkfleet:vllm_itl_seconds:p{int(q * 100)}_5m", _quantile(q, "vllm:inter_token_latency_seconds"))
        for q in (0.5, 0.95, 0.99)
    ),
    Recording("sparkfleet:vllm_kv_cache_usage:ratio", f"max by ({BY}) (vllm:kv_cache_usage_perc)"),
    Recording("sparkfleet:vllm_requests_running:sum", f"sum by ({BY}) (vllm:num_requests_running)"),
    Recording("sparkfleet:vllm_requests_waiting:sum", f"sum by ({BY}) (vllm:num_requests_waiting)"),
    # seed 004: vLLM has no hit-rate gauge; the ratio of the two counters is the hit rate.
    Recording(
        "sparkfleet:vllm_prefix_cache_hit:ratio5m",
        f"{_rate('vllm:prefix_cache_hits_total', '5m')} / {_rate('vllm:prefix_cache_queries_total', '5m')}",
    ),
    # The front door's own counters (node_exporter textfile, front_door role): answers in 5xx over all.
    Recording(
        "sparkfleet:door_5xx:ratio5m",
        'sum by (sparkfleet_host) (rate(sparkfleet_door_requests_total{code="5xx"}[5m]))'
        " / sum by (sparkfleet_host) (rate(sparkfleet_door_requests_total[5m]))",
    ),
    Recording(
        "sparkfleet:vllm_spec_decode_acceptance:ratio5m",
        f"{_rate('vllm:spec_decode_num_accepted_tokens_total', '5m')}"
        f" / {_rate('vllm:spec_decode_num_draft_tokens_total', '5m')}",
    ),
)


@dataclass(frozen=True)
class Alert:
    name: str
    signal: str  # what the alert watches; the dashboard and the tests query it on its own
    condition: str  # completes the signal into the alert expression, formatted with the thresholds
    wait: str  # which Thresholds duration applies
    severity: str
    summary: str
    source: str

    def expr(self, th: Thresholds) -> str:
        return f"{self.signal} {self.condition.format(th=th, floor='sparkfleet_plan_memavailable_floor_bytes')}"


ALERTS: tuple[Alert, ...] = (
    Alert(
        "SparkfleetVllmDown",
        f'up{{job="{VLLM_JOB}", sparkfleet_on_demand!="true"}}',
        "== 0",
        "down_for",
        "critical",
        "vLLM instance {{ $labels.sparkfleet_instance }} on {{ $labels.sparkfleet_host }} does not answer /metrics",
        "systemd restarts a crashed instance; a long outage means it cannot start (see its journal)",
    ),
    Alert(
        "SparkfleetNodeExporterDown",
        f'up{{job="{NODE_JOB}"}}',
        "== 0",
        "down_for",
        "warning",
        "node_exporter on {{ $labels.sparkfleet_host }} does not answer: host memory is not being watched",
        "MemAvailable is the only memory signal on GB10 (nvidia-smi reports none)",
    ),
    Alert(
        "SparkfleetKvCacheNearlyFull",
        "sparkfleet:vllm_kv_cache_usage:ratio",
        "> {th.kv_cache_usage}",
        "sustained_for",
        "warning",
        "KV cache use of {{ $labels.sparkfleet_instance }} on {{ $labels.sparkfleet_host }}:"
        " {{ $value | humanizePercentage }}",
        f"{SEED_VLLM_BLOG}: compact or shorten conversations before KV use nears the limit; beyond it vLLM preempts",
    ),
    Alert(
        "SparkfleetMemoryHeadroomLow",
        "node_memory_MemAvailable_bytes",
        "< on (instance, job) {floor}",
        "sustained_for",
        "critical",
        "MemAvailable on {{ $labels.sparkfleet_host }} is {{ $value | humanize1024 }}B, below the plan's floor",
        f"{SEED_VLLM_BLOG} and {SEED_SM121}: unified memory; the OS, page cache and vLLM share one pool",
    ),
    Alert(
        "SparkfleetMemoryGuardStopped",
        "increase(sparkfleet_memory_guard_stops_total[15m])",
        "> 0",
        "down_for",
        "critical",
        "the memory guard on {{ $labels.sparkfleet_host }} stopped {{ $labels.sparkfleet_instance }}: MemAvailable fell"
        " under its floor (journalctl -u sparkfleet-memory-guard says the figures)",
        "Blackwellboy/model-serving-minefield#57: on GB10 cgroups do not see GPU allocations; the guard stops an"
        " instance before the host hangs on unified-memory exhaustion",
    ),
    Alert(
        "SparkfleetMemoryGuardSilent",
        "time() - sparkfleet_memory_guard_last_check_timestamp_seconds",
        "> 60",
        "down_for",
        "critical",
        "the memory guard on {{ $labels.sparkfleet_host }} has not read MemAvailable for {{ $value | humanizeDuration }}",
        "nothing else keeps a GB10 from wedging when an instance overruns its plan (MemoryMax does not see GPU memory)",
    ),
    Alert(
        "SparkfleetBenchmarkBelowPrediction",
        "sparkfleet_benchmark_far_below_prediction",
        "== 1",
        "down_for",
        "warning",
        "the last benchmark of {{ $labels.instance }} on {{ $labels.sparkfleet_host }} decoded far below its predicted"
        " speed (its summary.json names the likely causes: a kernel fallback, eager mode, compiles during the run)",
        "sparkfleet.planning.speed: the plan's speed prediction, fitted to the seeds' measured Spark figures",
    ),
    Alert(
        "SparkfleetTtftHigh",
        "sparkfleet:vllm_ttft_seconds:p95_5m",
        "> {th.ttft_p95_seconds}",
        "sustained_for",
        "warning",
        "TTFT p95 of {{ $labels.sparkfleet_instance }} on {{ $labels.sparkfleet_host }} is {{ $value | humanizeDuration }}",
        f"{SEED_GUIDE} §10: TTFT grows with prompt size at a flat prefill rate; a jump means queueing",
    ),
    Alert(
        "SparkfleetGenerationStalled",
        "sparkfleet:vllm_requests_running:sum",
        "> 0 and on (sparkfleet_host, sparkfleet_instance) sparkfleet:vllm_generation_tokens:rate1m == 0",
        "stalled_for",
        "critical",
        "{{ $labels.sparkfleet_instance }} on {{ $labels.sparkfleet_host }} has running requests but generates nothing",
        f"{SEED_SM121}: a wedged engine still answers /health; the watchdog restarts it",
    ),
    Alert(
        "SparkfleetDoorServerErrors",
        "sparkfleet:door_5xx:ratio5m",
        "> {th.door_error_ratio}",
        "sustained_for",
        "critical",
        "The front door of {{ $labels.sparkfleet_host }} answers {{ $value | humanizePercentage }} of requests with 5xx",
        "front_door: 503 while an instance (re)starts; a lasting share means an instance that cannot serve",
    ),
    Alert(
        "SparkfleetDoorAuthFailures",
        "sum by (sparkfleet_host) (rate(sparkfleet_door_auth_failures_total[5m])) * 60",
        "> {th.door_auth_failures_per_minute}",
        "sustained_for",
        "warning",
        "The front door of {{ $labels.sparkfleet_host }} refuses {{ $value }} requests a minute for a missing or bad key",
        "front_door: a revoked key still in use, or someone trying keys",
    ),
    Alert(
        "SparkfleetGpuClockStuckLow",
        "sparkfleet_gpu_sm_clock_mhz / sparkfleet_gpu_sm_clock_max_mhz",
        "< {th.gpu_clock_fraction} and on (instance, gpu) sparkfleet_gpu_utilization_ratio > {th.gpu_busy_utilization}"
        f' unless on (instance, gpu) (sparkfleet_gpu_clock_event_active{{{{reason=~"{SLOWDOWN_REASONS}"}}}} == 1)',
        "sustained_for",
        "critical",
        "GPU {{ $labels.gpu }} of {{ $labels.sparkfleet_host }} is busy at {{ $value | humanizePercentage }} of its"
        " maximum clock with no slowdown reason: a stuck clock (power-cycle the Spark)",
        f"{GPU_HANGS}: a GB10 sat at 702 MHz until power-cycled",
    ),
    Alert(
        "SparkfleetGpuBusyAtLowPower",
        "sparkfleet_gpu_utilization_ratio",
        "> {th.gpu_busy_utilization} and on (instance, gpu) sparkfleet_gpu_power_watts < {th.gpu_busy_min_watts}",
        "sustained_for",
        "critical",
        "GPU {{ $labels.gpu }} of {{ $labels.sparkfleet_host }} reports {{ $value | humanizePercentage }} busy at"
        " almost no power: a wedged GPU that /health does not show",
        f"{GPU_HANGS}: 96 % utilisation at 20 W with /health green",
    ),
    Alert(
        "SparkfleetGpuThermalSlowdown",
        f'max by (sparkfleet_host, instance, gpu) (sparkfleet_gpu_clock_event_active{{reason=~"{HEAT_REASONS}"}})',
        "== 1",
        "sustained_for",
        "warning",
        "GPU {{ $labels.gpu }} of {{ $labels.sparkfleet_host }} is slowed down for heat: check airflow and dust",
        "nvidia-smi clocks_event_reasons (hw_slowdown, hw/sw_thermal_slowdown); decode speed falls with the clock",
    ),
    Alert(
        "SparkfleetSpecDecodeAcceptanceLow",
        "sparkfleet:vllm_spec_decode_acceptance:ratio5m",
        "< {th.spec_acceptance}",
        "sustained_for",
        "warning",
        "Speculative acceptance of {{ $labels.sparkfleet_instance }} is {{ $value | humanizePercentage }}",
        f"{SEED_GUIDE} §14: DFlash acceptance collapses on quantized weights and then slows decoding down",
    ),
)


def rules_document(th: Thresholds) -> dict[str, Any]:
    """The Prometheus rule file (check it with promtool check rules)."""
    alerts = [
        {
            "alert": a.name,
            "expr": a.expr(th),
            "for": getattr(th, a.wait),
            "labels": {"severity": a.severity},
            "annotations": {"summary": a.summary, "description": a.source},
        }
        for a in ALERTS
    ]
    return {
        "groups": [
            {"name": "sparkfleet-vllm-recording", "rules": [{"record": r.record, "expr": r.expr} for r in RECORDINGS]},
            {"name": "sparkfleet-vllm-alerts", "rules": alerts},
        ]
    }


def queries(th: Thresholds) -> list[dict[str, str]]:
    """Every expression the rules hold, with the signal each alert watches (what tests run live)."""
    rows = [{"kind": "record", "name": r.record, "expr": r.expr} for r in RECORDINGS]
    for a in ALERTS:
        rows.append({"kind": "alert", "name": a.name, "expr": a.expr(th)})
        rows.append({"kind": "signal", "name": a.name, "expr": a.signal})
    return rows
