from __future__ import annotations

import json
from pathlib import Path

import huggingface_hub.constants
import pytest

from sparkfleet.cli import main


def test_plan_json_has_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "nvidia/Qwen3.6-35B-A3B-NVFP4", "--json", "--memory-gib", "121.69", "--trust-remote-code"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in (
        "argv",
        "env",
        "gpu_memory_utilization",
        "kv_cache_memory_bytes",
        "kv_tokens",
        "memory",
        "warnings",
        "reasons",
    ):
        assert key in data
    assert {"weights", "kv"} <= data["memory"].keys()


def test_infeasible_intent_exits_non_zero_with_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "openai/gpt-oss-120b", "--memory-gib", "64"]) == 2
    assert "GiB" in capsys.readouterr().err


def test_predict_mode_reports_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "plan",
            "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4",
            "--memory-gib",
            "121.6",
            "--gpu-memory-utilization",
            "0.15",
            "--vllm-version",
            "0.18.1",
            "--trust-remote-code",
        ]
    )
    assert code == 2
    assert "refuse to start" in capsys.readouterr().err


def test_overrides_plan_a_model_known_only_by_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "plan",
                "openai/gpt-oss-120b",
                "--weights-gib",
                "10",
                "--kv-bytes-per-token",
                "4096",
                "--memory-gib",
                "121.69",
                "--json",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["memory"]["weights"] == 10.0


def test_explain_and_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["explain", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", "--memory-gib", "121.69", "--trust-remote-code"])
        == 0
    )
    out = capsys.readouterr().out
    assert "--moe-backend marlin" in out and "source:" in out
    assert main(["catalog"]) == 0
    assert "poolside/Laguna-XS.2" in capsys.readouterr().out


def test_bad_input_names_the_variable(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # An id that is no catalog model is looked for on the hub: offline, so that no test waits on the network.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert main(["plan", "no/such-model"]) == 2
    assert "model" in capsys.readouterr().err
    assert main(["plan", "openai/gpt-oss-120b", "--host", "0.0.0.0", "--memory-gib", "121.69"]) == 2
    assert "intent.host" in capsys.readouterr().err


def test_plan_for_a_fork_with_capabilities_and_long_context(capsys: pytest.CaptureFixture[str]) -> None:
    aeon = ["plan", "AEON-7/DFlash-Qwen3.5-27B-Uncensored-NVFP4", "--memory-gib", "121.69", "--concurrency", "1"]
    aeon.append("--trust-remote-code")
    assert main([*aeon, "--vllm-version", "0.19.0", "--speculative", "dflash"]) == 2
    assert "a fork release that declares dflash" in capsys.readouterr().err
    assert main([*aeon, "--vllm-version", "0.19.0", "--speculative", "dflash", "--capability", "dflash", "--json"]) == 0
    assert '"method":"dflash"' in " ".join(json.loads(capsys.readouterr().out)["argv"])
    nano = ["plan", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", "--memory-gib", "121.69", "--concurrency", "1"]
    nano.append("--trust-remote-code")
    assert main([*nano, "--context", "1048576", "--allow-long-context", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["env"]["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] == "1"


def test_remote_code_runs_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    omni = ["plan", "nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4", "--memory-gib", "121.69", "--json"]
    assert main(omni) == 2
    err = capsys.readouterr().err
    assert "intent.trust_remote_code" in err and "--trust-remote-code" in err
    assert main([*omni, "--trust-remote-code"]) == 0
    assert "--trust-remote-code" in json.loads(capsys.readouterr().out)["argv"]


def test_a_flagship_model_plans_with_no_consent_at_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["vllm_version"] == "0.33.0" and "--trust-remote-code" not in planned["argv"]


def test_a_lock_with_prebuilt_kernels_plans_no_first_start_compile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 64: `sparkfleet plan` counted first-start compiles (their memory, MAX_JOBS, the start budget) whatever the
    release; with the release's lock (--lock) it plans what the host will: none where the kernels are prebuilt."""
    from sparkfleet.models import Platform
    from sparkfleet.release import LockRequest, build_lock, target_for

    text = (Path(__file__).resolve().parents[1] / "fixtures" / "locks" / "gb10-vllm-0.32.0.lock").read_text()
    lock = build_lock(LockRequest(platform=Platform.GB10, target=target_for(Platform.GB10), vllm_version="0.32.0"), text)
    compiled, prebuilt = tmp_path / "compiled.json", tmp_path / "prebuilt.json"
    compiled.write_text(lock.model_dump_json())
    prebuilt.write_text(lock.model_copy(update={"prebuilt_kernels": "flashinfer-jit-cache 0.7.0.post1"}).model_dump_json())
    plans = {}
    for name, path in (("compiled", compiled), ("prebuilt", prebuilt)):
        assert main(["plan", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", "--json", "--lock", str(path)]) == 0
        plans[name] = json.loads(capsys.readouterr().out)
    assert plans["compiled"]["vllm_version"] == plans["prebuilt"]["vllm_version"] == "0.32.0"
    assert plans["compiled"]["env"]["MAX_JOBS"] != "1" and plans["prebuilt"]["env"]["MAX_JOBS"] == "1"
    assert plans["prebuilt"]["start_budget_s"] < plans["compiled"]["start_budget_s"]
    assert main(["plan", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", "--lock", str(tmp_path / "none.json")]) == 2
    assert "--lock" in capsys.readouterr().err


def test_without_a_version_a_model_plans_on_the_newest_release_that_loads_it(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 63: the community Gemma-4-26B NVFP4 loads with vLLM 0.21 to 0.30 only. Asked for no release, the plan picks
    0.30.0 and says so; asked for 0.33.0, it is refused with the reason, as before."""
    gemma = "bg-digitalservices/Gemma-4-26B-A4B-it-NVFP4"
    assert main(["plan", gemma, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["vllm_version"] == "0.30.0"
    assert main(["plan", gemma]) == 0
    said = capsys.readouterr()
    assert "planned on vLLM 0.30.0, the newest release that loads" in said.err and "vLLM 0.30.0, planned" in said.out
    assert main(["plan", gemma, "--vllm-version", "0.33.0"]) == 2
    assert "loads with stock vLLM 0.21.0 to 0.30.0 only" in capsys.readouterr().err
