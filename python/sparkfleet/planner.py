"""plan(host, model, intent) -> ServePlan. Pure: no files, no network, no clock."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from . import loading, remotecode, rules
from . import memory as mem
from .answers import answer_check
from .errors import InfeasibleError, PlanError
from .kvcache import GroupKind, KvGeometry, attention_bytes_per_token, base_block_size, geometry
from .models import (
    GIB,
    ClusterBackend,
    HostFacts,
    Intent,
    KvDtype,
    MemoryBreakdown,
    ModelProfile,
    NodePlacement,
    Platform,
    Reason,
    ServePlan,
    ServeProfile,
    SpeculativeMethod,
    SystemdLimits,
)
from .requestsize import SOURCE as REQUEST_SOURCE
from .requestsize import max_request_mib
from .sources import SEED_GUIDE, SEED_SM121, SEED_VLLM_BLOG
from .versions import (
    ENV_VARS,
    FIRST_DFLASH,
    FLAGS,
    NEWEST_RELEASE,
    SUPPORTED_MAX,
    SUPPORTED_MIN,
    EnvState,
    VllmVersion,
    capability_origin,
    cudagraph_capture_ceiling,
    cudagraph_memory_in_budget,
    env_state,
    has_flag,
    in_supported_range,
)

DEFAULT_CONTEXT = 65536
DEFAULT_VLLM = {platform: NEWEST_RELEASE[platform.value] for platform in Platform}
BATCHED_TOKENS = {
    ServeProfile.INTERACTIVE: 8192,
    ServeProfile.THROUGHPUT: 16384,
    ServeProfile.MEMORY_SAVER: 2048,
}
# Drafter methods default to the short draft the seeds run paired drafts with (seed 002 §7.1.1: MTP at 3).
SPECULATIVE_TOKENS = {
    SpeculativeMethod.NGRAM: 4,
    SpeculativeMethod.SUFFIX: 8,
    SpeculativeMethod.EAGLE3: 3,
    SpeculativeMethod.DRAFT_MODEL: 3,
}
PREFIX_CACHE_SLACK = 0.10
MEMORY_MAX_SLACK_GIB = 4.0


@dataclass(frozen=True)
class _Resolved:
    version: VllmVersion
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_dtype: str
    speculative_tokens: int
    capture_sizes: tuple[int, ...]
    enforce_eager: bool
    prefix_caching: bool
    yarn: bool
    long_context: bool
    shards: int
    # The draft's weights (GiB) and its KV layers, counted in the target's full-attention shape.
    drafter_gib: float
    draft_layers: int
    # The drafter checkpoint that was read, for its own activation peak.
    drafter: ModelProfile | None


def _version(host: HostFacts) -> VllmVersion:
    text = host.vllm_version or DEFAULT_VLLM[host.platform]
    try:
        version = VllmVersion.parse(text)
    except ValueError as exc:
        raise PlanError("vllm_version", str(exc)) from exc
    # A release newer than the rule table plans with the newest rules (and a warning): users need not wait for us.
    if version < VllmVersion.parse(SUPPORTED_MIN):
        raise PlanError(
            "vllm_version",
            f"{version} is older than the oldest release sparkfleet plans for",
            (f"a release from {SUPPORTED_MIN} on",),
        )
    return version


def _speculative_tokens(profile: ModelProfile, intent: Intent) -> int:
    method = intent.speculative
    if method is SpeculativeMethod.NONE:
        return 0
    if intent.num_speculative_tokens:
        return intent.num_speculative_tokens
    if method is SpeculativeMethod.MTP:
        return profile.speculative.mtp_default_tokens
    if method is SpeculativeMethod.DFLASH:
        return profile.speculative.dflash_default_tokens
    return SPECULATIVE_TOKENS[method]


def _kv_dtype(profile: ModelProfile, intent: Intent) -> str:
    dflash = intent.speculative is SpeculativeMethod.DFLASH
    mtp_fp8 = intent.speculative is SpeculativeMethod.MTP and profile.speculative.mtp_requires_fp8_kv
    if intent.kv_cache_dtype is KvDtype.FP8:
        if not profile.kv_fp8_supported:
            raise PlanError(
                "intent.kv_cache_dtype",
                f"fp8 KV gives scrambled output with {profile.id}",
                ("kv_cache_dtype bf16",),
            )
        if dflash:
            raise PlanError(
                "intent.kv_cache_dtype",
                "DFlash drafts need a BF16 KV cache",
                ("kv_cache_dtype bf16", "speculative mtp or ngram"),
            )
        return "fp8"
    if intent.kv_cache_dtype is KvDtype.BF16:
        if mtp_fp8:
            raise PlanError(
                "intent.kv_cache_dtype",
                f"the MTP draft of {profile.id} needs an fp8 KV cache",
                ("kv_cache_dtype fp8", "speculative none"),
            )
        return "auto"
    if dflash or not profile.kv_fp8_supported:
        return "auto"
    wants_fp8 = profile.kv_fp8_recommended or mtp_fp8 or intent.profile is ServeProfile.MEMORY_SAVER
    return "fp8" if wants_fp8 else "auto"


def _capture_sizes(max_num_seqs: int, spec_tokens: int, batched: int, version: VllmVersion) -> tuple[int, ...]:
    """Powers of two up to vLLM's own default ceiling for this concurrency (§4.1)."""
    ceiling = min(2 * max_num_seqs * (1 + spec_tokens), cudagraph_capture_ceiling(version), batched)
    sizes = []
    size = 1
    while size <= ceiling:
        sizes.append(size)
        size *= 2
    return tuple(sizes)


