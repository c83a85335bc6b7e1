"""What a release is made of: the vllm_install role's inputs, checked (version, source, patches, wheels)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ..errors import PlanError
from ..models import Platform, Strict, known_capabilities
from ..versions import NEWEST_RELEASE

_VERSION = re.compile(r"^\d+(\.\d+){1,3}([.+-]?[A-Za-z0-9.]+)*$", re.ASCII)
# A git ref: a branch, tag or commit; no leading '-' (it would be read as an option) and no '..'.
_GIT_REF = re.compile(r"^(?!-)(?!.*\.\.)[A-Za-z0-9._/-]{1,200}$")
_REQUIREMENT = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])? *(([=<>!~]=?|===) *[A-Za-z0-9.*+!_-]+ *,? *)*$"
)
_URL = re.compile(r"^(https?|file)://[!-~]+$")

TRITON_PTXAS = "lib/python{python}/site-packages/triton/backends/nvidia/bin/ptxas"
DIST_ALIAS = "vllm-dist-alias"
SEED_GUIDE = "seed 000 §2 (source build with uv, cu130 torch, FlashInfer cu130 jit-cache)"
# vLLM 0.33.0's Requires-Dist: 'b12x==1.5.1; extra == "b12x"' (read from its wheel by tests/index).
B12X_EXTRA_SINCE = (0, 33)
B12X_REQUIREMENT = "vllm[b12x]"


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2])


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


def patch_entries(patches: list[Any], sha256s: list[str], variable: str = "vllm_install_patches") -> list[dict[str, Any]]:
    """Patches as the install inputs take them: each with its defaults (name the file's, kind patch, target '.', strip
    1) and the sha256 of its content, read on the controller in the same order, which makes it part of the release
    id."""
    for index, item in enumerate(patches):
        if not isinstance(item, dict) or not isinstance(item.get("src"), str):
            raise PlanError(f"{variable}[{index}]", "each patch needs src (a file on the controller)")
    if len(patches) != len(sha256s):
        raise PlanError(variable, f"{len(patches)} patches but {len(sha256s)} contents read")
    out = []
    for item, sha256 in zip(patches, sha256s, strict=True):
        out.append(
            {
                "name": item.get("name") or item["src"].rsplit("/", 1)[-1],
                "kind": item.get("kind", "patch"),
                "target": item.get("target", "."),
                "strip": item.get("strip", 1),
                "sha256": str(sha256),
            }
        )
    return out


class PrecompiledWheel(Strict):
    """The vLLM wheel a fork build takes its compiled kernels from (VLLM_USE_PRECOMPILED), pinned by hash."""

    url: str
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]

    @field_validator("url")
    @classmethod
    def _wheel_url(cls, value: str) -> str:
        if not _URL.fullmatch(value) or value.startswith("http://") or not value.endswith(".whl"):
            raise ValueError(f"{value!r} is not an https or file URL of a .whl")
        return value

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[1]


class InstallInputs(Strict):
    """The vllm_install role's variables; null means the platform default (PLATFORM_PACKAGES)."""

    platform: Platform
    python: str = "python3"
    python_version: Annotated[str, Field(pattern=r"^3\.\d{1,2}$")] | None = None
    uv_version: str
    vllm_source: Literal["pypi", "git"] = "pypi"
    vllm_package: str | None = None
    vllm_version: str
    vllm_git_repo: str | None = None
    vllm_git_ref: str | None = None
    # A fork build's kernels: the precompiled wheel it unpacks, fetched and hash-checked before the build.
    precompiled_wheel: PrecompiledWheel | None = Field(default=None, validate_default=True)
    torch_version: str | None = None
    torchvision_version: str | None = None
    flashinfer_version: str | None = None
    ray_version: str | None = None
    # gb10: lock FlashInfer's prebuilt kernels (its JIT-cache shim and GB10's provider) so nothing compiles at
    # first start; they live only on FlashInfer's own index (flashinfer_index_url, empty: FLASHINFER_CUDA13_INDEX).
    flashinfer_prebuilt: bool = True
    flashinfer_index_url: str | None = None
    # vLLM's b12x extra (0.33+): the SM120/121 kernels behind the fastest Spark recipes, locked like any package.
    b12x: bool = False
    index_urls: tuple[str, ...] | None = None
    # Wheel directories on the controller (resolving) and on the host (installing).
    lock_find_links: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    # A host directory holding every wheel of the lock: install with no index at all.
    wheelhouse: str | None = None
    extra_packages: tuple[str, ...] | None = None
    excludes: tuple[str, ...] | None = None
    patches: tuple[ReleasePatch, ...] = ()
    # What a fork (or a patched release) carries beyond vllm_version, e.g. dflash on a 0.19 fork.
    capabilities: tuple[str, ...] = ()
    cuda_home: str = "/usr/local/cuda"
    # The host is a member of a multi-Spark cluster (ray_cluster_head set): NCCL must carry graphs across nodes.
    multi_node: bool = False

    @model_validator(mode="before")
    @classmethod
    def _newest_release_by_default(cls, values: object) -> object:
        """An empty vllm_version takes the newest release the platform publishes (versions.NEWEST_RELEASE)."""
        if isinstance(values, dict) and not values.get("vllm_version"):
            platform = values.get("platform")
            platform = platform.value if isinstance(platform, Platform) else platform
            if isinstance(platform, str) and platform in NEWEST_RELEASE:
                return {**values, "vllm_version": NEWEST_RELEASE[platform]}
        return values

    @field_validator("uv_version", "vllm_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not _VERSION.fullmatch(value):
            raise ValueError(f"{value!r} is not a version such as 0.32.0")
        return value

    @field_validator("torch_version", "torchvision_version", "flashinfer_version", "ray_version")
    @classmethod
    def _optional_version(cls, value: str | None) -> str | None:
        if value is not None and not _VERSION.fullmatch(value):
            raise ValueError(f"{value!r} is not a version such as 2.12.0+cu130")
        return value

    @field_validator("vllm_git_ref")
    @classmethod
    def _ref(cls, value: str | None) -> str | None:
        if value is not None and not _GIT_REF.fullmatch(value):
            raise ValueError(f"{value!r} is not a git branch, tag or commit")
        return value

    @field_validator("extra_packages")
    @classmethod
    def _requirements(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for item in value or ():
            if not _REQUIREMENT.fullmatch(item):
                raise ValueError(f"{item!r} is not a requirement such as transformers>=5.0")
        return value

    @field_validator("index_urls", "flashinfer_index_url", "vllm_git_repo")
    @classmethod
    def _urls(cls, value: tuple[str, ...] | str | None) -> tuple[str, ...] | str | None:
        for url in [value] if isinstance(value, str) else value or []:
            if not _URL.fullmatch(url):
                raise ValueError(f"{url!r} is not an https or file URL")
            if url.startswith("http://"):
                # Root installs what it fetches: an index or repository in clear text can be swapped on the way.
                raise ValueError(f"{url!r} is plain http: root builds and installs from it, so only https or file")
        return value

    @field_validator("precompiled_wheel")
    @classmethod
    def _fork_kernels_pinned(cls, value: PrecompiledWheel | None, info: ValidationInfo) -> PrecompiledWheel | None:
        source = info.data.get("vllm_source")
        if source == "git" and value is None:
            raise ValueError(
                "a fork build takes vLLM's compiled kernels from a precompiled wheel, which root would otherwise "
                "download unpinned: give {url: https://.../vllm-<version>-<tags>.whl, sha256: <its hash>} (the "
                "wheel of the fork's base commit, e.g. from wheels.vllm.ai)"
            )
        if source != "git" and value is not None:
            raise ValueError("only a fork build (vllm_source git) uses a precompiled wheel: leave it empty")
        return value

    @model_validator(mode="after")
    def _git_needs_repo_and_ref(self) -> InstallInputs:
        if self.vllm_source == "git" and not (self.vllm_git_repo and self.vllm_git_ref):
            raise ValueError("vllm_source git needs vllm_git_repo and vllm_git_ref (a pinned branch, tag or commit)")
        return self

    @field_validator("capabilities")
    @classmethod
    def _capabilities_of_a_fork(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        known_capabilities(value)
        if value and info.data.get("vllm_source") != "git" and not info.data.get("patches"):
            raise ValueError(
                f"a release from the package index is exactly vLLM {info.data.get('vllm_version')}; declare "
                f"{', '.join(value)} only for a fork (vllm_source git) or a patched release"
            )
        return value

    @field_validator("b12x")
    @classmethod
    def _b12x_on_a_spark_release(cls, value: bool, info: ValidationInfo) -> bool:
        platform, version = info.data.get("platform"), info.data.get("vllm_version")
        if not value:
            return value
        if platform is not None and platform is not Platform.GB10:
            raise ValueError(f"b12x holds SM120/121 CUDA kernels; the {platform.value} release cannot load them")
        if info.data.get("vllm_source") == "git":
            raise ValueError("a fork declares its own extras: put b12x==<version> in vllm_install_extra_packages")
        if isinstance(version, str) and _release(version) < B12X_EXTRA_SINCE:
            since = ".".join(map(str, B12X_EXTRA_SINCE))
            raise ValueError(f"vLLM publishes its b12x extra from {since}.0; vllm_version is {version}")
        return value

    @field_validator("flashinfer_index_url")
    @classmethod
    def _jit_cache_needs_flashinfer(cls, value: str | None, info: ValidationInfo) -> str | None:
        platform = info.data.get("platform")
        if value and platform is not None and platform is not Platform.GB10:
            raise ValueError(
                f"FlashInfer's JIT cache is a GB10 (CUDA) package and the {platform.value} release has no "
                "FlashInfer: leave it empty"
            )
        return value
