"""plan(host, model, intent) -> ServePlan. Pure: no files, no network, no clock."""

from __future__ import annotations

import dataclasses
import math

from ..errors import PlanError
from ..kv.cache import KvPool
from ..models import (
    GIB,
    ClusterBackend,
    EnvVar,
    Flag,
    HostFacts,
    Intent,
    MemoryBreakdown,
    ModelProfile,
    NodePlacement,
    PackedMlaPool,
    Platform,
    Reason,
    ServePlan,
    SystemdLimits,
    command_line,
)
from ..sources import vllm
from ..versions import (
    FLAGS,
    VllmVersion,
    has_flag,
)
from . import buildcheck, clients, contextparallel, encoder, loading, memguard, remotecode, rules, speedplan
from . import memory as mem
from .answers import answer_check
from .binding import refuse_open_bind
from .budget import Budget, memory_budget, non_kv
from .cautions import compile_warning, guard_env, plan_warnings, scheduler_warning
from .choices import Resolved, check_bundled_draft, release_of, resolve
from .loading import LoadChoice
from .remotecode import CodeVerdict
from .requestsize import SOURCE as REQUEST_SOURCE
from .requestsize import max_request_mib
from .rules.kernels import NVFP4_DECISION_SOURCE, NVFP4_FORMATS

MEMORY_MAX_SLACK_GIB = 4.0


def cluster_backend(intent: Intent, version: VllmVersion, placement: NodePlacement | None) -> ClusterBackend | None:
    """How the ranks of a multi-node instance meet; None for one node. Native needs where this rank runs."""
    if intent.nodes == 1:
        if placement is not None:
            raise PlanError("placement", "a node placement applies to an instance over several nodes only", ("nodes 2",))
        return None
    native = has_flag(version, "--nnodes")
    if intent.cluster_backend is ClusterBackend.NATIVE and not native:
        raise PlanError(
            "intent.cluster_backend",
            f"vLLM {version} has no multi-node launch of its own (--nnodes appeared in {FLAGS['--nnodes'].first})",
            ("cluster_backend ray", f"vllm_version {FLAGS['--nnodes'].first} or newer"),
        )
    chosen = ClusterBackend.RAY if intent.cluster_backend is ClusterBackend.RAY or not native else ClusterBackend.NATIVE
    if chosen is ClusterBackend.RAY:
        if placement is not None and placement.rank > 0:
            raise PlanError("placement.rank", "a Ray instance runs on the head alone: its other ranks are Ray workers")
        return chosen
    if placement is None:
        raise PlanError(
            "intent.cluster_backend",
            "a native multi-node instance runs one process per node and needs the cluster link's addresses",
            (
                "ray_cluster_head and ray_cluster_interface on every member (the roles read the addresses)",
                "--master-addr and --host-ip on the command line",
                "cluster_backend ray",
            ),
        )
    if placement.rank >= intent.nodes:
        raise PlanError("placement.rank", f"rank {placement.rank} of {intent.nodes} nodes (0 to {intent.nodes - 1})")
    return chosen


def start_budget_reason(platform: Platform, weights_gib: float, compiles: bool) -> Reason:
    why, source = memguard.start_budget_reason(platform, weights_gib, compiles)
    return Reason(
        item=f"start budget {memguard.start_budget_s(platform, weights_gib, compiles)} s", reason=why, source=source
    )


