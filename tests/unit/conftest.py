from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sparkfleet.memory import GB10_REFERENCE_TOTAL_GIB
from sparkfleet.models import GIB, HostFacts

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
# The collection's plugins are imported by file path: the repo root is not laid out as
# ansible_collections/sparkfleet/vllm.
sys.path.insert(0, str(ROOT / "plugins" / "filter"))
sys.path.insert(0, str(ROOT / "plugins" / "modules"))

SPARK_TOTAL = int(GB10_REFERENCE_TOTAL_GIB * GIB)


def spark(version: str = "0.32.0", total: int = SPARK_TOTAL, available: int | None = None) -> HostFacts:
    return HostFacts(
        platform="gb10",
        gpu_name="NVIDIA GB10",
        compute_capability="12.1",
        driver_version="580.142",
        cuda_version="13.0",
        ptxas_path="/usr/local/cuda/bin/ptxas",
        mem_total_bytes=total,
        mem_available_bytes=available,
        vllm_version=version,
    )


def cpu_host(version: str = "0.32.0", total_gib: int = 64) -> HostFacts:
    return HostFacts(
        platform="cpu",
        arch="x86_64",
        mem_total_bytes=total_gib * GIB,
        mem_available_bytes=(total_gib - 4) * GIB,
        unified_memory=False,
        vllm_version=version,
    )


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
