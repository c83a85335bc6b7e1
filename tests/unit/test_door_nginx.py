"""The front door's real nginx configuration, run by Debian's nginx and njs (scripts/lib.sh ensure_nginx).

The role's template is rendered by Ansible's templating from a door plan the planner made; nginx serves it
on a free loopback port in front of a stand-in instance on a Unix socket (as vLLM's --uds serves). What a
client sees is checked as an attacker would try it: no key, a wrong key, a flood of them, and a key holder
on the same address.
"""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import http.client
import http.server
import json
import re
import shutil
import socket
import socketserver
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import spark
from rendering import TemplateRenderer
from test_door import KEY_A, KEY_B, NANO, door

from sparkfleet.catalog import get_profile
from sparkfleet.models import Intent
from sparkfleet.planning.hostplan import InstanceRequest, plan_host

ROOT = Path(__file__).resolve().parents[2]
NGINX = ROOT / ".cache" / "nginx"
ROLE = ROOT / "roles" / "front_door"
ANONYMOUS_BURST = 5
HEADER_TIMEOUT_S = 2
UI_BURST = 8
# Sign-ins an address may make at once (the fixture's burst, then one a minute), and the lockout's failures and window.
SIGN_IN_BURST = 5
LOCKOUT_FAILURES = 2
LOCKOUT_S = 30
WRONG_PASSWORD = "wrong"
KEY_C = "c" * 40
# The chat instance runs this many sequences at once: a key's share is one fewer.
CHAT_SEQS = 3


def nginx_binary() -> Path:
    binary = NGINX / "usr" / "sbin" / "nginx"
    if not binary.exists():
        # Under CI=true the suite's skip hook turns this into a failure naming ensure_nginx (tests/suite/ci_skips.py).
        pytest.skip("no nginx here: run scripts/test, or source scripts/lib.sh and ensure_nginx")
    return binary


