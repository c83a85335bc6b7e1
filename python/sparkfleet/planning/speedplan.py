"""A plan's speed on a Spark, with bands from the calibration, and the concurrency a per-user decode floor allows.

Predicted for one GB10 node serving a generating model whose checkpoint headers were read (hub ids and local
directories) or whose profile carries sourced parameter counts; otherwise None, and the plan says which figure it
lacks (a CPU sandbox's speed says nothing of a Spark's, and the model is not calibrated across a cluster's link).
"""

from __future__ import annotations

from ..errors import PlanError
from ..kv import sparse
from ..kv.cache import kv_dtype_bytes
from ..models import Intent, ModelProfile, Platform, Reason, SpeculativeMethod
from ..models.speed import Band, ConcurrencyPoint, SpeedPrediction, TtftPoint
from ..reading.arithmetic import CONFIG_ARITHMETIC
from . import calibration, multinode, speed
from .speed import StepFacts

# Decode is predicted with this many tokens in the sequence (seed 002 §10's benchmark: 1,024 prompt tokens).
CONTEXT_TOKENS = calibration.UNSTATED_CONTEXT
TTFT_PROMPTS = (1024, 8192, 32768)
CURVE = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SOURCE = (
    f"sparkfleet.planning.speed (bytes per step over {speed.BANDWIDTH_SOURCE}) with factors fitted to the seeds' "
    "measured Spark figures (sparkfleet.planning.calibration; benchmarks/speed_calibration.py prints the table)"
)


def facts_for(profile: ModelProfile, platform: Platform, nodes: int, kv_cache_dtype: str) -> StepFacts | None:
    if platform is not Platform.GB10 or nodes > 1:
        return None
    return speed.step_facts(profile, kv_dtype_bytes(kv_cache_dtype), sparse.RECORD_BYTES.get(kv_cache_dtype))


def silence(profile: ModelProfile, platform: Platform, intent: Intent, runner: str) -> list[str]:
    """Why a GB10 plan of a generating model predicts no speed, naming the figure it lacks; nothing where it predicts."""
    if platform is not Platform.GB10 or runner != "generate":
        return []
    if modelled_layout(intent) is None:
        return [
            f"no speed predicted: across {intent.nodes} Sparks the speed model holds one GPU a Spark, tensor parallel "
            f"times pipeline stages equal to the Sparks ({intent.tensor_parallel_size} x "
            f"{intent.pipeline_parallel_size} is not {intent.nodes})"
        ]
    if profile.decode_reads is None and profile.parameters is None:
        lacking = profile.decode_reads_gap or "no safetensors headers were read and the profile has no parameter counts"
        return [f"no speed predicted: what a decode step reads is not known ({lacking})"]
    return []


def _counted(profile: ModelProfile) -> bool:
    return profile.decode_reads is None and profile.sources.get("parameters", "").startswith(CONFIG_ARITHMETIC)


def _band(value: float, kind: calibration.Kind, extra: float = 0.0) -> Band:
    value, low, high = speed.band(value, calibration.error_by_kind()[kind] + extra)
    return Band(value=round(value, 1), low=round(low, 1), high=round(high, 1))


def _speculative(
    facts: StepFacts, profile: ModelProfile, intent: Intent, drafts: int, eager: bool
) -> tuple[Band | None, str | None]:
    method = intent.speculative
    if method not in (SpeculativeMethod.MTP, SpeculativeMethod.DFLASH) or drafts < 1:
        why = None if method is SpeculativeMethod.NONE else f"{method.value}: no seed states its acceptance on a Spark"
        return None, why
    drafting = speed.drafting(facts, profile.speculative, method.value, drafts)
    tps = speed.speculative_tps(facts, calibration.factors(), drafting, context=CONTEXT_TOKENS, eager=eager)
    basis = speed.MTP_SOURCE if method is SpeculativeMethod.MTP else speed.DFLASH_SOURCE
    return _band(tps, "speculative"), f"{drafting.tokens_per_step:.2f} tokens per step ({basis}); content-dependent"


