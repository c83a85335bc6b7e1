"""How fast a planned instance runs on a Spark: the bytes each decode step reads over GB10's bandwidth.

Decode is bandwidth-bound (seed 002 §2: "Decode is bandwidth-bound, so active parameter count dominates"): one
step reads the output head, the weights its tokens route through and each sequence's KV, then waits for a fixed
per-step cost (scheduling, launches; more without CUDA graphs). Prefill is compute-bound (seed 002 §2): two
FLOPs per active parameter per prompt token at an effective rate, after a fixed start. The factors (`Factors`)
are fitted to the seeds' measured Spark figures in sparkfleet.planning.calibration; this module is the physics.
"""

from __future__ import annotations

import dataclasses
import math

from ..kv.cache import GroupKind, attention_bytes_per_token, state_bytes
from ..models import GIB, CheckpointFormat, ModelProfile, SpeculativeSupport
from ..models.speed import DecodeReads, Parameters

# GB10's LPDDR5X bandwidth (seed 002 §2, hardware facts: "~273 GB/s bandwidth").
GB10_BANDWIDTH = 273e9
BANDWIDTH_SOURCE = "seed 002 §2: GB10 ~273 GB/s memory bandwidth"


# NCCL all-reduce between Sparks over the RoCE link, small messages (a decode step's): 8 KB in 27.8 us and 64 KB in
# 67 us between two (nccl-tests all_reduce_perf, NCCL 2.31.2, MTU 9000), 48 KB in 54-64 us among four (b12x's
# GLM-5.3-Flash TP4 profile, about 100 of them a step): a start of 22 us and 1.44 GB/s fit all three within 5 us.
ALLREDUCE_START_S = 22e-6
ALLREDUCE_BYTES_PER_S = 1.44e9
LINK_SOURCE = (
    "NVIDIA/dgx-spark-playbooks PR #103 (all_reduce_perf between two Sparks: 8 KB 27.8 us, 64 KB 67 us); "
    "b12x docs/rocenante.md and PR #295 (four Sparks, 48 KB all-reduces 54-64 us each, about 100 a decode step)"
)


# Decode context parallel over MLA, as vLLM 0.32 / 0.33 combine each MLA layer's partial outputs across the ranks that
# split the latent. By default (ag_rs) the query is all-gathered, then the softmax LSE, and the output reduce-scattered
# (layers/attention/mla_attention.py, v1/attention/ops/dcp.py cp_lse_ag_out_rs): three collectives. GlmMoeDsa sets
# a2a with a replicated query instead (model_executor/models/config.py GlmMoeDsaForCausalLM: set_dcp_defaults(
# comm_backend="a2a", q_replicate=True)): one all-to-all of the outputs (dcp.py dcp_a2a_lse_reduce). Each sparse
# indexer all-gathers its top-k candidates, a score and a token id of 4 bytes each (layers/sparse_attn_indexer.py).
DCP_A2A_ARCHITECTURES = frozenset({"GlmMoeDsaForCausalLM"})
DCP_CANDIDATE_BYTES = 8
DCP_SOURCE = (
    "vLLM 0.33 v1/attention/ops/dcp.py (ag_rs: query and LSE all-gathers and an output reduce-scatter a layer; a2a: "
    "one all-to-all, GlmMoeDsa's default in model_executor/models/config.py), layers/sparse_attn_indexer.py (each "
    "indexer's top-k candidates all-gathered)"
)


def allreduce_seconds(nbytes: float, start_s: float = ALLREDUCE_START_S) -> float:
    return start_s + nbytes / ALLREDUCE_BYTES_PER_S


@dataclasses.dataclass(frozen=True)
class Factors:
    """What the calibration fits: per-step cost, bandwidth efficiency, eager's cost per layer, prefill's rate."""

    step_s: float
    bandwidth_efficiency: float
    eager_s_per_layer: float
    prefill_start_s: float
    flops: float
    # What one all-reduce of a decode step costs between Sparks before its bytes: nccl-tests' raw figure unless the
    # multi-node fit (sparkfleet.planning.multinode) gives what vLLM's steps pay.
    allreduce_start_s: float = ALLREDUCE_START_S