def _budget_chunk(r: Resolved, budget: Budget, intent: Intent, profile: ModelProfile) -> tuple[Resolved, list[Reason]]:
    """The resolved choices with the scheduler chunk the budget fitted, and why it is not the usual one."""
    chunk = budget.max_num_batched_tokens
    if not chunk:
        return r, []
    why = "its activation peak is smaller"
    source = vllm("§1.3, §4.3")
    windows = profile.sliding_attention_layers > 0 or isinstance(profile.kv_layout, PackedMlaPool)
    if windows and r.version.at_least("0.26.0"):
        why += f", and vLLM reserves each sliding window for the {r.concurrent_batches} chunk(s) in flight beside it"
        source += f"; {vllm('§2.4')}; config/vllm.py max_in_flight_tokens in 0.26 and newer"
    reason = Reason(
        item=f"max_num_batched_tokens {chunk}, not {r.max_num_batched_tokens}",
        reason=f"{intent.concurrency} x {r.max_model_len} tokens fit only with the smaller chunk: {why}",
        source=source,
    )
    capture = tuple(size for size in r.capture_sizes if size <= chunk)
    return dataclasses.replace(r, max_num_batched_tokens=chunk, capture_sizes=capture), [reason]


@dataclasses.dataclass(frozen=True)
class Sized:
    """What sizing decided for one instance: the resolved choices, its KV pool and budget, how it loads, what is left."""

    r: Resolved
    backend: ClusterBackend | None
    geo: KvPool
    budget: Budget
    chunk_reasons: list[Reason]
    kv_bytes: int
    # Resident while the checkpoint loads: the weights, the runtime and a drafter's weights.
    loaded: float
    load: LoadChoice
    footprint: float
    headroom: float
    # Kernel compiles a Spark's first start runs beside the footprint.
    jit_jobs: int


def plan(
    host: HostFacts,
    profile: ModelProfile,
    intent: Intent,
    model_ref: str | None = None,
    *,
    drafter: ModelProfile | None = None,
    model_dir: str | None = None,
    model_fs: str | None = None,
    placement: NodePlacement | None = None,
) -> ServePlan:
    """The plan for one instance; `drafter` is the profile of intent.drafter, read by the caller.

    `model_dir` is where the model's files are on the host (a staged directory, or the hub snapshot model_stage
    will fill); a model_ref that is an absolute path is that directory. `model_fs` is the filesystem type it
    is read from (model_facts reads /proc/mounts), for the load strategy. `placement` is where this rank of a
    native multi-node instance runs.

    The stages: refuse what cannot be served safely, take consent for a repository's code, size the pool and the
    load, let the rules choose argv and env from the settings, then bound the process and say why.
    """
    model_dir = model_dir or (model_ref if model_ref and model_ref.startswith("/") else None)
    check_bundled_draft(profile, intent, model_dir)
    refuse_open_bind(intent)
    contextparallel.check(profile, intent)
    remote_code = remote_code_consent(profile, intent, drafter, host)
    intent, floor_reasons = decode_floor(host, profile, intent, drafter)
    sized = size(host, profile, intent, drafter=drafter, placement=placement, model_fs=model_fs)
    settings = settings_of(
        host, profile, intent, sized, model_ref=model_ref, model_dir=model_dir, placement=placement, remote_code=remote_code
    )
    entries = rules.apply(settings)
    served = assemble(
        host, profile, intent, sized, settings=settings, entries=entries, placement=placement, remote_code=remote_code
    )
    if host.release_record is not None:
        served = buildcheck.held_to_build(served, host.release_record)
    if not floor_reasons:
        return served
    said = [f"{r.item}: {r.reason}" for r in floor_reasons]
    return served.model_copy(update={"reasons": floor_reasons + served.reasons, "warnings": said + served.warnings})


def decode_floor(
    host: HostFacts, profile: ModelProfile, intent: Intent, drafter: ModelProfile | None
) -> tuple[Intent, list[Reason]]:
    """The intent with the concurrency intent.min_decode_tps allows (by the speed model), and why it changed."""
    if intent.min_decode_tps is None:
        return intent, []
    r = resolve(host, profile, intent, drafter)
    return speedplan.floor_concurrency(
        profile, intent, platform=host.platform, kv_cache_dtype=r.kv_cache_dtype, eager=r.enforce_eager
    )


