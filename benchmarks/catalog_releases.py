"""Which release each catalog model plans on, with default intents, on a Spark whose main release is the default
(vLLM 0.33.0) and which holds stock vLLM 0.30.0 beside it (vllm_install_releases), as issue 63's report asks.

Run: uv run python benchmarks/catalog_releases.py

Each model is planned alone (its default intent), as vllm_serve plans an instance: on the main release when that
loads it, else on the newest release beside it that does. Planner output, not a measurement.
"""

from __future__ import annotations

from sparkfleet.boundary.adapters import host_plan
from sparkfleet.catalog import load_catalog, recipe_intent
from sparkfleet.errors import PlanError
from sparkfleet.planning.catalogspeed import reference_spark

# A Spark's recorded driver facts over the reference Spark the planner assumes away from one.
SPARK = (
    reference_spark()
    .model_copy(
        update={
            "gpu_name": "NVIDIA GB10",
            "driver_version": "580.142",
            "cuda_version": "13.0",
            "ptxas_path": "/usr/local/cuda/bin/ptxas",
            "vllm_version": "0.33.0",
        }
    )
    .model_dump(mode="json")
)
BESIDE = [{"name": "stock-0.30", "vllm_version": "0.30.0"}]


def main() -> None:
    print(f"{'model':<58} {'release':<22} {'context x seqs':>16}")
    planned = 0
    catalog = load_catalog()
    for model_id in sorted(catalog):
        # A model one Spark cannot hold is asked on the Sparks its recipe serves it on (the head's plan).
        intent = {"trust_remote_code": True} | recipe_intent(catalog[model_id])
        instance = {"name": "m", "model": model_id, "intent": intent}
        try:
            served = host_plan(SPARK, [instance], "vllm_serve_instances", False, BESIDE).instances["m"]
        except PlanError as exc:
            print(f"{model_id:<58} refused: {str(exc)[:120]}")
            continue
        planned += 1
        where = (
            f"{served.release.name} (vLLM {served.vllm_version})" if served.release else f"main (vLLM {served.vllm_version})"
        )
        print(f"{model_id:<58} {where:<22} {served.max_model_len:>9,} x {served.max_num_seqs}")
    print(f"\n{planned} of {len(catalog)} catalog models planned with their default intent")


if __name__ == "__main__":
    main()
