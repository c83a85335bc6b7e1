"""A release is a lock: the exact packages (with hashes) a vLLM release installs on its target.

Pure functions only, but for `record`, which reads what a built release implements by running its own Python
(record_reader.py). `sparkfleet.resolver` runs uv and git on the controller and hands the text it got to these
functions; nothing else here touches the network or the disk.

The lock is resolved by uv for the TARGET (a Spark is aarch64 whatever the controller is), and the
release id is a hash of the locked packages, the patches and, for a git source, the commit sha, so
two hosts with the same id have byte-identical package sets.
"""

from __future__ import annotations

from .lock import (
    Lock,
    build_lock,
    check_lock_file,
    check_lock_schema,
    explain_resolution_failure,
    lock_release_id,
    release_id,
)
from .packages import (
    CUBIN_PACKAGE,
    FLASHINFER_CUDA13_INDEX,
    FLASHINFER_SOURCE,
    GB10_ARCH,
    GB10_CUDA_MAJOR,
    GB10_CUDA_SOURCE,
    GB10_GLIBC,
    GB10_KERNEL_PROVIDERS,
    JIT_CACHE_PACKAGE,
    JIT_CACHE_PROVIDER_PREFIX,
    NOT_ON_PYPI,
    PLATFORM_PYTHON,
    PREBUILT_KERNEL_PACKAGES,
    cubins,
    gb10_provider,
    jit_cache_version,
    kernel_problems,
    prebuilt_kernels,
    providers,
)
from .reading import CudaFinding, LockedPackage, canonical_lock, check_target, parse_lock, torch_cuda
from .request import (
    INDEX_STRATEGY,
    LOCK_SCHEMA,
    NCCL_GRAPHS_MIN,
    NCCL_MULTI_NODE,
    NCCL_PACKAGE,
    PIN_VARIABLES,
    LockRequest,
    Naming,
    Target,
    build_requirement_lines,
    canonical_name,
    compile_argv,
    fork_requirement_lines,
    index_cutoff,
    nccl_override,
    requirements_in,
    target_for,
)

__all__ = [
    "CUBIN_PACKAGE",
    "FLASHINFER_CUDA13_INDEX",
    "FLASHINFER_SOURCE",
    "GB10_ARCH",
    "GB10_CUDA_MAJOR",
    "GB10_CUDA_SOURCE",
    "GB10_GLIBC",
    "GB10_KERNEL_PROVIDERS",
    "INDEX_STRATEGY",
    "JIT_CACHE_PACKAGE",
    "JIT_CACHE_PROVIDER_PREFIX",
    "LOCK_SCHEMA",
    "NCCL_GRAPHS_MIN",
    "NCCL_MULTI_NODE",
    "NCCL_PACKAGE",
    "NOT_ON_PYPI",
    "PIN_VARIABLES",
    "PLATFORM_PYTHON",
    "PREBUILT_KERNEL_PACKAGES",
    "CudaFinding",
    "Lock",
    "LockRequest",
    "LockedPackage",
    "Naming",
    "Target",
    "build_lock",
    "build_requirement_lines",
    "canonical_lock",
    "canonical_name",
    "check_lock_file",
    "check_lock_schema",
    "check_target",
    "compile_argv",
    "cubins",
    "explain_resolution_failure",
    "fork_requirement_lines",
    "gb10_provider",
    "index_cutoff",
    "jit_cache_version",
    "kernel_problems",
    "lock_release_id",
    "nccl_override",
    "parse_lock",
    "prebuilt_kernels",
    "providers",
    "release_id",
    "requirements_in",
    "target_for",
    "torch_cuda",
]