# Bytes per weight of a checkpoint's routed experts (its quantized part): 4-bit FP4 with an FP8 scale per 16 weights
# (NVFP4) or an 8-bit scale per 32 (MXFP4), INT4 with a 16-bit scale and zero per 128, FP8, or unquantized BF16.
EXPERT_BYTES_PER_PARAM = {
    CheckpointFormat.MODELOPT_NVFP4: 0.5625,
    CheckpointFormat.CT_NVFP4: 0.5625,
    CheckpointFormat.MXFP4: 0.53125,
    CheckpointFormat.AWQ_INT4: 0.53125,
    CheckpointFormat.GPTQ_INT4: 0.53125,
    CheckpointFormat.FP8: 1.0,
    CheckpointFormat.BF16: 2.0,
}
# Input embeddings stay unquantized: a step gathers one row of them.
EMBEDDING_BYTES_PER_PARAM = 2.0
# No weight a step reads is wider than BF16.
DENSE_BYTES_PER_PARAM_MAX = 2.0


@dataclasses.dataclass(frozen=True)
class StepFacts:
    """What one decode step of a model reads and computes, from its checkpoint size and parameter counts.

    The checkpoint's bytes split three ways: the output head (read whole every step), the routed experts at the
    checkpoint's quantized width (a step reads those its tokens route to), and the dense rest (attention, state
    layers, shared experts: read every step), whose width is what is left of the checkpoint's size. Quantized MoE
    checkpoints keep the dense rest wider than the experts (seed 002 §7.3.1: "attention and the Mamba layers feeding
    it stay BF16"), so a step reads more than the average width times the active count.
    """

    weights_bytes: float
    parameters: Parameters
    expert_bytes_per_param: float
    vocab: int
    hidden: int
    layers: int
    # KV bytes per token already in a sequence: of all full-attention layers, and of the sliding layers (up to
    # their window); state bytes each sequence's state layers hold (read and written each step).
    full_kv_bytes_per_token: float
    window_kv_bytes_per_token: float = 0.0
    window: int = 0
    state_bytes: float = 0.0
    # The checkpoint's own headers, by tensor class: where present, the bytes a step reads come from them.
    reads: DecodeReads | None = None
    # MLA keeps one latent a token, whole on every tensor-parallel rank: tensor parallel does not divide its KV.
    kv_replicated: bool = False
    # The MLA layers, their query heads and latent, the sparse indexers with their top-k, and whether vLLM combines
    # the layers' outputs by all-to-all: what decode context parallel moves between ranks.
    mla_layers: int = 0
    mla_heads: int = 0
    mla_latent: int = 0
    mla_rope: int = 0
    indexers: int = 0
    index_topk: int = 0
    dcp_a2a: bool = False

    @property
    def head_params(self) -> float:
        return float(self.vocab * self.hidden)

    @property
    def head_bytes(self) -> float:
        if self.reads is not None:
            return float(self.reads.head_bytes)
        return self.parameters.head_bytes_per_param * self.head_params

    @property
    def embedding_params(self) -> float:
        """The input embedding as a matrix of its own (untied); a step reads one row of it, not all."""
        return 0.0 if self.parameters.tied_embeddings else self.head_params

    @property
    def params_per_expert(self) -> float:
        p = self.parameters
        if p.experts is None or p.experts_per_token is None:
            return 0.0
        return (p.total_b - p.active_b) * 1e9 / (p.experts - p.experts_per_token)

    @property
    def expert_bytes(self) -> float:
        """Bytes of one routed expert over every MoE layer."""
        if self.reads is not None:
            return self.reads.routed_expert_bytes / self.reads.experts if self.reads.experts else 0.0
        return self.params_per_expert * self.expert_bytes_per_param

    @property
    def dense_bytes(self) -> float:
        """Bytes of the dense rest: the checkpoint less its head, embedding and routed experts."""
        if self.reads is not None:
            return float(self.reads.dense_bytes + self.reads.shared_expert_bytes)
        p = self.parameters
        experts = (p.experts or 0) * self.params_per_expert
        params = p.total_b * 1e9 - experts - self.head_params - self.embedding_params
        rest = self.weights_bytes - self.head_bytes - EMBEDDING_BYTES_PER_PARAM * self.embedding_params
        dense_bytes = rest - experts * self.expert_bytes_per_param
        if params <= 0:
            return 0.0
        # The rest's width lies between the experts' and BF16's: what the checkpoint holds beyond that (a vision
        # tower, an MTP layer, a rounded parameter count) is not read by a text decode step.
        width = min(max(dense_bytes / params, self.expert_bytes_per_param), DENSE_BYTES_PER_PARAM_MAX)
        return params * width

    def weight_bytes_read(self, tokens: float) -> float:
        """Weight bytes a step of `tokens` tokens reads: the head, the dense rest, and each expert any token routes to."""
        p = self.parameters
        read = self.head_bytes + self.dense_bytes
        if p.experts is not None and p.experts_per_token is not None:
            # Uniform routing: the chance an expert is missed by all `tokens` tokens is (1 - k/E)^tokens.
            touched = p.experts * (1 - (1 - p.experts_per_token / p.experts) ** tokens)
            read += touched * self.expert_bytes
        return read

    def cache_bytes_read(self, context: int) -> float:
        """KV and state bytes one sequence's step reads at `context` tokens."""
        window = min(context, self.window) if self.window else context
        return self.full_kv_bytes_per_token * context + self.window_kv_bytes_per_token * window + 2 * self.state_bytes

    def step_bytes(self, sequences: int, tokens_per_sequence: int, context: int) -> float:
        return self.weight_bytes_read(sequences * tokens_per_sequence) + sequences * self.cache_bytes_read(context)


