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
from typing import Any, NamedTuple

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


class Answer(NamedTuple):
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes


def fetch(url: str, headers: dict[str, str], method: str = "GET") -> Answer:
    """One request's answer, redirects followed, on this thread's kept connection."""
    if _proxied(url):
        request = urllib.request.Request(url, headers=headers, method=method)
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            return Answer(answer.status, {k.lower(): v for k, v in answer.headers.items()}, answer.read())
    for hop in range(_REDIRECTS + 1):
        response, body = _request(url, headers, method)
        moved = response.getheader("Location")
        if response.status in (301, 302, 303, 307, 308) and moved and hop < _REDIRECTS:
            url = urllib.parse.urljoin(url, moved)
            continue
        if response.status >= 300:
            raise OSError(f"{url}: HTTP {response.status}")
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, body)
    raise OSError(f"{url}: more than {_REDIRECTS} redirects")


def _request(url: str, headers: dict[str, str], method: str) -> tuple[http.client.HTTPResponse, bytes]:
    """One request on the kept connection; one the server closed meanwhile is opened again, once."""
    parts = urllib.parse.urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        return _send(_connection(parts.scheme, parts.netloc), method, path, headers)
    except (http.client.HTTPException, OSError):
        _connection(parts.scheme, parts.netloc).close()
        return _send(_connection(parts.scheme, parts.netloc), method, path, headers)


def _send(
    connection: http.client.HTTPConnection, method: str, path: str, headers: dict[str, str]
) -> tuple[http.client.HTTPResponse, bytes]:
    connection.request(method, path, headers=headers)
    response = connection.getresponse()
    return response, response.read()


class RangeFile(io.RawIOBase):
    """A read-only seekable file over HTTP ranges (wrap it in io.BufferedReader for zipfile's small reads)."""

    def __init__(self, url: str, size: int | None = None) -> None:
        self.url = url
        self.pos = 0
        if size is None:
            size = int(fetch(url, {}, "HEAD").headers["content-length"])
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
        answer = fetch(self.url, {"Range": f"bytes={self.pos}-{end - 1}"})
        data = answer.body
        if answer.status == 200:  # a server that ignores the range sends the whole file
            data = data[self.pos : end]
        self.pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
