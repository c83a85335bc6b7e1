"""Nemotron-H Puzzle's per-layer blocks, read as vLLM's nemotron_h.py builds them (the layout itself is proved by
tests/vllm/check_kv_geometry.py's nemotron_h_puzzle family)."""

from __future__ import annotations

from typing import Any

import pytest

from sparkfleet.errors import PlanError
from sparkfleet.models import ModelProfile, StateLayerKind
from sparkfleet.reading.config import profile_from_config

GIB = 1024**3


def puzzle(blocks: list[dict[str, Any]], **fields: Any) -> ModelProfile:
    config = {
        "architectures": ["NemotronHPuzzleForCausalLM"],
        "model_type": "nemotron_h_puzzle",
        "hidden_size": 2688,
        "num_hidden_layers": len(blocks),
        "num_attention_heads": 32,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "mamba_num_heads": 64,
        "mamba_head_dim": 64,
        "ssm_state_size": 128,
        "n_groups": 8,
        "conv_kernel": 4,
        "block_configs": blocks,
        **fields,
    }
    return profile_from_config("org/puzzle", config, 30 * GIB, "puzzle")


MAMBA, MOE = {"block_type": "mamba"}, {"block_type": "moe", "n_routed_experts": 128, "num_experts_per_tok": 6}


def test_attention_blocks_with_a_window_are_sliding_layers_beside_the_mamba_state() -> None:
    profile = puzzle([MAMBA, MOE, {"block_type": "attention", "sliding_window": 4096}, MAMBA, {"block_type": "attention"}])
    assert (profile.full_attention_layers, profile.sliding_attention_layers, profile.sliding_window) == (1, 1, 4096)
    state = profile.state_layers
    assert state is not None and state.kind is StateLayerKind.MAMBA2 and state.count == 2
    # Proved: no unproved-layout warning.
    assert not [q for q in profile.quirks if "not proved" in q]


def test_the_models_own_window_applies_to_every_attention_block_without_one() -> None:
    profile = puzzle([MAMBA, {"block_type": "attention"}, {"block_type": "attention"}], sliding_window=1024)
    assert (profile.sliding_attention_layers, profile.sliding_window) == (2, 1024)


@pytest.mark.parametrize(
    ("blocks", "fields", "named"),
    [
        ([{"block_type": "retention"}], {}, "block_type retention"),
        ([MAMBA, {"block_type": "attention"}], {"hybrid_override_pattern": "*M"}, "disagrees with block_configs"),
        ([{"block_type": "mamba", "ssm_state_size": 64}, {"block_type": "attention"}], {}, "ssm_state_size"),
        ([MAMBA, {"block_type": "attention", "num_key_value_heads": 8}], {}, "num_key_value_heads"),
        ([MAMBA, {"block_type": "attention", "q_indexer_top_k": 2048}], {}, "q_indexer_top_k"),
        (
            [{"block_type": "attention", "sliding_window": 128}, {"block_type": "attention", "sliding_window": 4096}],
            {},
            "sliding windows [128, 4096]",
        ),
        ([MAMBA, {"block_type": "attention"}], {"layers_block_type": ["attention", "mamba"]}, "layers_block_type"),
        ([MAMBA, {"block_type": "attention"}], {"num_hidden_layers": 3}, "2 blocks for num_hidden_layers 3"),
        ([MAMBA, {"block_type": "attention", "sliding_window": 0}], {}, "sliding_window 0"),
    ],
)
def test_blocks_vllm_would_build_otherwise_are_refused_by_name(
    blocks: list[dict[str, Any]], fields: dict[str, Any], named: str
) -> None:
    with pytest.raises(PlanError) as refused:
        puzzle(blocks, **fields)
    assert "unsupported layout" in refused.value.problem and named in refused.value.problem


def test_a_mamba_block_that_repeats_the_models_own_fields_is_read() -> None:
    profile = puzzle([{"block_type": "mamba", "ssm_state_size": 128}, {"block_type": "attention"}])
    assert profile.state_layers is not None and profile.state_layers.count == 1


def test_layers_block_type_is_read_before_a_stale_hybrid_override_pattern() -> None:
    # transformers' NemotronHConfig builds the layers from layers_block_type where the file has it.
    profile = puzzle(
        [MAMBA, {"block_type": "attention"}],
        layers_block_type=["mamba", "attention"],
        hybrid_override_pattern="*M",
    )
    assert profile.full_attention_layers == 1 and profile.state_layers is not None


def nemotron_h(**fields: Any) -> ModelProfile:
    """A Nemotron-H config.json that leaves out head_dim, the KV heads and the Mamba groups."""
    config = {
        "architectures": ["NemotronHForCausalLM"],
        "model_type": "nemotron_h",
        "hidden_size": 2688,
        "num_hidden_layers": 2,
        "num_attention_heads": 32,
        "hybrid_override_pattern": "M*",
        "mamba_num_heads": 64,
        **fields,
    }
    return profile_from_config("org/nemotron", config, 30 * GIB, "nemotron")


def test_fields_the_file_leaves_out_are_nemotron_h_config_defaults() -> None:
    # NemotronHConfig: head_dim 128 (not hidden_size / heads = 84), 8 KV heads, 8 Mamba groups.
    profile = nemotron_h()
    assert (profile.kv_heads, profile.head_dim) == (8, 128)
    state = profile.state_layers
    # conv over heads x head size (64 x 64) and 2 x 8 groups x 128 state.
    assert state is not None and state.conv_dim == 64 * 64 + 2 * 8 * 128


def test_nemotron_h_older_field_names_win_as_its_config_class_renames_them() -> None:
    # NemotronHConfig.__post_init__: mamba_n_groups and mamba_d_conv set n_groups and conv_kernel.
    state = nemotron_h(mamba_n_groups=2, mamba_d_conv=3).state_layers
    assert state is not None and (state.conv_dim, state.conv_kernel) == (64 * 64 + 2 * 2 * 128, 3)
