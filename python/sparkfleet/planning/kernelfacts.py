"""Known kernel defects on sm_121, by vLLM release and the FlashInfer it pins: each row with its evidence. Pure.

A row names the vLLM kernel class that `VLLM_DISABLED_KERNELS` takes out of vLLM's selection (every release from
0.29 reads the variable in model_executor/kernels/linear/__init__.py and skips a kernel whose class name it lists),
the checkpoints and modes that reach it, and the releases it touches. The plan disables a kernel only where the
locked release would select it; the doctor's log signatures (sparkfleet.logsigns) name the crash and its fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import CheckpointFormat
from ..versions import VllmVersion

# The FlashInfer each stock vLLM release pins (flashinfer-python), resolved by uv from the package index's metadata
# for aarch64 / Python 3.12 on 2026-12-02 (0.32.0 and 0.33.0 also in tests/fixtures/locks).
FLASHINFER_OF_VLLM = {
    "0.29.0": "0.6.18",
    "0.30.0": "0.6.18.post1",
    "0.31.0": "0.7.0.post1",
    "0.32.0": "0.7.0.post1",
    "0.33.0": "0.7.2.post1",
}
FLASHINFER_PINS_SOURCE = "flashinfer-python pinned by each vLLM release (uv pip compile against the index, 2026-12-02)"


@dataclass(frozen=True)
class KernelDefect:
    name: str
    kernel: str  # the vLLM class VLLM_DISABLED_KERNELS names
    formats: frozenset[CheckpointFormat]
    graphs_only: bool  # only where CUDA graphs are captured (not --enforce-eager)
    first_vllm: str  # the first release that selects the kernel (reports or the wheel read)
    fixed_vllm: str | None  # the first release without the defect (its FlashInfer fixed, or the order changed)
    effect: str
    fallback: str  # what vLLM selects once the kernel is disabled
    evidence: str


DEFECTS: tuple[KernelDefect, ...] = (
    KernelDefect(
        name="FlashInfer's cuDNN FP8 GEMM moves its workspace during CUDA-graph capture",
        kernel="FlashInferFP8ScaledMMLinearKernel",
        formats=frozenset({CheckpointFormat.FP8}),
        graphs_only=True,
        first_vllm="0.26.0",
        fixed_vllm="0.31.0",
        effect="the shared cuDNN workspace is grown with resize_() while graphs are captured, so earlier graphs replay "
        "against freed memory: misaligned address, illegal memory access, Xid 31, or silent corruption",
        fallback="CutlassFP8ScaledMMLinearKernel",
        evidence="vllm-project/vllm#52540 (GB10 confirmed, vLLM 0.26.0) and #55571 (the workaround: a clean "
        "981-question run with graphs on); flashinfer-ai/flashinfer#4666 (fixed: read from the wheels, 0.6.18.post1 "
        "still resize_()s its 32 MiB workspace, 0.7.0 keeps a 40 MiB one in place); vLLM 0.29.0 and 0.30.0 pin "
        "FlashInfer 0.6.18 / 0.6.18.post1, 0.31.0 pins 0.7.0.post1",
    ),
    # No stock release selects it over the W4A4 kernels: 0.29.0 has no such class and 0.30.0 ships it below them
    # ("a fallback on a W4A4-capable checkpoint, not a preference"), both read from the wheels. Nightlies built between
    # vllm-project/vllm@882ca8d696 and @13cf9e05c did: a build that declares it names this row.
    KernelDefect(
        name="the weight-only CuteDSL NVFP4 GEMM chosen over the W4A4 CUTLASS one on sm_12x",
        kernel="FlashInferCuteDslNvFp4W4A16LinearKernel",
        formats=frozenset({CheckpointFormat.MODELOPT_NVFP4, CheckpointFormat.CT_NVFP4}),
        graphs_only=False,
        first_vllm="0.30.0",
        fixed_vllm="0.30.0",
        effect="a W4A4 checkpoint's dense layers ran weight-only: time to first token 1,455 against 926 ms on a "
        "dense 27B (vllm#55170's own figures, RTX PRO 6000)",
        fallback="FlashInferCutlassNvFp4LinearKernel",
        evidence="vllm-project/vllm#55397 and #55170 (the W4A4 kernels first on SM120/121); the 0.29.0 and 0.30.0 "
        "wheels read (kernels/linear/__init__.py _POSSIBLE_NVFP4_KERNELS)",
    ),
)


def flashinfer_of(version: VllmVersion) -> str | None:
    """The FlashInfer a stock release pins, where known."""
    return FLASHINFER_OF_VLLM.get(f"{version.major}.{version.minor}.{version.patch}")


def defects_for(version: VllmVersion, fmt: CheckpointFormat, captures_graphs: bool) -> list[KernelDefect]:
    """The rows the locked release would hit with this checkpoint and mode."""
    return [
        d
        for d in DEFECTS
        if fmt in d.formats
        and (captures_graphs or not d.graphs_only)
        and version.at_least(d.first_vllm)
        and not (d.fixed_vllm and version.at_least(d.fixed_vllm))
    ]