def _check_speculative(profile: ModelProfile, intent: Intent, version: VllmVersion, capabilities: tuple[str, ...]) -> None:
    method = intent.speculative
    if intent.drafter and not method.takes_drafter:
        raise PlanError(
            "intent.drafter",
            f"a drafter serves speculative mtp, dflash, eagle3 or draft_model, not {method.value}",
            ("speculative eagle3", "speculative draft_model", "no drafter"),
        )
    if method.needs_drafter and not intent.drafter:
        raise PlanError(
            "intent.drafter",
            f"speculative {method.value} drafts with a separate checkpoint and none was given",
            ("drafter ORG/NAME (a hub id) or a local directory", "speculative ngram"),
        )
    if method is SpeculativeMethod.MTP and not profile.speculative.mtp and not intent.drafter:
        raise PlanError(
            "intent.speculative",
            f"{profile.id} has no MTP heads or paired MTP draft",
            ("drafter (a separate MTP assistant checkpoint)", "speculative ngram", "speculative suffix", "speculative none"),
        )
    if method is SpeculativeMethod.DFLASH:
        if not profile.speculative.dflash_drafter and not intent.drafter:
            raise PlanError(
                "intent.speculative",
                f"no DFlash drafter is known for {profile.id}",
                ("drafter (a DFlash drafter trained for this model)", "speculative ngram", "speculative none"),
            )
        if capability_origin("dflash", version, capabilities) is None:
            raise PlanError(
                "intent.speculative",
                f"DFlash needs vLLM >= {FIRST_DFLASH} or a release that declares the dflash capability; "
                f"target is {version}, declaring {', '.join(capabilities) or 'none'}",
                (f"vllm_version {FIRST_DFLASH} or newer", "a fork release that declares dflash"),
            )


def _check_bundled_draft(profile: ModelProfile, intent: Intent, model_dir: str | None) -> None:
    subdir = profile.speculative.mtp_draft_subdir
    if intent.speculative is not SpeculativeMethod.MTP or intent.drafter or not subdir:
        return
    if model_dir is None or not model_dir.startswith("/"):
        raise PlanError(
            "intent.speculative",
            f"the MTP draft of {profile.id} is its own {subdir}/ directory, which vLLM loads by absolute path "
            "(a relative one is read as a hub repository), and where the model is staged is not known here",
            (
                "plan the staged model: the vllm_serve role does, after model_stage",
                "CLI --model-dir /ABSOLUTE/STAGED/DIRECTORY",
                "speculative none",
            ),
        )


