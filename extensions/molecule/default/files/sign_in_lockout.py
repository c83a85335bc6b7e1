"""Issue 61's sign-in lockout against the real door and Open WebUI, run on the host by verify_webui.yml.

Reads {"url", "ca", "email", "password", "failures"} on stdin (the password never on a command line), signs in from
127.0.0.3 (Linux gives the host all of 127.0.0.0/8; the door flood's 127.0.0.2 and everyone else's 127.0.0.1 are
left alone) with a wrong password `failures` times, then with the right one, and prints each answer's status, its
Retry-After and its text as JSON (nothing of the password).
"""

from __future__ import annotations

import http.client
import json
import ssl
import sys
from urllib.parse import urlsplit

SOURCE = "127.0.0.3"


def sign_in(url: str, context: ssl.SSLContext, email: str, password: str) -> dict[str, object]:
    where = urlsplit(url)
    connection = http.client.HTTPSConnection(
        where.hostname or "", where.port or 443, context=context, timeout=30, source_address=(SOURCE, 0)
    )
    connection.request(
        "POST", where.path, body=json.dumps({"email": email, "password": password}),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    reply = connection.getresponse()
    answer = {"status": reply.status, "retry_after": reply.getheader("Retry-After"), "text": reply.read().decode()[:300]}
    connection.close()
    return answer


def main() -> None:
    given = json.load(sys.stdin)
    context = ssl.create_default_context(cafile=given["ca"])
    wrong = [sign_in(given["url"], context, given["email"], "not-" + given["password"]) for _ in range(given["failures"])]
    right = sign_in(given["url"], context, given["email"], given["password"])
    print(json.dumps({"source": SOURCE, "wrong": wrong, "right": right}))


if __name__ == "__main__":
    main()
