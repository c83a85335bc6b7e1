from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cpu_host

from sparkfleet.errors import PlanError
from sparkfleet.localmodel import profile_from_dir
from sparkfleet.models import Intent
from sparkfleet.planning.planner import plan


def _stage(tmp_path: Path, **config: object) -> Path:
    base = {
        "architectures": ["LlamaForCausalLM"],
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_size": 256,
        "vocab_size": 4096,
        "max_position_embeddings": 2048,
    }
    (tmp_path / "config.json").write_text(json.dumps(base | config))
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1000)
    return tmp_path


def test_local_directory_is_planned_from_config_and_file_sizes(tmp_path: Path) -> None:
    profile = profile_from_dir(_stage(tmp_path))
    assert profile.head_dim == 64 and profile.kv_heads == 2 and profile.full_attention_layers == 4
    result = plan(cpu_host(), profile, Intent(max_context=512, concurrency=4), model_ref=str(tmp_path))
    assert result.argv[2] == str(tmp_path)
    # 4 layers x 2 (K,V) x 2 heads x 64 x 2 bytes = 2048 bytes per token; 4 x 512 tokens
    assert result.kv_cache_memory_bytes >= 4 * 512 * 2048


def test_linear_attention_without_its_state_shape_is_refused(tmp_path: Path) -> None:
    _stage(tmp_path, layer_types=["linear_attention", "full_attention"] * 2)
    with pytest.raises(PlanError, match="state shape"):
        profile_from_dir(tmp_path)


def test_missing_config(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="config.json"):
        profile_from_dir(tmp_path)


def test_a_directory_without_weights_is_refused_unless_their_size_is_given(tmp_path: Path) -> None:
    """Issue 49: a directory holding only a config.json was planned at 0.00 GiB of weights, looking like a fit."""
    _stage(tmp_path).joinpath("model.safetensors").unlink()
    with pytest.raises(PlanError, match=r"no weights sparkfleet can size.*--weights-gib G") as refused:
        profile_from_dir(tmp_path)
    assert refused.value.variable == "model"
    drafter = pytest.raises(PlanError, match="--drafter-weights-gib G")
    with drafter:
        profile_from_dir(tmp_path, variable="--drafter", size_flag="--drafter-weights-gib")
    assert profile_from_dir(tmp_path, weights_known=True).num_layers == 4
    # An index's total_size sizes it even before every shard is there.
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 5 * 2**30}}))
    assert profile_from_dir(tmp_path).weights_gib == 5.0


def test_the_cli_plans_a_weightless_directory_only_by_a_given_size(tmp_path: Path) -> None:
    from sparkfleet.cli import main

    _stage(tmp_path).joinpath("model.safetensors").unlink()
    assert main(["plan", str(tmp_path), "--platform", "cpu", "--memory-gib", "64"]) == 2
    assert main(["plan", str(tmp_path), "--platform", "cpu", "--memory-gib", "64", "--weights-gib", "2"]) == 0
