"""What Prometheus scrapes and alerts on, and what Grafana shows, for the plans applied to a fleet.

One table of signals feeds the recording rules, the alerts and the dashboard panels, so a panel and
the alert on the same quantity cannot drift apart. The memory floor comes from the plan: memory is
unified, so vLLM, the OS and the page cache share one pool, and the alert fires when MemAvailable
eats into what the plan reserved for the host.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator

from .door import METRICS_PREFIX
from .errors import PlanError, from_validation
from .hostplan import Endpoint, HostPlan, footprint_gib
from .models import GIB, WILDCARDS, ServePlan, Strict
from .sources import SEED_GUIDE, SEED_SM121, SEED_VLLM_BLOG

VLLM_JOB = "sparkfleet-vllm"
# Clock-event reasons that explain a low clock (the GPU metrics collector, monitoring role).
_HEAT = "hw_slowdown|hw_thermal_slowdown|sw_thermal_slowdown"
_SLOWDOWNS = f"sw_power_cap|hw_power_brake_slowdown|{_HEAT}"
GPU_HANGS = "GB10 hangs reported in other Spark projects' trackers (issue 20)"
NODE_JOB = "sparkfleet-node"
BY = "sparkfleet_host, sparkfleet_instance"
_DURATION = re.compile(r"[1-9][0-9]*(ms|s|m|h)|0s")


class Thresholds(Strict):
    """When an alert fires; the role's monitoring_alerts variable, validated here."""

    kv_cache_usage: Annotated[float, Field(gt=0, le=1)] = 0.9
    ttft_p95_seconds: Annotated[float, Field(gt=0)] = 10.0
    memory_floor_fraction: Annotated[float, Field(gt=0, le=1)] = 0.5
    spec_acceptance: Annotated[float, Field(gt=0, lt=1)] = 0.3
    door_error_ratio: Annotated[float, Field(gt=0, le=1)] = 0.05
    door_auth_failures_per_minute: Annotated[float, Field(gt=0)] = 30.0
    # A GPU this busy is under load; below this share of its maximum clock, or this power, it is stuck.
    gpu_busy_utilization: Annotated[float, Field(gt=0, le=1)] = 0.9
    gpu_clock_fraction: Annotated[float, Field(gt=0, lt=1)] = 0.5
    gpu_busy_min_watts: Annotated[float, Field(gt=0)] = 25.0
    down_for: str = "2m"
    stalled_for: str = "2m"
    sustained_for: str = "5m"

    @field_validator("down_for", "stalled_for", "sustained_for")
    @classmethod
    def _duration(cls, value: str) -> str:
        if not _DURATION.fullmatch(value):
            raise ValueError(f"{value!r} is not a Prometheus duration such as 30s, 2m or 1h")
        return value


def thresholds(raw: Any, label: str = "monitoring_alerts") -> Thresholds:
    try:
        return Thresholds.model_validate(raw or {})
    except ValidationError as exc:
        raise from_validation(exc, label, ".", (f"one of the keys {', '.join(Thresholds.model_fields)}",)) from exc


# --------------------------------------------------------------------------- recording rules


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


# --------------------------------------------------------------------------- alerts


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
        f' unless on (instance, gpu) (sparkfleet_gpu_clock_event_active{{{{reason=~"{_SLOWDOWNS}"}}}} == 1)',
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
        f'max by (sparkfleet_host, instance, gpu) (sparkfleet_gpu_clock_event_active{{reason=~"{_HEAT}"}})',
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


# --------------------------------------------------------------------------- plan metrics


def _sample(name: str, value: float, labels: dict[str, str] | None = None) -> str:
    text = ",".join(f'{k}="{v}"' for k, v in (labels or {}).items())
    return f"{name}{{{text}}} {value:.0f}" if text else f"{name} {value:.0f}"


