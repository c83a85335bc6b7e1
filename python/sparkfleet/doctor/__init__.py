"""Judge what the doctor playbook observed on a host: green, yellow or red, each with the reason.

The playbook only reads (facts, sysctl, units, journal, a readiness probe); every judgement lives
here so it is tested without a host. The plan against reality compares what vLLM reported at its
last start (KV cache tokens and memory, weights) with what the applied plan predicted.
"""

from __future__ import annotations

from .host import host_findings, sysctl_findings
from .observations import (
    KV_TOLERANCE,
    Finding,
    HostObservation,
    InstanceObservation,
    LinkObservation,
    Loose,
    Observations,
    Policy,
    ServeObservation,
    Status,
    gib_text,
)
from .report import diagnose, render
from .serving import (
    MMAP_READ_FACTOR,
    backends_finding,
    instance_findings,
    journal_pattern,
    journal_report,
    kernels_finding,
    link_findings,
    lock_finding,
    log_findings,
    serve_findings,
    service_findings,
    storage_finding,
)

__all__ = [
    "KV_TOLERANCE",
    "MMAP_READ_FACTOR",
    "Finding",
    "HostObservation",
    "InstanceObservation",
    "LinkObservation",
    "Loose",
    "Observations",
    "Policy",
    "ServeObservation",
    "Status",
    "backends_finding",
    "diagnose",
    "gib_text",
    "host_findings",
    "instance_findings",
    "journal_pattern",
    "journal_report",
    "kernels_finding",
    "link_findings",
    "lock_finding",
    "log_findings",
    "render",
    "serve_findings",
    "service_findings",
    "storage_finding",
    "sysctl_findings",
]
