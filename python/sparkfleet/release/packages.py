"""Where a release runs (a Spark: aarch64, glibc 2.39, CUDA 13) and which prebuilt kernel packages it carries."""

from __future__ import annotations

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
