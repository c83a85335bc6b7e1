"""The alert thresholds a user may set, with their defaults, and the names every rule shares."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator

from ...errors import from_validation
from ...models import Strict

VLLM_JOB = "sparkfleet-vllm"
# Clock-event reasons that explain a low clock (the GPU metrics collector, monitoring role).
HEAT_REASONS = "hw_slowdown|hw_thermal_slowdown|sw_thermal_slowdown"
SLOWDOWN_REASONS = f"sw_power_cap|hw_power_brake_slowdown|{HEAT_REASONS}"
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
