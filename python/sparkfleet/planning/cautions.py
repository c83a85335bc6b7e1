"""What a plan warns about or refuses after it is built: untested releases, slow paths, memory left for the first
start's compiles, environment variables a release does not read. Pure: no files, no network, no clock."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import PlanError
from ..models import (
    GIB,
    CheckpointFormat,
    ClusterBackend,
    HostFacts,
    Intent,
    ModelProfile,
    Platform,
    SpeculativeMethod,
)
from ..sources import SEED_GUIDE, SEED_SM121, SEED_VLLM_BLOG
from ..versions import (
    ENV_VARS,
    FIRST_SPECULATION_SCHEDULE,
    SUPPORTED_MAX,
    EnvState,
    VllmVersion,
    env_state,
    has_speculation_schedule,
    in_supported_range,
)
from . import memory as mem
from .choices import Resolved
from .rules.kernels import NVFP4_FORMATS
from .rules.speculation import SPECULATION_OFF_AT
from .speed import GB10_BANDWIDTH


def compile_warning(jit_jobs: int, headroom: float) -> list[str]:
    if not jit_jobs or headroom >= mem.JIT_PROCESS_GIB:
        return []
    return [
        f"the first start compiles kernels one at a time (MAX_JOBS 1), up to {mem.JIT_PROCESS_GIB:g} GiB each, and "
        f"this plan leaves {headroom:.1f} GiB of headroom: that start may reach the host reserve ({mem.JIT_SOURCE})"
    ]


def scheduler_warning(r: Resolved, activation_at: Callable[[int], float], headroom: float) -> str | None:
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


def guard_env(env: dict[str, str], version: VllmVersion) -> None:
    for name in env:
        if name in ENV_VARS and env_state(version, name) in {EnvState.ABSENT, EnvState.REMOVED}:
            raise PlanError(
                "env",
                f"{name} is not read by vLLM {version}; it would be ignored",
                (ENV_VARS[name].replacement or "dropping it",),
            )


def kernel_cautions(host: HostFacts, profile: ModelProfile, intent: Intent) -> list[str]:
    """A MoE kernel the intent asks for on an NVFP4 MoE on GB10, where the field found only Marlin correct; a recipe's
    FlashInfer attention on an FP8 checkpoint, which another seed advises against."""
    return _moe_kernel_cautions(host, profile, intent) + _fp8_attention_cautions(host, profile, intent)


def _fp8_attention_cautions(host: HostFacts, profile: ModelProfile, intent: Intent) -> list[str]:
    fp8 = profile.checkpoint_format is CheckpointFormat.FP8
    recipe = profile.recipe_attention_backend == "FLASHINFER" and not profile.force_attention_backend
    if host.platform is not Platform.GB10 or not (fp8 and recipe) or intent.attention_backend is not None:
        return []
    return [
        f"{profile.id} runs FLASHINFER attention as its Spark recipe does ({SEED_GUIDE} §7.1.3: ~170K context against "
        f"~60K on the default backend), while {SEED_SM121} advises never FlashInfer for FP8 models on Blackwell "
        "(accuracy bugs, vllm-project/vllm#35138): the known-answer check runs at every start; to A/B it, "
        "intent.attention_backend: TRITON_ATTN"
    ]


def _moe_kernel_cautions(host: HostFacts, profile: ModelProfile, intent: Intent) -> list[str]:
    asked = (intent.moe_backend or "").lower().replace("-", "_")
    nvfp4 = profile.checkpoint_format in NVFP4_FORMATS
    if not asked or asked == "marlin" or host.platform is not Platform.GB10 or not (profile.moe and nvfp4):
        return []
    return [
        f"moe_backend {asked} on {profile.id}'s FP4 MoE on sm_121: the native CUTLASS FP4 MoE path emits garbage there "
        f"(NaN scales; {SEED_GUIDE} §7.2.2, {SEED_SM121}) while flashinfer_cutlass ran faster than Marlin on one build "
        f"({SEED_GUIDE} §7.1.4): check the answers, and that vLLM's log names the MoE backend you asked for"
    ]


def speculation_cautions(profile: ModelProfile, intent: Intent, r: Resolved) -> list[str]:
    """What the field says of this plan's speculative decoding: its cost at high concurrency, MTP's loops, DFlash on a
    quantized target."""
    out: list[str] = []
    if (
        intent.speculative is not SpeculativeMethod.NONE
        and intent.concurrency >= SPECULATION_OFF_AT
        and not has_speculation_schedule(r.version)
    ):
        out.append(
            f"speculation runs at every batch size on vLLM {r.version}: with {SPECULATION_OFF_AT} or more running requests "
            f"it costs total throughput ({SEED_GUIDE} §14.7); vLLM {FIRST_SPECULATION_SCHEDULE}+ turns it off there"
        )
    if intent.speculative is SpeculativeMethod.MTP and profile.speculative.mtp_loops:
        dflash = f"; DFlash ({profile.speculative.dflash_drafter}) avoids them" if profile.speculative.dflash_drafter else ""
        out.append(f"MTP on {profile.id} can now and then fall into output loops{dflash} ({profile.sources['mtp_loops']})")
    if intent.speculative is SpeculativeMethod.DFLASH and profile.checkpoint_format.is_fp4:
        out.append(f"DFlash acceptance collapses on quantized targets under stock vLLM ({SEED_GUIDE} §7.1.1)")
    return out


def plan_warnings(host: HostFacts, profile: ModelProfile, intent: Intent, r: Resolved, required: int) -> list[str]:
    out: list[str] = []
    if not in_supported_range(r.version):
        out.append(
            f"vLLM {r.version} is newer than sparkfleet's rules, which were proved on {SUPPORTED_MAX}: planned with "
            "those rules; the release's own parser checks the argv on the host before the unit switches"
        )
    given = intent.gpu_memory_utilization
    safe = mem.planned_utilization_cap(host.platform is Platform.GB10, intent.nodes, r.max_model_len)
    if given is not None and given > safe:
        out.append(
            f"gpu_memory_utilization {given} is above {safe}, the most the field runs this layout at under load "
            f"(Xid 43 and OOM above it: {SEED_SM121})"
        )
    if profile.chat_template_fix and not intent.chat_template:
        out.append(
            f"{profile.id}'s own chat template {profile.chat_template_fix}: give the instance a fixed one "
            f"(chat_template) ({profile.sources['chat_template_fix']})"
        )
    if r.enforce_eager and host.platform is Platform.GB10:
        out.append(
            "memory-saver runs with --enforce-eager: about 55% lower decode throughput on GB10 "
            f"(59 -> 26 tok/s in {SEED_SM121})"
        )
    # fp8 KV is the tested recipe where the profile recommends it, and where the MTP recipe requires it.
    fp8_in_recipe = profile.kv_fp8_recommended or (
        intent.speculative is SpeculativeMethod.MTP and profile.speculative.mtp_requires_fp8_kv
    )
    if r.kv_cache_dtype == "fp8" and profile.kv_fp8_avoided:
        out.append(
            f"fp8 KV on {profile.id}: its tested recipe keeps the KV cache unquantized, and fp8 KV on a model that "
            f"dislikes it gives repetition loops; check output quality ({profile.sources['kv_fp8_avoided']})"
        )
    elif r.kv_cache_dtype == "fp8" and not fp8_in_recipe:
        out.append(f"fp8 KV on {profile.id} is not from its tested recipe: check output quality ({SEED_VLLM_BLOG})")
    out += speculation_cautions(profile, intent, r) + kernel_cautions(host, profile, intent)
    if intent.nodes > 1 and host.platform is Platform.CPU and intent.cluster_backend is ClusterBackend.RAY:
        out.append(
            "vLLM's CPU platform has no Ray device (vllm/v1/executor/ray_utils.py: 'current platform cpu does not "
            "support ray'): this multi-node plan renders but vLLM will not start it"
        )
    if r.yarn:
        out.append("static YaRN stretches the model past its training and can dent short-prompt quality")
    if (r.yarn or r.long_context) and host.platform is Platform.GB10:
        out.append(
            f"a prompt near {r.max_model_len} tokens takes minutes to prefill on GB10 ({GB10_BANDWIDTH / 1e9:g} GB/s): "
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
