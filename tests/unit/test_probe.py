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
        monkeypatch.setattr(probe, "unit_state", lambda unit: (self.active, self.since, False))
        monkeypatch.setattr(probe, "infer", self.infer)
        monkeypatch.setattr(probe.subprocess, "run", self.run)

    def infer(self, *_: Any) -> str:
        if not self.answers:
            raise TimeoutError("timed out")
        return "ok"

    def run(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.restarts.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")


def watchdog(tmp_path: Path, now: float, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(probe.time, "monotonic", lambda: now)
    args = SimpleNamespace(unit="u.service", state=str(tmp_path / "state.json"), deadline=10, failures=2, start_grace=900)
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
