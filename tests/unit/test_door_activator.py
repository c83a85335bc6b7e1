"""The front door's activator: what it starts, what it stops to make room, what it never touches.

The switchboard runs against a fake systemd (a state per unit, every call recorded); one test runs the
script itself, socket-activated over a unix socket as systemd starts it, with fake systemctl and probe
executables on its PATH.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, load_file

activator = load_file("roles/front_door/files/sparkfleet_door_activator.py")


def table(budget: float = 30.0, idle: int = 600) -> dict[str, Any]:
    return {
        "budget_gib": budget,
        "wait_s": 20,
        "instances": {
            name: {
                "unit": f"sparkfleet-vllm-{name}.service",
                "url": f"http://127.0.0.1:{port}",
                "footprint_gib": gib,
                "idle_stop_after_s": idle,
            }
            for name, port, gib in (("coder", 8001, 20.0), ("chat", 8002, 12.0), ("embed", 8003, 4.0))
        },
    }


class FakeSystemd:
    """systemctl as the switchboard calls it: show / start / stop, states kept per unit."""

    def __init__(self, active: tuple[str, ...] = (), slow: tuple[str, ...] = ()) -> None:
        self.states = {f"sparkfleet-vllm-{name}.service": "active" for name in active}
        self.slow = {f"sparkfleet-vllm-{name}.service" for name in slow}  # killed after the stop timeout
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        verb, unit = argv[1], argv[-1] if argv[1] != "show" else argv[2]
        if verb == "start":
            self.states[unit] = "active"
        elif verb == "stop":
            self.states[unit] = "failed" if unit in self.slow else "inactive"
        elif verb == "reset-failed":
            self.states[unit] = "inactive"
        return subprocess.CompletedProcess(argv, 0, stdout=f"ActiveState={self.states.get(unit, 'inactive')}\n")

    def verbs(self, verb: str) -> list[str]:
        return [c[-1].removeprefix("sparkfleet-vllm-").removesuffix(".service") for c in self.calls if c[1] == verb]


@pytest.fixture
def board(monkeypatch: pytest.MonkeyPatch) -> Any:
    def make(
        active: tuple[str, ...] = (),
        busy: tuple[str, ...] = (),
        verdict: dict[str, Any] | None = None,
        slow: tuple[str, ...] = (),
        **kw: Any,
    ) -> Any:
        systemd = FakeSystemd(active, slow)
        monkeypatch.setattr(activator.subprocess, "run", systemd.run)
        made = activator.Switchboard(table(**kw), "/etc/sparkfleet", "/probe.py")
        made.systemd = systemd
        made.in_flight = lambda name: 2.0 if name in busy else 0.0
        made.listening = lambda name: systemd.states.get(made.instances[name]["unit"]) == "active"
        made.readiness = lambda name, timeout: verdict or {"ready": True, "reply": "204"}
        return made

    return make


def test_a_stopped_instance_that_fits_is_started_and_answers_once_ready(board: Any) -> None:
    made = board(active=("embed",))
    status, body = made.ensure("chat")
    assert (status, body["state"]) == (200, "ready")
    assert made.systemd.verbs("start") == ["chat"] and made.systemd.verbs("stop") == []
    # Ready and listening: the next request is let through without asking systemd.
    calls = len(made.systemd.calls)
    assert made.ensure("chat")[0] == 200 and len(made.systemd.calls) == calls


def test_room_is_made_by_stopping_the_least_recently_used_idle_instance(board: Any) -> None:
    made = board(active=("chat", "embed"), budget=30.0)
    made.used.update(chat=100.0, embed=50.0)  # embed was used longest ago
    # coder (20) beside chat (12) and embed (4) is 36 > 30: stopping embed alone leaves 32, so chat goes too.
    assert made.ensure("coder")[0] == 200
    assert made.systemd.verbs("stop") == ["embed", "chat"]
    made = board(active=("chat", "embed"), budget=34.0)
    made.used.update(chat=100.0, embed=50.0)
    assert made.ensure("coder")[0] == 200
    assert made.systemd.verbs("stop") == ["embed"]


def test_a_busy_instance_is_never_stopped_to_make_room(board: Any) -> None:
    made = board(active=("chat",), busy=("chat",), budget=30.0)
    status, body = made.ensure("coder")
    assert status == 503
    assert "chat is serving requests" in body["reason"] and "30.0 GiB" in body["reason"]
    assert made.systemd.verbs("stop") == [] and made.systemd.verbs("start") == []


def test_an_instance_that_answers_wrong_is_stopped_and_the_reason_reaches_the_client(board: Any) -> None:
    made = board(verdict={"ready": False, "reason": "wrong answer 'Paris', expected '204'"})
    status, body = made.ensure("chat")
    assert status == 503 and "wrong answer 'Paris'" in body["reason"]
    assert made.systemd.verbs("stop") == ["chat"]
    # Still loading when the wait ends: it keeps starting for the next request.
    made = board(verdict={"ready": False, "reason": "not ready after 20 s (health never answered)"})
    assert made.ensure("chat")[0] == 503 and made.systemd.verbs("stop") == []


def test_idle_instances_stop_after_their_idle_time_unless_a_request_runs(board: Any) -> None:
    made = board(active=("chat", "embed", "coder"), busy=("coder",), idle=60)
    now = time.monotonic()
    made.used.update(chat=now - 61, embed=now - 30, coder=now - 600)
    made.stop_idle()
    assert made.systemd.verbs("stop") == ["chat"]
    assert made.used["coder"] >= now  # a long request counts as use


def test_an_instance_killed_after_its_stop_timeout_is_left_at_rest_not_failed(board: Any) -> None:
    made = board(active=("chat",), slow=("chat",), idle=60)
    made.used["chat"] = time.monotonic() - 120
    made.stop_idle()
    assert made.systemd.verbs("reset-failed") == ["chat"]
    assert made.systemd.states["sparkfleet-vllm-chat.service"] == "inactive"


def fake_tools(tmp: Path) -> dict[str, str]:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(
        "#!/bin/sh\n"
        'echo "$@" >> "$FAKE_SYSTEMD/calls"\n'
        'case "$1" in\n'
        '  show) f="$FAKE_SYSTEMD/$2"; [ -f "$f" ] && echo "ActiveState=$(cat "$f")" || echo ActiveState=inactive ;;\n'
        '  start) echo active > "$FAKE_SYSTEMD/$3" ;;\n'
        '  stop) echo inactive > "$FAKE_SYSTEMD/$2" ;;\n'
        "esac\n"
    )
    systemctl.chmod(0o755)
    probe = tmp / "probe.py"
    probe.write_text('import json\nprint(json.dumps({"ready": True, "reply": "204"}))\n')
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_SYSTEMD": str(tmp), "probe": str(probe)}


# RestrictAddressFamilies=AF_UNIX, in Python: a socket of any other family fails as the kernel would fail it.
UNIX_ONLY = """
import os, runpy, socket, sys
_init = socket.socket.__init__
def _unix_only(self, family=-1, type=-1, proto=-1, fileno=None):
    if fileno is None and family != socket.AF_UNIX:
        raise OSError(97, "Address family not supported by protocol")
    _init(self, family, type, proto, fileno)