def _draft(profile: ModelProfile, intent: Intent, drafter: ModelProfile | None, tensor_parallel: int) -> tuple[float, int]:
    """(weights GiB, KV layers in the target's full-attention shape) of the draft the intent runs.

    A drafter checkpoint's attention layers join the KV pool (vLLM registers them with the target's); where
    its per-token page differs from the target's, it is counted as the target-shaped layers holding at least
    as many bytes, an upper bound of the group vLLM gives it.
    """
    method = intent.speculative
    if method is SpeculativeMethod.MTP and not intent.drafter:
        return profile.speculative.mtp_draft_weights_gib, profile.speculative.mtp_layers
    if method is SpeculativeMethod.DFLASH and not intent.drafter:
        return profile.speculative.dflash_drafter_weights_gib, 0
    if not intent.drafter:
        return 0.0, 0
    if drafter is None and intent.drafter_weights_gib is None:
        raise PlanError(
            "intent.drafter",
            f"{intent.drafter} was not read, so its weights and KV layers are unknown",
            ("plan with the sparkfleet CLI (--drafter reads it)", "drafter_weights_gib G"),
        )
    weights = intent.drafter_weights_gib if intent.drafter_weights_gib is not None else drafter.weights_gib  # type: ignore[union-attr]
    if drafter is None:
        return weights, 0
    target = attention_bytes_per_token(profile, 2, tensor_parallel, GroupKind.FULL)
    draft = drafter.full_attention_layers * attention_bytes_per_token(drafter, 2, tensor_parallel, GroupKind.FULL)
    draft += drafter.sliding_attention_layers * attention_bytes_per_token(drafter, 2, tensor_parallel, GroupKind.SLIDING)
    return weights, math.ceil(draft / target)


def _resolve(host: HostFacts, profile: ModelProfile, intent: Intent, drafter: ModelProfile | None) -> _Resolved:
    version = _version(host)
    declared = set(host.vllm_capabilities)
    carried = profile.min_vllm_capabilities and declared.issuperset(profile.min_vllm_capabilities)
    if version < profile.min_version and not carried:
        fork = f"a fork release that declares {', '.join(profile.min_vllm_capabilities)}"
        raise PlanError(
            "vllm_version",
            f"{profile.id} needs vLLM >= {profile.min_vllm}"
            + (f" (for {', '.join(profile.min_vllm_capabilities)})" if profile.min_vllm_capabilities else "")
            + f", target is {version}",
            (f"vllm_version {profile.min_vllm} or newer", *((fork,) if profile.min_vllm_capabilities else ())),
        )
    shards = intent.tensor_parallel_size * intent.pipeline_parallel_size
    if intent.nodes > 1 and shards != intent.nodes:
        raise PlanError(
            "intent.nodes",
            f"{intent.nodes} Sparks have {intent.nodes} GPUs but tensor x pipeline parallel is {shards}",
            (f"tensor_parallel_size {intent.nodes}",),
        )
    if intent.nodes == 1 and shards > 1 and host.platform is Platform.GB10:
        raise PlanError("intent.tensor_parallel_size", "a DGX Spark has one GPU", ("nodes equal to the TP size",))
    if profile.tensor_parallel_max and intent.tensor_parallel_size > profile.tensor_parallel_max:
        raise PlanError(
            "intent.tensor_parallel_size",
            f"{profile.id} supports tensor parallel up to {profile.tensor_parallel_max}",
            ("pipeline_parallel_size instead",),
        )
    _check_speculative(profile, intent, version, host.vllm_capabilities)

    context = intent.max_context or min(profile.native_max_context, DEFAULT_CONTEXT)
    long_context, yarn = _past_native(profile, intent, context)
    spec_tokens = _speculative_tokens(profile, intent)
    # A decode step schedules 1 + k tokens per sequence under speculative decoding: the default chunk is
    # raised so that every sequence's draft fits in one step.
    batched = intent.max_num_batched_tokens or max(BATCHED_TOKENS[intent.profile], intent.concurrency * (1 + spec_tokens))
    eager = intent.profile is ServeProfile.MEMORY_SAVER
    # vLLM's CPU platform has no CUDA graphs: no capture sizes to choose and no graph pool to budget.
    graphs = not eager and host.platform is not Platform.CPU
    drafter_gib, draft_layers = _draft(profile, intent, drafter, intent.tensor_parallel_size)
    return _Resolved(
        drafter=drafter,
        drafter_gib=drafter_gib,
        draft_layers=draft_layers,
        version=version,
        max_model_len=context,
        max_num_seqs=intent.concurrency,
        max_num_batched_tokens=batched,
        kv_cache_dtype=_kv_dtype(profile, intent),
        speculative_tokens=spec_tokens,
        capture_sizes=_capture_sizes(intent.concurrency, spec_tokens, batched, version) if graphs else (),
        enforce_eager=eager,
        prefix_caching=intent.speculative is not SpeculativeMethod.DFLASH,
        yarn=yarn,
        long_context=long_context,
        shards=shards,
    )


