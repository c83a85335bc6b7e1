"""What vLLM's log says it loaded, and the known signatures of a GB10 going wrong (or harmlessly noisy).

One table each: SELECTIONS reads what vLLM says it loaded beside its kernels (the kernel backends it
selected are sparkfleet.backends', judged against the plan there), SIGNS names the lines that mean trouble
or nothing. Every entry says which vLLM versions its line was seen in and where the line comes from;
tests/unit/test_logsigns.py holds a real line for each. The doctor reads a start's journal through
`journal_grep()` (only the lines these tables and sparkfleet.backends need) and judges them here;
`sparkfleet explain --journal FILE` does the same for a log pasted from anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from . import backendlog
from .sources import SEED_GUIDE, SEED_MISTRAL, SEED_NANO, SEED_SM121

XID_CATALOG = "NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors)"


class Severity(str, Enum):
    RED = "red"
    YELLOW = "yellow"
    HARMLESS = "harmless"


@dataclass(frozen=True)
class Selection:
    """A line in which vLLM names what it selected; the group 'value' is the choice."""

    what: str
    anchor: str  # a literal the journal is grepped for
    pattern: re.Pattern[str]
    seen_in: str
    source: str


@dataclass(frozen=True)
class Sign:
    name: str
    anchor: str
    pattern: re.Pattern[str]
    severity: Severity
    meaning: str  # the likely cause and the fix, or why it is harmless
    seen_in: str
    source: str


SELECTIONS: tuple[Selection, ...] = (
    Selection(
        "compile cache",
        "from the cache, took",
        re.compile(r"Directly load the compiled graph\(s\) for compile range (?P<value>.+?) from the cache"),
        "0.32",
        "vLLM compilation/backends.py",
    ),
)

SIGNS: tuple[Sign, ...] = (
    Sign(
        "illegal instruction",
        "llegal instruction",
        re.compile(r"cudaErrorIllegalInstruction|an illegal instruction was encountered"),
        Severity.RED,
        "a kernel built for sm_100 ran on sm_121 (FlashAttention or FlashInfer MLA): force the attention backend "
        "the plan names (TRITON_ATTN for MLA models)",
        "0.17-0.32",
        f"{SEED_MISTRAL} §4",
    ),
    Sign(
        "FP4 GEMM on sm_120/121",
        "FP4 gemm Runner",
        re.compile(r"\[FP4 gemm Runner\] Failed to run cutlass FP4 gemm on sm12[01]"),
        Severity.RED,
        "the CUTLASS FP4 GEMM has no sm_121 kernel: use a cu130 release and --moe-backend marlin",
        "0.18-0.19",
        f"{SEED_GUIDE} §6",
    ),
    Sign(
        "unknown environment variable",
        "Unknown vLLM environment variable",
        re.compile(r"Unknown vLLM environment variable detected: (?P<value>\S+)"),
        Severity.YELLOW,
        "this release ignores it (the FlashInfer MoE variables went in 0.23 for --moe-backend): remove it",
        "0.23-0.32",
        f"{SEED_GUIDE} §6; vLLM platforms/interface.py",
    ),
    Sign(
        "out of memory",
        "out of memory",
        re.compile(r"CUDA out of memory|torch\.OutOfMemoryError|CUDA error: out of memory"),
        Severity.RED,
        "the footprint passed what the plan gave it (often during CUDA graph capture): plan again with the host's "
        "real MemAvailable, fewer capture sizes or enforce_eager",
        "0.17-0.32",
        f"{SEED_NANO} (cause 4: graphs and JIT compilers)",
    ),
    Sign(
        "forward compatibility unavailable",
        "Forward Compatibility",
        re.compile(r"CUDA Forward Compatibility mode\W+\w*\s*UNAVAILABLE|compatibility mode is UNAVAILABLE"),
        Severity.RED,
        "the release's CUDA needs a newer driver than the host's 580.x: use a release built for the host's CUDA 13.0 "
        "(the cu130 wheels sparkfleet locks); not a 590.x driver, which host_prep refuses (it deadlocks CUDA graphs "
        "on GB10)",
        "NGC 25.12-26.04",
        f"{SEED_GUIDE} §7.3.1; {SEED_SM121} (590.x)",
    ),
    Sign(
        "cuDNN GEMM fault under CUDA graphs",
        "cudnn_generated_fort_native",
        re.compile(r"cudnn_generated_fort_native_\w*matMul\w*"),
        Severity.RED,
        "FlashInfer's cuDNN GEMM moved its workspace while CUDA graphs were captured and a graph replayed against "
        "freed memory (FlashInfer before 0.7.0): a release with FlashInfer 0.7.0 or later (vLLM 0.31+), or "
        "VLLM_DISABLED_KERNELS=FlashInferFP8ScaledMMLinearKernel, or eager",
        "0.26-0.30 (FlashInfer 0.6.x)",
        "vllm-project/vllm#52540, #55571; flashinfer-ai/flashinfer#4666, PR #4553 (the faulting kernel's name)",
    ),
    Sign(
        "NCCL receiver deadlock on RoCE",
        "retrieved an 'unused' request",
        re.compile(r"ncclIbCompletionEventProcess: Receiver got a completion for a CTS but retrieved an 'unused' request"),
        Severity.RED,
        "NCCL's IB receiver discarded a completion and the collective never finishes while HTTP stays up "
        "(seen on 4 Sparks after hours at full concurrency, NCCL 2.28.9 to 2.30.7; open upstream, no release fixes "
        "it): the rank watchdog restarts the instance; keep the NCCL the cluster runs on every member and follow "
        "NVIDIA/nccl#2334 for the fix, or opt into a build carrying its candidate fix (NVIDIA/nccl PR 2393) with "
        "ray_cluster_nccl: custom, its sha256 checked on every member",
        "NCCL 2.28.9-2.30.7",
        "NVIDIA/nccl#2334 (net_ib/p2p.cc, the CTS branch of the resiliency path)",
    ),
    Sign(
        "GPU Xid",
        "NVRM: Xid",
        re.compile(r"NVRM: Xid \([^)]*\): (?P<value>13|31|43|79)\b"),
        Severity.RED,
        "13: a kernel faulted (often the wrong kernel for sm_121); 31: a GPU memory fault; 43: the GPU stopped "
        "a context; 79: the GPU fell off the bus (power-cycle the Spark)",
        "kernel log, any release",
        XID_CATALOG,
    ),
    Sign(
        "PyTorch capability warning",
        "cuda capability 12.1",
        re.compile(r"Found GPU\d+ NVIDIA GB10 which is of cuda capability 12\.1"),
        Severity.HARMLESS,
        "PyTorch's list of tested capabilities stops at 12.0; sm_121 runs the sm_120 code: nothing to do",
        "torch 2.9-2.11",
        f"{SEED_MISTRAL} §8",
    ),
    Sign(
        "FlashInfer autotune skipped",
        "Skipping FlashInfer autotune",
        re.compile(r"Skipping FlashInfer autotune because it is disabled"),
        Severity.HARMLESS,
        "the plan turned the autotuner off on purpose: its SM120 tactics all fail on sm_121 (22 minutes lost)",
        "0.19-0.32",
        f"{SEED_MISTRAL} §4",
    ),
    Sign(
        "not a safetensors repo",
        "is not a safetensors repo",
        re.compile(r"'(?P<value>[^']+)' is not a safetensors repo"),
        Severity.HARMLESS,
        "the repository keeps its weights in another layout (Mistral's consolidated.safetensors): vLLM's lookup of "
        "the safetensors metadata (transformers_utils/config.py try_get_safetensors_metadata) falls back and loads "
        "them: nothing to do",
        "0.17-0.33 (huggingface_hub's NotASafetensorsRepoError)",
        f"{SEED_MISTRAL} §8",
    ),
    Sign(
        "bundled MTP draft run as a generic draft model",
        "SpeculativeConfig(method='draft_model'",
        re.compile(r"SpeculativeConfig\(method='draft_model', model='(?P<value>[^']*/assistant)'"),
        Severity.YELLOW,
        "this vLLM build has no Gemma-4 MTP support for a bundled assistant/ draft and decodes it as a generic draft "
        "model (slower, and not what the checkpoint was trained for): upgrade vLLM rather than forcing it",
        "0.32-0.33 (config/speculative.py SpeculativeConfig.__repr__)",
        f"{SEED_GUIDE} §14.7",
    ),
)


@dataclass(frozen=True)
class Seen:
    what: str
    value: str
    line: str


def journal_grep() -> str:
    """One journalctl --grep pattern (PCRE2) for every line the tables and sparkfleet.backends read."""
    anchors = [selection.anchor for selection in SELECTIONS] + [sign.anchor for sign in SIGNS]
    anchors += backendlog.journal_anchors()
    return "|".join(re.escape(anchor) for anchor in dict.fromkeys(anchors))


# The kernel backends under the names a benchmark's record has kept them by.
_KERNEL_KEYS = {backendlog.Layer.ATTENTION: "attention backend", backendlog.Layer.MOE: "MoE backend"}


def loaded(journal: str) -> list[Seen]:
    """What vLLM said it selected, one per kind, the last start's line winning: its kernel backends (read by
    sparkfleet.backends, vLLM's names) and the other selections of SELECTIONS."""
    found: dict[str, Seen] = {}
    selected = backendlog.parse(journal)
    for layer in backendlog.Layer:
        for seen in selected.of(layer):
            if not seen.inferred:
                what = _KERNEL_KEYS.get(layer) or f"{seen.quant} GEMM"
                found[what] = Seen(what, seen.name, seen.line)
    for line in journal.splitlines():
        for selection in SELECTIONS:
            match = selection.pattern.search(line)
            if match:
                found[selection.what] = Seen(selection.what, match.group("value"), line.strip())
    return list(found.values())


def signs(journal: str) -> list[tuple[Sign, Seen]]:
    """Every known signature in the log, once per signature and value."""
    out: dict[tuple[str, str], tuple[Sign, Seen]] = {}
    for line in journal.splitlines():
        for sign in SIGNS:
            match = sign.pattern.search(line)
            if match:
                value = match.groupdict().get("value") or ""
                out.setdefault((sign.name, value), (sign, Seen(sign.name, value, line.strip())))
    return list(out.values())


def judge(journal: str) -> list[tuple[Severity | None, str]]:
    """(severity, line) for the doctor: what SELECTIONS read (no severity), then each signature. The kernel
    backends are judged against the plan by sparkfleet.backends."""
    out: list[tuple[Severity | None, str]] = []
    for line in journal.splitlines():
        for selection in SELECTIONS:
            match = selection.pattern.search(line)
            if match:
                out.append((None, f"{selection.what}: {match.group('value')}"))
    for sign, seen in signs(journal):
        shown = f" {seen.value}" if seen.value else ""
        out.append((sign.severity, f"{sign.name}{shown}: {sign.meaning} ({sign.source})"))
    return out
