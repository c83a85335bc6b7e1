"""Nemotron-H's layers, each one block of its own (hybrid_override_pattern: 'M' Mamba-2, '*' attention, '-' MLP, 'E'
MoE; or layers_block_type, as transformers 5 saves it), counted as vLLM's models/nemotron_h.py builds them: its MLPs
and experts have no gate (relu2), an up and a down projection each. Pure; for config arithmetic."""

from __future__ import annotations

from typing import Any

from . import mixers

BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}


def _int(text: dict[str, Any], key: str, default: int = 0) -> int:
    return mixers.positive(text, key) or default


def block_kinds(text: dict[str, Any]) -> list[str] | None:
    """Each layer's block, or None for a config whose layers each hold a mixer and an MLP."""
    pattern = text.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern and set(pattern) <= BLOCKS.keys():
        return [BLOCKS[c] for c in pattern]
    kinds = text.get("layers_block_type")
    if isinstance(kinds, list) and kinds and {str(k) for k in kinds} <= set(BLOCKS.values()):
        return [str(k) for k in kinds]
    return None


def mamba2(text: dict[str, Any], hidden: int) -> int:
    """A Mamba-2 mixer: z, x, B, C and dt from the hidden state, the convolution over x, B and C (with its bias), a
    dt bias, A and D a head, the gated norm, and the output projection."""
    heads, width = _int(text, "mamba_num_heads"), _int(text, "mamba_head_dim")
    inner = heads * width
    conv = inner + 2 * _int(text, "n_groups", 1) * _int(text, "ssm_state_size")
    bias = conv if text.get("use_conv_bias", True) else 0
    return hidden * (inner + conv + heads) + conv * _int(text, "conv_kernel", 4) + bias + 3 * heads + inner + inner * hidden


def counted(text: dict[str, Any], kinds: list[str], hidden: int, heads: int) -> tuple[int, int]:
    """Every block's weights, and those of the routed experts a token does not take."""
    experts, top_k = _int(text, "n_routed_experts"), _int(text, "num_experts_per_tok")
    expert = 2 * hidden * _int(text, "moe_intermediate_size")
    sizes = {
        "mamba": mamba2(text, hidden),
        "attention": mixers.attention(text, hidden, heads),
        "mlp": 2 * hidden * _int(text, "intermediate_size"),
        "moe": experts * expert + 2 * hidden * _int(text, "moe_shared_expert_intermediate_size") + experts * hidden,
    }
    idle = sum(1 for kind in kinds if kind == "moe") * max(experts - top_k, 0) * expert
    return sum(sizes[kind] for kind in kinds), idle