def step_facts(profile: ModelProfile, kv_dtype_bytes: int, sparse_record: int | None = None) -> StepFacts | None:
    """The step facts of a profile whose checkpoint headers were read, or with sourced parameter counts; None for one
    with neither (no speed is predicted). The headers' reading comes first: it is the checkpoint's own.

    A sparse MLA (`sparse_record`: its record's bytes on GB10) reads each layer's record for its index_topk tokens only,
    and its indexers' keys for the whole context: the one read as a window, the other as full attention."""
    reads = profile.decode_reads
    parameters = reads.parameters() if reads is not None else profile.parameters
    if parameters is None:
        return None
    if sparse_record is not None and profile.index_topk:
        indexers = profile.indexers * profile.indexer_bytes_per_token
        return _facts(profile, parameters, (indexers, sparse_record * profile.full_attention_layers, profile.index_topk))
    full = attention_bytes_per_token(profile, kv_dtype_bytes, 1, GroupKind.FULL)
    sliding = attention_bytes_per_token(profile, kv_dtype_bytes, 1, GroupKind.SLIDING)
    window = (full * profile.full_attention_layers, sliding * profile.sliding_attention_layers, profile.sliding_window or 0)
    return _facts(profile, parameters, window)


def expert_width(profile: ModelProfile, parameters: Parameters) -> float:
    """Bytes per routed-expert weight: the checkpoint format's, unless the checkpoint is far smaller than that format
    allows (a config that names no quantization over FP4 experts, as DeepSeek-V4-Flash's): then its own average."""
    named = EXPERT_BYTES_PER_PARAM[profile.checkpoint_format]
    average = profile.weights_gib * GIB / (parameters.total_b * 1e9)
    return average if average < 0.9 * named else named


def _facts(profile: ModelProfile, parameters: Parameters, kv: tuple[int, int, int]) -> StepFacts:
    """`kv`: the bytes a token of the whole context costs a step, those of a window's token, and the window."""
    return StepFacts(
        weights_bytes=profile.weights_gib * GIB,
        parameters=parameters,
        reads=profile.decode_reads,
        expert_bytes_per_param=expert_width(profile, parameters),
        vocab=profile.vocab_size,
        hidden=profile.hidden_size,
        layers=profile.num_layers,
        full_kv_bytes_per_token=kv[0],
        window_kv_bytes_per_token=kv[1],
        window=kv[2],
        state_bytes=state_bytes(profile, 1, 0) * (profile.state_layers.count if profile.state_layers else 0),
        kv_replicated=profile.mla is not None,
        mla_layers=profile.full_attention_layers if profile.mla is not None else 0,
        mla_heads=(profile.mla.heads or 0) if profile.mla is not None else 0,
        mla_latent=profile.mla.kv_lora_rank if profile.mla is not None else 0,
        mla_rope=profile.mla.qk_rope_head_dim if profile.mla is not None else 0,
        indexers=profile.indexers if profile.index_topk else 0,
        index_topk=profile.index_topk or 0,
        dcp_a2a=profile.architecture in DCP_A2A_ARCHITECTURES,
    )


@dataclasses.dataclass(frozen=True)
class Layout:
    """How a step spreads over Sparks, one GPU each: `ranks` in tensor parallel within each of `stages` pipeline
    stages, and the ranks that split a sequence's KV (the tensor-parallel ranks, but MLA's latent is whole on each of
    them unless decode context parallel splits it)."""

    ranks: int = 1
    stages: int = 1
    kv_ranks: int = 1


SOLO = Layout()


