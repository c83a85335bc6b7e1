from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT
from refusal_cases import CASES

from sparkfleet.errors import PlanError


@pytest.mark.parametrize("case", CASES, ids=[c.what for c in CASES])
def test_a_careless_input_is_refused_naming_the_variable(case) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PlanError) as err:
        case.run()
    assert err.value.variable == case.variable
    assert case.says in str(err.value)


def test_the_docs_table_is_what_the_cases_say() -> None:
    rendered = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "refusals_doc.py")], check=True, capture_output=True, text=True
    ).stdout
    assert (ROOT / "docs" / "refusals.md").read_text(encoding="utf-8") == rendered, (
        "run scripts/refusals_doc.py > docs/refusals.md"
    )
