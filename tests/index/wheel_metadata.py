"""vLLM's own Requires-Dist, read from its wheel on the index with HTTP range requests (no download).

PyPI serves no separate metadata file for vLLM's wheels, so this reads the zip's central directory
and the METADATA member through ranges of the wheel: a few hundred kilobytes of a ~500 MB file.
"""

from __future__ import annotations

import io
import json
import re
import urllib.request
import zipfile
from typing import Any

SIMPLE = "https://pypi.org/simple/{name}/"


class RangeFile(io.RawIOBase):
    """A read-only seekable file over HTTP ranges."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pos = 0
        head = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(head, timeout=60) as response:
            self.size = int(response.headers["Content-Length"])

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
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end - 1}"})
        with urllib.request.urlopen(request, timeout=120) as response:
            data: bytes = response.read()
        self.pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def wheel_url(name: str, version: str, platform_tag: str) -> str:
    request = urllib.request.Request(SIMPLE.format(name=name), headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    for entry in files:
        filename = entry["filename"]
        if filename.startswith(f"{name}-{version}-") and filename.endswith(".whl") and platform_tag in filename:
            return str(entry["url"])
    raise LookupError(f"no {platform_tag} wheel of {name} {version} on the index")


def requires_dist(name: str, version: str, platform_tag: str = "aarch64") -> list[str]:
    with zipfile.ZipFile(io.BufferedReader(RangeFile(wheel_url(name, version, platform_tag)), 1 << 20)) as wheel:
        member = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        text = wheel.read(member).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def exact_pin(requirements: list[str], package: str) -> str | None:
    """The version a requirement list pins `package` to with ==, for a Linux aarch64 host without extras."""
    for line in requirements:
        spec, _, marker = line.partition(";")
        if "extra ==" in marker:
            continue
        match = re.match(rf"^{re.escape(package)}(\[[^\]]*\])?\s*\(?==\s*([^\s,)]+)", spec.strip(), re.I)
        if match:
            return match.group(2)
    return None