def remote_code_consent(
    profile: ModelProfile, intent: Intent, drafter: ModelProfile | None, host: HostFacts
) -> CodeVerdict | None:
    """The repository code vLLM would run, once consented to; the drafter's is checked too (one flag covers both).
    The model's architecture is checked against the release's own registry where its record was read."""
    version = release_of(host)
    remotecode.check_architecture(profile, version, host.release_record)
    remote_code = remotecode.consent(profile, intent, version, "the model")
    if drafter is not None:
        drafter_code = remotecode.consent(drafter, intent, version, "the drafter")
        remote_code = remote_code or drafter_code
    return remote_code


def size(
    host: HostFacts,
    profile: ModelProfile,
    intent: Intent,
    *,
    drafter: ModelProfile | None,
    placement: NodePlacement | None,
    model_fs: str | None,
) -> Sized:
    r = resolve(host, profile, intent, drafter)
    backend = cluster_backend(intent, r.version, placement)
    geo = contextparallel.kv_pool(profile, intent, r, host)
    budget = memory_budget(host, profile, intent, r, geo)
    r, chunk_reasons = _budget_chunk(r, budget, intent, profile)
    kv_bytes = geo.num_blocks(budget.kv_bytes) * geo.bytes_per_block
    loaded = budget.non_kv.weights + budget.non_kv.runtime + budget.non_kv.drafter
    room_while_loading = host.mem_total_gib - budget.reserve - budget.baseline - loaded
    load = loading.choose(host, profile, intent.load, r.version, room_gib=room_while_loading, model_fs=model_fs)
    loading.check_utilization(load, host, budget.utilization)
    footprint = budget.non_kv.total + kv_bytes / GIB
    headroom = host.mem_total_gib - budget.reserve - budget.baseline - footprint
    # A Spark's first start compiles kernels beside the footprint: as many at once as the headroom holds.
    # ...unless the release carries FlashInfer's kernels prebuilt for its version (vllm download-kernels).
    jit_jobs = mem.jit_jobs(headroom) if host.platform is Platform.GB10 and not host.flashinfer_kernels else 0
    return Sized(r, backend, geo, budget, chunk_reasons, kv_bytes, loaded, load, footprint, headroom, jit_jobs)


def settings_of(
    host: HostFacts,
    profile: ModelProfile,
    intent: Intent,
    sized: Sized,
    *,
    model_ref: str | None,
    model_dir: str | None,
    placement: NodePlacement | None,
    remote_code: CodeVerdict | None,
) -> rules.Settings:
    """What the rules choose argv and env from."""
    return rules.Settings(
        host=host,
        profile=profile,
        intent=intent,
        resolved=sized.r,
        model_ref=model_ref or profile.id,
        model_dir=model_dir,
        kv_cache_memory_bytes=None if intent.gpu_memory_utilization is not None else sized.kv_bytes,
        gpu_memory_utilization=sized.budget.utilization,
        load=sized.load,
        jit_jobs=sized.jit_jobs,
        cluster_backend=sized.backend,
        placement=placement,
        remote_code=remote_code,
    )


def process_limits(host: HostFacts, sized: Sized) -> tuple[int, float, float]:
    """The bytes a start needs available, the unit's MemoryMax (GiB) and the first start's compile memory (GiB).

    Both cover the larger of serving and loading (eager holds a shard beside the weights, before the KV cache exists).
    """
    budget, total = sized.budget, host.mem_total_gib
    required = (
        int((budget.utilization * total + budget.baseline) * GIB)
        if host.platform is Platform.GB10
        else int((sized.footprint + budget.baseline) * GIB)
    )
    at_load = sized.loaded + sized.load.transient_gib
    required = max(required, int((at_load + budget.baseline) * GIB))
    jit = sized.jit_jobs * mem.JIT_PROCESS_GIB
    memory_max = min(
        max(sized.footprint + max(MEMORY_MAX_SLACK_GIB, jit), at_load + MEMORY_MAX_SLACK_GIB) + budget.baseline,
        total - 2.0,
    )
    return required, memory_max, jit


