"""Where a release runs (a Spark: aarch64, glibc 2.39, CUDA 13) and which prebuilt kernel packages it carries."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..models import Platform

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
# FlashInfer's prebuilt kernels, each only for the exact flashinfer-python version. Since FlashInfer 0.7 the
# JIT cache is a small shim (`flashinfer-jit-cache==X+cu130`, a few kB) whose Requires-Dist pins one provider
# wheel per architecture (`flashinfer-jit-cache-sm121a`, ~180 MB each); the runtime loads the closest installed
# provider, exact targets before family targets, and only one whose full version equals the shim's
# (flashinfer-ai/flashinfer#4514, #5096). Before 0.7 the JIT cache was one monolithic wheel (1.3-2.1 GB).
# flashinfer-cubin holds no sm_120/121 kernels at all and a stale one breaks FlashInfer's import on a Spark
# (flashinfer-ai/flashinfer#4781): a gb10 release never carries it.
JIT_CACHE_PACKAGE = "flashinfer-jit-cache"
CUBIN_PACKAGE = "flashinfer-cubin"
PREBUILT_KERNEL_PACKAGES = (JIT_CACHE_PACKAGE, CUBIN_PACKAGE)
JIT_CACHE_PROVIDER_PREFIX = f"{JIT_CACHE_PACKAGE}-sm"
# GB10 is sm_121: its exact target first, then the SM12x family build that also runs on it (flashinfer#5096).
GB10_KERNEL_PROVIDERS = ("sm121a", "sm120f")
JIT_CACHE_SPLIT = (0, 7)
FLASHINFER_CUDA13_INDEX = "https://flashinfer.ai/whl/cu130"
FLASHINFER_SOURCE = "flashinfer-ai/flashinfer#4514, #5096 (shim and per-architecture providers), #4781 (no cubin on sm_121)"


def _base(version: str) -> str:
    return version.split("+", maxsplit=1)[0]


def _release_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", _base(version))[:2])


def cuda_local_tag(cuda: str) -> str:
    """'13.0' -> 'cu130': the local version FlashInfer's index gives a CUDA build."""
    parts = cuda.split(".")
    return f"cu{parts[0]}{parts[1] if len(parts) > 1 and parts[1] else '0'}"


def jit_cache_version(flashinfer: str, cuda: str) -> str:
    """The JIT cache of exactly this FlashInfer for this CUDA: '0.7.2.post1+cu130'."""
    return f"{_base(flashinfer)}+{cuda_local_tag(cuda)}"


def providers(packages: Mapping[str, str]) -> dict[str, str]:
    """The JIT-cache providers among the packages: architecture ('sm121a') -> version."""
    return {
        name.removeprefix(f"{JIT_CACHE_PACKAGE}-"): version
        for name, version in packages.items()
        if name.startswith(JIT_CACHE_PROVIDER_PREFIX)
    }


def gb10_provider(available: Mapping[str, str], version: str) -> str | None:
    """The provider a Spark loads, of exactly the shim's version: sm121a where published, else sm120f."""
    return next((arch for arch in GB10_KERNEL_PROVIDERS if available.get(arch) == version), None)


def split_cache(flashinfer: str) -> bool:
    """FlashInfer 0.7 and later publish the JIT cache as a shim plus per-architecture providers."""
    return _release_tuple(flashinfer) >= JIT_CACHE_SPLIT


def _matching(packages: Mapping[str, str], name: str) -> str | None:
    flashinfer = packages.get("flashinfer-python")
    found = packages.get(name)
    return found if flashinfer and found and _base(found) == _base(flashinfer) else None


def prebuilt_kernels(packages: Mapping[str, str]) -> str | None:
    """'flashinfer-jit-cache X + sm121a' when the lock carries FlashInfer's JIT cache for its exact version, so the
    first start compiles nothing; None otherwise. From FlashInfer 0.7 the shim alone holds no kernel: it counts
    only with a provider of its full version (cubins alone still leave the JIT modules to compile)."""
    found = _matching(packages, JIT_CACHE_PACKAGE)
    if not found:
        return None
    if not split_cache(found):
        return f"{JIT_CACHE_PACKAGE} {found}"
    loaded = [arch for arch, version in sorted(providers(packages).items()) if version == found]
    return f"{JIT_CACHE_PACKAGE} {found} + {', '.join(loaded)}" if loaded else None


def kernel_problems(packages: Mapping[str, str], gb10: bool) -> list[str]:
    """Why FlashInfer's prebuilt kernels in a lock would not load (or break it); empty when they fit."""
    problems = []
    flashinfer = packages.get("flashinfer-python")
    shim = packages.get(JIT_CACHE_PACKAGE)
    found = providers(packages)
    if gb10 and CUBIN_PACKAGE in packages:
        cubin = packages[CUBIN_PACKAGE]
        problems.append(f"{CUBIN_PACKAGE} {cubin} has no sm_120/121 kernels and breaks FlashInfer on a Spark")
    if shim and flashinfer and _base(shim) != _base(flashinfer):
        problems.append(f"{JIT_CACHE_PACKAGE} {shim} is not of flashinfer-python {flashinfer} (FlashInfer refuses it)")
    for arch, version in sorted(found.items()):
        if version != shim:
            shim_said = shim or "(no shim)"
            problems.append(f"{JIT_CACHE_PACKAGE}-{arch} {version} is not the shim's version {shim_said} (never loaded)")
    if shim and split_cache(shim) and gb10 and not gb10_provider(found, shim):
        problems.append(f"{JIT_CACHE_PACKAGE} {shim} has no provider a Spark loads ({' or '.join(GB10_KERNEL_PROVIDERS)})")
    return problems


def cubins(packages: Mapping[str, str]) -> str | None:
    found = _matching(packages, CUBIN_PACKAGE)
    return f"{CUBIN_PACKAGE} {found}" if found else None
