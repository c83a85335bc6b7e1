#!/usr/bin/python3
"""Attack and use a front door from another host; print what each request got, as JSON.

Usage: door_probe.py BASE_URL CA_FILE KEY_FILE PATHS_FILE MODEL...

PATHS_FILE holds vLLM's own route list (its /openapi.json, read on the door's host). Every route is
tried with GET and POST without a key and with a wrong key, then with the key; the models are asked
for a chat completion each, one of them streamed, and an unknown model is asked for. Then a flood of wrong
keys meets the per-address limit, and one key's burst its own limit. The key is read
from a file so it never reaches an argv.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import sys
import time
from urllib.parse import urlsplit

base, ca_file, key_file, paths_file, *models = sys.argv[1:]
url = urlsplit(base)
context = ssl.create_default_context(cafile=ca_file)
# http.client speaks HTTP/1.1; a second context only asks which protocol the door offers.
offer = ssl.create_default_context(cafile=ca_file)
offer.set_alpn_protocols(["h2", "http/1.1"])
with open(key_file) as handle:
    key = handle.read().strip()
with open(paths_file) as handle:
    # Path parameters ({model_id}) become a plain word: the door must refuse the path whatever it is.
    routes = sorted({re.sub(r"\{[^}]*\}", "x", p) for p in json.load(handle)["paths"]} | {"/health", "/metrics", "/docs"})


_kept: list[http.client.HTTPSConnection] = []


def ask(method: str, path: str, auth: str | None, body: dict[str, object] | None = None) -> tuple[int, str, dict[str, str]]:
    # One kept-alive connection, as clients hold one: a new TLS handshake per request cost most of this probe's
    # time. A connection the door closed (or said it would) is opened again.
    headers = {"Content-Type": "application/json"}
    if auth is not None:
        headers["Authorization"] = f"Bearer {auth}"
    data = json.dumps(body).encode() if body is not None else (b"{}" if method == "POST" else None)
    for attempt in (1, 2):
        if not _kept:
            # A request for a stopped on-demand model waits while the door starts it.
            _kept.append(http.client.HTTPSConnection(url.hostname, url.port or 443, context=context, timeout=300))
        connection = _kept[0]
        try:
            connection.request(method, path, body=data, headers=headers)
            reply = connection.getresponse()
            text = reply.read().decode(errors="replace")
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            connection.close()
            _kept.clear()
            if attempt == 2:
                raise
            continue
        if reply.will_close:
            connection.close()
            _kept.clear()
        return reply.status, text, {k.lower(): v for k, v in reply.getheaders()}
    raise AssertionError("unreachable")


def alpn() -> str | None:
    with (
        socket.create_connection((url.hostname, url.port or 443), timeout=10) as raw,
        offer.wrap_socket(raw, server_hostname=url.hostname) as tls,
    ):
        return tls.selected_alpn_protocol()


chat = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8, "temperature": 0}
result: dict[str, object] = {"routes": len(routes), "alpn": alpn()}
result["without_key"] = {f"{m} {p}": ask(m, p, None)[0] for p in routes for m in ("GET", "POST")}
result["wrong_key"] = {f"{m} {p}": ask(m, p, "w" * 40)[0] for p in routes for m in ("GET", "POST")}
result["health_body"] = ask("GET", "/health", None)[1]
result["with_key"] = {f"{m} {p}": ask(m, p, key)[0] for p in routes for m in ("GET", "POST")}
status, text, _ = ask("GET", "/v1/models", key)
result["models"] = [m["id"] for m in json.loads(text)["data"]] if status == 200 else text
result["chats"] = {}
for model in models:
    began = time.monotonic()
    status, text, _ = ask("POST", "/v1/chat/completions", key, {**chat, "model": model})
    reply = json.loads(text)
    answer = reply.get("choices", [{}])[0].get("message", {}).get("content")
    took = round(time.monotonic() - began, 1)
    result["chats"][model] = {"status": status, "model": reply.get("model"), "text": answer, "took_s": took}  # type: ignore[index]
status, text, headers = ask("POST", "/v1/chat/completions", key, {**chat, "model": models[0], "stream": True})
events = [line for line in text.splitlines() if line.startswith("data: ")]
done = bool(events) and events[-1] == "data: [DONE]"
result["stream"] = {"status": status, "events": len(events), "done": done, "type": headers.get("content-type")}
status, text, _ = ask("POST", "/v1/chat/completions", key, {**chat, "model": "no/such-model"})
result["unknown_model"] = {"status": status, "error": json.loads(text).get("error", {})}
# Past the per-address limit of requests without a valid key (this address already spent most of its burst
# on the sweeps above): 429 for them, while a key holder on the same address is still served.
flood = [ask("GET", "/v1/models", "w" * 40)[0] for _ in range(400)]
time.sleep(2)
result["anonymous_flood"] = {"statuses": sorted(set(flood)), "then_with_key": ask("GET", "/v1/models", key)[0]}
# Past the default burst of one key: the door answers 429 with Retry-After, in OpenAI's format.
limited = [ask("GET", "/v1/models", key) for _ in range(90)]
result["limited"] = {
    "statuses": sorted({status for status, _, _ in limited}),
    "retry_after": next((h.get("retry-after") for status, _, h in limited if status == 429), None),
    "code": next((json.loads(t)["error"]["code"] for status, t, _ in limited if status == 429), None),
}
print(json.dumps(result))
