"""What vLLM's log says it loaded, and the known signatures of a GB10 going wrong (or harmlessly noisy).

One table each: SELECTIONS reads the backends vLLM picked at start (compared with what the plan asked
for), SIGNS names the lines that mean trouble or nothing. Every entry says which vLLM versions its line
was seen in and where the line comes from; tests/unit/test_logsigns.py holds a real line for each. The
doctor reads a start's journal through `journal_grep()` (only the lines these tables need) and judges
them here; `sparkfleet explain --journal FILE` does the same for a log pasted from anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from .sources import SEED_GUIDE, SEED_MISTRAL, SEED_NANO

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
    flag: str | None  # the vLLM flag that asks for it, compared with the plan's flags
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
        "attention backend",
        "attention backend out of potential backends",
        re.compile(r"Using (?P<value>\w+) attention backend out of potential backends"),
        "--attention-backend",
        "0.19-0.32",
        "vLLM platforms/cuda.py (get_attn_backend_cls)",
    ),
    Selection(
        "NVFP4 GEMM",
        "for NVFP4 GEMM",
        re.compile(r"Using (?:NvFp4LinearBackend\.)?(?P<value>\w+?)(?:NvFp4LinearKernel)? for NVFP4 GEMM"),
        None,
        "0.19 (NvFp4LinearBackend.X), 0.32 (kernel class)",
        f"{SEED_GUIDE} §7.2.2; vLLM model_executor/kernels/linear/__init__.py",
    ),
    Selection(
        "MoE backend",
        "MoE backend",
        re.compile(r"Using '(?P<value>[\w-]+)' (?:NvFp4|Fp8|MxFp8|MxFp4) MoE backend"),
        "--moe-backend",
        "0.19-0.33",
        f"{SEED_GUIDE} §7.2.2; vLLM fused_moe/oracle/nvfp4.py",
    ),
    Selection(
        "compile cache",
        "from the cache, took",
        re.compile(r"Directly load the compiled graph\(s\) for compile range (?P<value>.+?) from the cache"),
        None,
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
        "the release's CUDA needs a newer driver than the host's 580.x: update the driver (>= 590.44) or use a "
        "release built for the host's CUDA",
        "NGC 25.12-26.04",
        f"{SEED_GUIDE} §7.3.1",
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
)


@dataclass(frozen=True)
class Seen:
    what: str
    value: str
    line: str


def journal_grep() -> str:
    """One journalctl --grep pattern (PCRE2) for every line the tables read."""
    anchors = [selection.anchor for selection in SELECTIONS] + [sign.anchor for sign in SIGNS]
    return "|".join(re.escape(anchor) for anchor in anchors)


def loaded(journal: str) -> list[Seen]:
    """What vLLM said it selected, one per kind, the last start's line winning."""
    found: dict[str, Seen] = {}
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


def _asked(flags: Mapping[str, list[str]], flag: str) -> str | None:
    values = flags.get(flag)
    return values[0] if values else None


def _same(asked: str, value: str) -> bool:
    def norm(text: str) -> str:
        return re.sub(r"[^a-z0-9]", "", text.lower())

    return norm(asked) == norm(value)


# vLLM fell back to Marlin for an NVFP4 MoE on its own: it works on sm_121, at a cost worth knowing.
MARLIN_FALLBACK = (
    "vLLM chose Marlin for the NVFP4 MoE on its own: the published aarch64 wheels carry no sm_121 code for "
    "vLLM's own MoE kernels (vllm-project/vllm#50925), so FP4 weights are dequantized to BF16 on the fly, with "
    "no FP4 tensor cores: long prompts prefill slower (time to first token; seed 002, measured GB10 performance), "
    "decode is unharmed (seed 003: 16% faster than FlashInfer's sm_121 fallback). Its repacked weights keep "
    "their size (4-bit, fp8 scales: vLLM marlin_utils_fp4.py). Pin --moe-backend marlin to make it the plan's "
    "choice, or use a release with sm_121 MoE kernels"
)


def _marlin_fallback(seen: Seen, asked: str | None) -> bool:
    return seen.what == "MoE backend" and "NvFp4 MoE" in seen.line and _same(seen.value, "marlin") and asked is None


def judge(journal: str, flags: Mapping[str, list[str]]) -> list[tuple[Severity | None, str]]:
    """(severity, line) for the doctor: each selection against the plan's flag, then each signature.

    A selection that matches what the plan asked for, or that the plan left to vLLM, has no severity.
    """
    out: list[tuple[Severity | None, str]] = []
    for seen in loaded(journal):
        selection = next(s for s in SELECTIONS if s.what == seen.what)
        asked = _asked(flags, selection.flag) if selection.flag else None
        if _marlin_fallback(seen, asked):
            out.append((Severity.YELLOW, f"{seen.what}: {seen.value}: {MARLIN_FALLBACK}"))
        elif asked is None:
            out.append((None, f"{seen.what}: {seen.value} (vLLM's choice)"))
        elif _same(asked, seen.value):
            out.append((None, f"{seen.what}: {seen.value} (as the plan asked, {selection.flag} {asked})"))
        else:
            severity = Severity.RED if selection.flag == "--moe-backend" else Severity.YELLOW
            out.append(
                (
                    severity,
                    f"{seen.what}: {seen.value}, but the plan asked {selection.flag} {asked}: the flag did not apply "
                    f"({selection.source})",
                )
            )
    for sign, seen in signs(journal):
        shown = f" {seen.value}" if seen.value else ""
        out.append((sign.severity, f"{sign.name}{shown}: {sign.meaning} ({sign.source})"))
    return out
