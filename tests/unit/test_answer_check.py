"""Ready means right: the known-answer check each plan carries and the probe's judgement of replies."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import load_file, spark
from hypothesis import given
from hypothesis import strategies as st

from sparkfleet.catalog import get_profile, load_catalog
from sparkfleet.models import Intent, KnownAnswer
from sparkfleet.planning.answers import KNOWN_ANSWERS, REASONING_ANSWER_TOKENS, answer_check
from sparkfleet.planning.planner import plan

probe = load_file("roles/vllm_serve/files/sparkfleet_probe.py")


@pytest.fixture(autouse=True)
def _no_start_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe records each start under /run (test_probe.py tests that); these tests judge answers only."""
    monkeypatch.setattr(probe, "record_start", lambda args, since, answered: None)


QWEN = "nvidia/Qwen3.6-35B-A3B-NVFP4"


def chat_reply(content: str, reasoning: str = "", logprobs: list[float] | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"message": {"content": content, "reasoning_content": reasoning or None}}
    if logprobs is not None:
        choice["logprobs"] = {"content": [{"token": "x", "logprob": lp} for lp in logprobs]}
    return {"choices": [choice]}


# ---------------------------------------------------------------- the plan's check


def test_every_catalog_plan_asks_the_default_question_through_the_chat_path() -> None:
    for model_id, profile in load_catalog().items():
        check = answer_check(profile, "m", False)
        assert check.path == "/v1/chat/completions"
        assert check.expect == KNOWN_ANSWERS[0].answer
        assert check.body["messages"] == [{"role": "user", "content": KNOWN_ANSWERS[0].question}]
        assert check.body["temperature"] == 0 and check.body["logprobs"] is True
        thinks = profile.reasoning_parser is not None or profile.reasoning_parser_plugin is not None
        assert (check.body["max_tokens"] == REASONING_ANSWER_TOKENS) is thinks, model_id
        assert "sm_121" in check.reason and "chat template" in check.reason


def test_the_plan_carries_the_check_and_the_intent_can_give_its_own() -> None:
    profile = get_profile(QWEN)
    default = plan(spark(), profile, Intent(max_context=8192, concurrency=1, trust_remote_code=True))
    assert default.answer_check.expect == "204" and default.answer_check.body["model"] == default.served_name
    own = KnownAnswer(question="Name the largest planet. One word.", answer="Jupiter")
    asked = plan(spark(), profile, Intent(max_context=8192, concurrency=1, trust_remote_code=True, answer_check=own))
    assert asked.answer_check.expect == "Jupiter" and "intent's own question" in asked.answer_check.reason
    base = KnownAnswer(question="The quick brown fox", answer=None)
    check = answer_check(profile, "m", False, base)
    assert check.expect is None and "base model" in check.reason


def test_template_kwargs_reach_the_server_default_and_the_check_as_clients_send_them() -> None:
    profile = get_profile(QWEN)  # a reasoning model: thinks by default (seed 002 §7.1.1)
    quiet = Intent(max_context=8192, concurrency=1, trust_remote_code=True, chat_template_kwargs={"enable_thinking": False})
    planned = plan(spark(), profile, quiet)
    (value,) = planned.flag("--default-chat-template-kwargs") or [""]
    assert json.loads(value) == {"enable_thinking": False} and " " not in value
    assert planned.answer_check.body["chat_template_kwargs"] == {"enable_thinking": False}
    # Told not to think, it needs no room to think; the default plan carries neither flag nor kwargs.
    assert planned.answer_check.body["max_tokens"] == 16
    default = plan(spark(), profile, Intent(max_context=8192, concurrency=1, trust_remote_code=True))
    assert default.flag("--default-chat-template-kwargs") is None
    assert "chat_template_kwargs" not in default.answer_check.body
    assert default.answer_check.body["max_tokens"] == REASONING_ANSWER_TOKENS
    # The profile's own settings, with the intent's over them.
    card = profile.model_copy(update={"chat_template_kwargs": {"enable_thinking": True, "preserve_thinking": True}})
    merged = plan(spark(), card, quiet)
    assert merged.answer_check.body["chat_template_kwargs"] == {"enable_thinking": False, "preserve_thinking": True}


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [({"enable thinking": True}, "not a template variable name"), ({"x": "two\nlines"}, "one line"),
     ({"x": "y" * 257}, "one line"), ({"tokenize": True}, "vLLM refuses it"), ({f"k{i}": 1 for i in range(17)}, "at most 16"), ({"x": [1]}, "valid")],
)  # fmt: skip
def test_template_kwargs_that_cannot_be_one_json_word_are_refused(kwargs: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match="chat_template_kwargs") as err:
        Intent(chat_template_kwargs=kwargs)
    assert problem in str(err.value)


