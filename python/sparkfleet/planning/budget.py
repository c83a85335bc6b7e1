"""The memory budget of one instance: its non-KV memory, the KV cache the intent needs or the room allows, and
the utilization vLLM is given, or the refusal that says what would fit. Pure: no files, no network, no clock."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import InfeasibleError, PlanError
from ..kv.cache import KvPool
from ..models import (
    GIB,
    HostFacts,
    Intent,
    ModelProfile,
    PackedMlaPool,
    Platform,
    ServeProfile,
    SpeculativeMethod,
)
from ..versions import cudagraph_memory_in_budget
from . import encoder
from . import memory as mem
from .choices import Resolved

PREFIX_CACHE_SLACK = 0.10


@dataclass(frozen=True)
class Budget:
    kv_bytes: int
    utilization: float
    non_kv: mem.NonKv
    reserve: float
    baseline: float
    # The scheduler chunk the budget was made for, where it is smaller than the resolved one (fit_chunk).
    max_num_batched_tokens: int | None = None


def _suggestions(profile: ModelProfile, intent: Intent, r: Resolved, geo: KvPool, kv_room: float) -> tuple[str, ...]:
    tips: list[str] = []
    room = max(0, int(kv_room * GIB))
    per_request = geo.bytes_for_requests(1, r.max_model_len, r.in_flight())
    fitting = room // per_request if per_request else 0
    if fitting >= 1 and fitting < intent.concurrency:
        tips.append(f"concurrency {fitting}")
    context = r.max_model_len
    while context > 1024 and geo.bytes_for_requests(intent.concurrency, context, r.in_flight()) > room:
        context //= 2
    if context < r.max_model_len and geo.bytes_for_requests(intent.concurrency, context, r.in_flight()) <= room:
        tips.append(f"max_context {context}")
    # DeepSeek-V4, and a sparse MLA on GB10, keep fp8_ds_mla whatever is asked: fp8 would change nothing.
    fp8_helps = profile.kv_fp8_supported and not isinstance(profile.kv_layout, PackedMlaPool) and r.kv_record is None
    if r.kv_cache_dtype != "fp8" and fp8_helps and intent.speculative is not SpeculativeMethod.DFLASH:
        tips.append("kv_cache_dtype fp8")
    layout = profile.layout
    if layout is not None and intent.nodes < layout.nodes:
        dcp = layout.decode_context_parallel_size
        tips.append(
            f"nodes {layout.nodes} with tensor_parallel_size {layout.tensor_parallel_size}"
            + (f", decode_context_parallel_size {dcp}" if dcp > 1 else "")
            + f" and cluster_backend {layout.cluster_backend.value} (the layout its recipes serve it on)"
        )
    else:
        tips.append(f"nodes {max(2, intent.nodes * 2)} (tensor parallel)")
    return tuple(tips)


def non_kv(host: HostFacts, profile: ModelProfile, intent: Intent, r: Resolved, batched: int) -> mem.NonKv:
    """Non-KV memory of one rank when the scheduler runs `batched` tokens per step (its activation peak).

    vLLM's profile run drives the target and then the drafter's dummy run over the same tokens, one after the
    other, so the peak is the larger of the two activations, not their sum. A multimodal encoder's largest call
    adds only its peak above that (sparkfleet.planning.encoder), which memory.non_kv leaves out.
    """
    nk = mem.non_kv(
        profile,
        host.platform,
        model_shards=r.shards,
        max_num_batched_tokens=batched,
        max_num_seqs=r.max_num_seqs,
        capture_sizes=[size for size in r.capture_sizes if size <= batched],
        drafter_gib=r.drafter_gib,
    )
    if r.drafter is not None:
        nk = dataclasses.replace(nk, activation=max(nk.activation, mem.activation_gib(r.drafter, batched, r.max_num_seqs)))
    return dataclasses.replace(
        nk, encoder=encoder.encoder_gib(profile, batched, r.max_model_len, r.max_num_seqs, nk.activation)
    )


def _batched_that_fits(
    host: HostFacts, profile: ModelProfile, intent: Intent, r: Resolved, geo: KvPool, *, usable: float
) -> int | None:
    """The largest smaller max_num_batched_tokens (a power of two, at least 2048) whose activation peak leaves
    room for the KV the intent needs, if lowering the scheduler's chunk is what would make it fit."""
    batched = 1 << (r.max_num_batched_tokens.bit_length() - 1)
    if batched == r.max_num_batched_tokens:
        batched //= 2
    while batched >= 2048:
        room = (usable - non_kv(host, profile, intent, r, batched).total) * GIB
        if room >= geo.bytes_for_requests(intent.concurrency, r.max_model_len, r.in_flight(batched)):
            return batched
        batched //= 2
    return None


