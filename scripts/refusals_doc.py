"""Render docs/refusals.md: every careless input in tests/unit/refusal_cases.py and what the user sees.

Run: uv run python scripts/refusals_doc.py > docs/refusals.md
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "unit"))

from refusal_cases import CASES, ROLE_CASES  # noqa: E402

from sparkfleet.errors import PlanError  # noqa: E402


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main() -> None:
    rows = [
        "# What sparkfleet refuses, and what you see",
        "",
        "Each input below is refused in the site playbook's preflight, before any host changes (the message",
        "is the filter's or the assertion's, prefixed by Ansible with the task that failed). Generated from",
        "tests/unit/refusal_cases.py by scripts/refusals_doc.py; the unit tests run every case.",
        "",
        "| you set | variable named | message |",
        "|---|---|---|",
    ]
    for case in CASES:
        try:
            case.run()
        except PlanError as exc:
            rows.append(f"| {cell(case.what)} | `{cell(exc.variable)}` | {cell(str(exc))} |")
        else:
            raise SystemExit(f"{case.what}: was not refused")
    for what, variable, message in ROLE_CASES:
        rows.append(f"| {cell(what)} | `{cell(variable)}` | {cell(variable + ': ' + message)} |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