def test_a_pooling_model_is_checked_by_an_embedding() -> None:
    check = answer_check(get_profile(QWEN), "emb", True)
    assert (
        check.path == "/v1/embeddings"
        and check.expect is None
        and check.body == {"model": "emb", "input": check.body["input"]}
    )


@pytest.mark.parametrize("bad", ["", "   ", "two\nlines", "tab\there", "bell\x07", "nel\x85", "sep\u2028x", "x" * 501])
def test_a_question_that_is_not_one_printable_line_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="question"):
        KnownAnswer(question=bad, answer="4")


# ---------------------------------------------------------------- garbage, whatever the question

SEEN_GARBAGE = {
    "the wrong FP4 kernel (seed 004)": "!!!!!!!!!!!!!!!!",
    "empty text (seed 002 §6)": "",
    "whitespace only": " \n ",
    "the random sandbox model's answer": " env env env env env throughDEso ansiblelylylylylyly env",
    "a two-character unit": "abababababab",
    "replacement characters": "The answer is \ufffd\ufffd",
    "a control character": "204\x1b[0m",
}


@pytest.mark.parametrize("text", SEEN_GARBAGE.values(), ids=SEEN_GARBAGE.keys())
def test_seen_garbage_is_named(text: str) -> None:
    assert probe.garbage(text)
    with pytest.raises(probe.WrongAnswer, match="garbage"):
        probe.judge_chat(chat_reply(text), None)


@pytest.mark.parametrize("text", ["204", "12*17 = 204.", "Paris", "The capital of France is Paris.", "hi", "1 2 3 4 5 6"])
def test_ordinary_answers_are_not_garbage(text: str) -> None:
    assert probe.garbage(text) is None


@given(
    unit=st.text(st.characters(codec="utf-8", exclude_categories=("Z", "C")), min_size=1, max_size=8),
    times=st.integers(4, 40),
)
def test_any_unit_repeated_four_times_or_more_is_garbage(unit: str, times: int) -> None:
    assert probe.garbage(unit * times)


@given(
    text=st.text(min_size=0, max_size=40),
    bad=st.sampled_from(["\x00", "\x07", "\x1b", "\x7f", "\x9b", "\ufffd"]),
    at=st.integers(0, 40),
)
def test_a_control_or_replacement_character_anywhere_is_garbage(text: str, bad: str, at: int) -> None:
    assert probe.garbage(text[:at] + bad + text[at:])


@given(
    before=st.text(st.characters(codec="ascii", categories=("L", "Zs", "P")), max_size=30),
    after=st.text(st.characters(codec="ascii", categories=("Zs", "P")), max_size=30),
)
def test_the_answer_counts_as_a_whole_word_anywhere_and_in_any_case(before: str, after: str) -> None:
    assert probe.contains_answer(f"{before} PARIS{after}", "Paris")
    assert not probe.contains_answer(f"{before}2040{after}", "204")
    assert not probe.contains_answer(f"{before} 1204{after}", "204")


def test_nan_log_probabilities_are_garbage_even_with_the_right_text() -> None:
    with pytest.raises(probe.WrongAnswer, match="2 NaN"):
        probe.judge_chat(chat_reply("204", logprobs=[-0.1, math.nan, math.nan]), "204")
    assert probe.judge_chat(chat_reply("204", logprobs=[-0.01, -0.2]), "204") == "204"
    # vLLM writes NaN as the JSON token NaN; the probe reads it as Python's json does.
    assert math.isnan(json.loads('{"logprob": NaN}')["logprob"])


