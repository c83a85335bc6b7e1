#!/usr/bin/python3
"""Read one long streamed completion through the door slowly, so it is still in flight while the door
reloads; write what arrived and when to OUT (JSON), and OUT.started once the first event is in. Once
OUT.release exists (the reload is done) the rest is read at full speed.

Usage: slow_stream.py HOST PORT CA_FILE KEY_FILE MODEL OUT
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import sys
import time

host, port, ca_file, key_file, model, out = sys.argv[1:]
with open(key_file) as handle:
    key = handle.read().strip()


class SmallWindow(http.client.HTTPSConnection):
    """A small receive buffer: the door can send only as fast as this client reads."""

    def connect(self) -> None:
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        raw.settimeout(120)
        raw.connect((self.host, self.port))
        self.sock = ssl.create_default_context(cafile=ca_file).wrap_socket(raw, server_hostname=self.host)


body = {
    "model": model,
    "prompt": "Count:",
    "max_tokens": 450,
    "ignore_eos": True,
    "temperature": 0,
    "stream": True,
    # The last event before [DONE] counts the tokens: vLLM merges the tokens of a slow reader into fewer events.
    "stream_options": {"include_usage": True},
}
started = time.time()
connection = SmallWindow(host, int(port))
connection.request(
    "POST",
    "/v1/completions",
    body=json.dumps(body),
    headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
)
reply = connection.getresponse()
received = b""
released = False
while True:
    chunk = reply.read1(256)
    if not chunk:
        break
    if not received:
        open(out + ".started", "w").close()
    received += chunk
    released = released or os.path.exists(out + ".release")
    if not released:
        time.sleep(0.3)  # at most about 135 s in all: longer than the revocation run, even on a loaded machine
events = [line for line in received.decode(errors="replace").splitlines() if line.startswith("data: ")]
usage = {}
for event in reversed(events):
    if event != "data: [DONE]":
        usage = json.loads(event[len("data: ") :]).get("usage") or {}
        break
with open(out, "w") as handle:
    json.dump(
        {
            "status": reply.status,
            "events": len(events),
            "completion_tokens": usage.get("completion_tokens"),
            "done": bool(events) and events[-1] == "data: [DONE]",
            "started": started,
            "ended": time.time(),
        },
        handle,
    )
