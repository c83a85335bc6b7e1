"""Speed across Sparks: the published figures of one model on one Spark and on two in tensor parallel (same source,
same engine, same settings), the per-all-reduce cost fitted to their ratio, and the fit's leave-one-model-out error.

The ratio is what is fitted and checked, not the figures: each source's single-Spark run sits apart from the seeds'
(other builds and patches), while the step's physics (each rank reads and computes half, then two all-reduces a layer
cross the link) is the same. nccl-tests' raw all-reduce (22 us + bytes at 1.44 GB/s) under-states what vLLM's steps
pay; the fit gives the start of each all-reduce from these rows.
"""

from __future__ import annotations

import dataclasses
from functools import cache

from ..catalog import get_profile
from ..kv.cache import kv_dtype_bytes
from . import calibration, speed

KUBIS_GPT_OSS = (
    "kubis.ai/blog/dgx_series/benchmarks/gpt-oss-120b-topology-benchmark (llama-benchy pp1024 tg128, --enforce-eager "
    "both runs)"
)
KUBIS_SUPER = "kubis.ai/blog/dgx_series/benchmarks/nemotron3-super-120b-topology-benchmark (vLLM 0.17.2rc1, pp1024 tg128)"


@dataclasses.dataclass(frozen=True)
class Scaling:
    model: str
    nodes: int
    concurrency: int
    one_spark_tps: float
    spread_tps: float
    eager: bool
    source: str

    @property
    def ratio(self) -> float:
        return self.spread_tps / self.one_spark_tps


ROWS = (
    Scaling("openai/gpt-oss-120b", 2, 1, 57.5, 69.0, True, KUBIS_GPT_OSS),
    Scaling("openai/gpt-oss-120b", 2, 8, 153.5, 231.0, True, KUBIS_GPT_OSS),
    Scaling("openai/gpt-oss-120b", 2, 32, 318.7, 471.7, True, KUBIS_GPT_OSS),
    Scaling("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", 2, 1, 16.29, 22.97, False, KUBIS_SUPER),
    Scaling("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", 2, 8, 55.79, 82.77, False, KUBIS_SUPER),
    Scaling("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", 2, 32, 83.50, 128.27, False, KUBIS_SUPER),
)
# Both sources ran pp1024 tg128: the mean sequence holds the prompt and half the reply.
CONTEXT = 1024 + 64
# The all-reduce starts tried, 10 us apart: the fit's grid.
STARTS = tuple(n * 1e-6 for n in range(10, 301, 2))


def predicted_ratio(row: Scaling, factors: speed.Factors) -> float:
    facts = speed.step_facts(get_profile(row.model), kv_dtype_bytes("fp8"))
    assert facts is not None, row.model

    def tps(ranks: int) -> float:
        return speed.aggregate_tps(
            facts, factors, concurrency=row.concurrency, context=CONTEXT, eager=row.eager, layout=speed.Layout(ranks=ranks)
        )

    return tps(row.nodes) / tps(1)


def _error(rows: tuple[Scaling, ...], factors: speed.Factors) -> float:
    """Mean relative error of the ratio, each model weighing the same."""
    models = sorted({r.model for r in rows})
    per_model = [
        sum(speed.log_error(predicted_ratio(r, factors), r.ratio) for r in rows if r.model == m)
        / sum(1 for r in rows if r.model == m)
        for m in models
    ]
    return sum(per_model) / len(per_model)


def fit(rows: tuple[Scaling, ...]) -> speed.Factors:
    base = calibration.factors()
    return min((dataclasses.replace(base, allreduce_start_s=start) for start in STARTS), key=lambda f: _error(rows, f))


@cache
def factors() -> speed.Factors:
    return fit(ROWS)


@cache
def leave_one_model_out_error() -> float:
    """Each model's ratio predicted by a fit to the other models' rows: the claim a multi-node band carries."""
    models = sorted({r.model for r in ROWS})
    errors = [_error(tuple(r for r in ROWS if r.model == m), fit(tuple(r for r in ROWS if r.model != m))) for m in models]
    return sum(errors) / len(errors)


# No published vLLM pipeline-parallel figure on Sparks was found; llama.cpp's layer split over two Sparks with two
# batches in flight (its pipeline groups, as vLLM keeps pipeline_parallel_size batches) against one Spark is the
# nearest: Qwen3.8-27B UD-Q4_K_XL at 32, 64 and 128 streams, 128 prompt and 256 generated tokens, "1.12x to 1.13x of a
# single Spark". Checked on the catalog's nearest layout (a dense 27B Qwen), not fitted: its error widens the bands.
PIPELINE_SOURCE = (
    "unslothai/unsloth PR #10323 and unslothai/llama.cpp PR #187 (two Sparks, -sm layer with --pipeline-groups 2 against "
    "one Spark: 1.12-1.13x at 32-128 streams)"
)
PIPELINE_STAND_IN = "unsloth/Qwen3.6-27B-NVFP4"
PIPELINE_ROWS = tuple(
    Scaling(PIPELINE_STAND_IN, 2, concurrency, 1.0, 1.125, False, PIPELINE_SOURCE) for concurrency in (32, 64, 128)
)
PIPELINE_CONTEXT = 128 + 128


def predicted_pipeline_ratio(row: Scaling) -> float:
    facts = speed.step_facts(get_profile(row.model), kv_dtype_bytes("auto"))
    assert facts is not None, row.model

    def tps(layout: speed.Layout, factors: speed.Factors) -> float:
        return speed.aggregate_tps(
            facts, factors, concurrency=row.concurrency, context=PIPELINE_CONTEXT, eager=row.eager, layout=layout
        )

    return tps(speed.Layout(stages=row.nodes), factors()) / tps(speed.SOLO, calibration.factors())


@cache
def pipeline_error() -> float:
    """The mean error of the predicted pipeline ratio against the published layer-split figures."""
    return sum(speed.log_error(predicted_pipeline_ratio(r), r.ratio) for r in PIPELINE_ROWS) / len(PIPELINE_ROWS)


EXTRA_ERROR_SOURCE = (
    "the link fit's leave-one-model-out error; for pipeline stages also the error against llama.cpp's published "
    "layer-split ratios, no vLLM pipeline figure on Sparks being published"
)


def extra_error(layout: speed.Layout) -> float:
    """How much wider a multi-node prediction's bands are than one Spark's: the link fit's leave-one-model-out error,
    and for pipeline stages the pipeline check's error too."""
    if layout == speed.SOLO:
        return 0.0
    return leave_one_model_out_error() + (pipeline_error() if layout.stages > 1 else 0.0)