class Instance(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A stand-in for vLLM on its socket: /health, and chat answers that say which Authorization arrived."""

    daemon_threads = True


class InstanceHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def address_string(self) -> str:
        return "door"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def reply(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.reply(b"")

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = json.loads(raw)
        # A media test holds its request in flight this long, as a long transcription would.
        time.sleep(float(body.get("hold_s", 0)))
        seen = {"path": self.path, "request_id": self.headers.get("X-Request-Id")}
        if "hold_s" in body or len(raw) > 1024 * 1024:
            seen |= {"sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)}
        self.reply(json.dumps({"model": body["model"], "authorization": self.headers.get("Authorization"), **seen}).encode())


UI_SESSION = "token=signed-in"
UI_BODIES: list[tuple[str, int]] = []
UI_UPGRADES: list[str] = []


class UiHandler(http.server.BaseHTTPRequestHandler):
    """A stand-in for Open WebUI on its loopback port: says how many body bytes reached it (and records them), and
    answers its session check, GET /api/v1/auths/, 200 for the signed-in cookie and 401 otherwise."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.headers.get("Upgrade"):
            UI_UPGRADES.append(self.path)
        if self.path == "/api/v1/auths/":
            signed_in = self.headers.get("Cookie") == UI_SESSION and "Content-Length" not in self.headers
            self.answer(200 if signed_in else 401, b"{}")
        else:
            self.answer(200, b"{}")

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        UI_BODIES.append((self.path, len(raw)))
        # Open WebUI answers a wrong address or password 400 (its INVALID_CRED); here the password "wrong" is one.
        if self.path == "/api/v1/auths/signin" and json.loads(raw).get("password") == WRONG_PASSWORD:
            self.answer(400, json.dumps({"detail": "The email or password provided is incorrect."}).encode())
            return
        self.answer(200, json.dumps({"bytes": len(raw)}).encode())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def door_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ssl.SSLContext]]:
    binary = nginx_binary()
    base = tmp_path_factory.mktemp("door")
    config, logs = base / "etc", base / "log"
    (config / "tls").mkdir(parents=True)
    logs.mkdir()
    instance_socket = base / "api.sock"
    server = Instance(str(instance_socket), InstanceHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    ui = http.server.ThreadingHTTPServer(("127.0.0.1", 0), UiHandler)
    threading.Thread(target=ui.serve_forever, daemon=True).start()

    port, ui_port = free_port(), free_port()
    limits = {
        "anonymous_burst": ANONYMOUS_BURST,
        "anonymous_per_minute": 1,
        "burst": 100,
        "header_timeout_s": HEADER_TIMEOUT_S,
        "webui_burst": UI_BURST,
        "webui_per_minute": 1,
        "large_body_concurrency": 1,
        # One request queued beyond the running ones: three keys reach the instance's bound.
        "instance_queue": 1,
        "sign_in_per_minute": 1,
        "sign_in_burst": SIGN_IN_BURST,
        "sign_in_lockout_failures": LOCKOUT_FAILURES,
        "sign_in_lockout_s": LOCKOUT_S,
    }
    # A text model and an omni model (audio, video, an image a request) behind one door.
    requests = [
        InstanceRequest(
            name=name,
            profile=get_profile(model),
            model_ref=model,
            intent=Intent(trust_remote_code=True, port=port, max_context=8192, concurrency=seqs, served_name=name),
        )
        for name, model, port, seqs in (("chat", NANO, 8000, CHAT_SEQS), ("omni", OMNI, 8001, 1))
    ]
    plan: dict[str, Any] = door(
        plan_host(spark(), requests, "vllm_serve_instances", True),
        clients=[{"name": "alice", "key": KEY_A}, {"name": "bob", "key": KEY_B}, {"name": "carol", "key": KEY_C}],
        address="127.0.0.1",
        port=port,
        limits=limits,
        webui={"port": ui_port, "upstream_port": ui.server_address[1]},
    )
    for route in plan["routes"]:
        route["upstream"] = f"unix:{instance_socket}"  # the stand-in, where the plan names /run/sparkfleet-vllm-*
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", config / "tls" / "door.key", "-out", config / "tls" / "door.crt", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1"],
        check=True, capture_output=True,
    )  # fmt: skip
    variables = {
        "__front_door_plan": plan,
        "__front_door_keyed": [],
        "front_door_config_dir": str(config),
        "front_door_access_log": str(logs / "door.access.log"),
        "inventory_hostname": "spark01",
        "ansible_managed": "Ansible managed",
        "__front_door_generation": "test-generation",
        "__front_door_sign_in_dir": str(base / "sign-in"),
    }
    for name in ("sparkfleet-door.conf", "clients.map", "upstream-keys.map"):
        renderer = TemplateRenderer(ROLE / "templates" / f"{name}.j2")
        (config / name).write_text(renderer.render(variables))
        renderer.close()
    (config / "models.json").write_text(json.dumps(plan["models"]))
    shutil.copy(ROLE / "files" / "sparkfleet_door.js", config)
    shutil.copy(ROLE / "files" / "sparkfleet_sign_in.js", config)
    (base / "sign-in").mkdir()
    temp = base / "temp"
    temp.mkdir()
    temp_paths = " ".join(
        f"{kind}_temp_path {temp}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (base / "nginx.conf").write_text(
        f"load_module {NGINX}/usr/lib/nginx/modules/ngx_http_js_module.so;\n"
        f"user root;\npid {base}/nginx.pid;\nerror_log {logs}/error.log;\nevents {{}}\n"
        f"http {{\n    include {NGINX}/etc/nginx/mime.types;\n    {temp_paths}\n    include {config}/sparkfleet-door.conf;\n}}\n"
    )
    nginx = subprocess.Popen(
        [binary, "-p", str(base), "-c", str(base / "nginx.conf"), "-g", "daemon off;"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if nginx.poll() is not None or time.monotonic() > deadline:
                nginx.kill()
                error_log = (logs / "error.log").read_text() if (logs / "error.log").exists() else ""
                pytest.fail(f"nginx did not serve the door's configuration: {nginx.communicate()[0]}{error_log}")
            time.sleep(0.1)
    context = ssl.create_default_context(cafile=str(config / "tls" / "door.crt"))
    yield f"127.0.0.1:{port}", context, f"127.0.0.1:{ui_port}", logs / "door.access.log"
    nginx.terminate()
    nginx.wait(timeout=10)
    server.shutdown()
    ui.shutdown()


def ask(
    door: tuple[str, ssl.SSLContext, str],
    method: str,
    path: str,
    key: str | None = None,
    body: Any = None,
    *,
    extra: dict[str, str] | None = None,
    ui: bool = False,
) -> tuple[int, dict[str, str], str]:
    address, context = door[2] if ui else door[0], door[1]
    host_name, port = address.split(":")
    connection = http.client.HTTPSConnection(host_name, int(port), context=context, timeout=10)
    headers = ({"Authorization": f"Bearer {key}"} if key else {}) | (extra or {})
    connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    reply = connection.getresponse()
    text = reply.read().decode()
    connection.close()
    return reply.status, {k.lower(): v for k, v in reply.getheaders()}, text


NOT_FOUND = (
    '{"error":{"message":"No such path on this endpoint.","type":"invalid_request_error","param":null,"code":"not_found"}}\n'
)
CHAT = {"model": "chat", "messages": [{"role": "user", "content": "hi"}]}
OMNI = "nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4"


def audio_request(model: str, seconds: int, **extra: Any) -> dict[str, Any]:
    """A chat request with `seconds` of 16 kHz mono 16-bit WAV in it, base64, as OpenAI's input_audio carries it."""
    samples = bytes(range(256)) * (seconds * 16_000 * 2 // 256)
    wav = b"RIFF" + (36 + len(samples)).to_bytes(4, "little") + b"WAVEfmt " + bytes(24) + b"data" + samples
    part = {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav).decode(), "format": "wav"}}
    return {
        "model": model,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Transcribe."}, part]}],
    } | extra


def test_an_audio_request_reaches_the_omni_model_intact_and_not_a_text_model(door_url: Any) -> None:
    """Issue 49: a minute of WAV (2.5 MiB in the body) goes through the door byte for byte to the model that takes
    audio; the text model's own limit refuses it at the door."""
    body = audio_request("omni", 60)
    sent = json.dumps(body).encode()
    status, _, text = ask(door_url, "POST", "/v1/chat/completions", KEY_A, body)
    assert status == 200, text
    seen = json.loads(text)
    assert (seen["bytes"], seen["sha256"]) == (len(sent), hashlib.sha256(sent).hexdigest())
    status, _, text = ask(door_url, "POST", "/v1/chat/completions", KEY_A, audio_request("chat", 60))
    assert status == 413 and "the model `chat` takes" in text, text


def test_media_bodies_in_flight_are_bounded_host_wide_and_text_goes_on(door_url: Any) -> None:
    """nginx buffers a body whole before the router knows its model: one lane (here of 1) bounds the media bodies
    held at once, whichever key sends them; text requests are not counted in it."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        held = pool.submit(ask, door_url, "POST", "/v1/chat/completions", KEY_A, audio_request("omni", 60, hold_s=3))
        time.sleep(1.0)
        status, headers, text = ask(door_url, "POST", "/v1/chat/completions", KEY_A, audio_request("omni", 60))
        assert status == 429 and "requests carrying media" in text and headers["retry-after"] == "1", text
        assert ask(door_url, "POST", "/v1/chat/completions", KEY_A, CHAT)[0] == 200
        assert held.result(timeout=20)[0] == 200
    assert ask(door_url, "POST", "/v1/chat/completions", KEY_A, audio_request("omni", 60))[0] == 200


def test_the_door_answers_health_without_a_key_and_routes_a_key_holder_without_passing_its_key(door_url: Any) -> None:
    status, headers, text = ask(door_url, "GET", "/health")
    assert (status, text) == (200, "ok\n")
    # Which configuration answers: the wait after a change holds out for this run's (a refused reload keeps the old).
    assert headers["x-sparkfleet-generation"] == "test-generation"
    assert headers["strict-transport-security"] == "max-age=63072000"
    status, headers, text = ask(door_url, "POST", "/v1/chat/completions", KEY_A, CHAT)
    assert status == 200, text
    seen = json.loads(text)
    assert seen == {"model": "chat", "authorization": None, "path": "/v1/chat/completions", "request_id": seen["request_id"]}
    assert headers["strict-transport-security"].startswith("max-age=")
    assert re.fullmatch(r"[0-9a-f]{32}", seen["request_id"]) and headers["x-request-id"] == seen["request_id"]


def test_a_cap_under_the_reasoning_models_floor_goes_through_with_a_caution(door_url: Any) -> None:
    """Issue 49: Nemotron-3-Nano needs about 10,000 output tokens to reason and call a tool (seed 002 §7.3.1); a
    request capped lower is served, and the door says why it may come back empty, in its log and to the client."""
    low = {**CHAT, "max_tokens": 512}
    status, headers, text = ask(door_url, "POST", "/v1/chat/completions", KEY_A, low)
    assert status == 200, text
    caution = headers["x-sparkfleet-caution"]
    assert caution == "max_tokens 512 is under 10000, what chat needs to reason and then answer or call a tool"
    # vLLM reads max_completion_tokens first: a high one is no caution, a low one is.
    for body, cautioned in (({**low, "max_completion_tokens": 16384}, False), ({**CHAT, "max_tokens": 10000}, False),
                            ({**CHAT, "max_completion_tokens": 9999}, True), (CHAT, False)):  # fmt: skip
        status, headers, text = ask(door_url, "POST", "/v1/chat/completions", KEY_A, body)
        assert status == 200 and ("x-sparkfleet-caution" in headers) is cautioned, (body, headers)
    logged = [json.loads(line) for line in door_url[3].read_text().splitlines()]
    capped = [entry for entry in logged if entry["caution"]]
    assert [entry["caution"].split(" is under")[0] for entry in capped[-2:]] == ["max_tokens 512", "max_tokens 9999"]
    assert all(entry["model"] == "chat" and entry["status"] == 200 for entry in capped)


def test_upstream_gets_the_path_the_door_matched_and_the_doors_own_request_id(door_url: Any) -> None:
    """A client's spelling of a path (doubled slashes, a dot segment, a query string) and its X-Request-Id (which
    vLLM would make the response's id) never reach the instance."""
    ids = set()
    for path in ("/v1//chat/completions", "/v1/./chat/completions", "/v1/chat/completions?debug=1&x=%2e%2e"):
        status, headers, text = ask(door_url, "POST", path, KEY_A, CHAT, extra={"X-Request-Id": "chosen-by-the-client"})
        assert status == 200, (path, text)
        seen = json.loads(text)
        assert seen["path"] == "/v1/chat/completions", path
        assert seen["request_id"] != "chosen-by-the-client" and headers["x-request-id"] == seen["request_id"]
        ids.add(seen["request_id"])
    assert len(ids) == 3


def test_a_connection_that_never_finishes_its_request_head_is_closed(door_url: Any) -> None:
    """Slow headers are bounded (front_door_limits.header_timeout_s, 2 s here; nginx's default holds them 60 s), on
    the door's port and the chat UI's."""
    context = door_url[1]
    for address in (door_url[0], door_url[2]):
        host_name, port = address.split(":")
        with (
            socket.create_connection((host_name, int(port)), timeout=30) as raw,
            context.wrap_socket(raw, server_hostname=host_name) as tls,
        ):
            tls.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: door\r\nX-Slow: ")
            started = time.monotonic()
            while tls.recv(4096):
                pass  # nginx may answer 408 before it closes
            held = time.monotonic() - started
        assert held < HEADER_TIMEOUT_S + 20, f"the partial head on {address} was held {held:.1f} s"


def test_without_a_valid_key_every_path_is_refused_then_limited_per_address_while_key_holders_go_on(
    door_url: Any,
) -> None:
    statuses = []
    for attempt in range(ANONYMOUS_BURST + 4):
        key = None if attempt % 2 else "w" * 40
        status, headers, text = ask(door_url, "POST", "/v1/chat/completions", key, CHAT)
        statuses.append(status)
        if status == 401:
            assert headers["www-authenticate"] == 'Bearer realm="sparkfleet"'
            assert json.loads(text)["error"]["code"] == "invalid_api_key"
        else:
            assert status == 429, text
            assert headers["retry-after"] == "1"
            assert json.loads(text)["error"]["code"] == "rate_limit_exceeded"
    # At most the burst and the one request the rate allows (the open /health counts too), then only 429.
    refused = statuses.count(401)
    assert 1 <= refused <= ANONYMOUS_BURST + 1, statuses
    assert statuses == [401] * refused + [429] * (len(statuses) - refused)
    # Any other path without a key counts against the same address.
    assert ask(door_url, "GET", "/v1/no-such-path")[0] == 429
    # A key holder on the same address is counted against its key, not the address.
    assert ask(door_url, "POST", "/v1/chat/completions", KEY_A, CHAT)[0] == 200
    assert ask(door_url, "GET", "/v1/models", KEY_A)[0] == 200
    assert ask(door_url, "GET", "/v1/no-such-path", KEY_A)[0::2] == (404, NOT_FOUND)
    assert ask(door_url, "GET", "/_sparkfleet/metrics/chat", KEY_A)[0::2] == (404, NOT_FOUND)


def test_no_path_tells_a_client_without_a_key_whether_it_exists(door_url: Any) -> None:
    """Unknown paths and the metrics paths refuse first: 401 (or 429 once the address is limited), never 404.
    (nginx's internal locations answer 404 to everyone: they exist in the published configuration anyway.)"""
    for path in ("/v1/no-such-path", "/_sparkfleet/metrics/chat", "/", "/v1/chat/completions/x"):
        assert ask(door_url, "GET", path)[0] in (401, 429), path


def test_a_body_reaches_the_ui_only_from_a_signed_in_browser(door_url: Any) -> None:
    """Open WebUI reads a request's JSON before it checks the session: without one, the door answers 401 and no byte
    of the body reaches the UI (its own session check, without the body, decides); reads need no session."""
    del UI_BODIES[:]
    status, _, _ = ask(door_url, "POST", "/api/v1/chats/new", body={"chat": {"t": "x" * 500_000}}, ui=True)
    assert status == 401
    assert UI_BODIES == []
    wrong = {"Cookie": "token=forged"}
    assert ask(door_url, "POST", "/api/v1/chats/new", body={"chat": {}}, extra=wrong, ui=True)[0] == 401
    assert UI_BODIES == []
    assert ask(door_url, "GET", "/api/v1/chats/", ui=True)[0] == 200
    # Issue 61: a GET carrying a body is no read: it too needs the session before the UI sees a byte.
    status, _, _ = ask(door_url, "GET", "/api/v1/chats/", body={"chat": {"t": "x" * 500_000}}, ui=True)
    assert status == 401
    assert UI_BODIES == []


def test_a_websocket_reaches_the_ui_only_from_a_signed_in_browser(door_url: Any) -> None:
    """Issue 61: unauthenticated WebSocket messages of up to 16 MiB took Open WebUI to 1,038 MiB; the door cannot bound a
    message, so the upgrade itself needs the session (a browser's socket carries its sign-in cookie)."""
    del UI_UPGRADES[:]
    socket_io = "/ws/socket.io/?EIO=4&transport=websocket"
    upgrade = {
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    }
    assert ask(door_url, "GET", socket_io, extra=upgrade, ui=True)[0] == 401
    assert ask(door_url, "GET", socket_io, extra={**upgrade, "Cookie": "token=forged"}, ui=True)[0] == 401
    assert UI_UPGRADES == []
    ask(door_url, "GET", socket_io, extra={**upgrade, "Cookie": UI_SESSION}, ui=True)
    assert [socket_io] == UI_UPGRADES


def test_the_ui_port_takes_small_sign_in_bodies_and_limits_each_address(door_url: Any) -> None:
    """The UI's port takes no key: a sign-in body is an address and a password (64 KiB at most, refused before
    the UI reads it), and every request counts against its address, past which it gets 429."""
    big = {"email": "a@example.com", "password": "x" * 70_000}
    assert ask(door_url, "POST", "/api/v1/auths/signin", body=big, ui=True)[0] == 413
    status, _, text = ask(
        door_url, "POST", "/api/v1/auths/signin", body={"email": "a@example.com", "password": "x"}, ui=True
    )
    assert status == 200 and json.loads(text)["bytes"] > 0
    # Elsewhere uploads of up to 32 MiB reach it, from a signed-in browser.
    signed_in = {"Cookie": UI_SESSION}
    assert ask(door_url, "POST", "/api/v1/files/", body={"data": "x" * 200_000}, extra=signed_in, ui=True)[0] == 200
    statuses = [ask(door_url, "POST", "/api/v1/files/", body={}, extra=signed_in, ui=True)[0] for _ in range(UI_BURST + 3)]
    assert statuses.count(429) >= 3 and statuses[0] == 200


def test_a_heavy_key_fills_only_its_share_of_an_instance_and_another_key_goes_straight_through(door_url: Any) -> None:
    """Issue 61: one key holds at most max_num_seqs - 1 of an instance's requests; the next is 429 with Retry-After,
    while a second key's request is admitted at once; the instance's own bound (its sequences and a queue of 1)
    turns away a third key."""
    held = {"model": "chat", "messages": [], "hold_s": 3}
    plan_share, bound = CHAT_SEQS - 1, CHAT_SEQS + 1
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        alice = [pool.submit(ask, door_url, "POST", "/v1/chat/completions", KEY_A, held) for _ in range(plan_share)]
        time.sleep(1.0)
        status, headers, text = ask(door_url, "POST", "/v1/chat/completions", KEY_A, CHAT)
        assert status == 429 and headers["retry-after"] == "2", text
        assert f"this key has {plan_share} of its requests in flight, its share of the model" in text, text
        assert ask(door_url, "POST", "/v1/chat/completions", KEY_B, CHAT)[0] == 200
        bob = pool.submit(ask, door_url, "POST", "/v1/chat/completions", KEY_B, held)
        bob_again = pool.submit(ask, door_url, "POST", "/v1/chat/completions", KEY_B, held)
        time.sleep(1.0)
        status, _, text = ask(door_url, "POST", "/v1/chat/completions", KEY_C, CHAT)
        assert status == 429 and f"or the model has {bound}" in text, text
        # The other instance is admitted on its own bound.
        assert ask(door_url, "POST", "/v1/chat/completions", KEY_C, {"model": "omni", "messages": []})[0] == 200
        assert [f.result(timeout=20)[0] for f in [*alice, bob, bob_again]] == [200] * (plan_share + 2)
    assert ask(door_url, "POST", "/v1/chat/completions", KEY_A, CHAT)[0] == 200


def test_sign_in_guesses_are_limited_per_address(door_url: Any) -> None:
    """Issue 61: 1,200 guesses a minute reached the UI; now a burst of 5 and one a minute (the fixture's), from an
    address of its own (127.0.0.2), whose general allowance on the UI's port (a burst of 8) is untouched."""
    statuses = [sign_in(door_url, "127.0.0.2", "guess")[0] for _ in range(SIGN_IN_BURST + 4)]
    assert statuses == [200] * (SIGN_IN_BURST + 1) + [429] * 3


def sign_in(door: Any, source: str, password: str) -> tuple[int, dict[str, str], str]:
    """One sign-in to the UI's port from `source` (a loopback address of its own)."""
    host_name, port = door[2].split(":")
    connection = http.client.HTTPSConnection(host_name, int(port), context=door[1], timeout=10, source_address=(source, 0))
    connection.request("POST", "/api/v1/auths/signin", body=json.dumps({"email": "a@example.com", "password": password}))
    reply = connection.getresponse()
    answer = (reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read().decode())
    connection.close()
    return answer
