"""Switch on-demand vLLM instances for the front door: start on the first request, stop when idle.

nginx asks GET /ensure/<instance> (over a unix socket only nginx's workers and root may open) before it
proxies a request for an on-demand model. The answer is 200 once the instance is up and has passed its
readiness check (the probe's known-answer check: ready means right), else 503 with the reason after the
plan's wait. To make room it stops idle on-demand instances, least recently used first, until the new
one fits in the plan's on-demand budget and the host's live figure admits it (the memory guard's start
admission: MemAvailable less what the start takes stays above the guard's floor); never a busy one and
never an always-on one (they are not in its table). What still does not fit is answered 503 naming the
shortfall: nothing starts into a squeeze. A thread stops each on-demand instance that has had no
request for its idle_stop_after_s and has none running. The request path stays in nginx; this process only talks to systemd.

Socket-activated by systemd (LISTEN_FDS); Python's standard library only.
"""

from __future__ import annotations

import argparse
import http.server
import importlib.util
import json
import os
import re
import socket
import socketserver
import subprocess
import sys
import threading
import time
from types import ModuleType
from typing import Any, cast

_NAME = re.compile(r"/ensure/([a-z0-9][a-z0-9-]{0,39})")
_GAUGE = re.compile(r"^vllm:num_requests_(?:running|waiting)(?:\{[^}]*\})? ([0-9.eE+-]+)$", re.MULTILINE)


def log(message: str) -> None:
    print(message, flush=True)


