"""The host memory guard and the start admission: whom it stops, when, what it says; the planner's side of it.

The guard's functions run against a fake systemd (unit states, every call recorded) and meminfo files this test
writes; the sandbox scenario (extensions/molecule/fleet/verify_memory.yml) runs it for real.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sparkfleet.vllm.plugins.module_utils import cuda_memory as host_state_cuda
from ansible_collections.sparkfleet.vllm.plugins.module_utils import host_state
from conftest import ROOT, load_file, spark

from sparkfleet.catalog import get_profile
from sparkfleet.errors import InfeasibleError, PlanError
from sparkfleet.models import GIB, Intent, Platform
from sparkfleet.planning import memguard
from sparkfleet.planning.hostplan import InstanceRequest, plan_host
from sparkfleet.planning.planner import plan

guard = load_file("roles/vllm_serve/files/sparkfleet_memory_guard.py")
SCRIPT = ROOT / "roles/vllm_serve/files/sparkfleet_memory_guard.py"


def table(platform: str = "cpu") -> dict[str, Any]:
    return {
        "platform": platform,
        "floor_starting_bytes": 2 * GIB,
        "floor_serving_bytes": 1 * GIB,
        "interval_s": 1.0,
        "settle_s": 5.0,
        # The planner's figures (sparkfleet.planning.memguard), as the table written to the host carries them.
        "return_after_s": memguard.GUARD_RETURN_AFTER_S,
        "return_tries": memguard.GUARD_RETURN_TRIES,
        "instances": {
            name: {
                "unit": f"sparkfleet-vllm-{name}.service",
                "footprint_bytes": gib * GIB,
                "required_available_bytes": (gib + 2) * GIB,
                "gpu_memory_utilization": util,
                "start_budget_s": 600,
                "on_demand": False,
            }
            for name, gib, util in (("big", 60, 0.55), ("small", 10, 0.12))
        },
    }


def meminfo_text(available_gib: float, cached_gib: float = 3.0) -> str:
    kib = 1024 * 1024
    return (
        f"MemTotal:       {int(121.69 * kib)} kB\nMemFree:        {int(available_gib * kib / 2)} kB\n"
        f"MemAvailable:   {int(available_gib * kib)} kB\nBuffers:        1024 kB\nCached:         {int(cached_gib * kib)} kB\n"
    )


class FakeSystemd:
    """`systemctl show` and `systemctl stop` against unit states held here."""

    def __init__(self, states: dict[str, tuple[str, float]], unit_files: dict[str, str] | None = None) -> None:
        self.states = states  # unit -> (ActiveState, ActiveEnterTimestampMonotonic in seconds)
        self.unit_files = unit_files or {}  # unit -> UnitFileState (enabled unless named)
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        if argv[:2] == ["systemctl", "show"]:
            units = [a for a in argv[2:] if not a.startswith("--")]
            blocks = [
                f"Id={u}\nActiveState={self.states.get(u, ('inactive', 0))[0]}\n"
                f"SubState={'running' if self.states.get(u, ('inactive', 0))[0] == 'active' else 'dead'}\n"
                f"ActiveEnterTimestampMonotonic={int(self.states.get(u, ('inactive', 0))[1] * 1e6)}\nControlGroup=\n"
                f"UnitFileState={self.unit_files.get(u, 'enabled')}"
                for u in units
            ]
            return subprocess.CompletedProcess(argv, 0, "\n\n".join(blocks) + "\n", "")
        return subprocess.CompletedProcess(argv, 0, "", "")


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    paths = {"table": tmp_path / "memory-guard.json", "meminfo": tmp_path / "meminfo", "state": tmp_path / "state.json"}
    paths["table"].write_text(json.dumps(table()))
    paths["textfile"] = tmp_path / "textfile" / "sparkfleet_memory_guard.prom"
    paths["textfile"].parent.mkdir()
    monkeypatch.setattr(guard, "STATE_DIR", str(tmp_path))
    monkeypatch.setattr(guard.time, "monotonic", lambda: 1000.0)
    return paths


def make_guard(host: dict[str, Any]) -> Any:
    return guard.Guard(str(host["table"]), str(host["state"]), str(host["textfile"]), str(host["meminfo"]))


def test_above_the_floor_it_stops_nothing(host: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    systemd = FakeSystemd(
        {"sparkfleet-vllm-big.service": ("active", 900.0), "sparkfleet-vllm-small.service": ("active", 20.0)}
    )
    monkeypatch.setattr(guard.subprocess, "run", systemd.run)
    host["meminfo"].write_text(meminfo_text(5.0))
    make_guard(host).check()
    assert not [c for c in systemd.calls if c[1] == "stop"]
    state = json.loads(host["state"].read_text())
    # big started 100 s ago (within its 600 s budget) and has not answered: the starting floor is in force.
    assert state["phase"] == "starting" and state["floor_bytes"] == 2 * GIB
    # Past its budget it is no longer taken for starting (the watchdog reports an overrun), and the serving floor holds.
    systemd.states["sparkfleet-vllm-big.service"] = ("active", 100.0)
    make_guard(host).check()
    assert json.loads(host["state"].read_text())["phase"] == "serving"


def test_under_the_floor_it_stops_the_starting_instance_not_the_larger_one(
    host: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # big serves (its watchdog saw it answer since this start); small started 100 s ago and has not answered yet.
    (Path(guard.STATE_DIR) / "watchdog-big.json").write_text(json.dumps({"since": 10.0, "ready_seen": True}))
    systemd = FakeSystemd(
        {"sparkfleet-vllm-big.service": ("active", 10.0), "sparkfleet-vllm-small.service": ("active", 900.0)}
    )
    monkeypatch.setattr(guard.subprocess, "run", systemd.run)
    host["meminfo"].write_text(meminfo_text(1.5))
    make_guard(host).check()
    assert ["systemctl", "stop", "--no-block", "sparkfleet-vllm-small.service"] in systemd.calls
    assert not [c for c in systemd.calls if c[1] == "stop" and c[-1] == "sparkfleet-vllm-big.service"]
    said = capsys.readouterr().out
    assert (
        "MemAvailable 1.50 GiB is under the 2.00 GiB starting floor; stopping sparkfleet-vllm-small.service (starting"
        in said
    )
    assert "The host's largest holders now (host-side memory): " in said
    metrics = host["textfile"].read_text()
    assert 'sparkfleet_memory_guard_stops_total{sparkfleet_instance="small"} 1' in metrics
    # An instance never stopped has its count too (0), so the alert's increase() sees the first stop.
    assert 'sparkfleet_memory_guard_stops_total{sparkfleet_instance="big"} 0' in metrics
    assert 'sparkfleet_memory_guard_floor_bytes{phase="starting"} 2147483648' in metrics


def test_with_every_instance_serving_it_stops_the_one_holding_the_most(
    host: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, since in (("big", 10.0), ("small", 20.0)):
        (Path(guard.STATE_DIR) / f"watchdog-{name}.json").write_text(json.dumps({"since": since, "ready_seen": True}))
    systemd = FakeSystemd(
        {"sparkfleet-vllm-big.service": ("active", 10.0), "sparkfleet-vllm-small.service": ("active", 20.0)}
    )
    monkeypatch.setattr(guard.subprocess, "run", systemd.run)
    host["meminfo"].write_text(meminfo_text(0.9))
    g = make_guard(host)
    g.check()
    stops = [c[-1] for c in systemd.calls if c[1] == "stop"]
    assert stops == ["sparkfleet-vllm-big.service"]
    # Within the settle time it does not stop a second one: the first one's memory is on its way back.
    systemd.states["sparkfleet-vllm-big.service"] = ("deactivating", 10.0)
    g.check()
    assert [c[-1] for c in systemd.calls if c[1] == "stop"] == ["sparkfleet-vllm-big.service"]


def test_under_the_floor_with_nothing_of_ours_running_it_stops_nothing(
    host: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    systemd = FakeSystemd({})
    monkeypatch.setattr(guard.subprocess, "run", systemd.run)
    host["meminfo"].write_text(meminfo_text(0.2))
    make_guard(host).check()
    assert not [c for c in systemd.calls if c[1] == "stop"]
    assert "no sparkfleet instance runs: nothing of ours to stop" in capsys.readouterr().out


def test_admission_refuses_a_start_that_would_cross_the_floor_naming_both_figures() -> None:
    info = {"MemAvailable": 14 * GIB, "Cached": 40 * GIB, "Buffers": 0}
    assert guard.admission(table(), "small", info, None) == []
    problems = guard.admission(table(), "big", info, None)
    assert len(problems) == 1
    assert "MemAvailable 14.00 GiB less the 62.00 GiB it takes at start leaves -48.00 GiB" in problems[0]
    assert "memory guard's 2.00 GiB starting floor" in problems[0]


def test_admission_on_gb10_checks_cuda_free_against_utilization_times_total() -> None:
    """The field's case: a 60 GB file written before the start left CUDA 41.52 GiB free (unsloth PR #10705)."""
    info = {"MemAvailable": 115 * GIB, "Cached": 60 * GIB, "Buffers": 0}
    total = int(121.69 * GIB)
    refused = guard.admission(table("gb10"), "big", info, (int(41.52 * GIB), total))
    assert len(refused) == 1
    assert "CUDA reports 41.52 GiB free of 121.69 GiB and vLLM needs utilization 0.55 x 121.69 GiB = 66.93 GiB" in refused[0]
    assert "page cache holds 60.00 GiB" in refused[0] and "gpu_memory_utilization 0.34 or less" in refused[0]
    assert guard.admission(table("gb10"), "big", info, (int(103.25 * GIB), total)) == []


