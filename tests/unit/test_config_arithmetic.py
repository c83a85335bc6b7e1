"""Issue 62: a checkpoint whose headers were not read is counted by its config's arithmetic, against the model cards'
published counts (each card's own convention: some count the input embedding and the head, GLM's does not)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import spark

from sparkfleet.errors import PlanError
from sparkfleet.localmodel import profile_from_dir
from sparkfleet.models import Intent
from sparkfleet.planning.planner import plan
from sparkfleet.reading.arithmetic import parameters_from_config

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def config(name: str, **published: object) -> dict[str, Any]:
    """A fixture config, with the published fields its trimmed copy left out."""
    return dict(json.loads((CONFIGS / f"{name}.json").read_text())) | published


# (config, card's total, card's active, whether the card's active count includes the input embedding and the head)
CARDS = {
    # "8B" (Meta's model card lists 8.03B): dense, untied.
    "Llama-3.1-8B": (config("meta-llama--Llama-3.1-8B-Instruct"), 8.03, 8.03, True),
    # "1.23B" on the card; the published config ties the embeddings (tie_word_embeddings: true).
    "Llama-3.2-1B": (config("meta-llama--Llama-3.2-1B-Instruct", tie_word_embeddings=True), 1.24, 1.24, True),
    # "30.5B in total and 3.3B activated".
    "Qwen3-30B-A3B": (config("Qwen--Qwen3-30B-A3B"), 30.5, 3.3, True),
    # "671B total parameters with 37B activated for each token" (the MTP module's 14B apart); the MLP and MLA fields
    # as the published config.json gives them.
    "DeepSeek-V3": (
        config(
            "deepseek-ai--DeepSeek-V3",
            intermediate_size=18432,
            moe_intermediate_size=2048,
            n_shared_experts=1,
            first_k_dense_replace=3,
        ),
        671,
        37,
        True,
    ),
    # "106 billion total parameters and 12 billion active parameters": GLM counts active without embedding and head.
    "GLM-4.5-Air": (config("zai-org--GLM-4.5-Air", intermediate_size=10944), 106, 12, False),
}


@pytest.mark.parametrize("model", CARDS)
def test_config_arithmetic_counts_as_the_card_does(model: str) -> None:
    text, total, active, card_counts_ends = CARDS[model]
    counted = parameters_from_config(text, model)
    assert counted.total_b == pytest.approx(total, rel=0.01)
    ends = 0.0 if card_counts_ends else text["vocab_size"] * text["hidden_size"] * 2 / 1e9
    assert counted.active_b - ends == pytest.approx(active, rel=0.03)


@pytest.mark.parametrize(
    ("name", "lacking"),
    [
        ("Qwen--Qwen3-Next-80B-A3B-Instruct", "linear attention"),
        ("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "hybrid_override_pattern"),
        ("zai-org--GLM-5.3-Flash", "indexed_attention"),
    ],
)
def test_layers_it_cannot_count_are_named_not_guessed(name: str, lacking: str) -> None:
    with pytest.raises(PlanError, match=lacking):
        parameters_from_config(config(name), name)


def test_a_directory_with_only_its_config_is_predicted_by_arithmetic_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(config("Qwen--Qwen3-30B-A3B")))
    profile = profile_from_dir(tmp_path, weights_known=True).model_copy(update={"weights_gib": 56.9})
    assert profile.decode_reads is None and profile.parameters is not None
    assert "config arithmetic" in profile.sources["parameters"] and "no safetensors files" in profile.sources["parameters"]
    result = plan(spark(), profile, Intent(max_context=32768, concurrency=4), model_ref=str(tmp_path))
    assert result.speed is not None and "counted by config arithmetic" in result.speed.basis[0]


def test_a_directory_arithmetic_cannot_count_says_both_gaps(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(config("Qwen--Qwen3-Next-80B-A3B-Instruct")))
    profile = profile_from_dir(tmp_path, weights_known=True).model_copy(update={"weights_gib": 75})
    result = plan(spark(), profile, Intent(max_context=32768, concurrency=1), model_ref=str(tmp_path))
    assert result.speed is None
    (said,) = [w for w in result.warnings if w.startswith("no speed predicted")]
    assert "no safetensors files in the directory" in said and "linear attention" in said
