"""Files on an index read by HTTP range requests: zipfile reads a wheel's central directory or one member of it
(a few hundred kilobytes of a wheel of hundreds of megabytes) without a download.

Each thread keeps one connection per server: a release's hundreds of small reads then cost no name lookup or TLS
handshake each (without a proxy; through one, urllib opens a connection a request).
"""

from __future__ import annotations

import http.client
import io
import ssl
import threading
import urllib.parse
import urllib.request
from typing import Any

TIMEOUT_S = 120
_REDIRECTS = 5
_local = threading.local()


def _proxied(url: str) -> bool:
    return urllib.parse.urlsplit(url).scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(
        urllib.parse.urlsplit(url).hostname or ""
    )


def _connection(scheme: str, netloc: str) -> http.client.HTTPConnection:
    pool: dict[tuple[str, str], http.client.HTTPConnection] = _local.__dict__.setdefault("pool", {})
    if (scheme, netloc) not in pool:
        pool[scheme, netloc] = (
            http.client.HTTPSConnection(netloc, timeout=TIMEOUT_S, context=ssl.create_default_context())
            if scheme == "https"
            else http.client.HTTPConnection(netloc, timeout=TIMEOUT_S)
        )
    return pool[scheme, netloc]


def fetch(url: str, headers: dict[str, str], method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one request, redirects followed, on this thread's kept connection."""
    if _proxied(url):
        request = urllib.request.Request(url, headers=headers, method=method)
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            return answer.status, dict(answer.headers.items()), answer.read()
    for _ in range(_REDIRECTS):
        parts = urllib.parse.urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        for retry in (False, True):  # a kept connection the server closed is opened again once
            connection = _connection(parts.scheme, parts.netloc)
            try:
                connection.request(method, path or "/", headers=headers)
                answer = connection.getresponse()
                body = answer.read()
                break
            except (http.client.HTTPException, OSError):
                connection.close()
                if retry:
                    raise
        if answer.status in (301, 302, 303, 307, 308) and answer.getheader("Location"):
            url = urllib.parse.urljoin(url, answer.getheader("Location", ""))
            continue
        if answer.status >= 400:
            raise OSError(f"{url}: HTTP {answer.status}")
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, body
    raise OSError(f"{url}: more than {_REDIRECTS} redirects")


class RangeFile(io.RawIOBase):
    """A read-only seekable file over HTTP ranges (wrap it in io.BufferedReader for zipfile's small reads)."""

    def __init__(self, url: str, size: int | None = None) -> None:
        self.url = url
        self.pos = 0
        if size is None:
            _, headers, _ = fetch(url, {}, "HEAD")
            size = int({k.lower(): v for k, v in headers.items()}["content-length"])
        self.size = size

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, size: int = -1) -> bytes:
        end = self.size if size < 0 else min(self.size, self.pos + size)
        if end <= self.pos:
            return b""
        status, _, data = fetch(self.url, {"Range": f"bytes={self.pos}-{end - 1}"})
        if status == 200:  # a server that ignores the range sends the whole file
            data = data[self.pos : end]
        self.pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
