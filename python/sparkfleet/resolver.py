"""Controller-side I/O for releases: uv resolves the lock, git pins a fork's ref, pip fills a wheelhouse.

Everything that reads the network or the disk for a release lives here; the rules are in
`sparkfleet.release`. Errors are PlanErrors naming the variable (role or CLI spelling).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .errors import PlanError
from .models import Platform
from .recipes import InstallInputs, lock_request, target_of
from .release import (
    FLASHINFER_SOURCE,
    GB10_KERNEL_PROVIDERS,
    JIT_CACHE_PACKAGE,
    PIN_VARIABLES,
    Lock,
    LockRequest,
    Naming,
    build_lock,
    build_requirement_lines,
    check_lock_file,
    check_lock_schema,
    compile_argv,
    explain_resolution_failure,
    fork_requirement_lines,
    gb10_provider,
    index_cutoff,
    jit_cache_version,
    kernel_problems,
    nccl_override,
    parse_lock,
    providers,
    requirements_in,
    torch_cuda,
)
from .release.cachefile import locked

_SHA = re.compile(r"^[0-9a-f]{40}$")
RESOLVE_TIMEOUT_S = 600
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sparkfleet" / "locks"


def uv_binary() -> str:
    """uv on PATH, else the one the `uv` package ships (a dependency of sparkfleet)."""
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError) as exc:
        raise PlanError("uv", "uv is not installed on the controller", ("pip install uv",)) from exc


def _run(
    argv: list[str], timeout: int = RESOLVE_TIMEOUT_S, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, env=env)


def resolve_git_sha(repo: str, ref: str, naming: Naming = "role") -> str:
    """The commit a branch, tag or sha names, asked of the repository (a sha is taken as it is)."""
    if _SHA.fullmatch(ref):
        return ref
    try:
        done = _run(["git", "ls-remote", "--", repo, ref, f"refs/tags/{ref}^{{}}"], timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PlanError(PIN_VARIABLES[naming]["*git"], f"git ls-remote {repo} failed: {exc}") from exc
    if done.returncode != 0:
        raise PlanError(PIN_VARIABLES[naming]["*git"], f"{repo} cannot be read: {done.stderr.strip()[:500]}")
    rows = [line.split("\t") for line in done.stdout.splitlines() if "\t" in line]
    # An annotated tag's peeled commit (^{}) wins over the tag object.
    peeled = [sha for sha, name in rows if name.endswith("^{}")]
    direct = [sha for sha, name in rows if not name.endswith("^{}")]
    if not (peeled or direct):
        raise PlanError(PIN_VARIABLES[naming]["*git"], f"{ref!r} is not a branch or tag of {repo}")
    return (peeled or direct)[0]


def fork_requirements(repo: str, sha: str, device: str, naming: Naming = "role") -> list[str]:
    """The requirements vLLM's setup.py would declare for `device`, read from the fork at `sha`."""
    with tempfile.TemporaryDirectory(prefix="sparkfleet-fork-") as tmp:
        steps = [
            ["git", "init", "-q", tmp],
            ["git", "-C", tmp, "fetch", "-q", "--depth", "1", "--filter=blob:none", repo, sha],
        ]
        for argv in steps:
            done = _run(argv, timeout=300)
            if done.returncode != 0:
                raise PlanError(
                    PIN_VARIABLES[naming]["*git"], f"cannot fetch {sha} from {repo}: {done.stderr.strip()[:500]}"
                )
        listing = _run(["git", "-C", tmp, "ls-tree", "--name-only", "FETCH_HEAD", "requirements/"])
        files = {}
        for path in listing.stdout.split():
            shown = _run(["git", "-C", tmp, "show", f"FETCH_HEAD:{path}"])
            if shown.returncode == 0:
                files[path.removeprefix("requirements/")] = shown.stdout
        pyproject = _run(["git", "-C", tmp, "show", "FETCH_HEAD:pyproject.toml"])
    # Its build requirements join the lock too: the fork builds without isolation, from hashed packages only.
    build = build_requirement_lines(pyproject.stdout if pyproject.returncode == 0 else None)
    return fork_requirement_lines(files, f"{device}.txt") + build


