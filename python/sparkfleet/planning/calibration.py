"""The seeds' measured Spark speeds, the factors fitted to them, and the fit's leave-one-model-out error.

Every row is a figure a seed measured on a DGX Spark (cited by seed and line). The model's bytes come from its
catalog profile, or from `OTHER_MODELS` for a model the catalog does not ship. The fit is weighted least squares
on relative error, each model weighing the same however many rows it has: prefill first (time to first token
against the prompt's FLOPs), then decode (seconds per token against the bytes a step reads, with the per-step
cost and eager's per-layer cost). Speculative and aggregate rows are never fitted: they test the model.
Prefill is predicted for prompts of 512 tokens and more: seed 001's 58-token judge call (TTFT 0.42 s) is per-request
overhead the prompt is too short to amortize (its own words), which no prompt-length model explains.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Literal

from ..models.speed import Parameters
from . import speed
from .speed import Drafting, Factors, StepFacts

Kind = Literal["decode", "aggregate", "prefill", "speculative"]
KINDS: tuple[Kind, ...] = ("decode", "aggregate", "prefill", "speculative")
# What a row leaves unstated is read as the guide's benchmark: 1,024 prompt tokens (seed 002 §10, vllm bench
# --random-input-len 1024) already in the sequence.
UNSTATED_CONTEXT = 1024


@dataclasses.dataclass(frozen=True)
class OtherModel:
    """A measured model outside the catalog: what a step of it reads."""

    weights_gb: float
    parameters: Parameters
    vocab: int
    hidden: int
    layers: int
    kv_bytes_per_token: float
    source: str


OTHER_MODELS = {
    "Qwen/Qwen2.5-3B-Instruct": OtherModel(
        weights_gb=6.17,
        parameters=Parameters(total_b=3.09, active_b=3.09, tied_embeddings=True),
        vocab=151936,
        hidden=2048,
        layers=36,
        # 36 layers x 2 (K and V) x 2 KV heads x 128 x 2 bytes (BF16).
        kv_bytes_per_token=36 * 2 * 2 * 128 * 2,
        source="Qwen2.5-3B config.json (3.09B parameters, BF16, tied embeddings, 36 layers, 2 KV heads of 128); "
        "seed 002 §2 states no quantization: BF16 assumed",
    ),
}


@dataclasses.dataclass(frozen=True)
class Measurement:
    model: str
    kind: Kind
    # Tokens/s: decode or speculative per stream, aggregate over `concurrency` streams, prefill over the prompt.
    value: float
    source: str
    # Decode: tokens already in the sequence; prefill: the prompt's tokens.
    context: int = UNSTATED_CONTEXT
    concurrency: int = 1
    eager: bool = False
    # Speculative rows: the method, its drafts per step and what the recipe says each step yields.
    method: Literal["mtp", "dflash"] | None = None
    drafts: int = 0


def _ttft(model: str, prompt: int, ttft_s: float, source: str) -> Measurement:
    return Measurement(model, "prefill", prompt / ttft_s, source, context=prompt)


NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
SUPER = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
QWEN36 = "nvidia/Qwen3.6-35B-A3B-NVFP4"
GEMMA31 = "nvidia/Gemma-4-31B-IT-NVFP4"
GEMMA26 = "bg-digitalservices/Gemma-4-26B-A4B-it-NVFP4"
CODER = "Qwen/Qwen3-Coder-Next-FP8"
QWEN3B = "Qwen/Qwen2.5-3B-Instruct"

MEASUREMENTS: tuple[Measurement, ...] = (
    # Single-stream decode, CUDA graphs unless eager.
    Measurement(SUPER, "decode", 23.7, "seed 001 §eval: medium prompt, short gen, 23.7 tok/s", context=1834),
    Measurement(SUPER, "decode", 22.7, "seed 001 §eval: long prompt, short gen, 22.7 tok/s", context=7234),
    Measurement(SUPER, "decode", 23.4, "seed 001 §eval: medium prompt, long gen, 23.4 tok/s", context=1834),
    Measurement(SUPER, "decode", 22.9, "seed 001 §eval: long prompt, long gen, 22.9 tok/s", context=7234),
    Measurement(GEMMA31, "decode", 6.0, "seed 002 §2: 'a dense model the same size crawls (Gemma-4-31B ≈ 6 tok/s)'"),
    Measurement(QWEN3B, "decode", 26.0, "seed 002 §2: 'a small Qwen2.5-3B jumps 26 → 477 tok/s'"),
    Measurement(NANO, "decode", 51.6, "seed 003 table: Marlin + CUDA graphs + 0.3 util, 51.6 tok/s steady"),
    Measurement(NANO, "decode", 50.0, "seed 003 table: Marlin + enforce_eager + 0.2 util, 50.0 tok/s", eager=True),
    Measurement(NANO, "decode", 56.0, "seed 002 §2: 'Nemotron-3-Nano-30B-A3B (~56)'"),
    Measurement(
        GEMMA26, "decode", 49.6, "seed 002 §7.2.2: decode 49.6 tok/s answer-only, ~1,527-token prompt", context=1527
    ),
    Measurement(CODER, "decode", 43.0, "seed 002 §7.1.3: '~43 tok/s' (community benchmark)", context=512),
    Measurement(CODER, "decode", 41.0, "seed 002 §7.1.3: '≈41 @ 16K'", context=16384),
    Measurement(CODER, "decode", 39.0, "seed 002 §7.1.3: '≈39 @ 32K'", context=32768),
    Measurement(
        "RedHatAI/Qwen3.5-122B-A10B-NVFP4", "decode", 16.0, "seed 002 §7.1.4: ~16 tok/s (a Spark owner's benchmark)"
    ),
    Measurement("unsloth/Qwen3.6-27B-NVFP4", "decode", 10.5, "seed 002 §7.1.2: '~10.5 eager' (stock vLLM)", eager=True),
    Measurement(
        "AEON-7/DFlash-Qwen3.5-27B-Uncensored-NVFP4", "decode", 10.0, "seed 002 §14.4: '(vs ~10 stock-eager)'", eager=True
    ),
    # Aggregate decode over concurrent streams.
    Measurement(GEMMA31, "aggregate", 92.0, "seed 002 §2: '~92 tok/s aggregate at 16 concurrent requests'", concurrency=16),
    Measurement(QWEN3B, "aggregate", 477.0, "seed 002 §2: Qwen2.5-3B 477 tok/s at 16", concurrency=16),
    Measurement(QWEN3B, "aggregate", 1460.0, "seed 002 §2: '≈1,460 at 64'", concurrency=64),
    # Prefill, from the time to the first token.
    _ttft(QWEN36, 6019, 0.967, "seed 002 §10: ~6,019 prompt tokens, TTFT 967 ms (answer-only)"),
    _ttft(QWEN36, 3097, 0.502, "seed 002 §10: ~3,097 prompt tokens, TTFT 502 ms (thinking)"),
    _ttft(QWEN36, 6019, 0.965, "seed 002 §10: ~6,019 prompt tokens, TTFT 965 ms (thinking)"),
    _ttft(QWEN36, 3098, 0.507, "seed 002 §10: ~3,098 prompt tokens, TTFT 507 ms (thinking + answer)"),
    _ttft(GEMMA26, 1527, 0.2665, "seed 002 §7.2.2: TTFT 235-298 ms for the ~1,527-token prompt (the middle taken)"),
    _ttft(SUPER, 1834, 1.12, "seed 001 §eval: 1,834 prompt tokens, TTFT 1.12 s"),
    _ttft(SUPER, 7234, 3.85, "seed 001 §eval: 7,234 prompt tokens, TTFT 3.85 s"),
    # Speculative decoding, single stream: the recipe's acceptance, never fitted.
    Measurement(
        QWEN36, "speculative", 102.0, "seed 002 §10: MTP-3, answer-only at ~6K, 102 tok/s", 6019, method="mtp", drafts=3
    ),
    Measurement(
        QWEN36, "speculative", 125.0, "seed 002 §10: MTP-3, thinking at ~3K, 125 tok/s", 3097, method="mtp", drafts=3
    ),
    Measurement(
        QWEN36, "speculative", 117.0, "seed 002 §10: MTP-3, thinking at ~6K, 117 tok/s", 6019, method="mtp", drafts=3
    ),
    Measurement(
        QWEN36, "speculative", 115.0, "seed 002 §10: MTP-3, thinking + answer, 115 tok/s", 3098, method="mtp", drafts=3
    ),
    Measurement(QWEN36, "speculative", 50.0, "seed 002 §7.1.1: DFlash n=15 ~50 tok/s", method="dflash", drafts=15),
)


@cache
def facts_of(model: str) -> StepFacts:
    """What a step of a measured model reads: its catalog profile at its recipe's KV dtype, or OTHER_MODELS."""
    if model in OTHER_MODELS:
        other = OTHER_MODELS[model]
        return StepFacts(
            weights_bytes=other.weights_gb * 1e9,
            parameters=other.parameters,
            expert_bytes_per_param=2.0,
            vocab=other.vocab,
            hidden=other.hidden,
            layers=other.layers,
            full_kv_bytes_per_token=other.kv_bytes_per_token,
        )
    from ..catalog import load_catalog  # package data, read once; the planner itself never loads the catalog

    profile = load_catalog()[model]
    facts = speed.step_facts(profile, 1 if profile.kv_fp8_recommended else 2)
    if facts is None:
        raise ValueError(f"calibration: {model} has no parameter counts in the catalog")
    return facts