def fit_chunk(
    host: HostFacts, profile: ModelProfile, intent: Intent, r: Resolved, geo: KvPool, *, batched: int | None
) -> Budget | None:
    """A chunk sparkfleet chose (the intent names none) gives way to a smaller one that fits the intent: its
    activation peak is smaller, and each sliding window is reserved for fewer tokens in flight beside it."""
    # Not below what resolve raised it to: one step holds every sequence's draft tokens.
    if batched is None or intent.max_num_batched_tokens is not None or batched < r.max_num_seqs * (1 + r.speculative_tokens):
        return None
    smaller = dataclasses.replace(r, max_num_batched_tokens=batched)
    try:
        budget = memory_budget(host, profile, intent, smaller, geo)
    except InfeasibleError:
        return None
    return dataclasses.replace(budget, max_num_batched_tokens=budget.max_num_batched_tokens or batched)


def memory_budget(host: HostFacts, profile: ModelProfile, intent: Intent, r: Resolved, geo: KvPool) -> Budget:
    total = host.mem_total_gib
    reserve = intent.host_reserve_gib if intent.host_reserve_gib is not None else mem.HOST_RESERVE_GIB[host.platform]
    baseline = mem.PROCESS_BASELINE_GIB[host.platform]
    nk = non_kv(host, profile, intent, r, r.max_num_batched_tokens)
    in_budget = cudagraph_memory_in_budget(r.version)
    one_request = geo.bytes_for_requests(1, r.max_model_len, r.in_flight())
    cap = mem.GB10_MAX_UTILIZATION if host.platform is Platform.GB10 else 1.0
    measured = mem.measured_cap(host)

    if intent.gpu_memory_utilization is not None:
        util = intent.gpu_memory_utilization
        if util > cap:
            raise PlanError(
                "intent.gpu_memory_utilization",
                f"{util} is above the {cap} cap for unified memory on GB10 (OOM and Xid 43 in the field)",
                (f"gpu_memory_utilization {cap} or less",),
            )
        if measured is not None and util > measured and host.cuda_ceiling_bytes and host.cuda_total_bytes:
            raise PlanError(
                "intent.gpu_memory_utilization",
                f"{util} is more than vLLM's start check admits on this host: CUDA reports at most "
                f"{host.cuda_ceiling_bytes / GIB:.2f} GiB free of {host.cuda_total_bytes / GIB:.2f} GiB with no instance "
                f"running and the page cache dropped",
                (f"gpu_memory_utilization {measured:.2f} or less", "stop what else holds memory on the host"),
            )
        kv_gib = util * total - nk.profiled(in_budget)
        needed_util = (nk.profiled(in_budget) + one_request / GIB) / total
        if kv_gib * GIB < one_request:
            raise InfeasibleError(
                "intent.gpu_memory_utilization",
                f"vLLM will refuse to start at {util}: {util * total:.1f} GiB budget minus {nk.profiled(in_budget):.1f} "
                f"GiB non-KV leaves {kv_gib:.1f} GiB KV, and one {r.max_model_len}-token request needs "
                f"{one_request / GIB:.2f} GiB",
                (f"gpu_memory_utilization {mem.round_up(needed_util):.2f} or more", "a shorter max_context"),
            )
        return Budget(int(kv_gib * GIB), util, nk, reserve, baseline)

    planned_cap = mem.planned_utilization_cap(host.platform is Platform.GB10, intent.nodes, r.max_model_len)
    if measured is not None:
        planned_cap = min(planned_cap, measured)
    usable = min(planned_cap * total, total - reserve - baseline)
    room_for_kv = usable - nk.total
    if intent.profile is ServeProfile.THROUGHPUT:
        kv_bytes = max(0, int(room_for_kv * GIB))
    else:
        exact = geo.bytes_for_requests(intent.concurrency, r.max_model_len, r.in_flight())
        slack = 0.0 if intent.profile is ServeProfile.MEMORY_SAVER else PREFIX_CACHE_SLACK
        kv_bytes = int(exact * (1 + slack))
    needed = geo.bytes_for_requests(intent.concurrency, r.max_model_len, r.in_flight())
    if kv_bytes < needed or kv_bytes / GIB > room_for_kv + 1e-9:
        batched = _batched_that_fits(host, profile, intent, r, geo, usable=usable)
        smaller = fit_chunk(host, profile, intent, r, geo, batched=batched)
        if smaller is not None:
            return smaller
        # A chunk sparkfleet chose was lowered already where any would fit (fit_chunk): only a named one is worth naming.
        named = intent.max_num_batched_tokens is not None
        scheduler = (
            (f"max_num_batched_tokens {batched} (activation peak {nk.activation:.1f} GiB now)",) if batched and named else ()
        )
        raise InfeasibleError(
            "intent",
            f"{intent.concurrency} x {r.max_model_len} tokens needs {needed / GIB:.1f} GiB KV; "
            f"{max(room_for_kv, 0):.1f} GiB is free after {nk.total:.1f} GiB non-KV within the "
            f"{usable:.1f} GiB vLLM may use on this host",
            _suggestions(profile, intent, r, geo, room_for_kv) + scheduler,
        )
    util = mem.round_up((nk.profiled(in_budget) + kv_bytes / GIB) / total)
    return Budget(kv_bytes, min(util, planned_cap), nk, reserve, baseline)