def predict(
    profile: ModelProfile,
    intent: Intent,
    *,
    platform: Platform,
    kv_cache_dtype: str,
    max_num_seqs: int,
    max_model_len: int,
    eager: bool,
    speculative_tokens: int,
    runner: str,
) -> SpeedPrediction | None:
    layout = modelled_layout(intent)
    facts = facts_for(profile, platform, 1, kv_cache_dtype) if layout else None
    if facts is None or layout is None or runner != "generate":
        return None
    factors = multinode.factors() if intent.nodes > 1 else calibration.factors()
    extra = multinode.extra_error(layout)
    context = min(CONTEXT_TOKENS, max_model_len)
    curve = [
        ConcurrencyPoint(
            concurrency=n,
            aggregate_tps=round(
                total := speed.aggregate_tps(facts, factors, concurrency=n, context=context, eager=eager, layout=layout),
                1,
            ),
            per_user_tps=round(total / n, 1),
        )
        for n in sorted({*(c for c in CURVE if c < max_num_seqs), max_num_seqs})
    ]
    spec, spec_basis = _speculative(facts, profile, intent, speculative_tokens, eager)
    if intent.nodes > 1 and spec is not None:
        spec, spec_basis = None, "speculation across Sparks: no published figure to check it against"
    prompts = sorted({p for p in TTFT_PROMPTS if p <= max_model_len} | {min(TTFT_PROMPTS[0], max_model_len)})
    ttft = [TtftPoint(prompt_tokens=p, ttft_s=round(speed.ttft_seconds(facts, factors, p, layout), 3)) for p in prompts]
    return SpeedPrediction(
        decode=_band(speed.decode_tps(facts, factors, context=context, eager=eager, layout=layout), "decode", extra),
        aggregate=_band(curve[-1].aggregate_tps, "aggregate", extra),
        concurrency=max_num_seqs,
        curve=curve,
        prefill=_band(speed.prefill_tps(facts, factors, prompts[-1], layout), "prefill", extra),
        ttft=ttft,
        context_tokens=context,
        speculative=spec,
        speculative_basis=spec_basis,
        bytes_per_step_gb=round(facts.step_bytes(1, 1, context) / 1e9, 2),
        basis=[
            f"{facts.step_bytes(1, 1, context) / 1e9:.2f} GB read per single-stream step at {context} tokens "
            f"(output head {facts.head_bytes / 1e9:.2f} GB, {facts.parameters.active_b:g}B of "
            f"{facts.parameters.total_b:g}B parameters active"
            + (", counted by config arithmetic: no safetensors header was read)" if _counted(profile) else ")"),
            f"bandwidth efficiency {factors.bandwidth_efficiency:.2f} of {speed.GB10_BANDWIDTH / 1e9:g} GB/s "
            f"({speed.BANDWIDTH_SOURCE}), "
            f"per-step cost {factors.step_s * 1e3:.1f} ms"
            + (f", eager {factors.eager_s_per_layer * 1e3:.3f} ms per layer" if eager else ""),
            f"prefill {factors.flops / 1e12:.0f} TFLOP/s effective at 2 FLOPs per active parameter per prompt token",
            "bands: the calibration's mean leave-one-model-out error per kind "
            + ", ".join(f"{kind} {error:.0%}" for kind, error in calibration.error_by_kind().items()),
            *_across(layout, factors, extra),
        ],
    )


def modelled_layout(intent: Intent) -> speed.Layout | None:
    """How a step spreads over the plan's Sparks, one GPU each; None where tensor parallel times pipeline stages is
    not the number of Sparks (a layout the speed model does not hold)."""
    if intent.nodes == 1:
        return speed.SOLO
    if intent.tensor_parallel_size * intent.pipeline_parallel_size != intent.nodes:
        return None
    return speed.Layout(
        ranks=intent.tensor_parallel_size,
        stages=intent.pipeline_parallel_size,
        kv_ranks=intent.decode_context_parallel_size,
    )