def compile_lock(request: LockRequest, naming: Naming = "role", uv: str | None = None) -> Lock:
    """Resolve the request for its target with uv (index metadata only) and check the result."""
    uv = uv or uv_binary()
    # Every resolve of this lock sees the index as of one cutoff, recorded with it: a re-resolve reproduces it.
    # uv drops every file without an upload time under a cutoff, and only PyPI publishes them (PEP 700; local
    # find-links count as uploaded): a lock that takes packages from another index resolves at the index's now.
    settled = not (request.index_urls or request.flashinfer_jit_cache_index)
    cutoff = index_cutoff(os.environ.get("UV_EXCLUDE_NEWER"), datetime.now(UTC)) if settled else None
    # FlashInfer's kernels must be of the FlashInfer vLLM resolves to: resolve once without their index first.
    plain_request = request.model_copy(update={"flashinfer_jit_cache_index": None})
    text = _compile(plain_request, uv, naming, cutoff)
    override = nccl_override(request, {name: pkg.version for name, pkg in parse_lock(text).items()})
    if override:
        request = request.model_copy(update={"overrides": (*request.overrides, override)})
        text = _compile(request.model_copy(update={"flashinfer_jit_cache_index": None}), uv, naming, cutoff)
    kernels = _kernel_choice(request, text, uv, naming)
    if kernels.requirements:
        with_kernels = request.model_copy(
            update={
                "extra_packages": (*request.extra_packages, *kernels.requirements),
                "excludes": (*request.excludes, *kernels.excludes),
            }
        )
        text = _compile(with_kernels, uv, naming, cutoff)
    locked = {name: pkg.version for name, pkg in parse_lock(text).items()}
    if problems := kernel_problems(locked, gb10=request.platform is Platform.GB10):
        raise PlanError(PIN_VARIABLES[naming]["flashinfer-jit-cache"], "; ".join(problems), (FLASHINFER_SOURCE,))
    return build_lock(request, text, naming).model_copy(
        update={
            "resolved_at": cutoff or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "kernels_index": request.flashinfer_jit_cache_index if kernels.requirements else None,
            "kernels_note": kernels.note,
        }
    )


@dataclass(frozen=True)
class KernelChoice:
    """FlashInfer's prebuilt kernels a gb10 lock takes: the shim and one provider, the providers it leaves out,
    or why it takes none (then FlashInfer compiles at first start and the plan budgets for it)."""

    requirements: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    note: str | None = None


def _kernel_choice(request: LockRequest, text: str, uv: str, naming: Naming) -> KernelChoice:
    """Ask FlashInfer's index which providers the shim of this exact FlashInfer and CUDA pins, and take GB10's."""
    if request.platform is not Platform.GB10:
        return KernelChoice()
    index = request.flashinfer_jit_cache_index
    if not index:
        return KernelChoice(note=f"turned off ({PIN_VARIABLES[naming]['*prebuilt']})")
    locked = parse_lock(text)
    flashinfer = locked.get("flashinfer-python")
    cuda = torch_cuda(locked).cuda
    if flashinfer is None or cuda is None:
        return KernelChoice(note="the release has no FlashInfer on CUDA")
    version = jit_cache_version(flashinfer.version, cuda)
    shim = f"{JIT_CACHE_PACKAGE}=={version}"
    # The shim alone (first-index: FlashInfer's names come from its index only): its Requires-Dist names every
    # provider it was published with.
    probe_request = LockRequest(
        platform=request.platform,
        target=request.target,
        vllm_version=request.vllm_version,
        source="git",
        extra_packages=(shim,),
        flashinfer_jit_cache_index=index,
        index_urls=request.index_urls,
        find_links=request.find_links,
    )
    try:
        probe = _compile(probe_request, uv, naming, None)
    except PlanError as exc:
        return KernelChoice(note=f"{shim} could not be locked from {index}: {exc.problem[:240]}")
    published = providers({name: pkg.version for name, pkg in parse_lock(probe).items()})
    chosen = gb10_provider(published, version)
    if chosen is None:
        stale = {arch: found for arch, found in published.items() if arch in GB10_KERNEL_PROVIDERS}
        if stale:
            mismatch = ", ".join(f"{JIT_CACHE_PACKAGE}-{arch} {found}" for arch, found in sorted(stale.items()))
            raise PlanError(
                PIN_VARIABLES[naming]["flashinfer-jit-cache"],
                f"{index} publishes {shim} with {mismatch}: a provider of another version than its shim never loads",
                (f"an index whose providers match the shim ({FLASHINFER_SOURCE})",),
            )
        have = ", ".join(sorted(published)) or "none"
        wanted = " or ".join(GB10_KERNEL_PROVIDERS)
        return KernelChoice(note=f"{index}'s {shim} has no provider for GB10 ({wanted}); it has {have}")
    others = tuple(f"{JIT_CACHE_PACKAGE}-{arch}" for arch in sorted(published) if arch != chosen)
    return KernelChoice(requirements=(shim, f"{JIT_CACHE_PACKAGE}-{chosen}=={version}"), excludes=others)


