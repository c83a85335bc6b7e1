"""What Prometheus scrapes and alerts on, and what Grafana shows, for the plans applied to a fleet.

One table of signals feeds the recording rules, the alerts and the dashboard panels, so a panel and
the alert on the same quantity cannot drift apart. The memory floor comes from the plan: memory is
unified, so vLLM, the OS and the page cache share one pool, and the alert fires when MemAvailable
eats into what the plan reserved for the host.
"""

from __future__ import annotations

from .alerting import ALERTS, RECORDINGS, Alert, Recording, queries, rules_document
from .dashboard import PANELS, Panel, dashboard
from .targets import ScrapedHost, plan_metrics, scrape_targets
from .thresholds import BY, GPU_HANGS, NODE_JOB, VLLM_JOB, Thresholds, thresholds

__all__ = [
    "ALERTS",
    "BY",
    "GPU_HANGS",
    "NODE_JOB",
    "PANELS",
    "RECORDINGS",
    "VLLM_JOB",
    "Alert",
    "Panel",
    "Recording",
    "ScrapedHost",
    "Thresholds",
    "dashboard",
    "plan_metrics",
    "queries",
    "rules_document",
    "scrape_targets",
    "thresholds",
]
