"""The field's frontier models planned as it serves them on one to four Sparks, with their predicted speed (issue 62).

Each model from its published config (tests/fixtures/configs) and its checkpoint's size (the index's total_size in
local-inference-lab/lil's testdata); no header is read here, so parameters come from config arithmetic and each plan
says so. Prints, per layout: KV bytes a token on one rank, context x sequences, the utilization each node runs at,
and the predicted single-stream and aggregate decode with their bands. Figures are the planner's predictions for a
Spark, not measurements.

Run: uv run python benchmarks/frontier_plans.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from conftest import spark

from sparkfleet.catalog import load_catalog, recipe_intent
from sparkfleet.errors import PlanError
from sparkfleet.models import Intent, ModelProfile
from sparkfleet.planning.planner import plan
from sparkfleet.reading.arithmetic import speed_reading
from sparkfleet.reading.config import profile_from_config

CONFIGS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "configs"
# metadata.total_size of each checkpoint's model.safetensors.index.json (lil testdata, commits 7629ec8 / 04a6948).
CHECKPOINTS = {
    "GLM-5.3-NVFP4-Spark": ("zai-org--GLM-5.3-NVFP4", 435_548_900_560),
    "GLM-5.3-Flash-NVFP4": ("zai-org--GLM-5.3-Flash-NVFP4", 198_042_331_512),
    "DeepSeek-V4-Flash-0731": ("deepseek-ai--DeepSeek-V4-Flash-Base", 166_878_536_440),
}
CASES = (
    ("GLM-5.3-NVFP4-Spark", {"nodes": 4, "tensor_parallel_size": 4, "max_context": 32768, "concurrency": 1}),
    (
        "GLM-5.3-NVFP4-Spark",
        {"nodes": 4, "tensor_parallel_size": 4, "decode_context_parallel_size": 4, "max_context": 65536},
    ),
    ("GLM-5.3-NVFP4-Spark", {"nodes": 4, "pipeline_parallel_size": 4, "max_context": 32768, "concurrency": 1}),
    ("GLM-5.3-Flash-NVFP4", {"nodes": 2, "tensor_parallel_size": 2, "max_context": 65536, "concurrency": 2}),
    ("GLM-5.3-Flash-NVFP4", {"nodes": 2, "pipeline_parallel_size": 2, "max_context": 131072, "concurrency": 4}),
    ("DeepSeek-V4-Flash-0731", {"nodes": 2, "tensor_parallel_size": 2, "max_context": 131072, "concurrency": 4}),
    ("DeepSeek-V4-Flash-0731", {"nodes": 4, "tensor_parallel_size": 4, "max_context": 131072, "concurrency": 8}),
)


def profile(name: str) -> ModelProfile:
    fixture, size = CHECKPOINTS[name]
    config = json.loads((CONFIGS / f"{fixture}.json").read_text())
    read = profile_from_config(f"local-inference-lab/{name}", config, size, "lil testdata")
    return speed_reading(read, config, None, "no headers read here")


def main() -> None:
    asked = [(name, profile(name), {"concurrency": 1, "cluster_backend": "ray"} | settings) for name, settings in CASES]
    # The catalog's models one Spark cannot hold, as a plan with no layout asked takes them: on their recipe's Sparks.
    asked += [(f"catalog {p.id}", p, recipe_intent(p)) for p in load_catalog().values() if p.layout]
    for name, model, settings in asked:
        intent = Intent.model_validate(settings)
        sizes = (intent.tensor_parallel_size, intent.pipeline_parallel_size, intent.decode_context_parallel_size)
        layout = "TP{} PP{} DCP{}".format(*sizes)
        print(f"\n{name} on {intent.nodes} Sparks, {layout}, asked {intent.max_context:,} x {intent.concurrency}")
        try:
            result = plan(spark("0.33.0"), model, intent, model_ref=name)
        except PlanError as exc:
            print(f"  refused: {exc}")
            continue
        per_token = result.kv_cache_memory_bytes / max(result.kv_tokens, 1)
        print(
            f"  KV {result.kv_cache_dtype}: {per_token:,.0f} B a token a rank, {result.kv_tokens:,} tokens; "
            f"{result.max_model_len:,} x {result.max_num_seqs}; utilization {result.gpu_memory_utilization:.2f} a node"
        )
        s = result.speed
        if s is None:
            print("  speed: " + "; ".join(w for w in result.warnings if w.startswith("no speed")))
            continue
        print(
            f"  decode one stream {s.decode.value} tok/s ({s.decode.low}-{s.decode.high}); "
            f"{s.concurrency} streams {s.aggregate.value} tok/s ({s.aggregate.low}-{s.aggregate.high}); "
            f"{s.basis[0]}"
        )


if __name__ == "__main__":
    main()