socket.socket.__init__ = _unix_only
os.dup2(int(sys.argv[1]), 3)
os.environ["LISTEN_PID"] = str(os.getpid())
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_the_script_answers_nginx_over_its_activated_socket(tmp_path: Path) -> None:
    tools = fake_tools(tmp_path)
    (tmp_path / "table.json").write_text(json.dumps(table()))
    path = str(tmp_path / "activator.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    script = ROOT / "roles/front_door/files/sparkfleet_door_activator.py"
    argv = [sys.executable, str(script), str(tmp_path / "table.json"), "--config-dir", str(tmp_path)]
    argv += ["--probe", tools["probe"]]
    # As systemd does: the socket is fd 3, LISTEN_FDS counts it and LISTEN_PID names the process it is for;
    # and as its unit does when every instance is on a socket, no socket family but AF_UNIX may be opened.
    dup = os.dup(listener.fileno())
    shim = tmp_path / "as_systemd.py"
    shim.write_text(UNIX_ONLY)
    env = {"PATH": tools["PATH"], "FAKE_SYSTEMD": tools["FAKE_SYSTEMD"], "LISTEN_FDS": "1"}
    log = (tmp_path / "activator.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, str(shim), str(dup), *argv[1:]], env=env, pass_fds=(dup,), stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 20
        while "switching" not in (tmp_path / "activator.log").read_text():
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "activator.log").read_text()
            time.sleep(0.05)
        replies = {}
        for target in ("/ensure/chat", "/ensure/nope", "/ensure/../etc"):
            conn = UnixConnection(path)
            conn.request("GET", target)
            reply = conn.getresponse()
            replies[target] = (reply.status, json.loads(reply.read()))
        assert replies["/ensure/chat"][0] == 200 and replies["/ensure/chat"][1]["state"] == "ready"
        assert replies["/ensure/nope"][0] == 404 and replies["/ensure/../etc"][0] == 404
        calls = (tmp_path / "calls").read_text()
        assert "start --no-block sparkfleet-vllm-chat.service" in calls and "stop" not in calls
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        os.close(dup)
        log.close()
    out = (tmp_path / "activator.log").read_text()
    assert "switching coder, chat, embed (budget 30.0 GiB)" in out and "chat ready after" in out


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=30)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def test_an_instance_on_its_socket_is_seen_listening_and_read_through_the_probes_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(activator.subprocess, "run", FakeSystemd().run)
    path = str(tmp_path / "api.sock")
    on_socket = table()
    on_socket["instances"]["chat"] |= {"url": "http+unix://" + path.replace("/", "%2F"), "socket": path}
    made = activator.Switchboard(on_socket, str(tmp_path), str(ROOT / "roles/vllm_serve/files/sparkfleet_probe.py"))
    assert not made.listening("chat")
    assert made.in_flight("chat") == 0  # not there: nothing in flight
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    try:
        assert made.listening("chat")
    finally:
        listener.close()