def expert_share(facts: StepFacts, tokens: float, ranks: int) -> float:
    """Routed experts the busiest of `ranks` expert-parallel ranks reads for a step of `tokens` tokens: each holds
    experts / ranks whole experts, each touched with the uniform-routing chance, and the step waits for the rank that
    touched most (the expected maximum of `ranks` binomial counts); the touched count itself on one rank."""
    p = facts.parameters
    if p.experts is None or p.experts_per_token is None:
        return 0.0
    touched = 1.0 - float((1 - p.experts_per_token / p.experts) ** tokens)
    held = p.experts // ranks
    if ranks == 1:
        return p.experts * touched
    expected, cdf = 0.0, 0.0
    for count in range(held):
        cdf += math.comb(held, count) * touched**count * (1 - touched) ** (held - count)
        expected += 1 - min(cdf, 1.0) ** ranks
    return expected


def step_seconds(
    facts: StepFacts,
    factors: Factors,
    *,
    sequences: float,
    context: int,
    eager: bool,
    tokens_per_sequence: int = 1,
    layout: Layout = SOLO,
) -> float:
    """One decode step of one pipeline stage over `sequences` streams, each verifying `tokens_per_sequence` tokens at
    `context`: its ranks each read and compute their share of the stage's layers (an MoE's experts whole on each rank,
    as the planner's --enable-expert-parallel puts them, so the busiest rank sets the pace), then two all-reduces a
    layer (after attention, after the MLP) cross the link. vLLM's expert parallel over tensor-parallel ranks moves no
    all-to-all: with one data-parallel rank the MoE's output is all-reduced like a dense layer's (vLLM 0.32
    model_executor/layers/fused_moe/config.py use_all2all_kernels needs dp_size > 1)."""
    tokens = sequences * tokens_per_sequence
    ranks, stages = layout.ranks, layout.stages
    experts = expert_share(facts, tokens, ranks) * facts.expert_bytes
    weights = (facts.weight_bytes_read(tokens) - expert_share(facts, tokens, 1) * facts.expert_bytes) / ranks + experts
    cache = sequences * facts.cache_bytes_read(context) / (layout.kv_ranks if facts.kv_replicated else ranks)
    read = (weights + cache) / stages / (GB10_BANDWIDTH * factors.bandwidth_efficiency)
    compute = tokens * 2 * facts.parameters.active_b * 1e9 / factors.flops / ranks / stages
    fixed = factors.step_s + (factors.eager_s_per_layer * facts.layers / stages if eager else 0.0)
    link = 0.0
    if ranks > 1:
        link = 2 * facts.layers / stages * allreduce_seconds(tokens * facts.hidden * 2, factors.allreduce_start_s)
    return fixed + read + compute + link + dcp_seconds(facts, factors, tokens, layout)


def dcp_seconds(facts: StepFacts, factors: Factors, tokens: float, layout: Layout) -> float:
    """What decode context parallel adds to a step: each MLA layer's combine of its partial outputs (BF16, every
    query head over the latent) across the `kv_ranks` that split it, and each sparse indexer's gather of its
    candidates. With the heads unread, each collective's start alone is counted."""
    n = layout.kv_ranks
    if n <= 1 or not facts.mla_layers:
        return 0.0
    start = factors.allreduce_start_s
    outputs = tokens * facts.mla_heads * facts.mla_latent * 2
    if facts.dcp_a2a:
        combine = allreduce_seconds(outputs * (n - 1) / n, start)
    else:
        query = tokens * facts.mla_heads * (facts.mla_latent + facts.mla_rope) * 2
        combine = allreduce_seconds(query, start) + allreduce_seconds(tokens * facts.mla_heads * 4, start)
        combine += allreduce_seconds(outputs, start)
    gathered = tokens * facts.index_topk * DCP_CANDIDATE_BYTES * n
    indexers = facts.indexers * allreduce_seconds(gathered, start)
    return (facts.mla_layers * combine + indexers) / layout.stages


def hop_seconds(facts: StepFacts, factors: Factors, tokens: float) -> float:
    """One pipeline stage handing its tokens' hidden state and residual (BF16) to the next over the link."""
    return allreduce_seconds(tokens * facts.hidden * 2 * 2, factors.allreduce_start_s)


def aggregate_tps(
    facts: StepFacts, factors: Factors, *, concurrency: int, context: int, eager: bool, layout: Layout = SOLO
) -> float:
    """Tokens a second over `concurrency` streams. Across pipeline stages vLLM keeps as many batches in flight as
    there are stages (max_concurrent_batches = pipeline_parallel_size): each stage works on one while the others
    work on the rest, and every batch passes every stage and link hop once a token; with fewer streams than stages
    the stages idle in turn (the bubble)."""
    batches = min(layout.stages, concurrency)
    per_batch = concurrency / batches
    stage = step_seconds(facts, factors, sequences=per_batch, context=context, eager=eager, layout=layout)
    hop = hop_seconds(facts, factors, per_batch) if layout.stages > 1 else 0.0
    return concurrency / (layout.stages * (stage + hop))


