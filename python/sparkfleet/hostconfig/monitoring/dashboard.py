"""The Grafana dashboard: its panels read the recording rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .thresholds import VLLM_JOB


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
            (f"sparkfleet_memory_guard_floor_bytes{{{_HOST}}}", "guard floor ({{phase}}) {{sparkfleet_host}}"),
        ),
        "unified memory: nvidia-smi shows none on GB10, MemAvailable is what CUDA can still get; under the guard's "
        "floor the memory guard stops an instance",
    ),
    Panel(
        "Memory guard stops",
        "short",
        (
            (
                f"increase(sparkfleet_memory_guard_stops_total{{{_SEL}}}[1h])",
                "{{sparkfleet_host}}/{{sparkfleet_instance}}",
            ),
        ),
        "instances the memory guard stopped under its floor in the last hour (its journal names the figures)",
    ),
    Panel(
        "Last start: seconds to socket, /health and the first right answer",
        "s",
        ((f"sparkfleet_start_seconds{{{_SEL}}}", "{{sparkfleet_instance}} {{milestone}}"),),
        "from the unit's start, read from its journal and the readiness check",
    ),
    Panel(
        "Last start: kernels compiled",
        "short",
        ((f"sparkfleet_start_kernels_compiled{{{_SEL}}}", "{{sparkfleet_instance}} {{kind}}"),),
        "0 when the release carries FlashInfer's prebuilt kernels and torch.compile's cache was warm",
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