def _past_native(profile: ModelProfile, intent: Intent, context: int) -> tuple[bool, bool]:
    """(publisher-supported long context, static YaRN) for a context past the config's limit; else a refusal
    that names both ways and why the one asked for does not apply."""
    native = profile.native_max_context
    # vLLM itself accepts a max_model_len up to the config's model_max_length (contextlimit).
    if context <= max(native, profile.config_max_length or 0):
        return False, False
    supported = profile.long_context_max
    if intent.allow_long_context and supported and context <= supported:
        return True, False
    if intent.allow_yarn and profile.yarn_hf_overrides:
        return False, True
    why: list[str] = []
    if intent.allow_long_context:
        why.append(
            f"its publisher supports up to {supported} tokens without a rope override"
            if supported
            else "its publisher states no support past it without a rope override"
        )
    if intent.allow_yarn:
        why.append("its profile has no YaRN override (yarn_hf_overrides)")
    hints = [f"max_context {native}"]
    if supported:
        hints.append(f"allow_long_context true with max_context up to {supported} (publisher-supported, no rope override)")
    if profile.yarn_hf_overrides:
        hints.append("allow_yarn true (static YaRN; can dent short-prompt quality)")
    raise PlanError(
        "intent.max_context",
        f"{context} exceeds {profile.id}'s configured {native} tokens" + (f": {'; '.join(why)}" if why else ""),
        tuple(hints),
    )


def _geometry(profile: ModelProfile, intent: Intent, r: _Resolved, platform: Platform) -> KvGeometry:
    return geometry(
        profile,
        kv_cache_dtype=r.kv_cache_dtype,
        tensor_parallel=intent.tensor_parallel_size,
        pipeline_parallel=intent.pipeline_parallel_size,
        speculative_tokens=r.speculative_tokens,
        draft_layers=r.draft_layers,
        prefix_caching=r.prefix_caching,
        base_block_size=base_block_size(platform, profile.mla is not None),
    )


@dataclass(frozen=True)
class _Budget:
    kv_bytes: int
    utilization: float
    non_kv: mem.NonKv
    reserve: float
    baseline: float


def _suggestions(profile: ModelProfile, intent: Intent, r: _Resolved, geo: KvGeometry, kv_room: float) -> tuple[str, ...]:
    tips: list[str] = []
    room = max(0, int(kv_room * GIB))
    per_request = geo.bytes_for_requests(1, r.max_model_len, r.max_num_batched_tokens)
    fitting = room // per_request if per_request else 0
    if fitting >= 1 and fitting < intent.concurrency:
        tips.append(f"concurrency {fitting}")
    context = r.max_model_len
    while context > 1024 and geo.bytes_for_requests(intent.concurrency, context, r.max_num_batched_tokens) > room:
        context //= 2
    if context < r.max_model_len and geo.bytes_for_requests(intent.concurrency, context, r.max_num_batched_tokens) <= room:
        tips.append(f"max_context {context}")
    if r.kv_cache_dtype != "fp8" and profile.kv_fp8_supported and intent.speculative is not SpeculativeMethod.DFLASH:
        tips.append("kv_cache_dtype fp8")
    tips.append(f"nodes {max(2, intent.nodes * 2)} (tensor parallel)")
    return tuple(tips)