def reasons_of(
    host: HostFacts,
    profile: ModelProfile,
    intent: Intent,
    sized: Sized,
    *,
    entries: list[rules.Entry],
    remote_code: CodeVerdict | None,
    request: tuple[int, str],
) -> list[Reason]:
    """Why, item by item: every rule's, the chunk's, the start budget's, and the choices no flag shows."""
    reasons = [
        *(Reason(item=e.item, reason=e.reason, source=e.source) for e in entries),
        *sized.chunk_reasons,
        start_budget_reason(host.platform, sized.budget.non_kv.weights, sized.jit_jobs > 0),
    ]
    budget = clients.token_budget(profile)
    if budget is not None:
        reasons.append(
            Reason(item=f"clients: max_tokens {budget.max_tokens} or more", reason=budget.reason, source=budget.source)
        )
    if remote_code is None and intent.trust_remote_code:
        unneeded = remotecode.verdict(profile, sized.r.version)
        reasons.append(
            Reason(item="no --trust-remote-code", reason=f"consent unused: {unneeded.why}", source=unneeded.source)
        )
    reasons += encoder.reasons(profile, sized.r, sized.budget.non_kv)
    load = sized.load
    if load.flag is None:
        # vLLM's default needs no flag; the plan still says why it loads that way.
        reasons.append(Reason(item=f"load {load.strategy.value}", reason=load.reason, source=load.source))
    if (
        host.platform is Platform.GB10
        and profile.checkpoint_format in NVFP4_FORMATS
        and not any(e.name in {"--linear-backend", "VLLM_NVFP4_GEMM_BACKEND"} for e in entries)
    ):
        reasons.append(
            Reason(
                item="dense NVFP4 GEMM left to vLLM (FLASHINFER_CUTLASS)",
                reason="healthy on 0.19+ CUDA 13 builds and faster for prefill than Marlin; memory-saver pins Marlin",
                source=NVFP4_DECISION_SOURCE,
            )
        )
    request_mib, request_why = request
    reasons.append(Reason(item=f"request body up to {request_mib} MiB", reason=request_why, source=REQUEST_SOURCE))
    reasons.append(
        Reason(
            item="secret VLLM_API_KEY" if intent.api_key else "no API key",
            reason="the key is read from the environment file, never argv" if intent.api_key else "loopback bind only",
            source="field-anchors.md §2.6",
        )
    )
    return reasons


def all_warnings(
    host: HostFacts, profile: ModelProfile, intent: Intent, sized: Sized, *, required: int, runner: str
) -> list[str]:
    r = sized.r
    return (
        plan_warnings(host, profile, intent, r, required)
        + [w for w in (scheduler_warning(r, lambda n: non_kv(host, profile, intent, r, n).activation, sized.headroom),) if w]
        + memory_warnings(profile, sized)
        + speedplan.silence(profile, host.platform, intent, runner)
        + contextparallel.cautions(intent)
    )


def memory_warnings(profile: ModelProfile, sized: Sized) -> list[str]:
    """What may be held beside the footprint: first-start compiles, and a multimodal encoder's largest call."""
    return compile_warning(sized.jit_jobs, sized.headroom) + encoder.cautions(profile, sized.r, sized.budget.non_kv)


def memory_breakdown(host: HostFacts, sized: Sized, jit: float) -> MemoryBreakdown:
    nk, budget = sized.budget.non_kv, sized.budget
    return MemoryBreakdown(
        total=round(host.mem_total_gib, 2),
        weights=round(nk.weights, 2),
        runtime=round(nk.runtime, 2),
        activation=round(nk.activation, 2),
        cudagraph=round(nk.cudagraph, 2),
        extra=round(nk.extra, 2),
        drafter=round(nk.drafter, 2),
        encoder=round(nk.encoder, 2),
        kv=round(sized.kv_bytes / GIB, 2),
        process_baseline=budget.baseline,
        host_reserve=budget.reserve,
        headroom=round(sized.headroom, 2),
        load_transient=round(sized.load.transient_gib, 2),
        first_start_compile=round(jit, 2),
    )


