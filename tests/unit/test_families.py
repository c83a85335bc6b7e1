"""The family table (issue 48): one entry per family, the one place a family is named, and each entry agreeing
with the fields its checkpoints carry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkfleet.reading import states
from sparkfleet.reading.config import text_config
from sparkfleet.reading.defaults import with_class_defaults
from sparkfleet.reading.families import (
    FAMILIES,
    POOL_CHECKED_LAYOUTS,
    PROVED_LAYOUTS,
    LayerRule,
    StateReader,
    family_of,
    family_of_checkpoint,
)

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "configs").glob("*.json"))


def test_every_state_reader_the_table_names_exists() -> None:
    assert set(states.READERS) == set(StateReader)
    assert set(states.READERS.values()) <= set(states.READ_ORDER)


def test_a_model_type_belongs_to_one_family() -> None:
    types = [model_type for family in FAMILIES for model_type in family.text_types]
    assert len(types) == len(set(types))
    assert len({family.name for family in FAMILIES}) == len(FAMILIES)


def test_a_family_is_proved_one_way_at_most() -> None:
    assert not [family.name for family in FAMILIES if family.proof and family.pool_check]
    assert set(PROVED_LAYOUTS).isdisjoint(POOL_CHECKED_LAYOUTS)


def test_a_checkpoint_finds_the_family_of_the_language_model_it_wraps() -> None:
    assert family_of_checkpoint("qwen3_5_moe") is family_of("qwen3_5_moe_text")
    assert family_of_checkpoint("qwen4_exp") is family_of("qwen4_exp_text")
    assert family_of_checkpoint("qwen3_next") is family_of("qwen3_next")
    assert family_of_checkpoint("bailing_moe") is None and family_of_checkpoint(None) is None
    assert family_of(["llama"]) is None


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.stem)
def test_a_family_s_state_reader_is_the_one_its_fields_pick(path: Path) -> None:
    """The table names each family's reader; a config of no family goes to the first whose fields it has. For every
    fixture of a known family the two agree, so the table changed no plan and contradicts no checkpoint."""
    text = with_class_defaults(text_config(json.loads(path.read_text())))
    family = family_of(text.get("model_type"))
    hidden = int(text.get("hidden_size") or 0)
    by_fields = next((reader for reader in states.READ_ORDER if reader(text, 1, hidden) is not None), None)
    if family is None or family.state is None:
        assert family is None or by_fields is None or family.layers is LayerRule.COMPRESSED_MLA, path.stem
        return
    assert by_fields is states.READERS[family.state]
