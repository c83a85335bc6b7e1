"""Known kernel defects by release (sparkfleet.planning.kernelfacts, issue 64): the plan disables a kernel only where
the locked release would select it, and each row's releases agree with what the wheels say."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import spark

from sparkfleet.catalog import get_profile
from sparkfleet.models import Intent
from sparkfleet.planning.kernelfacts import DEFECTS, FLASHINFER_OF_VLLM
from sparkfleet.planning.planner import plan
from sparkfleet.versions import VllmVersion

CODER = "Qwen/Qwen3-Coder-Next-FP8"
NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
LOCKS = Path(__file__).resolve().parents[1] / "fixtures" / "locks"


@pytest.mark.parametrize(("version", "disabled"), [("0.29.0", True), ("0.30.0", True), ("0.31.0", False), ("0.33.0", False)])
def test_an_fp8_model_with_graphs_keeps_off_flashinfers_cudnn_gemm_only_before_flashinfer_0_7(
    version: str, disabled: bool
) -> None:
    """vllm#52540: FlashInfer before 0.7.0 moves its cuDNN GEMM workspace while graphs are captured."""
    result = plan(spark(version), get_profile(CODER), Intent(max_context=32768, concurrency=2))
    assert (result.env.get("VLLM_DISABLED_KERNELS") == "FlashInferFP8ScaledMMLinearKernel") is disabled
    if disabled:
        reason = next(e for e in result.environment if e.name == "VLLM_DISABLED_KERNELS")
        assert "vLLM selects CutlassFP8ScaledMMLinearKernel instead" in reason.reason
        assert "vllm-project/vllm#52540" in reason.source and "flashinfer-ai/flashinfer#4666" in reason.source


def test_eager_plans_and_other_formats_keep_every_kernel() -> None:
    eager = plan(spark("0.30.0"), get_profile(CODER), Intent(max_context=32768, concurrency=2, profile="memory-saver"))
    assert "VLLM_DISABLED_KERNELS" not in eager.env
    # No stock release ranks the weight-only CuteDSL NVFP4 kernel above the W4A4 ones (read from 0.29.0 and 0.30.0).
    for version in ("0.29.0", "0.30.0", "0.33.0"):
        assert "VLLM_DISABLED_KERNELS" not in plan(spark(version), get_profile(NANO), Intent(trust_remote_code=True)).env


def test_the_pinned_flashinfer_agrees_with_the_locks_and_each_row_is_sourced() -> None:
    for version in ("0.32.0", "0.33.0"):
        lock = (LOCKS / f"gb10-vllm-{version}.lock").read_text()
        assert f"flashinfer-python=={FLASHINFER_OF_VLLM[version]} " in lock
    fixed = next(d for d in DEFECTS if d.kernel == "FlashInferFP8ScaledMMLinearKernel").fixed_vllm
    assert fixed is not None
    # The first release whose pinned FlashInfer is 0.7 or later is the row's fix.
    first_fixed = min(
        (VllmVersion.parse(v) for v, fi in FLASHINFER_OF_VLLM.items() if VllmVersion.parse(fi) >= VllmVersion(0, 7, 0)),
    )
    assert str(first_fixed) == fixed
    assert all(d.evidence and d.fallback and d.effect for d in DEFECTS)