def plan_metrics(host_plan: HostPlan, th: Thresholds) -> str:
    """The applied plan as node_exporter textfile metrics: the alert floor and the dashboard's budget lines."""
    per_host = [
        ("sparkfleet_plan_memory_total_bytes", "MemTotal the plan was made for", host_plan.mem_total_gib * GIB),
        ("sparkfleet_plan_host_reserve_bytes", "memory the plan leaves to the OS", host_plan.host_reserve_gib * GIB),
        ("sparkfleet_plan_footprint_bytes", "all instances' planned footprint", host_plan.footprint_gib * GIB),
        (
            "sparkfleet_plan_memavailable_floor_bytes",
            f"alert when MemAvailable is below this ({th.memory_floor_fraction} of the host reserve)",
            th.memory_floor_fraction * host_plan.host_reserve_gib * GIB,
        ),
    ]
    lines: list[str] = []
    for name, help_text, value in per_host:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", _sample(name, value)]
    per_instance: list[tuple[str, str, Callable[[ServePlan], float]]] = [
        ("sparkfleet_plan_instance_footprint_bytes", "planned footprint", lambda p: footprint_gib(p) * GIB),
        ("sparkfleet_plan_instance_kv_cache_bytes", "planned KV cache", lambda p: p.kv_cache_memory_bytes),
        ("sparkfleet_plan_instance_kv_tokens", "planned KV capacity in tokens", lambda p: p.kv_tokens),
        ("sparkfleet_plan_instance_max_num_seqs", "planned concurrent sequences", lambda p: p.max_num_seqs),
    ]
    instances = sorted(host_plan.instances.items())
    for name, help_text, value_of in per_instance:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        lines += [_sample(name, value_of(p), {"sparkfleet_instance": n}) for n, p in instances]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- scrape targets