def _across(layout: speed.Layout, factors: speed.Factors, extra: float) -> list[str]:
    if layout == speed.SOLO:
        return []
    said = [
        f"{layout.ranks * layout.stages} Sparks: each collective over the link starts at "
        f"{factors.allreduce_start_s * 1e6:.0f} us plus its bytes at {speed.ALLREDUCE_BYTES_PER_S / 1e9:.2f} GB/s "
        f"({speed.LINK_SOURCE}; the start fitted to published one- and two-Spark ratios, "
        f"sparkfleet.planning.multinode); bands widened by {extra:.0%} ({multinode.EXTRA_ERROR_SOURCE})"
    ]
    if layout.ranks > 1:
        said.append(
            f"tensor parallel over {layout.ranks}: each rank reads and computes its share, then two all-reduces a layer; "
            "an MoE's experts whole on each rank (expert parallel), the step waiting for the rank its tokens touched "
            "most; prefill's compute divided over the ranks, its link traffic not counted (no figure)"
        )
    if layout.kv_ranks > 1:
        said.append(
            f"decode context parallel over {layout.kv_ranks}: each rank reads 1/{layout.kv_ranks} of a sequence's "
            "latent, and each MLA layer combines its partial outputs across them (one all-to-all where vLLM sets a2a, "
            f"else three collectives), each sparse indexer gathers its candidates ({speed.DCP_SOURCE})"
        )
    if layout.stages > 1:
        said.append(
            f"{layout.stages} pipeline stages: each reads its layers, {layout.stages} batches in flight as vLLM keeps "
            "them, every token crossing each stage and link hop in turn (fewer streams than stages leave stages idle)"
        )
    return said


def catalog_decode(profile: ModelProfile) -> Band | None:
    """A catalog model's single-stream decode on a Spark: CUDA graphs, its recipe's KV dtype, 1,024 tokens in."""
    facts = facts_for(profile, Platform.GB10, 1, "fp8" if profile.kv_fp8_recommended else "auto")
    if facts is None:
        return None
    return _band(speed.decode_tps(facts, calibration.factors(), context=CONTEXT_TOKENS, eager=False), "decode")


def floor_concurrency(
    profile: ModelProfile, intent: Intent, *, platform: Platform, kv_cache_dtype: str, eager: bool
) -> tuple[Intent, list[Reason]]:
    """The intent with its concurrency capped so each stream decodes at intent.min_decode_tps, and why."""
    floor = intent.min_decode_tps
    if floor is None:
        return intent, []
    facts = facts_for(profile, platform, intent.nodes, kv_cache_dtype)
    if facts is None:
        raise PlanError(
            "intent.min_decode_tps",
            "a decode floor needs the speed model: one GB10 node and a model profile with parameter counts",
            ("drop min_decode_tps", "a catalog model on platform gb10"),
        )
    factors = calibration.factors()
    allowed = speed.concurrency_for_floor(
        facts, factors, floor, most=intent.concurrency, context=CONTEXT_TOKENS, eager=eager
    )
    if allowed == 0:
        solo = speed.decode_tps(facts, factors, context=CONTEXT_TOKENS, eager=eager)
        raise PlanError(
            "intent.min_decode_tps",
            f"{floor:g} tok/s per user is above the {solo:.1f} tok/s one stream is predicted to decode on a Spark",
            (
                f"min_decode_tps {max(int(solo), 1)} or lower",
                "a model with fewer active parameters",
                "speculative mtp or dflash",
            ),
        )
    if allowed == intent.concurrency:
        return intent, []
    per_user = speed.aggregate_tps(facts, factors, concurrency=allowed, context=CONTEXT_TOKENS, eager=eager) / allowed
    reason = Reason(
        item=f"concurrency {allowed}, not {intent.concurrency}",
        reason=f"min_decode_tps {floor:g}: {allowed} streams are predicted to decode at {per_user:.1f} tok/s each, "
        f"{allowed + 1} would fall below it",
        source=SOURCE,
    )
    return intent.model_copy(update={"concurrency": allowed}), [reason]
