"""What a transformers config class fills in where config.json leaves a field out, for the families whose defaults
shape the KV cache.

Pure. vLLM reads the config object, not the file: a field a checkpoint omits is the class's default (or a value the
class derives), so the planner reads the same. Each entry names the class it follows (transformers 5.19, the one
vLLM 0.32 pins).
"""

from __future__ import annotations

from typing import Any

from .families import ClassDefaults, family_of

# Glm5NextTextConfig's linear_attn_config keys and the flat fields they set.
GLM5_NEXT_NESTED = {
    "num_heads": "linear_num_heads",
    "head_dim": "linear_head_dim",
    "short_conv_kernel_size": "linear_conv_kernel_dim",
}


def _olmo_hybrid(text: dict[str, Any]) -> dict[str, Any]:
    """OlmoHybridConfig.__post_init__: full attention where i % 4 == 3 (the last layer at least), Gated-DeltaNet with
    as many key and value heads as attention heads, keys 0.75 x hidden / heads wide and values twice that."""
    layers, heads, hidden = text["num_hidden_layers"], text["num_attention_heads"], text["hidden_size"]
    types = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(layers)]
    if "full_attention" not in types:
        types[-1] = "full_attention"
    key_heads = int(text.get("linear_num_key_heads") or heads)
    key_dim = int(text.get("linear_key_head_dim") or int(0.75 * hidden / key_heads))
    return {
        "layer_types": types,
        "linear_num_key_heads": key_heads,
        "linear_num_value_heads": heads,
        "linear_key_head_dim": key_dim,
        "linear_value_head_dim": 2 * key_dim,
        "linear_conv_kernel_dim": 4,
        "num_key_value_heads": heads,
    }


def _glm5_next(text: dict[str, Any]) -> dict[str, Any]:
    """Glm5NextTextConfig: KDA where i % 4 != 3 and indexed MLA elsewhere, a NoPE latent of 512, the indexer's keys
    pooled over 16 tokens, and KDA of 64 heads x 128; its linear_attn_config dict, when given, overrides the flat
    linear fields (__post_init__)."""
    layers = text["num_hidden_layers"]
    return {
        "layer_types": ["indexed_attention" if i % 4 == 3 else "linear_attention" for i in range(layers)],
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 0,
        "index_topk": 2048,
        "index_head_dim": 128,
        "index_kpool": 16,
        "linear_num_heads": 64,
        "linear_head_dim": 128,
        "linear_conv_kernel_dim": 4,
    }


def _glm5_next_nested(text: dict[str, Any]) -> dict[str, Any]:
    nested = text.get("linear_attn_config")
    if not isinstance(nested, dict):
        return {}
    return {flat: nested[key] for key, flat in GLM5_NEXT_NESTED.items() if nested.get(key) is not None}


# NemotronHConfig's defaults for the fields that shape the KV cache and the Mamba-2 state (the Puzzle config class
# derives from it). vLLM's nemotron_h.py reads head_dim where the config has one, so the class's 128 wins over
# hidden_size / heads.
NEMOTRON_H_DEFAULTS = {
    "num_key_value_heads": 8,
    "head_dim": 128,
    "ssm_state_size": 128,
    "mamba_num_heads": 128,
    "mamba_head_dim": 64,
    "n_groups": 8,
    "conv_kernel": 4,
    "mamba_ssm_cache_dtype": "float32",
}
NEMOTRON_H_OLD_NAMES = {"mamba_n_groups": "n_groups", "mamba_d_conv": "conv_kernel"}


def _positive(text: dict[str, Any], *keys: str) -> bool:
    return all(isinstance(text.get(key), int) and not isinstance(text.get(key), bool) and text[key] > 0 for key in keys)


def with_class_defaults(text: dict[str, Any]) -> dict[str, Any]:
    """The text config as its class sees it: the file's fields over the class's defaults (and, for GLM-5-Next, its
    linear_attn_config over both). A family with no class defaults of note is returned as it is."""
    family = family_of(text.get("model_type"))
    defaults = family.defaults if family else None
    if defaults is ClassDefaults.NEMOTRON_H:
        # Only fields the file leaves out: an explicit null is what the class holds too. Older names win over the
        # new ones, as NemotronHConfig.__post_init__ renames them.
        merged = {**NEMOTRON_H_DEFAULTS, **text}
        return merged | {new: text[old] for old, new in NEMOTRON_H_OLD_NAMES.items() if old in text}
    # Only where the fields the defaults derive from are positive integers: profile_from_config refuses anything
    # else, naming the field.
    if defaults is ClassDefaults.OLMO_HYBRID and _positive(text, "num_hidden_layers", "num_attention_heads", "hidden_size"):
        derived = _olmo_hybrid(text)
    elif defaults is ClassDefaults.GLM5_NEXT and _positive(text, "num_hidden_layers"):
        derived = _glm5_next(text)
    else:
        return text
    given = {key: value for key, value in text.items() if value is not None}
    merged = {**derived, **given}
    if defaults is ClassDefaults.GLM5_NEXT:
        merged |= _glm5_next_nested(text)
    return merged
