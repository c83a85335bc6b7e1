from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from sparkfleet.models import GIB, HostFacts
from sparkfleet.planning.memory import GB10_REFERENCE_TOTAL_GIB

ROOT = Path(__file__).resolve().parents[2]

# The sparkfleet CLI in a process of its own (huggingface_hub reads HF_ENDPOINT and HF_HOME when imported), where
# huggingface_hub's waits between retries are not slept: it retries a refused connection five times over 23 s, the
# same requests either way, which is not what the tests of an unreachable hub are about.
CLI_WITHOUT_RETRY_WAITS = [
    sys.executable,
    "-c",
    "import runpy, time; time.sleep = lambda seconds: None; runpy.run_module('sparkfleet.cli', run_name='__main__')",
]
FIXTURES = ROOT / "tests" / "fixtures"
# The plugins import the collection's plugin_utils by its ansible_collections name: lay this checkout
# out as ansible_collections/sparkfleet/vllm (a symlink under .cache), and import the plugins by file.
_COLLECTIONS = ROOT / ".cache" / "pytest-collections"
_LINK = _COLLECTIONS / "ansible_collections" / "sparkfleet" / "vllm"
if not _LINK.is_symlink():
    _LINK.parent.mkdir(parents=True, exist_ok=True)
    _LINK.symlink_to(ROOT, target_is_directory=True)
sys.path.insert(0, str(_COLLECTIONS))
sys.path.insert(0, str(ROOT / "plugins" / "filter"))
sys.path.insert(0, str(ROOT / "plugins" / "modules"))
# Under CI=true a skip not listed as legitimate fails, naming the missing tool and what installs it (tests/suite).
sys.path.insert(0, str(ROOT / "tests" / "suite"))
_ci_skips = importlib.import_module("ci_skips")
pytest_runtest_makereport = _ci_skips.pytest_runtest_makereport
pytest_make_collect_report = _ci_skips.pytest_make_collect_report

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


def load_file(relative: str) -> ModuleType:
    """A script the roles copy to hosts (standard library only, no package), imported from its file."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