def drafting_of(model: str, method: str, drafts: int) -> Drafting:
    """What the recipe's speculation costs and yields on a catalog model."""
    from ..catalog import load_catalog

    return speed.drafting(facts_of(model), load_catalog()[model].speculative, method, drafts)


def predict(row: Measurement, factors: Factors) -> float:
    facts = facts_of(row.model)
    if row.kind == "decode":
        return speed.decode_tps(facts, factors, context=row.context, eager=row.eager)
    if row.kind == "aggregate":
        return speed.aggregate_tps(facts, factors, concurrency=row.concurrency, context=row.context, eager=row.eager)
    if row.kind == "prefill":
        return speed.prefill_tps(facts, factors, row.context)
    drafting = drafting_of(row.model, row.method or "mtp", row.drafts)
    return speed.speculative_tps(facts, factors, drafting, context=row.context, eager=row.eager)


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None for a singular system."""
    n = len(vector)
    a = [[*row, b] for row, b in zip(matrix, vector, strict=True)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-300:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col], strict=True)]
    return [a[i][n] / a[i][i] for i in range(n)]


def _weighted_fit(rows: Sequence[tuple[list[float], float, float]], lower: Sequence[float]) -> list[float]:
    """min sum w (x.c - y)^2 / y^2 with c_i >= lower_i: every subset of the bounds tried, the best feasible kept."""
    n = len(lower)
    best: tuple[float, list[float]] | None = None
    for clamped in itertools.chain.from_iterable(itertools.combinations(range(n), k) for k in range(n + 1)):
        pinned = {i: lower[i] for i in clamped}
        free = [i for i in range(n) if i not in pinned]
        matrix = [[0.0] * len(free) for _row in free]
        vector = [0.0] * len(free)
        for x, y, w in rows:
            rest = y - sum(x[i] * v for i, v in pinned.items())
            scale = w / (y * y)
            for a, i in enumerate(free):
                vector[a] += scale * x[i] * rest
                for b, j in enumerate(free):
                    matrix[a][b] += scale * x[i] * x[j]
        solved = _solve(matrix, vector) if free else []
        if solved is None:
            continue
        c = [0.0] * n
        for i, v in pinned.items():
            c[i] = v
        for a, i in enumerate(free):
            c[i] = solved[a]
        if any(c[i] < lower[i] - 1e-12 for i in range(n)):
            continue
        loss = sum(w * ((sum(xi * ci for xi, ci in zip(x, c, strict=True)) - y) / y) ** 2 for x, y, w in rows)
        if best is None or loss < best[0]:
            best = (loss, c)
    if best is None:
        raise ValueError("calibration: no feasible fit")
    return best[1]


def _per_model_weights(rows: Sequence[Measurement]) -> list[float]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.model] = counts.get(row.model, 0) + 1
    return [1 / counts[row.model] for row in rows]


def fit(rows: Iterable[Measurement]) -> Factors:
    """The factors that best explain the prefill and single-stream decode rows given."""
    rows = list(rows)
    prefill = [r for r in rows if r.kind == "prefill"]
    # TTFT = start + prompt x 2 x active / flops: linear in (start, 1 / flops).
    p_rows = [
        ([1.0, r.context * 2 * facts_of(r.model).parameters.active_b * 1e9], r.context / r.value, w)
        for r, w in zip(prefill, _per_model_weights(prefill), strict=True)
    ]
    start, inverse_flops = _weighted_fit(p_rows, lower=[0.0, 1e-16])
    flops = 1 / inverse_flops
    decode = [r for r in rows if r.kind == "decode"]
    d_rows = []
    for r, w in zip(decode, _per_model_weights(decode), strict=True):
        facts = facts_of(r.model)
        compute = 2 * facts.parameters.active_b * 1e9 / flops
        read = facts.step_bytes(1, 1, r.context) / speed.GB10_BANDWIDTH
        # Seconds per token = step + eager x layers x per-layer + read / efficiency + compute.
        d_rows.append(([1.0, facts.layers if r.eager else 0.0, read], 1 / r.value - compute, w))
    step, per_layer, inverse_efficiency = _weighted_fit(d_rows, lower=[0.0, 0.0, 1.0])
    return Factors(
        step_s=step,
        bandwidth_efficiency=1 / inverse_efficiency,
        eager_s_per_layer=per_layer,
        prefill_start_s=start,
        flops=flops,
    )


@cache
def factors() -> Factors:
    """The factors fitted to every measurement."""
    return fit(MEASUREMENTS)


@dataclasses.dataclass(frozen=True)
class Check:
    row: Measurement
    predicted: float
    held_out: float

    @property
    def error(self) -> float:
        return speed.log_error(self.held_out, self.row.value)


@cache
def leave_one_model_out() -> tuple[Check, ...]:
    """Each row predicted with the factors fitted to every other model's rows (and with all of them)."""
    full = factors()
    checks = []
    for model in dict.fromkeys(r.model for r in MEASUREMENTS):
        others = fit(r for r in MEASUREMENTS if r.model != model)
        checks += [Check(r, predict(r, full), predict(r, others)) for r in MEASUREMENTS if r.model == model]
    return tuple(checks)


@cache
def error_by_kind() -> dict[Kind, float]:
    """Mean relative leave-one-model-out error per kind of figure (the predictions' bands)."""
    errors: dict[Kind, list[float]] = {kind: [] for kind in KINDS}
    for check in leave_one_model_out():
        errors[check.row.kind].append(check.error)
    return {kind: (sum(e) / len(e) if e else math.inf) for kind, e in errors.items()}