def load_probe(path: str) -> ModuleType:
    """The probe's module (one HTTP client for TCP and Unix sockets, shared with readiness and watchdogs)."""
    spec = importlib.util.spec_from_file_location("sparkfleet_probe", path)
    assert spec is not None and spec.loader is not None  # a .py path always has a spec and a loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Switchboard:
    """The on-demand instances of the door plan, when each was last asked for, and their locks."""

    def __init__(self, table: dict[str, Any], config_dir: str, probe: str, guard: str | None = None) -> None:
        self.budget = float(table["budget_gib"])
        self.wait = float(table["wait_s"])
        self.instances: dict[str, dict[str, Any]] = table["instances"]
        self.config_dir = config_dir
        self.probe = probe
        self._client: ModuleType | None = None
        # The memory guard's program and table (vllm_serve): the live admission of a start.
        self.guard = guard
        self.guard_table = os.path.join(config_dir, "memory-guard.json")
        self._guard: ModuleType | None = None
        self.used = {name: 0.0 for name in self.instances}
        self.ready = dict.fromkeys(self.instances, False)
        self.locks = {name: threading.Lock() for name in self.instances}
        self.room = threading.Lock()  # one start decides what to stop at a time
        for name in self.instances:
            if self.state(name) in ("active", "activating", "reloading"):
                self.used[name] = time.monotonic()  # running when we came up: its idle clock starts now

    def state(self, name: str) -> str:
        out = subprocess.run(
            ["systemctl", "show", self.instances[name]["unit"], "-p", "ActiveState"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        return out.strip().partition("=")[2] or "unknown"

    def client(self) -> ModuleType:
        """The probe's HTTP client (loopback ports and Unix sockets alike), loaded on first use."""
        if self._client is None:
            self._client = load_probe(self.probe)
        return self._client

    def listening(self, name: str) -> bool:
        instance = self.instances[name]
        try:
            if instance.get("socket"):
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.settimeout(1)
                    sock.connect(instance["socket"])
                return True
            host, port = instance["url"].rpartition("//")[2].rsplit(":", 1)
            with socket.create_connection((host.strip("[]"), int(port)), timeout=1):
                return True
        except OSError:
            return False

    def in_flight(self, name: str) -> float:
        """Requests running or waiting in the instance (vLLM's own gauges); 0 when it does not answer."""
        try:
            text = self.client().request(self.instances[name]["url"] + "/metrics", timeout=5)[1]
        except OSError:
            return 0
        return sum(float(value) for value in _GAUGE.findall(text))

    def stop(self, name: str, why: str) -> None:
        log(f"stopping {name}: {why}")
        self.ready[name] = False
        unit = self.instances[name]["unit"]
        subprocess.run(["systemctl", "stop", unit], check=False)
        # A server killed after its stop timeout ends "failed"; it was stopped on purpose, so it is at rest.
        if self.state(name) == "failed":
            log(f"{name} did not exit within its stop timeout and was killed")
            subprocess.run(["systemctl", "reset-failed", unit], check=False)

    def make_room(self, name: str) -> str | None:
        """Stop idle on-demand instances until `name` fits in the budget; the reason it cannot, or None."""
        need = float(self.instances[name]["footprint_gib"])
        running = [n for n in self.instances if n != name and self.state(n) in ("active", "activating", "reloading")]
        held = sum(float(self.instances[n]["footprint_gib"]) for n in running)
        busy = []
        for other in sorted(running, key=lambda n: self.used[n]):
            if held + need <= self.budget:
                break
            if self.in_flight(other) > 0 or not self.locks[other].acquire(blocking=False):
                busy.append(other)
                continue
            try:
                self.stop(other, f"idle, to make room for {name} ({need:.1f} GiB; budget {self.budget:.1f} GiB)")
            finally:
                self.locks[other].release()
            held -= float(self.instances[other]["footprint_gib"])
        if held + need <= self.budget:
            return None
        return (
            f"{name} needs {need:.1f} GiB and the on-demand budget is {self.budget:.1f} GiB, but "
            f"{', '.join(busy)} {'is' if len(busy) == 1 else 'are'} serving requests"
        )

    def shortfall(self, name: str) -> str | None:
        """Why the host cannot take the instance's start now (the memory guard's admission), or None."""
        if not self.guard or not os.path.exists(self.guard_table):
            return None
        if self._guard is None:
            self._guard = load_probe(self.guard)
        guard = self._guard
        table = guard.load_table(self.guard_table)
        if name not in table["instances"]:
            return None
        # CUDA's own figure is checked again by the unit's start (this process has no GPU device).
        problems = guard.admission(table, name, guard.read_meminfo(), None)
        return "; ".join(problems) or None

    def admit_live(self, name: str) -> str | None:
        """Stop idle on-demand instances until the host's live figure admits `name`; the shortfall if it cannot."""
        refused = self.shortfall(name)
        running = [n for n in self.instances if n != name and self.state(n) in ("active", "activating", "reloading")]
        for other in sorted(running, key=lambda n: self.used[n]):
            if refused is None:
                break
            if self.in_flight(other) > 0 or not self.locks[other].acquire(blocking=False):
                continue
            try:
                self.stop(other, f"idle, to make room for {name} on this host's live memory: {refused}")
            finally:
                self.locks[other].release()
            time.sleep(1)  # the stopped instance's pages come back to MemAvailable
            refused = self.shortfall(name)
        return refused

    def readiness(self, name: str, timeout: float) -> dict[str, Any]:
        """The probe's readiness check of the instance (health, then the known-answer check)."""
        unit = self.instances[name]["unit"]
        argv = [
            sys.executable, self.probe, "ready", "--unit", unit, "--url", self.instances[name]["url"],
            "--plan", os.path.join(self.config_dir, f"{name}.plan.json"),
            "--env-file", os.path.join(self.config_dir, f"{name}.env"),
            "--timeout", str(max(int(timeout), 1)),
        ]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        try:
            return cast("dict[str, Any]", json.loads(done.stdout.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            return {"ready": False, "reason": (done.stderr or done.stdout).strip()[-500:] or "the probe failed"}

    def ensure(self, name: str) -> tuple[int, dict[str, Any]]:
        """(status, body): 200 when the instance serves and answered right, 503 with the reason otherwise."""
        began = time.monotonic()
        self.used[name] = began
        if self.ready[name] and self.listening(name):
            return 200, {"instance": name, "state": "ready"}
        if not self.locks[name].acquire(timeout=self.wait):
            return 503, {"instance": name, "reason": f"{name} is still starting after {self.wait:.0f} s"}
        try:
            if self.ready[name] and self.listening(name):  # another request started it meanwhile
                return 200, {"instance": name, "state": "ready"}
            self.ready[name] = False
            if self.state(name) not in ("active", "activating", "reloading"):
                with self.room:
                    refused = self.make_room(name) or self.admit_live(name)
                    if refused:
                        log(f"not starting {name}: {refused}")
                        return 503, {"instance": name, "reason": f"{name} is not started: {refused}"}
                    log(f"starting {name} for a request")
                    subprocess.run(["systemctl", "start", "--no-block", self.instances[name]["unit"]], check=False)
            verdict = self.readiness(name, self.wait - (time.monotonic() - began))
            waited = round(time.monotonic() - began, 1)
            if verdict.get("ready"):
                self.ready[name] = True
                self.used[name] = time.monotonic()
                log(f"{name} ready after {waited} s: answered {verdict.get('reply')!r}")
                return 200, {"instance": name, "state": "ready", "waited_s": waited}
            reason = str(verdict.get("reason", "not ready"))
            if not reason.startswith("not ready after"):  # failed or answers wrong: do not leave it holding memory
                self.stop(name, f"not ready: {reason}")
            return 503, {"instance": name, "reason": f"{name} {reason}", "waited_s": waited}
        finally:
            self.locks[name].release()

    def stop_idle(self) -> None:
        now = time.monotonic()
        for name, spec in self.instances.items():
            if now - self.used[name] < spec["idle_stop_after_s"] or self.state(name) != "active":
                continue
            if self.in_flight(name) > 0 or not self.locks[name].acquire(blocking=False):
                self.used[name] = now  # a long request counts as use
                continue
            try:
                self.stop(
                    name, f"no request for {now - self.used[name]:.0f} s (idle_stop_after {spec['idle_stop_after_s']} s)"
                )
            finally:
                self.locks[name].release()

    def watch_idle(self) -> None:
        tick = max(5.0, min(float(s["idle_stop_after_s"]) for s in self.instances.values()) / 6)
        while True:
            time.sleep(tick)
            try:
                self.stop_idle()
            except Exception as exc:  # one bad round must not end the idle watch
                log(f"idle check failed: {type(exc).__name__}: {exc}")


class Handler(http.server.BaseHTTPRequestHandler):
    board: Switchboard | None = None  # set by main() before the server takes requests

    def do_GET(self) -> None:
        assert self.board is not None
        match = _NAME.fullmatch(self.path)
        if not match or match[1] not in self.board.instances:
            return self.reply(404, {"reason": "no such on-demand instance"})
        return self.reply(*self.board.ensure(match[1]))

    def reply(self, status: int, body: dict[str, Any]) -> None:
        data = (json.dumps(body) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def address_string(self) -> str:
        return "nginx"  # a unix socket has no peer address

    def log_message(self, format: str, *args: Any) -> None:  # the base class's parameter names
        pass  # nginx logs every request; this logs what it switches


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    # Its socket comes from systemd (a Unix socket): the placeholder the constructor makes must be one too, since
    # the unit may open no other family (RestrictAddressFamilies=AF_UNIX when every instance is on a socket).
    address_family = socket.AF_UNIX


def listener() -> socket.socket:
    """The socket systemd passes (LISTEN_FDS), or one of our own when run by hand."""
    if os.environ.get("LISTEN_PID") == str(os.getpid()) and os.environ.get("LISTEN_FDS") == "1":
        return socket.socket(fileno=3)
    raise SystemExit("run me through sparkfleet-door-activator.socket (no socket was passed)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", help="the door plan's activator table (JSON)")
    parser.add_argument("--config-dir", required=True, help="where each instance's plan.json and env file are")
    parser.add_argument("--probe", required=True, help="sparkfleet_probe.py")
    parser.add_argument("--guard", help="sparkfleet_memory_guard.py (its start admission, on the host's live figures)")
    args = parser.parse_args()
    with open(args.table, encoding="utf-8") as handle:
        Handler.board = Switchboard(json.load(handle), args.config_dir, args.probe, args.guard)
    server = Server(("", 0), Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = listener()
    threading.Thread(target=Handler.board.watch_idle, daemon=True).start()
    log(f"switching {', '.join(Handler.board.instances)} (budget {Handler.board.budget:.1f} GiB)")
    server.serve_forever()


if __name__ == "__main__":
    main()