def test_a_wrong_answer_names_what_was_expected() -> None:
    with pytest.raises(probe.WrongAnswer, match=r"wrong answer '205', expected '204'"):
        probe.judge_chat(chat_reply("205"), "204")


def test_a_reasoning_model_is_judged_over_its_thinking_and_its_answer() -> None:
    assert probe.judge_chat(chat_reply("", reasoning="12*17: 12*10 + 12*7 = 120 + 84 = 204"), "204")
    assert probe.judge_chat(chat_reply("204", reasoning="Let me compute."), "204") == "204"
    with pytest.raises(probe.WrongAnswer):
        probe.judge_chat(chat_reply("", reasoning="!!!!!!!!"), "204")


def test_embeddings_must_be_finite_and_not_all_zero() -> None:
    assert probe.judge_embedding({"data": [{"embedding": [0.1, -0.2]}]}) == "embedding of 2 values"
    for reply, why in [
        ({"data": []}, "no embedding"),
        ({"data": [{"embedding": [0.0, 0.0]}]}, "all zeros"),
        ({"data": [{"embedding": [0.1, math.nan]}]}, "NaN"),
        ({"data": [{"embedding": [math.inf]}]}, "NaN or infinite"),
    ]:
        with pytest.raises(probe.WrongAnswer, match=why):
            probe.judge_embedding(reply)


# ---------------------------------------------------------------- readiness and the watchdog use it

CHECK = {"path": "/v1/chat/completions", "body": {}, "expect": "204", "reason": "the default question; garbage causes: X"}


def test_ready_fails_at_once_on_a_wrong_answer_with_the_likely_cause(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(probe, "unit_state", lambda unit: ("active", 1.0, False))
    monkeypatch.setattr(probe, "journal", lambda unit: "")
    calls: list[str] = []

    def answer(url: str, *_: Any, **__: Any) -> tuple[int, str]:
        calls.append(url)
        return 200, json.dumps(chat_reply("" if url.endswith("/health") else " env env env env env env"))

    monkeypatch.setattr(probe, "request", answer)
    args = SimpleNamespace(unit="u.service", url="http://h", env_file="/etc/x.env", timeout=600)
    with pytest.raises(SystemExit):
        probe.ready(args, CHECK, None)
    out = json.loads(capsys.readouterr().out)
    assert out["ready"] is False and "garbage reply (one unit repeated" in out["reason"] and "causes: X" in out["reason"]
    assert calls == ["http://h/health", "http://h/v1/chat/completions"]


def test_ready_reports_the_answer_and_what_was_expected(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(probe, "unit_state", lambda unit: ("active", 1.0, False))
    monkeypatch.setattr(probe, "request", lambda url, *_, **__: (200, json.dumps(chat_reply("204"))))
    args = SimpleNamespace(unit="u.service", url="http://h", env_file="/etc/x.env", timeout=600)
    probe.ready(args, CHECK, None)
    out = json.loads(capsys.readouterr().out)
    assert out["ready"] is True and out["reply"] == "204" and out["expect"] == "204"


def test_the_watchdog_counts_a_wrong_answer_as_a_miss_and_restarts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter(["204", "205", "!!!!!!!!"])
    restarts: list[list[str]] = []
    monkeypatch.setattr(probe, "unit_state", lambda unit: ("active", 1000.0, False))
    monkeypatch.setattr(probe, "request", lambda *_, **__: (200, json.dumps(chat_reply(next(answers)))))
    # A wrong answer counts whatever vLLM's counters say: none here.
    monkeypatch.setattr(probe, "read_counters", lambda url: None)
    monkeypatch.setattr(probe.subprocess, "run", lambda argv, **_: restarts.append(argv))
    monkeypatch.setattr(probe.time, "monotonic", lambda: 1100.0)
    args = SimpleNamespace(
        unit="u.service", url="http://h", state=str(tmp_path / "s.json"), deadline=10, failures=2, start_grace=900
    )
    for _ in range(3):
        probe.watchdog(args, CHECK, None)
    assert restarts == [["systemctl", "restart", "--no-block", "u.service"]]
