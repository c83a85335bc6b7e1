"""Under CI=true a skip for a missing tool fails, through each suite's own conftest (tests/suite/ci_skips.py).

A tiny test file runs in a pytest process of its own with the real conftest loaded as a plugin (`-p conftest`,
its directory on PYTHONPATH), so removing the hooks from either conftest fails these tests, not just from the
plugin module.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ci_skips import LEGITIMATE

ROOT = Path(__file__).resolve().parents[2]
SUITES = ["tests/unit", "tests/index"]

TINY = """
import pytest

pytestmark = []


@pytest.mark.skipif(True, reason="node runs the door's njs router here")
def test_needs_node():
    pass


def test_skips_for_a_reason_nobody_listed():
    pytest.skip("no frobnicator here")


def test_port_taken():
    pytest.skip("port 28028 is taken on this machine")


@pytest.mark.xfail(reason="expected to fail", strict=True)
def test_expected_failure():
    raise AssertionError


def test_passes():
    pass
"""

MODULE_SKIP = """
import pytest

pytest.skip("systemd-analyze is not installed", allow_module_level=True)


def test_never_collected():
    pass
"""


def run(suite: str, tmp_path: Path, ci: str | None, source: str) -> tuple[dict[str, int], str]:
    """A tiny test file under `suite`'s conftest: pytest's closing counts, and its whole output."""
    (tmp_path / "test_tiny.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k not in {"CI", "PYTEST_ADDOPTS"}}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / suite), str(ROOT / "python")])
    if ci is not None:
        env["CI"] = ci
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q", "-rA", "--rootdir", str(tmp_path),
         "-c", os.devnull, str(tmp_path / "test_tiny.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|xfailed|errors?)\b", done.stdout)}
    return counts, done.stdout


@pytest.mark.parametrize("suite", SUITES)
def test_under_ci_a_skip_for_a_missing_tool_fails_naming_what_installs_it(suite: str, tmp_path: Path) -> None:
    counts, out = run(suite, tmp_path, "true", TINY)
    # The listed skip stays a skip and the expected failure an expected failure; the two unlisted skips fail.
    assert counts == {"passed": 1, "skipped": 1, "xfailed": 1, "failed": 1, "error": 1}, out
    assert "node is missing: scripts/lib.sh's ensure_node" in out
    assert "no frobnicator here -- a skip in CI fails unless tests/suite/ci_skips.py lists it" in out
    assert "SKIPPED" in out and "port 28028 is taken on this machine" in out


@pytest.mark.parametrize("suite", SUITES)
def test_under_ci_a_module_skipped_for_a_missing_tool_fails_its_collection(suite: str, tmp_path: Path) -> None:
    counts, out = run(suite, tmp_path, "true", MODULE_SKIP)
    assert counts == {"error": 1}, out
    assert "systemd-analyze is missing: scripts/lib.sh's ensure_systemd_analyze" in out


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("ci", [None, "false"])
def test_outside_ci_a_skip_is_a_skip(suite: str, ci: str | None, tmp_path: Path) -> None:
    assert run(suite, tmp_path, ci, TINY)[0] == {"passed": 1, "skipped": 3, "xfailed": 1}
    assert run(suite, tmp_path, ci, MODULE_SKIP)[0] == {"skipped": 1}


def test_each_legitimate_skip_is_one_a_test_makes() -> None:
    """The list names real skips: a reason no test gives any more is dropped from it, not kept as a loophole."""
    sources = "\n".join(path.read_text() for path in (ROOT / "tests").rglob("test_*.py") if path.name != "test_ci_skips.py")
    for reason, why in LEGITIMATE.items():
        assert f'"{reason}"' in sources, reason
        assert why
