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


def test_coder_next_names_both_seeds_on_its_flashinfer_attention_and_one_intent_goes_back() -> None:
    """Issue 64: seed 002's Coder-Next recipe runs FlashInfer attention (and 32,768 batched tokens); seed 004 says never
    FlashInfer for FP8 models on Blackwell (vllm#35138). The plan keeps the recipe, names both, cautions, and
    intent.attention_backend switches."""
    recipe = plan(spark("0.33.0"), get_profile(CODER), Intent(max_context=65536, concurrency=4))
    assert recipe.argv[recipe.argv.index("--attention-backend") + 1] == "FLASHINFER"
    assert recipe.argv[recipe.argv.index("--max-num-batched-tokens") + 1] == "32768"
    flag = next(f for f in recipe.flags if f.name == "--attention-backend")
    assert "vllm-project/vllm#35138" in flag.reason and "seed 004" in flag.source
    assert any("intent.attention_backend: TRITON_ATTN" in c for c in recipe.warnings)
    triton = plan(
        spark("0.33.0"), get_profile(CODER), Intent(max_context=65536, concurrency=4, attention_backend="triton_attn")
    )
    assert triton.argv.count("--attention-backend") == 1
    assert triton.argv[triton.argv.index("--attention-backend") + 1] == "TRITON_ATTN"
    assert not any("attention_backend" in c for c in triton.warnings)


def test_the_attention_lever_needs_a_release_with_the_flag() -> None:
    from sparkfleet.errors import PlanError
    from sparkfleet.planning.levers import check_attention_backend

    with pytest.raises(PlanError, match=r"intent\.attention_backend.*no --attention-backend \(from 0\.13\.0\)"):
        check_attention_backend(Intent(attention_backend="TRITON_ATTN"), VllmVersion.parse("0.12.0"))
    check_attention_backend(Intent(attention_backend="TRITON_ATTN"), VllmVersion.parse("0.13.0"))


def test_the_fp4_moe_pin_cites_the_evidence_of_the_release_it_was_read_from() -> None:
    """Issue 64: the Marlin pin, from seeds written on older releases, cites what 0.33's own selection does on sm_121."""
    for version, cited in (("0.33.0", True), ("0.32.0", False)):
        result = plan(spark(version), get_profile(NANO), Intent(trust_remote_code=True))
        flag = next(f for f in result.flags if f.name == "--moe-backend")
        assert flag.values == ["marlin"]
        assert ("vllm-project/vllm#54666" in flag.source) is cited
        assert ("walks past the FlashInfer and CUTLASS backends to Marlin" in flag.reason) is cited
