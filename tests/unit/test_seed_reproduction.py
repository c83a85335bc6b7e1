"""The planner against the published Spark start-up figures of tests/unit/published_figures.py.

Two checks, kept apart: the rows memory.py's constants were fitted to (in-sample) are a fit check, held tight; the
rows the fit never saw (out-of-sample) are the claim, held to their own tolerance. A row the planner misses stays,
marked with why (`expected_failure`), so the miss is seen rather than tuned away.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from published_figures import CASES, PublishedCase

from sparkfleet.catalog import get_profile
from sparkfleet.errors import InfeasibleError
from sparkfleet.models import ServePlan
from sparkfleet.planning.planner import plan

# In-sample: the fit's worst residual is 4.2 % (seed 000's "~13 GiB" of KV, itself rounded to the GiB); the rest are
# within 4 % (seed 003 at 0.30: 15.9 GB of KV, 1.1M tokens) and most within 1 %.
FIT_TOLERANCE = 0.05
# Out-of-sample, the claim: measured -8.8 % to +5.9 % (seed 002's 0.85 log +2.2 %; its §8 table, rounded to two
# figures and up to 5 GiB of non-KV apart from row to row, -8.8 % at 0.5 and +5.9 % at 0.4).
OUT_OF_SAMPLE_TOLERANCE = 0.10


def measured(result: ServePlan, quantity: str) -> float:
    return {"kv_gib": result.memory.kv, "tokens": float(result.kv_tokens), "weights_gib": result.memory.weights}[quantity]


def errors(case: PublishedCase) -> dict[str, float]:
    result = plan(case.host(), get_profile(case.model), case.intent)
    return {quantity: measured(result, quantity) / published - 1 for quantity, published in case.expected.items()}


def out_of_sample() -> Iterator[object]:
    for case in CASES:
        if case.starts and not case.in_sample:
            marks = [pytest.mark.xfail(strict=True, reason=case.expected_failure)] if case.expected_failure else []
            yield pytest.param(case, id=case.name, marks=marks)


def test_every_case_names_something_to_check() -> None:
    assert all(case.expected or not case.starts for case in CASES)


def test_the_claim_rests_on_rows_the_fit_never_saw() -> None:
    held = [c for c in CASES if c.starts and not c.in_sample and not c.expected_failure]
    assert len(held) >= 3
    assert not [c.name for c in CASES if c.in_sample and c.expected_failure]


@pytest.mark.parametrize("case", [c for c in CASES if not c.starts], ids=lambda c: c.name)
def test_the_fit_refuses_the_utilizations_that_failed(case: PublishedCase) -> None:
    with pytest.raises(InfeasibleError, match="refuse to start"):
        plan(case.host(), get_profile(case.model), case.intent)


@pytest.mark.parametrize("case", [c for c in CASES if c.starts and c.in_sample], ids=lambda c: c.name)
def test_the_fit_reproduces_the_figures_it_was_fitted_to(case: PublishedCase) -> None:
    for quantity, error in errors(case).items():
        assert abs(error) <= FIT_TOLERANCE, (
            f"fit check, {quantity}: {error:+.1%} against published {case.expected[quantity]}"
        )


@pytest.mark.parametrize("case", list(out_of_sample()))
def test_out_of_sample_figures_within_tolerance(case: PublishedCase) -> None:
    for quantity, error in errors(case).items():
        assert abs(error) <= OUT_OF_SAMPLE_TOLERANCE, (
            f"out of sample, {quantity}: {error:+.1%} against published {case.expected[quantity]}"
        )


def test_the_qwen36_geometry_turns_seed_002s_own_pool_into_its_tokens() -> None:
    """The +2.2 % on seed 002's Qwen3.6 tokens is the pool the budget predicts, not the bytes per token."""
    case = next(c for c in CASES if c.name == "seed 002 qwen3.6-35b util 0.85")
    result = plan(case.host(), get_profile(case.model), case.intent)
    tokens_on_the_published_pool = result.kv_tokens * case.expected["kv_gib"] / result.memory.kv
    assert abs(tokens_on_the_published_pool / case.expected["tokens"] - 1) < 0.001