def test_the_hosts_live_memory_admits_a_start_idle_ones_stop_first_else_503_names_the_shortfall(
    board: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45: the plan's budget is not enough; the host's live figure must admit the start too."""
    guard = load_file("roles/vllm_serve/files/sparkfleet_memory_guard.py")
    gib = 1 << 30
    (tmp_path / "memory-guard.json").write_text(
        json.dumps(
            {
                "platform": "cpu",
                "floor_starting_bytes": 2 * gib,
                "floor_serving_bytes": gib,
                "instances": {
                    name: {"unit": f"sparkfleet-vllm-{name}.service", "footprint_bytes": need * gib,
                           "required_available_bytes": need * gib, "gpu_memory_utilization": 0.1, "start_budget_s": 300}
                    for name, need in (("coder", 22), ("chat", 14), ("embed", 6))
                },
            }
        )
    )  # fmt: skip
    given_back = {"chat": 14 * gib, "embed": 6 * gib}
    available = {"now": 20 * gib}
    monkeypatch.setattr(guard, "read_meminfo", lambda path="/proc/meminfo": {"MemAvailable": available["now"]})
    monkeypatch.setattr(activator.time, "sleep", lambda seconds: None)

    def on(made: Any) -> Any:
        made.guard, made.guard_table, made._guard = "guard.py", str(tmp_path / "memory-guard.json"), guard
        stop = made.stop

        def stop_and_give_back(name: str, why: str) -> None:
            stop(name, why)
            available["now"] += given_back[name]

        made.stop = stop_and_give_back
        return made

    # 20 GiB free, coder takes 22 and the floor is 1: stopping embed (used longest ago) gives back 6, and that is enough.
    made = on(board(active=("chat", "embed"), budget=100.0))
    made.used.update(chat=100.0, embed=50.0)
    assert made.ensure("coder")[0] == 200
    assert made.systemd.verbs("stop") == ["embed"] and made.systemd.verbs("start") == ["coder"]
    # Nothing idle to stop: 503 naming the figures, and nothing starts into the squeeze.
    available["now"] = 10 * gib
    made = on(board(active=("chat",), busy=("chat",), budget=100.0))
    status, body = made.ensure("coder")
    assert status == 503 and made.systemd.verbs("start") == [] and made.systemd.verbs("stop") == []
    assert "coder is not started: MemAvailable 10.00 GiB less the 22.00 GiB it takes at start" in body["reason"]