def _non_kv(host: HostFacts, profile: ModelProfile, intent: Intent, r: _Resolved, batched: int) -> mem.NonKv:
    """Non-KV memory of one rank when the scheduler runs `batched` tokens per step (its activation peak).

    vLLM's profile run drives the target and then the drafter's dummy run over the same tokens, one after the
    other, so the peak is the larger of the two activations, not their sum.
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
    if r.drafter is None:
        return nk
    drafter_peak = mem.activation_gib(r.drafter, batched, r.max_num_seqs)
    return dataclasses.replace(nk, activation=max(nk.activation, drafter_peak))


def _batched_that_fits(
    host: HostFacts, profile: ModelProfile, intent: Intent, r: _Resolved, geo: KvGeometry, *, usable: float
) -> int | None:
    """The largest smaller max_num_batched_tokens (a power of two, at least 2048) whose activation peak leaves
    room for the KV the intent needs, if lowering the scheduler's chunk is what would make it fit."""
    batched = 1 << (r.max_num_batched_tokens.bit_length() - 1)
    if batched == r.max_num_batched_tokens:
        batched //= 2
    while batched >= 2048:
        room = (usable - _non_kv(host, profile, intent, r, batched).total) * GIB
        if room >= geo.bytes_for_requests(intent.concurrency, r.max_model_len, batched):
            return batched
        batched //= 2
    return None


