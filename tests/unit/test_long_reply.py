"""The long-reply check's judgement (sparkfleet.doctor.longreply), on answers shaped as vLLM gives them."""

from __future__ import annotations

import pytest

from sparkfleet.doctor.longreply import MAX_DRIFT_NATS, TIE_NATS, judge, steps


def decode(ids: list[int], logprobs: list[float]) -> dict[str, list[object]]:
    return {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": list(logprobs)}


def rescoring(prompt_len: int, rows: list[dict[int, float]]) -> list[dict[str, dict[str, float]] | None]:
    """vLLM's prompt_logprobs: None for the first token, then per position the actual token and the top ones."""
    return [
        None,
        *[{"7": {"logprob": -0.1}}] * (prompt_len - 1),
        *[{str(k): {"logprob": v} for k, v in r.items()} for r in rows],
    ]


def test_a_faithful_decode_is_green() -> None:
    found = steps(decode([5, 6], [-0.20, -0.31]), rescoring(3, [{5: -0.21}, {6: -0.30}]), 3)
    verdict = judge(found, "tiny")
    assert verdict.status == "green" and verdict.tokens == 2 and verdict.max_drift == pytest.approx(0.01)


def test_a_greedy_step_the_model_would_not_take_is_red_even_with_the_same_logprobs() -> None:
    """A decode forced off its argmax (a kernel, a drafter) reports the chosen token's logprob, which the prefill
    agrees with: the drift is nil, the choice is not greedy."""
    rows = [{5: -0.2}, {6: -3.0, 9: -0.1}, {8: -0.4}]
    verdict = judge(steps(decode([5, 6, 8], [-0.2, -3.0, -0.4]), rescoring(2, rows), 2), "tiny (speculation none)")
    assert verdict.status == "red" and verdict.off_greedy == [1]
    assert "1 of 3 greedy steps chose a token the prefill ranks below another" in verdict.detail
    assert verdict.detail.startswith("tiny (speculation none): ")


def test_drift_past_the_bound_is_red_and_a_near_tie_is_not_off_greedy() -> None:
    rows = [{5: -0.2 - MAX_DRIFT_NATS - 0.5}, {6: -0.5, 9: -0.5 + TIE_NATS / 2}]
    verdict = judge(steps(decode([5, 6], [-0.2, -0.5]), rescoring(2, rows), 2), "m")
    assert verdict.status == "red" and verdict.off_greedy == [] and "drift from the prefill's" in verdict.detail


def test_a_rescoring_that_misses_tokens_is_refused() -> None:
    with pytest.raises(ValueError, match="covers 1 of the reply's 2 tokens"):
        steps(decode([5, 6], [-0.2, -0.3]), rescoring(2, [{5: -0.2}]), 2)
    assert judge([], "m").status == "red"
