"""Issue 62: a checkpoint whose headers were not read is counted by its config's arithmetic, against the model cards'
published counts (each card's own convention: some count the input embedding and the head, GLM's does not)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import spark

from sparkfleet.catalog import load_catalog
from sparkfleet.errors import PlanError
from sparkfleet.localmodel import profile_from_dir
from sparkfleet.models import Intent
from sparkfleet.planning import speed
from sparkfleet.planning.planner import plan
from sparkfleet.reading.arithmetic import parameters_from_config
from sparkfleet.reading.config import text_config

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


PUBLISHED = json.loads((CONFIGS.parent / "published_config_fields.json").read_text())


def config(name: str) -> dict[str, Any]:
    """A fixture config, with the published fields its trimmed copy left out (tests/fixtures/published_config_fields.json)."""
    text = dict(json.loads((CONFIGS / f"{name}.json").read_text()))
    added = PUBLISHED.get(name, {}).get("fields", {})
    if isinstance(text.get("text_config"), dict):
        return text | {"text_config": text["text_config"] | added}
    return text | added


# (config, card's total, card's active, which of the input embedding and the output head the card's active count
# leaves out: each card's own convention)
CARDS = {
    # "8B" (Meta's model card lists 8.03B): dense, untied.
    "Llama-3.1-8B": (config("meta-llama--Llama-3.1-8B-Instruct"), 8.03, 8.03, 0),
    # "1.23B" on the card; the published config ties the embeddings (tie_word_embeddings: true).
    "Llama-3.2-1B": (config("meta-llama--Llama-3.2-1B-Instruct"), 1.24, 1.24, 0),
    # "30.5B in total and 3.3B activated".
    "Qwen3-30B-A3B": (config("Qwen--Qwen3-30B-A3B"), 30.5, 3.3, 0),
    # "671B total parameters with 37B activated for each token" (the MTP module's 14B apart); the MLP and MLA fields
    # as the published config.json gives them.
    "DeepSeek-V3": (
        config("deepseek-ai--DeepSeek-V3"),
        671,
        37,
        0,
    ),
    # "106 billion total parameters and 12 billion active parameters": GLM counts active without embedding and head.
    "GLM-4.5-Air": (config("zai-org--GLM-4.5-Air"), 106, 12, 2),
    # "117B parameters with 5.1B active parameters" (OpenAI's model card), its active count without the input
    # embedding (the paper's 5.13B: the unembedding counted, the embedding not).
    "gpt-oss-120b": (config("openai--gpt-oss-120b"), 117, 5.1, 1),
}


@pytest.mark.parametrize("model", CARDS)
def test_config_arithmetic_counts_as_the_card_does(model: str) -> None:
    text, total, active, ends_left_out = CARDS[model]
    counted = parameters_from_config(text, model)
    assert counted.total_b == pytest.approx(total, rel=0.01)
    ends = ends_left_out * text["vocab_size"] * text["hidden_size"] / 1e9
    assert counted.active_b - ends == pytest.approx(active, rel=0.03)


def test_deepseek_v4s_compressed_attention_counts_as_its_card() -> None:
    """ "284B total parameters" (DeepSeek-V4-Flash's card): one KV head, a grouped low-rank output, compressors and
    ratio-4 indexers per layer (the MLA arithmetic would have said 291.3B)."""
    counted = parameters_from_config(config("deepseek-ai--DeepSeek-V4-Flash-Base"), "v4-flash")
    assert counted.total_b == pytest.approx(284, abs=0.5)
    assert (counted.experts, counted.experts_per_token) == (256, 6)


def test_experts_are_never_read_wider_than_the_checkpoint_holds_them(tmp_path: Path) -> None:
    """The V4-Flash config names no quantization (BF16 by default), but its checkpoint (lil testdata's index:
    166,878,536,440 bytes) holds 284B weights at 0.59 bytes each: its experts are read at that width, not BF16's."""
    (tmp_path / "config.json").write_text(json.dumps(config("deepseek-ai--DeepSeek-V4-Flash-Base")))
    profile = profile_from_dir(tmp_path, weights_known=True).model_copy(update={"weights_gib": 166_878_536_440 / 2**30})
    parameters = profile.parameters
    assert parameters is not None
    assert speed.expert_width(profile, parameters) == pytest.approx(166_878_536_440 / (parameters.total_b * 1e9))
    assert speed.expert_width(profile.model_copy(update={"weights_gib": 530.0}), parameters) == 2.0


@pytest.mark.parametrize(
    ("name", "lacking"),
    [
        ("Qwen--Qwen3.8-Flash-Next", r"QSA indexer \(indexer_n_heads\), n-gram \(ple_layer_ids\)"),
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
    (tmp_path / "config.json").write_text(json.dumps(config("Qwen--Qwen3.8-Flash-Next")))
    profile = profile_from_dir(tmp_path, weights_known=True).model_copy(update={"weights_gib": 45})
    result = plan(spark(), profile, Intent(max_context=32768, concurrency=1), model_ref=str(tmp_path))
    assert result.speed is None
    (said,) = [w for w in result.warnings if w.startswith("no speed predicted")]
    assert "no safetensors files in the directory" in said and "QSA indexer" in said


# Catalog models whose published config is a fixture: (the fixture, which of the embedding and the head the catalog's
# sourced active count leaves out, as its publisher counts).
CATALOG_CONFIGS = {
    # OpenAI's 5.1B active leaves out the input embedding only (the paper's 5.13B).
    "openai/gpt-oss-120b": ("openai--gpt-oss-120b", 1),
    # Qwen's "3B active" for Qwen3.5 / 3.6-35B-A3B includes both, as its Qwen3-30B-A3B's "3.3B" does.
    "nvidia/Qwen3.6-35B-A3B-NVFP4": ("Qwen--Qwen3.6-35B-A3B", 0),
    # The catalog reads Qwen3-Coder-Next as Qwen3-Next-80B-A3B's config (its sources say so); Qwen's "3B active" for
    # it leaves out both (3.25B without them, 3.88B with).
    "Qwen/Qwen3-Coder-Next-FP8": ("Qwen--Qwen3-Next-80B-A3B-Instruct", 2),
    # NVIDIA's card: 31.6B total, 3.6B active with the embeddings (seed 002's "30B / 3.5B" rounded them, and this
    # check caught the catalog holding the rounded figures).
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4": ("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 0),
    # No card states GLM-5.3's counts: the catalog holds transformers' own count of each published config.
    "local-inference-lab/GLM-5.3-NVFP4-Spark": ("zai-org--GLM-5.3-NVFP4", 0),
    "local-inference-lab/GLM-5.3-Flash-NVFP4": ("zai-org--GLM-5.3-Flash-NVFP4", 0),
}


def stated_precision(figure: float) -> float:
    """Half a unit of a published figure's last digit: "3B" holds 2.5 to 3.5, "5.1B" 5.05 to 5.15."""
    text = f"{figure:g}"
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 0.5 * 10**-decimals


@pytest.mark.parametrize("model", CATALOG_CONFIGS)
def test_each_catalog_models_sourced_counts_agree_with_its_configs_arithmetic(model: str) -> None:
    """The catalog's card figures are a check on the reading: the counts transformers' own model agrees with
    (tests/vllm/check_parameter_counts.py) fall within what each card states, at the precision it states it."""
    fixture, ends_left_out = CATALOG_CONFIGS[model]
    sourced = load_catalog()[model].parameters
    assert sourced is not None
    text = config(fixture)
    counted = parameters_from_config(text, fixture)
    ends = ends_left_out * text_config(text)["vocab_size"] * text_config(text)["hidden_size"] / 1e9
    assert abs(counted.total_b - sourced.total_b) <= stated_precision(sourced.total_b)
    assert abs(counted.active_b - ends - sourced.active_b) <= stated_precision(sourced.active_b)
    assert (counted.experts, counted.experts_per_token) == (sourced.experts, sourced.experts_per_token)
