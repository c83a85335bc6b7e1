"""Rules for kernels, CUDA graphs and caching."""

from __future__ import annotations

from ...models import CheckpointFormat, ServeProfile, SpeculativeMethod
from ...sources import SEED_GUIDE, SEED_MISTRAL, SEED_NANO, SEED_SM121, vllm
from ...versions import EnvState, env_state, has_flag
from .base import Entry, Settings, arg, env, is_gb10


def kernels(s: Settings) -> list[Entry]:
    if not is_gb10(s):
        return []
    out: list[Entry] = []
    dflash = s.intent.speculative is SpeculativeMethod.DFLASH
    if s.profile.force_attention_backend or dflash:
        backend = "TRITON_MLA" if s.profile.mla else "TRITON_ATTN"
        out.append(
            arg(
                "--attention-backend",
                backend,
                reason="FlashAttention / FlashInfer MLA kernels are built for SM100 and crash or "
                "mis-compute on sm_121; Triton compiles for it",
                source=f"{SEED_MISTRAL} §4; {SEED_SM121}; {SEED_GUIDE} §14.7",
            )
        )
    if s.profile.moe and s.profile.checkpoint_format.is_fp4:
        out.append(
            arg(
                "--moe-backend",
                "marlin",
                reason="CUTLASS FP4 MoE emits silent garbage on sm_121; Marlin W4A16 is correct",
                source=f"{SEED_SM121}; {SEED_GUIDE} §6; {vllm('§3.1')}",
            )
        )
        out.append(
            env(
                "VLLM_MARLIN_USE_ATOMIC_ADD",
                "1",
                reason="Marlin reduce race on sm_121 gives wrong outputs without it",
                source=f"{SEED_SM121}; {vllm('§3.2')} (present 0.10-0.33)",
            )
        )
        if env_state(s.version, "VLLM_USE_FLASHINFER_MOE_FP4") is EnvState.HONOURED:
            out.append(
                env(
                    "VLLM_USE_FLASHINFER_MOE_FP4",
                    "0",
                    reason="keeps MoE routing off the FlashInfer CUTLASS FP4 path on releases that still read it",
                    source=f"{SEED_SM121}; {vllm('§3.2')} (deprecated 0.22, removed 0.24)",
                )
            )
    out += nvfp4_dense_gemm(s)
    if has_flag(s.version, "--no-enable-flashinfer-autotune"):
        out.append(
            arg(
                "--no-enable-flashinfer-autotune",
                reason="the autotuner profiles SM100 tactics that all fail on sm_121 (+1300 s start)",
                source=f"{SEED_MISTRAL} §4; {vllm('§3.1')} (flag since 0.16)",
            )
        )
    return out


NVFP4_FORMATS = {CheckpointFormat.MODELOPT_NVFP4, CheckpointFormat.CT_NVFP4}
# Where the seeds disagree on the dense NVFP4 GEMM: seed 003 (vLLM 0.18.1rc1) measured Marlin 16 % faster and about
# 7 GB smaller because FlashInfer's CUTLASS FP4 path failed on sm_121, and v0.18 builds crash in it (seed 002 §7.2);
# seed 002's recipes on 0.19+ CUDA 13 builds run FLASHINFER_CUTLASS healthy, and Marlin is slower for the
# compute-bound prefill (seed 002 §1). So Marlin is pinned where the CUTLASS path fails (before 0.19) and where one
# user's decode speed and footprint are the point (memory-saver); elsewhere vLLM's choice stands.
NVFP4_CUTLASS_HEALTHY = "0.19.0"
NVFP4_DECISION_SOURCE = (
    f"{SEED_NANO} (Marlin +16 %, -7 GB on 0.18.1rc1); {SEED_GUIDE} §1, §7.2 (FLASHINFER_CUTLASS on 0.19+)"
)


def nvfp4_dense_gemm(s: Settings) -> list[Entry]:
    """The dense NVFP4 GEMM backend on GB10 (its MoE layers are pinned to Marlin above)."""
    if s.profile.checkpoint_format not in NVFP4_FORMATS:
        return []
    broken = not s.version.at_least(NVFP4_CUTLASS_HEALTHY)
    if not broken and s.intent.profile is not ServeProfile.MEMORY_SAVER:
        return []
    why = (
        "the CUTLASS FP4 GEMM of this release fails on sm_121"
        if broken
        else "memory-saver: one user's decode is bandwidth-bound, where Marlin was faster and smaller"
    )
    if has_flag(s.version, "--linear-backend"):
        return [arg("--linear-backend", "marlin", reason=f"dense NVFP4 GEMM on Marlin: {why}", source=NVFP4_DECISION_SOURCE)]
    if env_state(s.version, "VLLM_NVFP4_GEMM_BACKEND") in {EnvState.HONOURED, EnvState.DEPRECATED}:
        return [
            env(
                "VLLM_NVFP4_GEMM_BACKEND",
                "marlin",
                reason=f"dense NVFP4 GEMM on Marlin: {why}",
                source=NVFP4_DECISION_SOURCE,
            )
        ]
    return []


def graphs(s: Settings) -> list[Entry]:
    if s.enforce_eager:
        return [
            arg(
                "--enforce-eager",
                reason="memory-saver profile: no torch.compile / CUDA-graph pool",
                source=f"{SEED_NANO} (saves ~13 GB); cost per {SEED_SM121}",
            )
        ]
    if not s.capture_sizes:
        return []
    sizes = [str(n) for n in s.capture_sizes]
    return [
        arg(
            "--cudagraph-capture-sizes",
            *sizes,
            reason="capture only batch sizes this concurrency can reach",
            source=f"{SEED_MISTRAL} §4 (9 sizes instead of ~51); {vllm('§4.1')}",
        ),
        arg(
            "--max-cudagraph-capture-size",
            s.capture_sizes[-1],
            reason="consistent with the largest captured size",
            source=vllm("§4.1"),
        ),
    ]


def caching(s: Settings) -> list[Entry]:
    if s.prefix_caching:
        mtp = s.intent.speculative is SpeculativeMethod.MTP
        return [
            arg(
                "--enable-prefix-caching",
                reason="agents resend a growing prompt; some hybrid archs default it off"
                + (
                    "; kept with MTP as the Qwen3.6 recipe runs them, where vLLM's recipe drops it only for the "
                    "lowest single-stream latency, at the cost of re-prefilling every agent turn"
                    if mtp
                    else ""
                ),
                source=f"{SEED_GUIDE} §7.1.3" + (", §7.1.1, §14.3" if mtp else ""),
            )
        ]
    return [
        arg(
            "--no-enable-prefix-caching",
            reason="prefix caching is disabled with DFlash for accuracy",
            source="field-anchors.md (eugr CHANGELOG 2026-05-06)",
        )
    ]
