"""Proved or said: a config.json is planned quietly only in a layout a tiny-model check proves (issue 21).

Every config fixture, with one layout field mutated, ends in a refusal naming the field or in a plan
that says its layout is not proved, never in a quiet plan.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sparkfleet.errors import PlanError
from sparkfleet.reading.config import UNREAD_LAYOUT_FIELDS, profile_from_config
from sparkfleet.reading.families import PROVED_LAYOUTS

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
FIXTURES = sorted(CONFIGS.glob("*.json"))
GIB = 2**30


def plan_or_refusal(config: dict[str, Any]) -> tuple[str, str]:
    """('refused', message) or ('warned', note) or ('quiet', '')."""
    try:
        profile = profile_from_config("org/model", config, 8 * GIB, "fixture")
    except PlanError as exc:
        return "refused", exc.problem
    notes = [q for q in profile.quirks if "not proved" in q]
    return ("warned", notes[0]) if notes else ("quiet", "")


def _text(config: dict[str, Any]) -> dict[str, Any]:
    """The dict that holds the language model's fields, to change in place (text_config returns a merge)."""
    for key in ("text_config", "llm_config", "language_config"):
        sub = config.get(key)
        if isinstance(sub, dict):
            return sub
    return config


def add_field(field: str) -> Callable[[dict[str, Any]], None]:
    return lambda config: _text(config).__setitem__(
        field, [{"attention": {"no_op": True}}] if field == "block_configs" else 4
    )


def unknown_model_type(config: dict[str, Any]) -> None:
    _text(config)["model_type"] = "made_up_text"


def unknown_layer_kind(config: dict[str, Any]) -> None:
    """An unknown kind in whichever field the family reads its layers from."""
    text = _text(config)
    if isinstance(text.get("hybrid_override_pattern"), str):
        text["hybrid_override_pattern"] = text["hybrid_override_pattern"][:-1] + "R"
        return
    field = next((f for f in ("layer_types", "layers_block_type") if isinstance(text.get(f), list)), "layer_types")
    layers = int(text.get("num_hidden_layers") or 4)
    text[field] = [*(text.get(field) or ["full_attention"] * layers)[:-1], "retention"]


MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    **{f"adds {field}": add_field(field) for field in UNREAD_LAYOUT_FIELDS},
    "an unproved model_type": unknown_model_type,
    "a layer kind sparkfleet does not know": unknown_layer_kind,
}


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_a_fixture_is_quiet_exactly_when_its_layout_is_proved(fixture: Path) -> None:
    config = json.loads(fixture.read_text())
    outcome, note = plan_or_refusal(config)
    proved = _text(config).get("model_type") in PROVED_LAYOUTS
    assert outcome == ("quiet" if proved else "warned"), note


@pytest.mark.parametrize("mutation", list(MUTATIONS))
@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_a_mutated_layout_is_refused_or_warned_never_quiet(fixture: Path, mutation: str) -> None:
    config = copy.deepcopy(json.loads(fixture.read_text()))
    MUTATIONS[mutation](config)
    outcome, message = plan_or_refusal(config)
    assert outcome != "quiet", f"{fixture.stem} {mutation}: planned quietly"
    if mutation.startswith("adds "):
        field = mutation.removeprefix("adds ")
        assert outcome == "refused" and f"unsupported layout: {field}" in message


def nas_config(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """The shape of nvidia/Llama-3_3-Nemotron-Super-49B-v1's config.json (issue 21; its first blocks read in
    a public copy of that file): no num_key_value_heads, every layer in block_configs."""
    return {
        "architectures": ["DeciLMForCausalLM"],
        "model_type": "nemotron-nas",
        "hidden_size": 8192,
        "num_attention_heads": 64,
        "num_hidden_layers": len(blocks),
        "max_position_embeddings": 131072,
        "block_configs": blocks,
    }


def block(no_op: bool = False, group: int | None = 8, linear: bool = False, **more: Any) -> dict[str, Any]:
    attention = {"no_op": no_op, "n_heads_in_group": None if no_op else group, "replace_with_linear": linear}
    ffn = {"ffn_mult": 5.25, "no_op": False, "replace_with_linear": False}
    for key, value in more.items():
        part, field = key.split("__")
        (attention if part == "attention" else ffn)[field] = value
    return {"attention": attention, "ffn": ffn}


@pytest.mark.parametrize(
    ("blocks", "says"),
    [
        ([block(), block(group=4)], "n_heads_in_group [4, 8]"),
        ([block(), block(linear=True)], "replace_with_linear"),
        ([block(no_op=True)], "no attention layer"),
        ([block(), block(attention__window_length=4096)], "attention.window_length"),
        ([block(attention__num_sink_tokens=4), block()], "attention.num_sink_tokens"),
        ([block(), block(ffn__replace_with_linear=True)], "ffn.replace_with_linear"),
        ([block(ffn__sparsify={"ratio": 0.5})], "ffn.sparsify"),
    ],
)
def test_a_nas_layout_vllm_would_misread_is_refused(blocks: list[dict[str, Any]], says: str) -> None:
    outcome, message = plan_or_refusal(nas_config(blocks))
    assert outcome == "refused" and "unsupported layout: block_configs" in message and says in message