def _budget(host: HostFacts, profile: ModelProfile, intent: Intent, r: _Resolved, geo: KvGeometry) -> _Budget:
    total = host.mem_total_gib
    reserve = intent.host_reserve_gib if intent.host_reserve_gib is not None else mem.HOST_RESERVE_GIB[host.platform]
    baseline = mem.PROCESS_BASELINE_GIB[host.platform]
    nk = _non_kv(host, profile, intent, r, r.max_num_batched_tokens)
    in_budget = cudagraph_memory_in_budget(r.version)
    one_request = geo.bytes_for_requests(1, r.max_model_len, r.max_num_batched_tokens)
    cap = mem.GB10_MAX_UTILIZATION if host.platform is Platform.GB10 else 1.0

    if intent.gpu_memory_utilization is not None:
        util = intent.gpu_memory_utilization
        if util > cap:
            raise PlanError(
                "intent.gpu_memory_utilization",
                f"{util} is above the {cap} cap for unified memory on GB10 (OOM and Xid 43 in the field)",
                (f"gpu_memory_utilization {cap} or less",),
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
        return _Budget(int(kv_gib * GIB), util, nk, reserve, baseline)

    usable = min(cap * total, total - reserve - baseline)
    room_for_kv = usable - nk.total
    if intent.profile is ServeProfile.THROUGHPUT:
        kv_bytes = max(0, int(room_for_kv * GIB))
    else:
        exact = geo.bytes_for_requests(intent.concurrency, r.max_model_len, r.max_num_batched_tokens)
        slack = 0.0 if intent.profile is ServeProfile.MEMORY_SAVER else PREFIX_CACHE_SLACK
        kv_bytes = int(exact * (1 + slack))
    needed = geo.bytes_for_requests(intent.concurrency, r.max_model_len, r.max_num_batched_tokens)
    if kv_bytes < needed or kv_bytes / GIB > room_for_kv + 1e-9:
        batched = _batched_that_fits(host, profile, intent, r, geo, usable=usable)
        scheduler = (f"max_num_batched_tokens {batched} (activation peak {nk.activation:.1f} GiB now)",) if batched else ()
        raise InfeasibleError(
            "intent",
            f"{intent.concurrency} x {r.max_model_len} tokens needs {needed / GIB:.1f} GiB KV; "
            f"{max(room_for_kv, 0):.1f} GiB is free after {nk.total:.1f} GiB non-KV within the "
            f"{usable:.1f} GiB vLLM may use on this host",
            _suggestions(profile, intent, r, geo, room_for_kv) + scheduler,
        )
    util = mem.round_up((nk.profiled(in_budget) + kv_bytes / GIB) / total)
    return _Budget(kv_bytes, min(util, cap), nk, reserve, baseline)


def _compile_warning(jit_jobs: int, headroom: float) -> list[str]:
    if not jit_jobs or headroom >= mem.JIT_PROCESS_GIB:
        return []
    return [
        f"the first start compiles kernels one at a time (MAX_JOBS 1), up to {mem.JIT_PROCESS_GIB:g} GiB each, and "
        f"this plan leaves {headroom:.1f} GiB of headroom: that start may reach the host reserve ({mem.JIT_SOURCE})"
    ]


def _scheduler_warning(r: _Resolved, activation_at: Callable[[int], float], headroom: float) -> str | None:
    """The activation peak follows max_num_batched_tokens, and it was measured at one count only (seed 003's
    8192). Far past it the estimate is an extrapolation: warn when an error as large as the estimate itself
    would eat the host reserve, and name a count whose peak the headroom does cover."""
    batched = r.max_num_batched_tokens
    activation = activation_at(batched)
    if batched <= 2 * mem.ACTIVATION_CALIBRATED_TOKENS or activation <= headroom:
        return None
    # Headroom never shrinks as the count falls (KV is sized apart from it), so re-planning at `fits` is quiet.
    fits = 1 << (batched.bit_length() - 1)
    while fits > 2 * mem.ACTIVATION_CALIBRATED_TOKENS and (fits >= batched or activation_at(fits) > headroom):
        fits //= 2
    return (
        f"max_num_batched_tokens {batched}: the scheduler's activation peak, about {activation:.1f} GiB, is extrapolated "
        f"past the {mem.ACTIVATION_CALIBRATED_TOKENS}-token profile it was measured at, and {headroom:.1f} GiB of "
        f"headroom would not absorb an error that large before the host reserve; max_num_batched_tokens {fits} "
        f"keeps the peak within it ({mem.ACTIVATION_SOURCE})"
    )


def _guard_env(env: dict[str, str], version: VllmVersion) -> None:
    for name in env:
        if name in ENV_VARS and env_state(version, name) in {EnvState.ABSENT, EnvState.REMOVED}:
            raise PlanError(
                "env",
                f"{name} is not read by vLLM {version}; it would be ignored",
                (ENV_VARS[name].replacement or "dropping it",),
            )


def _warnings(host: HostFacts, profile: ModelProfile, intent: Intent, r: _Resolved, required: int) -> list[str]:
    out: list[str] = []
    if not in_supported_range(r.version):
        out.append(
            f"vLLM {r.version} is newer than sparkfleet's rules, which were proved on {SUPPORTED_MAX}: planned with "
            "those rules; the release's own parser checks the argv on the host before the unit switches"
        )
    if r.enforce_eager and host.platform is Platform.GB10:
        out.append(
            "memory-saver runs with --enforce-eager: about 55% lower decode throughput on GB10 "
            f"(59 -> 26 tok/s in {SEED_SM121})"
        )
    if r.kv_cache_dtype == "fp8" and not profile.kv_fp8_recommended:
        out.append(f"fp8 KV on {profile.id} is not from its tested recipe: check output quality ({SEED_VLLM_BLOG})")
    if intent.speculative is SpeculativeMethod.DFLASH and profile.checkpoint_format.is_fp4:
        out.append(f"DFlash acceptance collapses on quantized targets under stock vLLM ({SEED_GUIDE} §7.1.1)")
    if intent.nodes > 1 and host.platform is Platform.CPU and intent.cluster_backend is ClusterBackend.RAY:
        out.append(
            "vLLM's CPU platform has no Ray device (vllm/v1/executor/ray_utils.py: 'current platform cpu does not "
            "support ray'): this multi-node plan renders but vLLM will not start it"
        )
    if r.yarn:
        out.append("static YaRN stretches the model past its training and can dent short-prompt quality")
    if (r.yarn or r.long_context) and host.platform is Platform.GB10:
        out.append(
            f"a prompt near {r.max_model_len} tokens takes minutes to prefill on GB10 (273 GB/s): "
            f"it fits, it is not fast ({SEED_GUIDE} §8)"
        )
    if host.mem_available_bytes is not None and host.mem_available_bytes < required:
        out.append(
            f"host MemAvailable is {host.mem_available_bytes / GIB:.1f} GiB; vLLM needs "
            f"{required / GIB:.1f} GiB free at start (drop caches or stop other services)"
        )
    step = r.max_num_seqs * (1 + r.speculative_tokens)
    if r.speculative_tokens and r.max_num_batched_tokens < step:
        out.append(
            f"max_num_batched_tokens {r.max_num_batched_tokens} is below one decode step of {r.max_num_seqs} sequences "
            f"x (1 + {r.speculative_tokens} draft tokens) = {step}: fewer sequences decode per step; "
            f"max_num_batched_tokens {step} keeps them together"
        )
    if intent.drafter and r.draft_layers == 0:
        out.append(
            f"drafter {intent.drafter} is known only by its size (drafter_weights_gib): its weights are in the budget, "
            "its KV layers are not"
        )
    for quirk in profile.quirks:
        out.append(quirk)
    return out


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
    is read from (spark_facts reads /proc/mounts), for the load strategy. `placement` is where this rank of a
    native multi-node instance runs.
    """
    model_dir = model_dir or (model_ref if model_ref and model_ref.startswith("/") else None)
    _check_bundled_draft(profile, intent, model_dir)
    if not intent.binds_loopback_only and not intent.allow_unauthenticated_bind:
        raise PlanError(
            "intent.host",
            f"binding {intent.host} exposes vLLM's whole app: its --api-key guards only the /v1 routes "
            "(/invocations, /tokenize, /metrics answer without it)",
            (
                "host 127.0.0.1 with the front_door role in front (TLS, a key on every path)",
                "allow_unauthenticated_bind true on a network you trust entirely",
            ),
        )
    version = _version(host)
    remotecode.check_architecture(profile, version)
    remote_code = remotecode.consent(profile, intent, version, "the model")
    if drafter is not None:
        # Both are checked (a drafter's own refusals too); vLLM's one flag covers both.
        drafter_code = remotecode.consent(drafter, intent, version, "the drafter")
        remote_code = remote_code or drafter_code
    r = _resolve(host, profile, intent, drafter)
    backend = cluster_backend(intent, r.version, placement)
    geo = _geometry(profile, intent, r, host.platform)
    budget = _budget(host, profile, intent, r, geo)
    kv_bytes = geo.num_blocks(budget.kv_bytes) * geo.bytes_per_block
    predicted = intent.gpu_memory_utilization is not None
    # While the checkpoint loads, only the weights (and the runtime, and a drafter's weights) are resident.
    loaded = budget.non_kv.weights + budget.non_kv.runtime + budget.non_kv.drafter
    room_while_loading = host.mem_total_gib - budget.reserve - budget.baseline - loaded
    load = loading.choose(host, profile, intent.load, r.version, room_gib=room_while_loading, model_fs=model_fs)
    loading.check_utilization(load, host, budget.utilization)
    total = host.mem_total_gib
    nk = budget.non_kv
    footprint = nk.total + kv_bytes / GIB
    headroom = total - budget.reserve - budget.baseline - footprint
    # A Spark's first start compiles kernels beside the footprint: as many at once as the headroom holds.
    # ...unless the release carries FlashInfer's kernels prebuilt for its version (vllm download-kernels).
    jit_jobs = mem.jit_jobs(headroom) if host.platform is Platform.GB10 and not host.flashinfer_kernels else 0
    settings = rules.Settings(
        host=host,
        profile=profile,
        intent=intent,
        version=r.version,
        model_ref=model_ref or profile.id,
        model_dir=model_dir,
        served_name=intent.served_name or profile.id,
        max_model_len=r.max_model_len,
        max_num_seqs=r.max_num_seqs,
        max_num_batched_tokens=r.max_num_batched_tokens,
        kv_cache_dtype=r.kv_cache_dtype,
        speculative_tokens=r.speculative_tokens,
        capture_sizes=r.capture_sizes,
        enforce_eager=r.enforce_eager,
        prefix_caching=r.prefix_caching,
        kv_cache_memory_bytes=None if predicted else kv_bytes,
        gpu_memory_utilization=budget.utilization,
        yarn=r.yarn,
        long_context=r.long_context,
        load=load,
        jit_jobs=jit_jobs,
        cluster_backend=backend,
        placement=placement,
        remote_code=remote_code,
    )
    entries = rules.apply(settings)
    argv = ["vllm", "serve", settings.model_ref]
    env: dict[str, str] = {}
    for entry in entries:
        if entry.kind == "arg":
            argv.extend((entry.name, *entry.values))
        else:
            env[entry.name] = entry.values[0]
    _guard_env(env, r.version)

    required = (
        int((budget.utilization * total + budget.baseline) * GIB)
        if host.platform is Platform.GB10
        else int((footprint + budget.baseline) * GIB)
    )
    # The cap and the start check cover the larger of serving and loading (eager holds a shard beside the
    # weights, before the KV cache exists).
    at_load = loaded + load.transient_gib
    required = max(required, int((at_load + budget.baseline) * GIB))
    jit = jit_jobs * mem.JIT_PROCESS_GIB
    memory_max = min(
        max(footprint + max(MEMORY_MAX_SLACK_GIB, jit), at_load + MEMORY_MAX_SLACK_GIB) + budget.baseline, total - 2.0
    )
    reasons = [Reason(item=e.item, reason=e.reason, source=e.source) for e in entries]
    if remote_code is None and intent.trust_remote_code:
        unneeded = remotecode.verdict(profile, r.version)
        reasons.append(
            Reason(item="no --trust-remote-code", reason=f"consent unused: {unneeded.why}", source=unneeded.source)
        )
    if load.flag is None:
        # vLLM's default needs no flag; the plan still says why it loads that way.
        reasons.append(Reason(item=f"load {load.strategy.value}", reason=load.reason, source=load.source))
    request_mib, request_why = max_request_mib(r.max_model_len, profile.multimodal, intent.max_request_mib)
    reasons.append(Reason(item=f"request body up to {request_mib} MiB", reason=request_why, source=REQUEST_SOURCE))
    reasons.append(
        Reason(
            item="secret VLLM_API_KEY" if intent.api_key else "no API key",
            reason="the key is read from the environment file, never argv" if intent.api_key else "loopback bind only",
            source="field-anchors.md §2.6",
        )
    )
    return ServePlan(
        nodes=intent.nodes,
        cluster_backend=backend,
        node_rank=placement.rank if placement else 0,
        headless=bool(placement and placement.rank > 0),
        model=settings.model_ref,
        served_name=settings.served_name,
        platform=host.platform,
        vllm_version=str(r.version),
        argv=argv,
        env=env,
        secret_env=["VLLM_API_KEY"] if intent.api_key else [],
        gpu_memory_utilization=budget.utilization,
        kv_cache_memory_bytes=kv_bytes,
        kv_tokens=geo.reported_tokens(kv_bytes, r.max_model_len, r.max_num_batched_tokens, r.version),
        max_concurrency_at_context=round(geo.max_concurrency(kv_bytes, r.max_model_len, r.max_num_batched_tokens), 2),
        max_model_len=r.max_model_len,
        max_num_seqs=r.max_num_seqs,
        max_num_batched_tokens=r.max_num_batched_tokens,
        kv_cache_dtype=r.kv_cache_dtype,
        block_size=geo.block_size,
        cudagraph_capture_sizes=list(r.capture_sizes),
        enforce_eager=r.enforce_eager,
        memory=MemoryBreakdown(
            total=round(total, 2),
            weights=round(nk.weights, 2),
            runtime=round(nk.runtime, 2),
            activation=round(nk.activation, 2),
            cudagraph=round(nk.cudagraph, 2),
            extra=round(nk.extra, 2),
            drafter=round(nk.drafter, 2),
            kv=round(kv_bytes / GIB, 2),
            process_baseline=budget.baseline,
            host_reserve=budget.reserve,
            headroom=round(headroom, 2),
            load_transient=round(load.transient_gib, 2),
            first_start_compile=round(jit, 2),
        ),
        required_available_bytes=required,
        systemd=SystemdLimits(memory_max=f"{math.ceil(memory_max)}G"),
        answer_check=answer_check(
            profile, settings.served_name, argv, intent.answer_check, rules.template_kwargs(profile, intent)
        ),
        warnings=_warnings(host, profile, intent, r, required)
        + [w for w in (_scheduler_warning(r, lambda n: _non_kv(host, profile, intent, r, n).activation, headroom),) if w]
        + _compile_warning(jit_jobs, headroom),
        reasons=reasons,
        mode="predicted" if predicted else "planned",
        load_strategy=load.strategy,
        max_request_mib=request_mib,
    )