def _compile(request: LockRequest, uv: str, naming: Naming, cutoff: str | None) -> str:
    with tempfile.TemporaryDirectory(prefix="sparkfleet-lock-") as tmp:
        infile, outfile = Path(tmp, "requirements.in"), Path(tmp, "requirements.lock")
        infile.write_text("\n".join(requirements_in(request)) + "\n", encoding="utf-8")
        excludes = overrides = None
        if request.excludes:
            excludes = Path(tmp, "excludes.txt")
            excludes.write_text("\n".join(request.excludes) + "\n", encoding="utf-8")
        if request.overrides:
            overrides = Path(tmp, "overrides.txt")
            overrides.write_text("\n".join(request.overrides) + "\n", encoding="utf-8")
        argv = compile_argv(
            request,
            uv,
            str(infile),
            str(outfile),
            excludes_file=str(excludes) if excludes else None,
            overrides_file=str(overrides) if overrides else None,
            exclude_newer=cutoff,
        )
        try:
            done = _run(argv)
        except subprocess.TimeoutExpired as exc:
            raise PlanError(PIN_VARIABLES[naming]["*index"], f"resolving took over {RESOLVE_TIMEOUT_S} s") from exc
        if done.returncode != 0:
            raise explain_resolution_failure(done.stderr, request, naming)
        return outfile.read_text(encoding="utf-8")


