from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
# Under CI=true a skip not listed as legitimate fails, naming the missing tool and what installs it (tests/suite).
sys.path.insert(0, str(ROOT / "tests" / "suite"))
_ci_skips = importlib.import_module("ci_skips")
pytest_runtest_makereport = _ci_skips.pytest_runtest_makereport
pytest_make_collect_report = _ci_skips.pytest_make_collect_report
FIXTURES = ROOT / "tests" / "fixtures"