def assemble(
    host: HostFacts,
    profile: ModelProfile,
    intent: Intent,
    sized: Sized,
    *,
    settings: rules.Settings,
    entries: list[rules.Entry],
    placement: NodePlacement | None,
    remote_code: CodeVerdict | None,
) -> ServePlan:
    """The plan from the rules' entries and the sizing: argv, env, limits, warnings and every reason."""
    r, geo, kv_bytes = sized.r, sized.geo, sized.kv_bytes
    flags = [Flag(name=e.name, values=list(e.values), reason=e.reason, source=e.source) for e in entries if e.kind == "arg"]
    environment = [
        EnvVar(name=e.name, value=e.values[0], reason=e.reason, source=e.source) for e in entries if e.kind == "env"
    ]
    env = {e.name: e.value for e in environment}
    runner = "pooling" if any(f.name == "--runner" and f.values == ["pooling"] for f in flags) else "generate"
    budget = clients.token_budget(profile) if runner == "generate" else None
    guard_env(env, r.version)
    required, memory_max, jit = process_limits(host, sized)
    request = max_request_mib(r.max_model_len, profile.multimodal, intent.max_request_mib, profile.media)
    reasons = reasons_of(host, profile, intent, sized, entries=entries, remote_code=remote_code, request=request)
    warnings = all_warnings(host, profile, intent, sized, required=required, runner=runner)
    return ServePlan(
        nodes=intent.nodes,
        cluster_backend=sized.backend,
        node_rank=placement.rank if placement else 0,
        headless=bool(placement and placement.rank > 0),
        model=settings.model_ref,
        served_name=settings.served_name,
        platform=host.platform,
        vllm_version=str(r.version),
        flags=flags,
        argv=command_line(settings.model_ref, flags),
        runner=runner,
        environment=environment,
        env=env,
        secret_env=["VLLM_API_KEY"] if intent.api_key else [],
        gpu_memory_utilization=sized.budget.utilization,
        kv_cache_memory_bytes=kv_bytes,
        kv_tokens=geo.reported_tokens(kv_bytes, r.max_model_len, r.in_flight(), r.version),
        max_concurrency_at_context=round(geo.max_concurrency(kv_bytes, r.max_model_len, r.in_flight()), 2),
        max_model_len=r.max_model_len,
        max_num_seqs=r.max_num_seqs,
        max_num_batched_tokens=r.max_num_batched_tokens,
        kv_cache_dtype=r.kv_cache_dtype,
        block_size=geo.block_size,
        cudagraph_capture_sizes=list(r.capture_sizes),
        enforce_eager=r.enforce_eager,
        memory=memory_breakdown(host, sized, jit),
        required_available_bytes=required,
        systemd=SystemdLimits(memory_max=f"{math.ceil(memory_max)}G"),
        answer_check=answer_check(
            profile, settings.served_name, runner == "pooling", intent.answer_check, rules.template_kwargs(profile, intent)
        ),
        warnings=warnings,
        reasons=reasons,
        mode="predicted" if intent.gpu_memory_utilization is not None else "planned",
        load_strategy=sized.load.strategy,
        max_request_mib=request[0],
        start_budget_s=memguard.start_budget_s(host.platform, sized.budget.non_kv.weights, sized.jit_jobs > 0),
        min_max_tokens=budget.max_tokens if budget is not None else None,
        speed=speedplan.predict(
            profile,
            intent,
            platform=host.platform,
            kv_cache_dtype=r.kv_cache_dtype,
            max_num_seqs=r.max_num_seqs,
            max_model_len=r.max_model_len,
            eager=r.enforce_eager,
            speculative_tokens=r.speculative_tokens,
            runner=runner,
        ),
    )