def cached_lock(
    request: LockRequest, cache_dir: Path = DEFAULT_CACHE, relock: bool = False, naming: Naming = "role"
) -> tuple[Lock, bool]:
    """The lock for this request, resolved once and kept on the controller; (lock, resolved_now).

    Hosts of a play (and later plays) reuse it, so a re-run never moves a fleet to packages
    published since; `relock` resolves again. Concurrent forks wait for the first resolve.
    """
    path = cache_dir / f"{request.fingerprint()}.json"
    with locked(path):
        cached = Lock.model_validate_json(path.read_text(encoding="utf-8")) if path.exists() else None
        if cached is not None and not relock:
            return cached, False
        lock = compile_lock(request, naming)
        # A re-resolve that finds the same package set keeps the lock (and its id and cutoff) it had.
        if cached is not None and cached.same_packages(lock):
            return cached, False
        tmp = path.with_suffix(".tmp")
        tmp.write_text(lock.model_dump_json(indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
        return lock, True


def read_lock_file(path: str, request: LockRequest, naming: Naming = "role") -> Lock:
    """A lock the user committed (`sparkfleet release lock --output`), checked against the host."""
    variable = PIN_VARIABLES[naming]["*lock"]
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanError(variable, f"cannot read {path}: {exc.strerror}") from exc
    check_lock_schema(text, path, variable)
    try:
        lock = Lock.model_validate_json(text)
    except ValueError as exc:
        raise PlanError(variable, f"{path} is not a sparkfleet release lock: {str(exc)[:300]}") from exc
    check_lock_file(lock, request, naming)
    return lock


def download_wheelhouse(
    lock: Lock, directory: str, index_urls: tuple[str, ...] = (), find_links: tuple[str, ...] = ()
) -> int:
    """Every wheel of the lock for its target, hash-checked, into `directory` (an air-gapped fleet's source)."""
    pip = _pip()
    Path(directory).mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8") as reqs:
        reqs.write(lock.requirements)
        reqs.flush()
        argv = [
            *pip,
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--require-hashes",
            "--platform",
            f"manylinux_{lock.glibc.replace('.', '_')}_{lock.arch}",
            "--python-version",
            lock.python,
            "--implementation",
            "cp",
            "--dest",
            directory,
            "--requirement",
            reqs.name,
        ]
        for url in index_urls:
            argv += ["--extra-index-url", url]
        for link in find_links:
            argv += ["--find-links", link]
        done = _run(argv, timeout=3600)
    if done.returncode != 0:
        raise PlanError("--wheelhouse", f"pip download failed: {done.stderr.strip()[-1500:]}")
    return sum(1 for name in os.listdir(directory) if name.endswith(".whl"))


def _pip() -> list[str]:
    """pip from PyPI through uv (cached by uv): pip download knows other platforms' tags, uv has no download."""
    return [uv_binary(), "tool", "run", "--from", "pip", "pip"]


def lock_for(
    inputs: InstallInputs,
    *,
    host_arch: str | None = None,
    host_glibc: str | None = None,
    lock_file: str | None = None,
    cache_dir: Path | None = DEFAULT_CACHE,
    relock: bool = False,
    naming: Naming = "role",
) -> Lock:
    """The lock a host installs: the user's committed lock file, else the controller's (cached) resolve.

    A fork's ref is pinned to its commit sha here, and its own requirement files are read at that sha.
    """
    target = target_of(inputs, host_arch, host_glibc)
    sha = None
    fork: tuple[str, ...] = ()
    if inputs.vllm_source == "git":
        sha = resolve_git_sha(str(inputs.vllm_git_repo), str(inputs.vllm_git_ref), naming)
        if not lock_file:
            device = "cuda" if inputs.platform.value == "gb10" else "cpu"
            fork = tuple(fork_requirements(str(inputs.vllm_git_repo), sha, device, naming))
    request = lock_request(inputs, target, sha, fork)
    if lock_file:
        lock = read_lock_file(lock_file, request, naming)
        if sha and lock.git_sha != sha:
            raise PlanError(
                PIN_VARIABLES[naming]["*lock"],
                f"{lock_file} was locked at {lock.git_sha}, {PIN_VARIABLES[naming]['*git']} now names {sha}",
            )
        return lock
    if cache_dir is None:
        return compile_lock(request, naming)
    return cached_lock(request, cache_dir, relock, naming)[0]


_UV_VERSION = re.compile(r"\d+\.\d+\.\d+")
_HASH_LINE = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def uv_requirement(version: str, cache_dir: Path | None = DEFAULT_CACHE, uv: str | None = None) -> str:
    """`uv==VERSION` with the sha256 of every file the index has for it, for pip's --require-hashes.

    Root installs uv on every host before anything else and then builds releases with it: the hashes
    come from the index once, on the controller, and are kept with the locks so later runs and other
    hosts install exactly those files.
    """
    if not _UV_VERSION.fullmatch(version):
        raise PlanError("vllm_install_uv_version", f"{version!r} is not a uv release such as 0.13.9")
    path = cache_dir / f"uv-{version}.requirements.txt" if cache_dir else None
    if path is not None and path.exists():
        return _checked_uv_requirement(path.read_text(encoding="utf-8"), version)
    with tempfile.TemporaryDirectory(prefix="sparkfleet-uv-") as tmp:
        infile, outfile = Path(tmp, "uv.in"), Path(tmp, "uv.txt")
        infile.write_text(f"uv=={version}\n", encoding="utf-8")
        argv = [uv or uv_binary(), "pip", "compile", str(infile), "--no-deps", "--generate-hashes", "--no-header"]
        done = _run([*argv, "--quiet", "--output-file", str(outfile)])
        if done.returncode != 0:
            reason = done.stderr.strip().splitlines()[-1:] or ["no output"]
            raise PlanError("vllm_install_uv_version", f"uv {version} does not resolve on the index: {reason[0].strip()}")
        text = _checked_uv_requirement(outfile.read_text(encoding="utf-8"), version)
    if path is not None:
        with locked(path):
            tmp_path = path.with_suffix(".tmp")
            tmp_path.write_text(text, encoding="utf-8")
            tmp_path.replace(path)
    return text


def _checked_uv_requirement(text: str, version: str) -> str:
    lines = [line.strip().rstrip("\\").strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    hashes = [line for line in lines[1:] if _HASH_LINE.fullmatch(line)]
    if not lines or lines[0] != f"uv=={version}" or not hashes or len(hashes) != len(lines) - 1:
        problem = f"the hash-pinned requirement for uv {version} is not one: {text[:200]!r}"
        raise PlanError("vllm_install_uv_version", problem)
    return f"uv=={version} \\\n" + " \\\n".join(f"    {line}" for line in hashes) + "\n"


def lock_json(lock: Lock) -> str:
    return json.dumps(lock.model_dump(mode="json"), indent=2) + "\n"