class ScrapedHost(Strict):
    """One inventory host as the Prometheus that scrapes it sees it."""

    address: str
    server: str
    endpoints: dict[str, Endpoint] = Field(default_factory=dict)
    node_exporter: bool = True
    # The door's address and port, when its instances serve on sockets behind it: their /metrics is read there.
    door_address: str = "0.0.0.0"
    door_port: int | None = None
    # Instances the front door switches: down between uses by design, so no down alert for them.
    on_demand: set[str] = Field(default_factory=set)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _target(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def scrape_targets(server: str, hosts: dict[str, ScrapedHost], node_port: int) -> dict[str, list[dict[str, Any]]]:
    """file_sd target groups for the Prometheus on `server`: the instances and node_exporter of each host it scrapes.

    An instance on its Unix socket behind the door is read through its own host's door ("vllm_door": TLS and
    the door's metrics key, job label still VLLM_JOB); only that host's Prometheus has the key.
    """
    vllm: list[dict[str, Any]] = []
    through_door: list[dict[str, Any]] = []
    node: list[dict[str, Any]] = []
    for name, host in sorted(hosts.items()):
        if host.server != server:
            continue
        local = name == server
        if host.node_exporter:
            address = "127.0.0.1" if local else host.address
            node.append({"targets": [_target(address, node_port)], "labels": {"sparkfleet_host": name}})
        for instance, ep in sorted(host.endpoints.items()):
            labels = {"sparkfleet_host": name, "sparkfleet_instance": instance}
            if instance in host.on_demand:
                labels["sparkfleet_on_demand"] = "true"
            if ep.socket is not None:
                if not local or host.door_port is None:
                    raise PlanError(
                        f"vllm_serve_instances ({instance}) on {name}",
                        f"serves on a Unix socket behind the front door of {name}; only the Prometheus on {name} "
                        "holds that door's metrics key",
                        (f"monitoring_server: {name} on {name}",),
                    )
                labels["__metrics_path__"] = f"{METRICS_PREFIX}{instance}"
                door = "127.0.0.1" if host.door_address in WILDCARDS else host.door_address
                through_door.append({"targets": [_target(door, host.door_port)], "labels": labels})
                continue
            if local:
                address = ep.local_host
            elif ep.host in WILDCARDS:
                address = host.address
            elif _loopback(ep.host):
                raise PlanError(
                    f"vllm_serve_instances ({instance}) on {name}",
                    f"listens on {ep.host}, which the Prometheus on {server} cannot reach",
                    ("host: 0.0.0.0 with an api_key (/metrics needs none)", f"monitoring_server: {name} on {name}"),
                )
            else:
                address = ep.host
            vllm.append({"targets": [_target(address, ep.port)], "labels": labels})
    return {"vllm": vllm, "vllm_door": through_door, "node": node}


# --------------------------------------------------------------------------- dashboard


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str
    targets: tuple[tuple[str, str], ...]  # (expr, legend)
    description: str = ""


_SEL = 'sparkfleet_host=~"$host", sparkfleet_instance=~"$instance"'
_HOST = 'sparkfleet_host=~"$host"'


def _r(record: str, selector: str = _SEL) -> str:
    return f"{record}{{{selector}}}"


PANELS: tuple[Panel, ...] = (
    Panel(
        "Prompt tokens/s",
        "short",
        ((_r("sparkfleet:vllm_prompt_tokens:rate1m"), "{{sparkfleet_host}}/{{sparkfleet_instance}}"),),
        "prefill throughput",
    ),
    Panel(
        "Generation tokens/s",
        "short",
        ((_r("sparkfleet:vllm_generation_tokens:rate1m"), "{{sparkfleet_host}}/{{sparkfleet_instance}}"),),
        "decode throughput, all streams together",
    ),
    Panel(
        "Time to first token",
        "s",
        tuple((_r(f"sparkfleet:vllm_ttft_seconds:p{q}_5m"), f"p{q} {{{{sparkfleet_instance}}}}") for q in (50, 95, 99)),
    ),
    Panel(
        "Inter-token latency",
        "s",
        tuple((_r(f"sparkfleet:vllm_itl_seconds:p{q}_5m"), f"p{q} {{{{sparkfleet_instance}}}}") for q in (50, 95, 99)),
    ),
    Panel(
        "KV cache use",
        "percentunit",
        ((_r("sparkfleet:vllm_kv_cache_usage:ratio"), "{{sparkfleet_host}}/{{sparkfleet_instance}}"),),
        "vllm:kv_cache_usage_perc; preemption starts at 100%",
    ),
    Panel(
        "Requests running / waiting",
        "short",
        (
            (_r("sparkfleet:vllm_requests_running:sum"), "running {{sparkfleet_instance}}"),
            (_r("sparkfleet:vllm_requests_waiting:sum"), "waiting {{sparkfleet_instance}}"),
        ),
    ),
    Panel(
        "Host MemAvailable vs the plan",
        "bytes",
        (
            (f"node_memory_MemAvailable_bytes{{{_HOST}}}", "MemAvailable {{sparkfleet_host}}"),
            (
                f"sparkfleet_plan_memory_total_bytes{{{_HOST}}} - sparkfleet_plan_footprint_bytes{{{_HOST}}}",
                "planned free {{sparkfleet_host}}",
            ),
            (f"sparkfleet_plan_memavailable_floor_bytes{{{_HOST}}}", "alert floor {{sparkfleet_host}}"),
        ),
        "unified memory: nvidia-smi shows none on GB10, MemAvailable is what CUDA can still get",
    ),
    Panel(
        "Speculative decoding acceptance",
        "percentunit",
        ((_r("sparkfleet:vllm_spec_decode_acceptance:ratio5m"), "{{sparkfleet_host}}/{{sparkfleet_instance}}"),),
        "accepted / drafted tokens; empty when speculative decoding is off",
    ),
    Panel(
        "Prefix cache hit rate",
        "percentunit",
        ((_r("sparkfleet:vllm_prefix_cache_hit:ratio5m"), "{{sparkfleet_host}}/{{sparkfleet_instance}}"),),
        "hits / queries (seed 004: vLLM has no hit-rate gauge)",
    ),
)

_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _variable(name: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": "query",
        "datasource": _DATASOURCE,
        "query": {"query": query, "refId": name},
        "definition": query,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "refresh": 2,
    }


def dashboard() -> dict[str, Any]:
    """An importable Grafana dashboard; the datasource is a variable, so import and provisioning both work."""
    panels = []
    for index, p in enumerate(PANELS):
        panels.append(
            {
                "id": index + 1,
                "type": "timeseries",
                "title": p.title,
                "description": p.description,
                "datasource": _DATASOURCE,
                "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
                "fieldConfig": {"defaults": {"unit": p.unit}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}},
                "targets": [
                    {"refId": chr(ord("A") + i), "datasource": _DATASOURCE, "expr": expr, "legendFormat": legend}
                    for i, (expr, legend) in enumerate(p.targets)
                ],
            }
        )
    return {
        "uid": "sparkfleet-vllm",
        "title": "sparkfleet: vLLM on DGX Spark",
        "tags": ["sparkfleet", "vllm"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-3h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
                _variable("host", "label_values(sparkfleet_plan_memory_total_bytes, sparkfleet_host)"),
                _variable("instance", f'label_values(up{{job="{VLLM_JOB}", {_HOST}}}, sparkfleet_instance)'),
            ]
        },
        "panels": panels,
    }
