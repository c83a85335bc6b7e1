"""What a locked release takes on disk before it is built: every locked wheel's files, as its zip's central directory
lists them, read from the index with range requests (or from a local find-links directory), never downloaded whole.

uv unpacks each wheel into its cache and links the release's files to it, so a release costs its wheels' unpacked
files once; its bytecode, written at the smoke step, comes on top (vllm_install_free_margin_gib keeps room for it).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import re
import time
import urllib.parse
import zipfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from ..models import Strict
from .cachefile import locked
from .lock import Lock
from .ranges import RangeFile, fetch
from .reading import LockedPackage, parse_lock

T = TypeVar("T")
PYPI_SIMPLE = "https://pypi.org/simple"
BLOCK = 4096  # what a file takes is counted in the filesystem's blocks
_WORKERS = 8
_ATTEMPTS = 3
_SIMPLE_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
_LINK = re.compile(r'<a[^>]*href="([^"]+)"[^>]*>([^<]+)</a>', re.I)


class PackageFootprint(Strict):
    name: str
    version: str
    bytes: int
    wheel: str


class ReleaseFootprint(Strict):
    """A release's files before it is built; `unmeasured` names each package whose wheel no index or link showed."""

    release_id: str
    bytes: int
    packages: int
    largest: list[PackageFootprint]
    unmeasured: list[str]


def wheel_fits(filename: str, arch: str, glibc: str, python: str) -> bool:
    """Whether a wheel installs on the target (its python, abi and platform tags), as uv chose it for the lock."""
    parts = filename[: -len(".whl")].split("-")
    if not filename.endswith(".whl") or len(parts) < 5:
        return False
    pythons, abis, platforms = parts[-3].split("."), parts[-2].split("."), parts[-1].split(".")
    major, minor = (int(p) for p in python.split("."))
    # cp312 for CPython 3.12 itself; py3, py37 .. py312 for pure Python; cp38-abi3 .. cp312-abi3 for the stable ABI.
    older = {f"py{major}{m}" for m in range(minor + 1)} | {f"py{major}"}
    stable = {f"cp{major}{m}" for m in range(minor + 1)} if "abi3" in abis else set()
    fits_python = any(tag == f"cp{major}{minor}" or tag in older or tag in stable for tag in pythons)
    return fits_python and any(_platform_fits(tag, arch, glibc) for tag in platforms)


def _platform_fits(tag: str, arch: str, glibc: str) -> bool:
    if tag == "any":
        return True
    legacy = {"manylinux1": "2.5", "manylinux2010": "2.12", "manylinux2014": "2.17"}
    match = re.fullmatch(r"(manylinux_(\d+)_(\d+)|manylinux1|manylinux2010|manylinux2014|linux)_(\w+)", tag)
    if match is None or match.group(4) != arch:
        return False
    if match.group(1) == "linux":
        return True
    needs = legacy.get(match.group(1)) or f"{match.group(2)}.{match.group(3)}"
    return tuple(map(int, needs.split("."))) <= tuple(map(int, glibc.split(".")))


