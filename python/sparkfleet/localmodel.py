"""Build a ModelProfile from a staged Hugging Face model directory (config.json + safetensors sizes).

This is the only module of the library that reads files; the planner receives the result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import PlanError
from .models import GIB, CheckpointFormat, ModelProfile


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    text = config.get("text_config")
    return {**config, **text} if isinstance(text, dict) else config


def _first(config: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return None


def checkpoint_format(config: dict[str, Any]) -> CheckpointFormat:
    quant = config.get("quantization_config") or {}
    method = str(quant.get("quant_method", "")).lower()
    algo = str(quant.get("quant_algo", "")).lower()
    if method == "modelopt":
        return CheckpointFormat.MODELOPT_NVFP4 if "fp4" in algo else CheckpointFormat.FP8
    if method == "compressed-tensors":
        text = json.dumps(quant).lower()
        return CheckpointFormat.CT_NVFP4 if "nvfp4" in text or '"num_bits": 4' in text else CheckpointFormat.FP8
    return {
        "fp8": CheckpointFormat.FP8,
        "mxfp4": CheckpointFormat.MXFP4,
        "awq": CheckpointFormat.AWQ_INT4,
        "gptq": CheckpointFormat.GPTQ_INT4,
    }.get(method, CheckpointFormat.BF16)


def weight_bytes(model_dir: Path) -> int:
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        total = json.loads(index.read_text()).get("metadata", {}).get("total_size")
        if isinstance(total, int) and total > 0:
            return total
    files = list(model_dir.glob("*.safetensors")) or list(model_dir.glob("*.bin"))
    return sum(f.stat().st_size for f in files)


def profile_from_config(model_id: str, config: dict[str, Any], weights: int, source: str) -> ModelProfile:
    """Profile from an already-read config.json (the facts module ships it from the target host)."""
    text = _text_config(config)
    layers = _first(text, "num_hidden_layers", "n_layers")
    heads = _first(text, "num_attention_heads", "n_head")
    hidden = _first(text, "hidden_size", "d_model")
    if not (layers and heads and hidden):
        raise PlanError("model", f"{source} lacks num_hidden_layers / num_attention_heads / hidden_size")
    kv_heads = _first(text, "n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num") or heads
    head_dim = _first(text, "head_dim") or _first(text, "hidden_size_per_head") or hidden // heads
    layer_types = text.get("layer_types") or []
    full = sum(1 for t in layer_types if t == "full_attention") if layer_types else layers
    sliding = sum(1 for t in layer_types if t == "sliding_attention") if layer_types else 0
    window = text.get("sliding_window") if sliding else None
    if layer_types and full + sliding < len(layer_types):
        raise PlanError(
            "model",
            f"{source}: linear-attention / Mamba layers need a catalog profile "
            "(their state shapes are not planned from a bare config)",
            ("a catalog id: sparkfleet catalog",),
        )
    native = int(_first(text, "max_position_embeddings", "max_seq_len", "seq_length") or 4096)
    cfg_source = f"{source} (config.json)"
    return ModelProfile(
        id=model_id,
        description=f"planned from {source}",
        architecture=(config.get("architectures") or ["unknown"])[0],
        weights_gib=max(weights, 1) / GIB,
        hidden_size=int(hidden),
        vocab_size=int(_first(text, "vocab_size") or 32000),
        num_layers=int(layers),
        full_attention_layers=int(full),
        sliding_attention_layers=int(sliding),
        sliding_window=int(window) if window else None,
        kv_heads=int(kv_heads),
        head_dim=int(head_dim),
        native_max_context=native,
        checkpoint_format=checkpoint_format(config),
        moe=bool(_first(text, "num_experts", "num_local_experts", "n_routed_experts")),
        sources={
            k: cfg_source
            for k in (
                "num_layers",
                "kv_heads",
                "head_dim",
                "native_max_context",
                "hidden_size",
                "sliding_window",
            )
        }
        | {"weights_gib": f"{source} (safetensors sizes)"},
    )


def profile_from_dir(path: str | Path) -> ModelProfile:
    model_dir = Path(path)
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        raise PlanError("model", f"{model_dir} has no config.json", ("a staged model directory", "a catalog id"))
    config = json.loads(config_path.read_text())
    return profile_from_config(str(model_dir), config, weight_bytes(model_dir), str(model_dir))
