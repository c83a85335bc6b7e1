"""One source for the intent (issue 48): the planner's Intent holds each key's default and description; the CLI's
arguments and the vllm_serve role's docs are made from it."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from sparkfleet.models import Intent
from sparkfleet.planargs import (
    NOT_ON_THE_COMMAND_LINE,
    READ_LIKE_A_MODEL,
    _intent,
    add_plan_args,
    intent_flag,
)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "unit" / "plugins"))
from adhoc import run_module  # noqa: E402 - the plugin tests' runner

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
        "--speculative", "ngram", "--moe-backend", "triton", "--attention-backend", "TRITON_ATTN", "--load", "eager",
        "--num-speculative-tokens", "3",
        "--drafter-weights-gib", "1.5",
        "--served-name", "m", "--host", "0.0.0.0", "--port", "8123", "--api-key", "--allow-unauthenticated-bind",
        "--tp", "2", "--pp", "2", "--dcp", "2", "--nodes", "2", "--cluster-backend", "native", "--cluster-port", "29600", "--yarn",
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


def test_the_roles_spec_holds_the_intent_as_intent_says() -> None:
    """Issue 48: the intent's options in vllm_serve's argument spec are made from Intent (scripts/role_docs.py), each
    with the field's own description, type, choices and default."""
    spec = yaml.safe_load((ROOT / "roles" / "vllm_serve" / "meta" / "argument_specs.yml").read_text())
    instances = spec["argument_specs"]["main"]["options"]["vllm_serve_instances"]
    intent = instances["options"]["intent"]["options"]
    assert intent == role_docs.intent_options()
    assert list(intent) == list(Intent.model_fields)
    for name, field in Intent.model_fields.items():
        assert intent[name]["description"] == field.description, name
    assert intent["profile"]["choices"] == ["interactive", "throughput", "memory-saver"]
    assert intent["trust_remote_code"]["type"] == "raw"  # true, false or a reviewed revision
    assert set(intent["answer_check"]["options"]) == {"question", "answer"}
    assert "required" not in intent["answer_check"]["options"]["answer"]  # null for a base model


def _instances_of(inventory: Path) -> list[list[dict[str, Any]]]:
    """Every vllm_serve_instances list an inventory or group_vars file sets."""
    found: list[list[dict[str, Any]]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "vllm_serve_instances" and isinstance(value, list) and value:
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(yaml.safe_load(inventory.read_text()))
    return found


def test_ansibles_validation_takes_every_instance_the_tests_and_docs_serve_and_refuses_a_misspelt_intent() -> None:
    """The role's spec runs before the planner: it must take every instance the scenarios and the sandbox serve
    (none refused by Ansible that the planner would take), and name a bad key or choice itself."""
    spec = yaml.safe_load((ROOT / "roles" / "vllm_serve" / "meta" / "argument_specs.yml").read_text())
    options = {"vllm_serve_instances": spec["argument_specs"]["main"]["options"]["vllm_serve_instances"]}
    inventories = [
        ROOT / "inventories" / "sandbox" / "group_vars" / "sparks.yml",
        ROOT / "extensions" / "molecule" / "inventory" / "group_vars" / "sparks.yml",
        ROOT / "extensions" / "molecule" / "fleet" / "inventory" / "hosts.yml",
        ROOT / "extensions" / "molecule" / "cluster" / "inventory" / "hosts.yml",
    ]
    served = [instances for inventory in inventories for instances in _instances_of(inventory)]
    assert len(served) >= 4
    for instances in served:
        done = run_module(
            "ansible.builtin.validate_argument_spec",
            {"argument_spec": options, "provided_arguments": {"vllm_serve_instances": instances}},
            # What the inventories template their keys from.
            "--extra-vars",
            json.dumps({"sandbox_api_key": "k" * 32}),
        )
        assert not done.get("failed"), (instances, done.get("msg"))
    tiny = {"name": "tiny", "model": "sandbox/tiny-llama", "intent": {"max_context": 512, "profile": "interactiv"}}
    refused = run_module(
        "ansible.builtin.validate_argument_spec",
        {"argument_spec": options, "provided_arguments": {"vllm_serve_instances": [tiny, {**tiny, "on_demnad": True}]}},
    )
    assert refused.get("failed")
    said = json.dumps(refused.get("argument_errors"))
    assert "profile" in said and "interactiv" in said and "on_demnad" in said
