"""Flood one door port from one address and ask the other port from the same address meanwhile (issue 61).

Run on the sandbox host as root: argv FLOODED_PORT ASKED_PORT SECONDS KEY_FILE. Connections to FLOODED_PORT are
opened from 127.0.0.2 (Linux gives the host all of 127.0.0.0/8) and held silent, as fast as they are refused, while
a TLS `GET /health` with the key goes to ASKED_PORT from the same address every 100 ms. Prints JSON: how many the
flood opened and how many were refused, the most the door's side held established on the flooded port (ss), and the
asked port's answers. Only the flooder's connections are counted: the chat UI keeps its own to the door.
"""

from __future__ import annotations

import json
import resource
import socket
import ssl
import subprocess
import sys
import threading
import time

FLOODER = "127.0.0.2"
# More than the 1,530 silent connections that filled a two-worker door in issue 61; the flood holds no more than this.
MOST_HELD = 1600


def connect(port: int) -> socket.socket | None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(5)
    try:
        sock.bind((FLOODER, 0))
        sock.connect(("127.0.0.1", port))
    except OSError:
        sock.close()
        return None
    return sock


def main(argv: list[str]) -> int:
    flooded, asked, seconds = int(argv[1]), int(argv[2]), float(argv[3])
    _, most = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (most, most))
    with open(argv[4], encoding="utf-8") as handle:
        key = handle.read().strip()
    tls = ssl.create_default_context(cafile="/etc/nginx/sparkfleet/tls/door.crt")
    tls.check_hostname = False
    stop = time.monotonic() + seconds
    held: list[socket.socket] = []
    counts = {"opened": 0, "refused": 0}

    def flood() -> None:
        while time.monotonic() < stop:
            if len(held) >= MOST_HELD:
                time.sleep(0.01)
                continue
            sock = connect(flooded)
            if sock is None:
                counts["refused"] += 1
                time.sleep(0.001)
            else:
                counts["opened"] += 1
                held.append(sock)

    threads = [threading.Thread(target=flood) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(1)
    answers, established = [], 0
    while time.monotonic() < stop:
        listed = subprocess.run(
            ["ss", "-Htn", "state", "established", f"( sport = :{flooded} and dst {FLOODER} )"],
            capture_output=True,
            text=True,
            check=False,
        )
        established = max(established, len(listed.stdout.splitlines()))
        status = "no connection"
        started = time.monotonic()
        sock = connect(asked)
        if sock is not None:
            try:
                with tls.wrap_socket(sock, server_hostname="localhost") as secure:
                    head = f"GET /health HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {key}\r\n"
                    head += "Connection: close\r\n\r\n"
                    secure.sendall(head.encode())
                    status = secure.recv(64).decode(errors="replace").split("\r\n")[0]
            except OSError as exc:
                status = type(exc).__name__
        answers.append({"status": status, "s": round(time.monotonic() - started, 3)})
        time.sleep(0.1)
    for thread in threads:
        thread.join()
    for sock in held:
        sock.close()
    print(json.dumps({**counts, "established": established, "answers": answers}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