def unpacked_bytes(archive: zipfile.ZipFile) -> int:
    """The files a wheel unpacks to, in whole blocks (directories take none of their own here)."""
    return sum(-(-info.file_size // BLOCK) * BLOCK for info in archive.infolist() if not info.is_dir())


def _simple_files(index: str, name: str) -> dict[str, tuple[str, str]]:
    """sha256 -> (filename, url) of every file an index lists for a project (PEP 691 JSON or PEP 503 HTML)."""
    page = f"{index.rstrip('/')}/{name}/"
    try:
        kind, body = _retried(functools.partial(_read_page, page))
    except OSError:
        return {}  # the index has no such project, or does not answer: the package counts as unmeasured
    found: dict[str, tuple[str, str]] = {}
    if "json" in kind:
        for item in json.loads(body).get("files", []):
            digest = item.get("hashes", {}).get("sha256")
            if digest:
                found[digest] = (item["filename"], urllib.parse.urljoin(page, item["url"]))
        return found
    for href, text in _LINK.findall(body):
        if "#sha256=" in href:
            url, fragment = href.split("#sha256=", 1)
            found[fragment[:64]] = (text.strip(), urllib.parse.urljoin(page, url))
    return found


def _read_page(page: str) -> tuple[str, str]:
    answer = fetch(page, {"Accept": _SIMPLE_ACCEPT})
    return answer.headers.get("content-type", ""), answer.body.decode("utf-8", "replace")


def _retried(call: Callable[[], T]) -> T:
    """A name lookup or connection that fails under many parallel requests is tried again before it counts."""
    for attempt in range(_ATTEMPTS):
        try:
            return call()
        except OSError:
            if attempt == _ATTEMPTS - 1:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def _unpacked_remote(url: str) -> int:
    with zipfile.ZipFile(io.BufferedReader(RangeFile(url), 1 << 16)) as archive:
        return unpacked_bytes(archive)


def _local_files(links: Sequence[str]) -> dict[str, Path]:
    """sha256 -> path of every wheel in the local find-links directories."""
    found: dict[str, Path] = {}
    for link in links:
        folder = Path(link.removeprefix("file://")).expanduser()
        for wheel in sorted(folder.glob("*.whl")) if folder.is_dir() else ():
            found[hashlib.sha256(wheel.read_bytes()).hexdigest()] = wheel
    return found


def _measure(
    package: LockedPackage, lock: Lock, *, indexes: Sequence[str], local: dict[str, Path]
) -> PackageFootprint | str:
    name, version = package.name, package.version
    wanted = {h.removeprefix("sha256:") for h in package.hashes}
    for digest in sorted(wanted & local.keys()):
        path = local[digest]
        if wheel_fits(path.name, lock.arch, lock.glibc, lock.python):
            with zipfile.ZipFile(path) as archive:
                return PackageFootprint(name=name, version=version, bytes=unpacked_bytes(archive), wheel=path.name)
    for index in indexes:
        listed = _simple_files(index, name)
        fitting = sorted(
            (listed[d] for d in wanted & listed.keys() if wheel_fits(listed[d][0], lock.arch, lock.glibc, lock.python)),
            key=lambda f: f[0],
        )
        for filename, url in fitting[:1]:
            try:
                size = _retried(functools.partial(_unpacked_remote, url))
                return PackageFootprint(name=name, version=version, bytes=size, wheel=filename)
            except (OSError, zipfile.BadZipFile) as exc:
                return f"{name} {version} ({filename}: {exc})"
    return f"{name} {version} (no wheel for {lock.target} on {', '.join(indexes) or 'no index'})"


def release_footprint(
    lock: Lock, indexes: Sequence[str] = (PYPI_SIMPLE,), find_links: Sequence[str] = ()
) -> ReleaseFootprint:
    """What the lock's release takes once built, package by package, from the files its hashes name."""
    local = _local_files(find_links)
    pinned = parse_lock(lock.requirements)
    searched = list(dict.fromkeys([*indexes, *([lock.kernels_index] if lock.kernels_index else [])]))
    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        results = list(pool.map(lambda package: _measure(package, lock, indexes=searched, local=local), pinned.values()))
    measured = [r for r in results if isinstance(r, PackageFootprint)]
    return ReleaseFootprint(
        release_id=lock.release_id,
        bytes=sum(m.bytes for m in measured),
        packages=len(measured),
        largest=sorted(measured, key=lambda m: -m.bytes)[:3],
        unmeasured=sorted(r for r in results if isinstance(r, str)),
    )


def cached_footprint(
    lock: Lock, cache_dir: Path | None, indexes: Sequence[str] = (PYPI_SIMPLE,), find_links: Sequence[str] = ()
) -> ReleaseFootprint:
    """The footprint of a lock, measured once and kept beside the locks (a lock's files never change)."""
    key = hashlib.sha256(json.dumps([lock.requirements, lock.target, lock.python, sorted(indexes)]).encode()).hexdigest()
    # Apart from the locks, whose directory holds locks alone (readers take every *.json there for one).
    path = cache_dir / "footprints" / f"{key}.json" if cache_dir else None
    if path is None:
        return release_footprint(lock, indexes, find_links)
    with locked(path):  # the play's hosts ask at once: one measures, the others read its answer
        if path.exists():
            return ReleaseFootprint.model_validate_json(path.read_text(encoding="utf-8"))
        found = release_footprint(lock, indexes, find_links)
        if not found.unmeasured:  # a package the index did not answer for is measured again next time
            path.write_text(found.model_dump_json(indent=1), encoding="utf-8")
        return found