def decode_tps(facts: StepFacts, factors: Factors, *, context: int, eager: bool, layout: Layout = SOLO) -> float:
    return aggregate_tps(facts, factors, concurrency=1, context=context, eager=eager, layout=layout)


def ttft_seconds(facts: StepFacts, factors: Factors, prompt_tokens: int, layout: Layout = SOLO) -> float:
    """A prompt's prefill: compute-bound, split over the tensor-parallel ranks; pipeline stages run it in turn."""
    compute = prompt_tokens * 2 * facts.parameters.active_b * 1e9 / factors.flops / layout.ranks
    hops = (layout.stages - 1) * hop_seconds(facts, factors, prompt_tokens)
    return factors.prefill_start_s + compute + hops


def prefill_tps(facts: StepFacts, factors: Factors, prompt_tokens: int, layout: Layout = SOLO) -> float:
    return prompt_tokens / ttft_seconds(facts, factors, prompt_tokens, layout)


def tokens_per_step(acceptance: float, drafts: int) -> float:
    """Expected tokens a verification step yields: accepted drafts (each kept while all before it were) and one more."""
    if acceptance >= 1:
        return float(drafts + 1)
    return (1 - acceptance ** (drafts + 1)) / (1 - acceptance)


@dataclasses.dataclass(frozen=True)
class Drafting:
    """What a speculative method costs a step and yields: its drafts, their acceptance, the draft's own reads."""

    drafts: int
    tokens_per_step: float
    # Draft passes a step runs (MTP drafts one token per pass; a DFlash block is one pass) and the bytes of each.
    passes: int
    pass_bytes: float


# What the recipes say speculation yields per verification step.
MTP_ACCEPTANCE = 0.8
MTP_SOURCE = "seed 002 §10: MTP lands ~3 tokens per step, ~80 % acceptance at num_speculative_tokens 3"
DFLASH_TOKENS_PER_STEP = 3.55
DFLASH_SOURCE = "seed 002 §7.1.1: DFlash reaches ~50 tok/s at 2.7-4.4 accepted tokens per step (the middle taken)"


def drafting(facts: StepFacts, support: SpeculativeSupport, method: str, drafts: int) -> Drafting:
    """What MTP or DFlash costs a step of this model and yields, at the recipes' acceptance."""
    if method == "mtp":
        # One MTP layer per draft token (a decoder layer of the active weights) through the shared output head.
        layer = (facts.weight_bytes_read(1) - facts.head_bytes) / facts.layers
        per_pass = max(support.mtp_layers, 1) * layer + facts.head_bytes
        return Drafting(drafts, tokens_per_step(MTP_ACCEPTANCE, drafts), passes=drafts, pass_bytes=per_pass)
    # DFlash drafts a whole block in one pass of its drafter, through the target's output head.
    drafter = support.dflash_drafter_weights_gib * GIB
    return Drafting(drafts, min(DFLASH_TOKENS_PER_STEP, drafts + 1.0), passes=1, pass_bytes=drafter + facts.head_bytes)


def speculative_tps(facts: StepFacts, factors: Factors, drafting: Drafting, *, context: int, eager: bool) -> float:
    verify = step_seconds(facts, factors, sequences=1, context=context, eager=eager, tokens_per_sequence=drafting.drafts + 1)
    draft = drafting.passes * (factors.step_s + drafting.pass_bytes / (GB10_BANDWIDTH * factors.bandwidth_efficiency))
    return drafting.tokens_per_step / (verify + draft)


def concurrency_for_floor(
    facts: StepFacts, factors: Factors, floor_tps: float, *, most: int, context: int, eager: bool
) -> int:
    """The most streams (up to `most`) that each still decode at `floor_tps` or faster; 0 when not even one does."""
    best = 0
    for n in range(1, most + 1):
        if aggregate_tps(facts, factors, concurrency=n, context=context, eager=eager) / n >= floor_tps:
            best = n
        else:
            break
    return best


def band(value: float, relative_error: float) -> tuple[float, float, float]:
    """A value and its range at a relative error, symmetric in ratio (x / (1 + e) to x * (1 + e))."""
    spread = 1 + max(relative_error, 0.0)
    return value, value / spread, value * spread


def log_error(predicted: float, measured: float) -> float:
    """The relative error of a prediction as |predicted / measured - 1|."""
    if measured <= 0 or predicted <= 0 or not math.isfinite(predicted):
        return math.inf
    return abs(predicted / measured - 1)
