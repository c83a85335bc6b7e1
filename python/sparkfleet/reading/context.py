"""The longest context vLLM allows for a config: its own derivation, key by key.

Read from vLLM 0.32.0 and 0.33.0 (`ModelArchConfigConvertorBase.derive_max_model_len_and_key` and
`_get_and_verify_max_len` in config/model.py), and proved against that code on the fixtures by
tests/vllm/check_context_limit.py:
- the smallest of nine length keys of the text config, except that a `model_max_length` there wins;
- times the RoPE factor, for rope types whose max_position_embeddings is not already scaled (not for
  yarn, llama3, longrope, su, deepseek_yarn, deepseek_llama_scaling, nor for Gemma-3);
- longrope defaults to original_max_position_embeddings;
- a user's max_model_len may exceed the derived value up to the text config's `model_max_length`.
The tokenizer's model_max_length bounds only pooling models with absolute position embeddings in those
releases, never a generative model, so it is not read here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
# Rope types whose max_position_embeddings already includes the scaling (vLLM does not multiply again).
PRESCALED_ROPE = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
# vLLM's default when no key is present.
FALLBACK = 2048
SOURCE = "vLLM 0.32.0/0.33.0 config/model.py _get_and_verify_max_len and derive_max_model_len_and_key"


@dataclass(frozen=True)
class ContextLimit:
    # What vLLM serves by default, and the key it came from.
    derived: int
    key: str
    # The longest max_model_len vLLM accepts without VLLM_ALLOW_LONG_MAX_MODEL_LEN (>= derived).
    allowed: int


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _rope_parameters(text: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each RoPE parameter set: transformers 5's rope_parameters (flat, or one per layer type) or rope_scaling."""
    for field in ("rope_parameters", "rope_scaling"):
        value = text.get(field)
        if not isinstance(value, dict):
            continue
        nested = [v for v in value.values() if isinstance(v, dict)]
        for params in nested or [value]:
            kind = params.get("rope_type") or params.get("type")
            if kind:
                yield {**params, "rope_type": kind}
        return


def context_limit(text: dict[str, Any]) -> ContextLimit:
    """vLLM's limit for a text config (the language model's part of config.json)."""
    derived, key = float("inf"), "none"
    for name in LENGTH_KEYS:
        value = _number(text.get(name))
        if value is not None and value < derived:
            derived, key = value, name
    override = _number(text.get("model_max_length"))
    if override:
        derived, key = override, "model_max_length"
    if derived == float("inf"):
        derived, key = float(FALLBACK), "vLLM's default (no length key)"
    rope = list(_rope_parameters(text))
    if rope and "gemma3" not in str(text.get("model_type") or ""):
        factor = 1.0
        for params in rope:
            if params["rope_type"] not in PRESCALED_ROPE:
                factor = _number(params.get("factor")) or factor
        derived *= factor
    default = int(derived)
    if any(p["rope_type"] == "longrope" for p in rope):
        default = int(_number(text.get("original_max_position_embeddings")) or derived)
    return ContextLimit(derived=default, key=key, allowed=max(int(derived), int(override or 0)))
