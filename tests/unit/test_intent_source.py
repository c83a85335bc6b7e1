"""One source for the intent (issue 48): the planner's Intent holds each key's default and description; the CLI's
arguments and the vllm_serve role's docs are made from it."""

from __future__ import annotations

import argparse
import importlib.util
from enum import Enum
from pathlib import Path

from sparkfleet.models import Intent
from sparkfleet.planargs import (
    NOT_ON_THE_COMMAND_LINE,
    READ_LIKE_A_MODEL,
    _intent,
    add_plan_args,
    intent_flag,
)

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("role_docs", ROOT / "scripts" / "role_docs.py")
assert _spec and _spec.loader
role_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(role_docs)


def _actions() -> dict[str, argparse.Action]:
    parser = argparse.ArgumentParser()
    add_plan_args(parser)
    return {action.dest: action for action in parser._actions}


def test_every_intent_key_says_what_it_asks_for() -> None:
    assert [name for name, field in Intent.model_fields.items() if not field.description] == []


def test_each_cli_argument_of_the_intent_is_the_field_itself() -> None:
    actions = _actions()
    for name, field in Intent.model_fields.items():
        if name in NOT_ON_THE_COMMAND_LINE:
            assert name not in actions
            continue
        action = actions[name]
        assert intent_flag(name) in action.option_strings
        if name in READ_LIKE_A_MODEL:
            continue
        assert action.help is not None and action.help.startswith(str(field.description)), name
        default = field.default.value if isinstance(field.default, Enum) else field.default
        assert action.default == default, name


def test_the_command_line_carries_every_value_to_the_intent() -> None:
    argv = [
        "some/model", "--context", "4096", "--concurrency", "9", "--profile", "throughput", "--kv-cache-dtype", "fp8",
        "--speculative", "ngram", "--moe-backend", "triton", "--load", "eager", "--num-speculative-tokens", "3",
        "--drafter-weights-gib", "1.5",
        "--served-name", "m", "--host", "0.0.0.0", "--port", "8123", "--api-key", "--allow-unauthenticated-bind",
        "--tp", "2", "--pp", "2", "--nodes", "2", "--cluster-backend", "native", "--cluster-port", "29600", "--yarn",
        "--allow-long-context", "--trust-remote-code", "--gpu-memory-utilization", "0.5",
        "--max-num-batched-tokens", "4096", "--max-request-mib", "64", "--min-decode-tps", "20", "--chat-template-kwargs",
        '{"enable_thinking": false}', "--chat-template", "/etc/t.jinja", "--host-reserve-gib", "6",
    ]  # fmt: skip
    parser = argparse.ArgumentParser()
    add_plan_args(parser)
    intent = _intent(parser.parse_args(argv), drafter="org/draft")
    defaults = Intent()
    taken = {name for name in Intent.model_fields if getattr(intent, name) != getattr(defaults, name)}
    assert taken == set(Intent.model_fields) - set(NOT_ON_THE_COMMAND_LINE)
    assert intent.max_context == 4096 and intent.tensor_parallel_size == 2 and intent.allow_yarn is True
    assert intent.chat_template_kwargs == {"enable_thinking": False} and intent.drafter == "org/draft"


def test_the_role_docs_list_every_intent_key_with_its_flag() -> None:
    readme = role_docs.render(ROOT / "roles" / role_docs.INTENT_ROLE)
    for name, field in Intent.model_fields.items():
        flag = "" if name in NOT_ON_THE_COMMAND_LINE else f"`{intent_flag(name)}`"
        assert f"| `{name}` |" in readme and f"| {flag} | {field.description}" in readme, name
