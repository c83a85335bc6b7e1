"""The plan's inputs from the command line: host, model, drafter, intent and placement, read from argparse."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import psutil
from pydantic import ValidationError

from .catalog import get_profile
from .errors import PlanError, from_validation
from .hub import HubUnreachableError, profile_from_hub, read_hub_model
from .localmodel import profile_from_dir
from .models import (
    GIB,
    ClusterBackend,
    HostFacts,
    Intent,
    LoadStrategy,
    ModelProfile,
    NodePlacement,
    Platform,
    ServePlan,
    SpeculativeMethod,
)
from .planning.choices import DEFAULT_VLLM
from .planning.memory import GB10_REFERENCE_TOTAL_GIB
from .planning.planner import plan
from .versions import CAPABILITIES, VllmVersion


def _local_platform() -> Platform:
    return Platform.GB10 if os.path.exists("/proc/driver/nvidia/gpus") else Platform.CPU


def _base_profile(model: str, weights_known: bool) -> tuple[ModelProfile, str, str | None]:
    """(profile, what vLLM loads, a note): a model directory, a catalog id, else ORG/NAME[@REV] on the hub."""
    if os.path.isdir(model):
        return profile_from_dir(model), model, None
    try:
        return get_profile(model), model, None
    except PlanError:
        if "/" not in model:
            raise
    hub_model = read_hub_model(model, weights_known=weights_known)
    note = f"planned from {hub_model.source}: config.json and safetensors headers ({hub_model.weights.describe()})"
    return profile_from_hub(hub_model), hub_model.repo_id, note


def _drafter(ref: str | None, weights_known: bool) -> tuple[ModelProfile | None, str | None, str | None]:
    """(profile, what the speculative config loads, a note) of --drafter: a directory, else a hub id read like
    a model (config.json and safetensors headers) and pinned to the commit that was read."""
    if ref is None:
        return None, None, None
    if os.path.isdir(ref):
        return profile_from_dir(ref), os.path.abspath(ref), None
    try:
        hub_model = read_hub_model(ref, weights_known=weights_known)
    except HubUnreachableError as exc:
        if not weights_known:
            raise PlanError(
                "--drafter", exc.problem, ("--drafter-weights-gib G (planned from its size)", *exc.suggestions)
            ) from exc
        # Its size was given: the plan counts its weights, and says its KV layers could not be read.
        return None, ref, f"drafter {ref} not read ({exc.problem})"
    except PlanError as exc:
        raise PlanError("--drafter", exc.problem, exc.suggestions) from exc
    note = f"drafter read from {hub_model.source} ({hub_model.weights.describe()})"
    return profile_from_hub(hub_model), f"{hub_model.repo_id}@{hub_model.commit}", note


def _profile(profile: ModelProfile, weights_gib: float | None, kv_bytes_per_token: int | None) -> ModelProfile:
    updates: dict[str, object] = {}
    sources = dict(profile.sources)
    if weights_gib is not None:
        updates["weights_gib"] = weights_gib
        sources["weights_gib"] = "--weights-gib"
    if kv_bytes_per_token is not None:
        # Express a measured per-token figure as one bf16 full-attention layer of that width.
        if kv_bytes_per_token % 4:
            raise PlanError("--kv-bytes-per-token", "must be a multiple of 4 (2 x K/V x bf16 bytes)")
        updates.update(
            full_attention_layers=1,
            sliding_attention_layers=0,
            kv_heads=1,
            head_dim=kv_bytes_per_token // 4,
            mla=None,
            state_layers=None,
            sliding_window=None,
        )
        sources["head_dim"] = sources["kv_heads"] = "--kv-bytes-per-token"
    if not updates:
        return profile
    return ModelProfile.model_validate(profile.model_dump() | updates | {"sources": sources})


def _host(args: argparse.Namespace) -> tuple[HostFacts, str | None]:
    platform = Platform(args.platform)
    note = None
    if args.memory_gib is not None:
        total = int(args.memory_gib * GIB)
        available = None
    elif platform is _local_platform():
        vm = psutil.virtual_memory()
        total, available = vm.total, vm.available
    else:
        total, available = int(GB10_REFERENCE_TOTAL_GIB * GIB), None
        note = f"planning for a DGX Spark's {GB10_REFERENCE_TOTAL_GIB} GiB (this host is not one; see --memory-gib)"
    host = HostFacts(
        platform=platform,
        arch="aarch64" if platform is Platform.GB10 else os.uname().machine,
        gpu_name="NVIDIA GB10" if platform is Platform.GB10 else None,
        compute_capability="12.1" if platform is Platform.GB10 else None,
        mem_total_bytes=total,
        mem_available_bytes=available,
        unified_memory=platform is Platform.GB10,
        vllm_version=args.vllm_version or DEFAULT_VLLM[Platform(args.platform)],
        vllm_capabilities=tuple(args.capability),
    )
    return host, note


def _intent(args: argparse.Namespace, drafter: str | None) -> Intent:
    return Intent(
        drafter=drafter,
        drafter_weights_gib=args.drafter_weights_gib,
        max_context=args.context,
        concurrency=args.concurrency,
        profile=args.profile,
        kv_cache_dtype=args.kv_cache_dtype,
        speculative=args.speculative,
        load=args.load,
        num_speculative_tokens=args.num_speculative_tokens,
        served_name=args.served_name,
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        allow_unauthenticated_bind=args.allow_unauthenticated_bind,
        tensor_parallel_size=args.tp,
        pipeline_parallel_size=args.pp,
        nodes=args.nodes,
        cluster_backend=args.cluster_backend,
        cluster_port=args.cluster_port,
        allow_yarn=args.yarn,
        allow_long_context=args.allow_long_context,
        trust_remote_code=args.trust_remote_code,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_num_batched_tokens=args.max_num_batched_tokens,
        host_reserve_gib=args.host_reserve_gib,
        chat_template_kwargs=_template_kwargs(args.chat_template_kwargs),
    )


def _template_kwargs(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError("--chat-template-kwargs", f"{text!r} is not JSON: {exc.msg}") from exc
    if not isinstance(value, dict):
        raise PlanError("--chat-template-kwargs", 'a JSON object such as {"enable_thinking": false}')
    return value


def add_plan_args(p: argparse.ArgumentParser, model_optional: bool = False) -> None:
    p.add_argument(
        "model",
        nargs="?" if model_optional else None,
        help="catalog id (see 'sparkfleet catalog'), a local model directory, or any hub id ORG/NAME[@REVISION] "
        "(read: config.json and the safetensors headers, never the weights)",
    )
    p.add_argument("--platform", choices=[x.value for x in Platform], default=Platform.GB10.value)
    p.add_argument("--vllm-version", help="default: the newest release of the platform (gb10 0.33.0, cpu 0.32.0)")
    p.add_argument(
        "--capability",
        action="append",
        default=[],
        choices=sorted(CAPABILITIES),
        help="a capability the release (a fork) carries beyond --vllm-version; repeatable",
    )
    p.add_argument("--memory-gib", type=float, help="total memory (default: this host's MemTotal)")
    p.add_argument("--context", type=int, help="max tokens per request (default: min(native, 65536))")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--profile", choices=["interactive", "throughput", "memory-saver"], default="interactive")
    p.add_argument("--kv-cache-dtype", choices=["auto", "fp8", "bf16"], default="auto")
    p.add_argument("--speculative", choices=[m.value for m in SpeculativeMethod], default="none")
    p.add_argument(
        "--load",
        choices=[m.value for m in LoadStrategy],
        default="auto",
        help="how vLLM reads the checkpoint; auto picks by platform, filesystem and the memory free while loading",
    )
    p.add_argument("--model-fs", help="the filesystem type the model is read from (nfs, lustre, ext4, ...)")
    p.add_argument(
        "--drafter",
        metavar="ID_OR_DIR",
        help="a separate draft checkpoint for mtp, dflash, eagle3 or draft_model: a hub id ORG/NAME[@REVISION] "
        "(read like a model: config.json and safetensors headers) or a local directory",
    )
    p.add_argument(
        "--model-dir",
        metavar="ABSOLUTE_DIR",
        help="where the model is staged on the host; vLLM loads it from there (and a draft bundled in it, such as "
        "assistant/, by its absolute path)",
    )
    p.add_argument("--drafter-weights-gib", type=float, help="the drafter's weights, for one known only by its size")
    p.add_argument("--num-speculative-tokens", type=int)
    p.add_argument("--served-name")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", action="store_true", help="require VLLM_API_KEY (read from the env file)")
    p.add_argument("--allow-unauthenticated-bind", action="store_true")
    p.add_argument("--tp", type=int, default=1, help="tensor parallel size")
    p.add_argument("--pp", type=int, default=1, help="pipeline parallel size")
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument(
        "--cluster-backend",
        choices=[b.value for b in ClusterBackend],
        default="auto",
        help="how a multi-node instance's ranks meet: vLLM's own launch (native) or Ray; auto: native where vLLM has it",
    )
    p.add_argument("--cluster-port", type=int, default=29500, help="rank 0's rendezvous port (native)")
    p.add_argument("--node-rank", type=int, help="this node's rank of a native multi-node instance (0 serves the API)")
    p.add_argument("--master-addr", help="the head's address on the cluster link (native multi-node)")
    p.add_argument("--host-ip", help="this node's address on the cluster link (native multi-node)")
    p.add_argument("--yarn", action="store_true", help="allow a context above the native limit (static YaRN)")
    p.add_argument(
        "--allow-long-context",
        action="store_true",
        help="allow a context above the config's limit that the publisher supports without a rope override",
    )
    p.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="run the Python code the model (or drafter) repository ships (its config.json auto_map); read it first",
    )
    p.add_argument(
        "--chat-template-kwargs",
        metavar="JSON",
        help="the chat template settings every request gets, e.g. '{\"enable_thinking\": false}' (server default and the "
        "readiness check)",
    )
    p.add_argument("--gpu-memory-utilization", type=float, help="predict what vLLM does at this utilization")
    p.add_argument("--max-num-batched-tokens", type=int)
    p.add_argument("--host-reserve-gib", type=float)
    p.add_argument("--weights-gib", type=float, help="override the profile's weights size")
    p.add_argument("--kv-bytes-per-token", type=int, help="override KV bytes per token (bf16, whole model)")
    p.add_argument("--json", action="store_true", help="print the ServePlan as JSON")


def _placement(args: argparse.Namespace) -> NodePlacement | None:
    if args.master_addr is None and args.node_rank is None and args.host_ip is None:
        return None
    rank = args.node_rank or 0
    # On the head (rank 0) the master is this node.
    master = args.master_addr or (args.host_ip if rank == 0 else None)
    if master is None:
        raise PlanError("--master-addr", "a rank above 0 needs the head's address on the cluster link")
    own = args.host_ip or (master if rank == 0 else None)
    if own is None:
        raise PlanError("--host-ip", "a rank above 0 needs its own address on the cluster link")
    try:
        return NodePlacement(rank=rank, master_addr=master, host_ip=own)
    except ValidationError as exc:
        raise from_validation(exc, "--placement") from exc


def make_plan(args: argparse.Namespace) -> tuple[ServePlan, str | None]:
    args.vllm_version = args.vllm_version or DEFAULT_VLLM[Platform(args.platform)]
    VllmVersion.parse(args.vllm_version)
    base, model_ref, model_note = _base_profile(args.model, weights_known=args.weights_gib is not None)
    profile = _profile(base, args.weights_gib, args.kv_bytes_per_token)
    drafter, drafter_ref, drafter_note = _drafter(args.drafter, weights_known=args.drafter_weights_gib is not None)
    host, host_note = _host(args)
    note = "; ".join(n for n in (model_note, drafter_note, host_note) if n) or None
    model_dir = os.path.abspath(args.model) if os.path.isdir(args.model) else None
    if args.model_dir is not None:
        if not os.path.isabs(args.model_dir):
            raise PlanError("--model-dir", f"{args.model_dir!r} is relative; the directory on the host, from /")
        model_ref = model_dir = os.path.normpath(args.model_dir)
    intent = _intent(args, drafter_ref)
    placed = {"model_dir": model_dir, "model_fs": args.model_fs, "placement": _placement(args)}
    return plan(host, profile, intent, model_ref=model_ref, drafter=drafter, **placed), note