def test_the_admit_command_exits_non_zero_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text(json.dumps(table()))
    (tmp_path / "meminfo").write_text(meminfo_text(14.0))
    argv = [sys.executable, str(SCRIPT), "admit", str(tmp_path / "t.json")]
    refused = subprocess.run(
        [*argv, "big", "--meminfo", str(tmp_path / "meminfo")], capture_output=True, text=True, check=False
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith("sparkfleet: start of big refused: MemAvailable 14.00 GiB")
    admitted = subprocess.run(
        [*argv, "small", "--meminfo", str(tmp_path / "meminfo")], capture_output=True, text=True, check=False
    )
    assert admitted.returncode == 0 and "admitted" in admitted.stdout


def test_the_host_plan_carries_the_guard_table() -> None:
    requests = [
        InstanceRequest(
            name="chat", profile=get_profile("openai/gpt-oss-120b"), model_ref="openai/gpt-oss-120b", intent=Intent()
        )
    ]
    plan = plan_host(spark(), requests)
    g = plan.memory_guard
    assert g is not None
    assert g.floor_starting_bytes == int(4.5 * GIB) and g.floor_serving_bytes == int(2.5 * GIB)
    chat = g.instances["chat"]
    served = plan.instances["chat"]
    assert chat.unit == "sparkfleet-vllm-chat.service"
    assert chat.required_available_bytes == served.required_available_bytes
    assert chat.gpu_memory_utilization == served.gpu_memory_utilization
    assert chat.start_budget_s == served.start_budget_s > memguard.START_BASE_S[Platform.GB10]
    assert "knapcio" in g.source and "MemoryMax bounds only host-side RAM" in g.reason


def test_start_budget_grows_with_the_weights_and_first_start_compiles() -> None:
    small = memguard.start_budget_s(Platform.GB10, 10.0, compiles=False)
    large = memguard.start_budget_s(Platform.GB10, 66.0, compiles=False)
    assert large - small == pytest.approx(56 * GIB / memguard.START_READ_BYTES_PER_S, abs=1)
    assert memguard.start_budget_s(Platform.GB10, 66.0, compiles=True) == large + memguard.START_COMPILE_S
    # Seed 000: 66 GiB over a USB SSD took 606 s to load; the budget holds it with the engine's own start beside it.
    assert large >= 606 + 84


def test_the_plan_follows_the_hosts_measured_ceiling_and_says_so() -> None:
    """MiaAI-Lab GLM-5.3-Flash-EXL3-2x-DGX-Sparks#47: CUDA free tops out at 101.3 of 121.69 GiB on a fresh boot."""
    measured = spark().model_copy(update={"cuda_ceiling_bytes": int(101.3 * GIB), "cuda_total_bytes": int(121.69 * GIB)})
    profile = get_profile("openai/gpt-oss-120b")
    served = plan(measured, profile, Intent(profile="throughput"))
    assert served.gpu_memory_utilization == pytest.approx(0.82)
    assert plan(spark(), profile, Intent(profile="throughput")).gpu_memory_utilization == pytest.approx(0.87)
    flag = next(f for f in served.flags if f.name == "--gpu-memory-utilization")
    assert "at most 0.82 on this host, whose measured ceiling is 101.30 GiB free of 121.69 GiB" in flag.reason
    with pytest.raises(PlanError) as refused:
        plan(measured, profile, Intent(gpu_memory_utilization=0.85))
    assert refused.value.variable == "intent.gpu_memory_utilization"
    assert "CUDA reports at most 101.30 GiB free of 121.69 GiB" in str(refused.value)
    assert "gpu_memory_utilization 0.82 or less" in str(refused.value)


def fake_reader(free_gib: float) -> Any:
    return lambda: {"cuda_free_bytes": int(free_gib * GIB), "cuda_total_bytes": int(121.69 * GIB)}


def test_host_facts_record_the_ceiling_on_an_idle_host_and_read_it_back_while_instances_run(tmp_path: Path) -> None:
    ceiling = tmp_path / "cuda-ceiling.json"
    dropped: list[bool] = []

    def drop() -> bool:
        dropped.append(True)
        return True

    idle = host_state.cuda_memory_facts(fake_reader(101.3), drop, [], str(ceiling), False)
    assert dropped and idle["cuda_ceiling_bytes"] == int(101.3 * GIB) and idle["cuda_caches_dropped"]
    # Instances running hold memory: the free figure falls, the recorded ceiling stands.
    busy = host_state.cuda_memory_facts(fake_reader(20.0), drop, ["sparkfleet-vllm-a.service"], str(ceiling), False)
    assert busy["cuda_free_bytes"] == int(20 * GIB) and busy["cuda_ceiling_bytes"] == int(101.3 * GIB)
    # An idle reading within 1 % of the total does not move it (a moved plan restarts its instance) ...
    host_state.cuda_memory_facts(fake_reader(101.9), drop, [], str(ceiling), False)
    assert json.loads(ceiling.read_text())["cuda_free_bytes"] == int(101.3 * GIB)
    # ... a larger move does, except in check mode.
    host_state.cuda_memory_facts(fake_reader(98.0), drop, [], str(ceiling), True)
    assert json.loads(ceiling.read_text())["cuda_free_bytes"] == int(101.3 * GIB)
    host_state.cuda_memory_facts(fake_reader(98.0), drop, [], str(ceiling), False)
    assert json.loads(ceiling.read_text())["cuda_free_bytes"] == int(98.0 * GIB)


def test_host_facts_report_a_driver_that_cannot_be_read(tmp_path: Path) -> None:
    def broken() -> dict[str, int]:
        raise host_state_cuda.CudaMemoryError("no NVIDIA driver library: cannot load libcuda.so.1")

    facts = host_state.cuda_memory_facts(broken, lambda: False, [], str(tmp_path / "c.json"), False)
    assert facts == {"cuda_memory_error": "no NVIDIA driver library: cannot load libcuda.so.1", "cuda_caches_dropped": False}


def test_the_preflight_refuses_a_start_vllm_would_refuse_on_the_free_figure_cuda_reports() -> None:
    """jundot/omlx PR #3526: staging right before a start left the page cache full and vLLM refused the start."""
    profile = get_profile("openai/gpt-oss-120b")
    requests = [InstanceRequest(name="chat", profile=profile, model_ref=profile.id, intent=Intent(profile="throughput"))]
    squeezed = spark().model_copy(
        update={"cuda_free_bytes": int(41.52 * GIB), "cuda_total_bytes": int(121.69 * GIB), "running_instances": ()}
    )
    with pytest.raises(InfeasibleError) as refused:
        plan_host(squeezed, requests)
    assert refused.value.variable == "instances[0] (chat)"
    assert "CUDA reports 41.52 GiB free of 121.69 GiB with the page cache dropped" in str(refused.value)
    assert "gpu_memory_utilization 0.34 or less" in str(refused.value)
    # The same figure while the instance itself runs: it is restarted in place, giving back its own share first.
    running = squeezed.model_copy(update={"running_instances": ("sparkfleet-vllm-chat.service",)})
    assert plan_host(running, requests).instances["chat"]


def test_a_starting_instance_seen_ready_serves_and_one_stopping_holds_off_a_second_stop(
    host: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both started within their budget; big answered right already (its watchdog saw it), small has not.
    (Path(guard.STATE_DIR) / "watchdog-big.json").write_text(json.dumps({"since": 900.0, "ready_seen": True}))
    systemd = FakeSystemd(
        {"sparkfleet-vllm-big.service": ("active", 900.0), "sparkfleet-vllm-small.service": ("active", 950.0)}
    )
    monkeypatch.setattr(guard.subprocess, "run", systemd.run)
    host["meminfo"].write_text(meminfo_text(1.5))
    g = make_guard(host)
    g.check()
    # small is the one starting, though big holds more.
    assert [c[-1] for c in systemd.calls if c[1] == "stop"] == ["sparkfleet-vllm-small.service"]
    # Far under the floor, but small is still stopping and holds its memory until it is gone: nothing more is stopped.
    systemd.states["sparkfleet-vllm-small.service"] = ("deactivating", 950.0)
    host["meminfo"].write_text(meminfo_text(0.4))
    g.check()
    assert [c[-1] for c in systemd.calls if c[1] == "stop"] == ["sparkfleet-vllm-small.service"]


def test_at_the_planned_cap_with_the_measured_ceiling_a_sparks_start_is_admitted_and_not_stopped(
    host: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh Spark as the field reports it: CUDA free 103.25 of 121.69 GiB, MemAvailable about 115.7 GiB."""
    total, free, available = int(121.69 * GIB), int(103.25 * GIB), int(115.7 * GIB)
    facts = spark().model_copy(update={"cuda_ceiling_bytes": free, "cuda_total_bytes": total, "cuda_free_bytes": free})
    requests = [
        InstanceRequest(
            name="chat", profile=get_profile("openai/gpt-oss-120b"), model_ref="openai/gpt-oss-120b",
            intent=Intent(profile="throughput"),
        )
    ]  # fmt: skip
    planned = plan_host(facts, requests)
    table = planned.memory_guard.model_dump(mode="json") if planned.memory_guard else {}
    assert guard.admission(table, "chat", {"MemAvailable": available}, (free, total)) == []
    # Once it holds what it planned, MemAvailable stays above the floor in force while it starts.
    host["table"].write_text(json.dumps(table))
    systemd = FakeSystemd({"sparkfleet-vllm-chat.service": ("active", 990.0)})
    monkeypatch.setattr(guard.subprocess, "run", systemd.run)
    after = available - table["instances"]["chat"]["required_available_bytes"]
    host["meminfo"].write_text(meminfo_text(after / GIB))
    make_guard(host).check()
    assert not [c for c in systemd.calls if c[1] == "stop"]


def test_host_facts_say_whether_an_x86_cpu_has_amx_tiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's CPU platform runs its AMX MLA kernel on 128-token blocks there, its reference kernel on 16 elsewhere."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f amx_bf16 amx_tile amx_int8\n")
    monkeypatch.setattr(host_state.pyplatform, "machine", lambda: "x86_64")
    assert host_state.cpu_amx_tile(str(cpuinfo)) is True
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f\n")
    assert host_state.cpu_amx_tile(str(cpuinfo)) is False
    monkeypatch.setattr(host_state.pyplatform, "machine", lambda: "aarch64")
    assert host_state.cpu_amx_tile(str(tmp_path / "missing")) is False


def test_a_textfile_directory_it_may_not_write_costs_the_metrics_never_the_guard(
    host: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not root (issue 47): a textfile directory someone re-owned leaves it guarding, saying so once."""
    systemd = FakeSystemd({"sparkfleet-vllm-big.service": ("active", 900.0)})
    monkeypatch.setattr(guard.subprocess, "run", systemd.run)

    def refused(path: str, text: str) -> None:
        if path == str(host["textfile"]):
            raise PermissionError(13, "Permission denied")
        Path(path).write_text(text)

    monkeypatch.setattr(guard, "write_atomic", refused)
    host["meminfo"].write_text(meminfo_text(5.0))
    watching = make_guard(host)
    watching.check()
    watching.check()
    assert json.loads(host["state"].read_text())["phase"] in ("starting", "serving")
    said = capsys.readouterr().err
    assert said.count("cannot write") == 1 and "guarding on without it" in said


def serving(names: tuple[str, ...] = ("big", "small")) -> dict[str, tuple[str, float]]:
    for name in names:
        (Path(guard.STATE_DIR) / f"watchdog-{name}.json").write_text(json.dumps({"since": 10.0, "ready_seen": True}))
    return {f"sparkfleet-vllm-{name}.service": ("active", 10.0) for name in names}


def starts(systemd: FakeSystemd) -> list[str]:
    return [c[-1] for c in systemd.calls if c[:2] == ["systemctl", "start"]]


def stopped_then_freed(
    host: dict[str, Any], monkeypatch: pytest.MonkeyPatch, systemd: FakeSystemd
) -> tuple[Any, dict[str, float]]:
    """The guard stopped big under the floor; big is inactive and 70 GiB are free again. (guard, its clock)"""
    monkeypatch.setattr(guard.subprocess, "run", systemd.run)
    clock = {"now": 5000.0}
    monkeypatch.setattr(guard.time, "time", lambda: clock["now"])
    g = make_guard(host)
    host["meminfo"].write_text(meminfo_text(0.9))
    g.check()
    systemd.states["sparkfleet-vllm-big.service"] = ("inactive", 10.0)
    host["meminfo"].write_text(meminfo_text(70.0))
    return g, clock


def test_the_guard_brings_back_what_it_stopped_once_its_start_has_stayed_affordable(
    host: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 61: a burst that went away leaves no model down for good. big needs 62 GiB to start and the starting
    floor is 2 GiB: MemAvailable must stay at 64 GiB or more for the table's 60 s."""
    systemd = FakeSystemd(serving())
    g, clock = stopped_then_freed(host, monkeypatch, systemd)
    assert [c[-1] for c in systemd.calls if c[1] == "stop"] == ["sparkfleet-vllm-big.service"]
    for seconds, available in ((1, 70.0), (30, 70.0), (40, 63.0), (50, 70.0), (109, 70.0)):
        clock["now"] = 5000.0 + seconds
        host["meminfo"].write_text(meminfo_text(available))
        g.check()
    # 63 GiB at 40 s is under the 64 its start needs: the 60 s count again from 50 s.
    assert starts(systemd) == []
    clock["now"] = 5111.0
    g.check()
    assert starts(systemd) == ["sparkfleet-vllm-big.service"]
    said = capsys.readouterr().out
    assert "starting sparkfleet-vllm-big.service again (try 1 of 3): MemAvailable 70.00 GiB has stayed above the " in said
    assert "64.00 GiB its start needs (its 62.00 GiB and the 2.00 GiB starting floor) for 61 s" in said
    metrics = host["textfile"].read_text()
    assert 'sparkfleet_memory_guard_returns_total{sparkfleet_instance="big"} 1' in metrics
    assert 'sparkfleet_memory_guard_stopped{sparkfleet_instance="big"} 1' in metrics
    # Back, and seen answering right since its new start: no longer the guard's to bring back.
    systemd.states["sparkfleet-vllm-big.service"] = ("active", 1100.0)
    (Path(guard.STATE_DIR) / "watchdog-big.json").write_text(json.dumps({"since": 1100.0, "ready_seen": True}))
    g.check()
    assert "sparkfleet-vllm-big.service serves again" in capsys.readouterr().out
    assert 'sparkfleet_memory_guard_stopped{sparkfleet_instance="big"} 0' in host["textfile"].read_text()
    clock["now"] = 6000.0
    g.check()
    assert starts(systemd) == ["sparkfleet-vllm-big.service"]


def test_a_return_that_never_comes_back_is_tried_a_bounded_number_of_times(
    host: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    systemd = FakeSystemd(serving())
    g, clock = stopped_then_freed(host, monkeypatch, systemd)
    # Each start is refused (its admission, or it fails): the unit is inactive again at the next reading.
    for step in range(10):
        clock["now"] = 5000.0 + 61 * step
        g.check()
    assert starts(systemd) == ["sparkfleet-vllm-big.service"] * 3
    assert "was started 3 times since the guard stopped it and is not back: it stays stopped" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("on_demand", "unit_file", "said"),
    [
        (True, "enabled", "is switched on demand: its next request starts it (the door's activator)"),
        (False, "disabled", "is no longer enabled (disabled): it stays stopped"),
    ],
)
def test_an_on_demand_or_disabled_instance_is_not_brought_back(  # noqa: PLR0917 - fixtures and parameters
    host: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    on_demand: bool,
    unit_file: str,
    said: str,
) -> None:
    plan = table()
    plan["instances"]["big"]["on_demand"] = on_demand
    host["table"].write_text(json.dumps(plan))
    systemd = FakeSystemd(serving(), {"sparkfleet-vllm-big.service": unit_file})
    g, clock = stopped_then_freed(host, monkeypatch, systemd)
    for step in range(3):
        clock["now"] = 5000.0 + 61 * step
        g.check()
    assert starts(systemd) == []
    assert f"sparkfleet-vllm-big.service {said}" in capsys.readouterr().out


def test_a_stop_names_the_hosts_largest_memory_holders(tmp_path: Path) -> None:
    """What took the memory may be no instance of ours: the stop's journal line names the largest cgroups."""
    for slice_dir, unit, held in (
        ("system.slice", "sparkfleet-vllm-big.service", 60 * GIB),
        ("system.slice", "nginx.service", 30 * 1024**2),
        ("user.slice", "user-1000.slice", 40 * GIB),
        ("system.slice", "sparkfleet-webui.service", GIB),
    ):
        (tmp_path / slice_dir / unit).mkdir(parents=True)
        (tmp_path / slice_dir / unit / "memory.current").write_text(f"{held}\n")
    assert guard.top_holders(str(tmp_path)) == [
        ("sparkfleet-vllm-big.service", 60 * GIB),
        ("user-1000.slice", 40 * GIB),
        ("sparkfleet-webui.service", GIB),
    ]


def test_on_a_cgroup_v1_host_the_holders_come_from_its_memory_controller(tmp_path: Path) -> None:
    """Hybrid hosts (the sandbox's containers) keep memory figures under memory/, as usage_in_bytes."""
    for unit, held in (("sparkfleet-vllm-tiny.service", 3 * GIB), ("nginx.service", 40 * 1024**2)):
        (tmp_path / "memory" / "system.slice" / unit).mkdir(parents=True)
        (tmp_path / "memory" / "system.slice" / unit / "memory.usage_in_bytes").write_text(f"{held}\n")
    assert guard.top_holders(str(tmp_path)) == [("sparkfleet-vllm-tiny.service", 3 * GIB), ("nginx.service", 40 * 1024**2)]
