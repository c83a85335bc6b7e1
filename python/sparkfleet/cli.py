"""sparkfleet plan | explain | catalog | monitoring | release lock."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil
import yaml
from pydantic import ValidationError

from .bench import check_summary, compare
from .catalog import get_profile, load_catalog
from .choices import DEFAULT_VLLM
from .errors import PlanError, from_validation
from .hub import HubUnreachableError, profile_from_hub, read_hub_model
from .localmodel import profile_from_dir
from .memory import GB10_REFERENCE_TOTAL_GIB
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
from .monitoring import dashboard, rules_document, thresholds
from .planner import plan
from .recipes import InstallInputs
from .report import render_explain, render_report
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


def _add_plan_args(p: argparse.ArgumentParser, model_optional: bool = False) -> None:
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


def _make_plan(args: argparse.Namespace) -> tuple[ServePlan, str | None]:
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


def _catalog(as_json: bool) -> str:
    catalog = load_catalog()
    if as_json:
        return json.dumps({k: v.model_dump(mode="json") for k, v in catalog.items()}, indent=2)
    rows = [f"{'model':<62} {'format':<26} {'weights':>8} {'context':>9}  notes"]
    for profile in catalog.values():
        notes = ", ".join(
            x
            for x in (
                "MoE" if profile.moe else "dense",
                "MLA" if profile.mla else "",
                profile.state_layers.kind.value if profile.state_layers else "",
                "MTP" if profile.speculative.mtp else "",
                "DFlash" if profile.speculative.dflash_drafter else "",
                "patch" if profile.patches else "",
            )
            if x
        )
        rows.append(
            f"{profile.id:<62} {profile.checkpoint_format.value:<26} {profile.weights_gib:>6.1f}Gi "
            f"{profile.native_max_context:>9}  {notes}"
        )
    return "\n".join(rows)


def _monitoring(artifact: str, alerts: str) -> str:
    th = thresholds(json.loads(alerts))
    if artifact == "rules":
        return yaml.safe_dump(rules_document(th), sort_keys=False, width=120)
    return json.dumps(dashboard(), indent=2) + "\n"


def _add_release_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--platform", choices=[x.value for x in Platform], required=True)
    p.add_argument("--vllm-version", help="default: the newest release of the platform (gb10 0.33.0, cpu 0.32.0)")
    p.add_argument(
        "--capability",
        action="append",
        default=[],
        choices=sorted(CAPABILITIES),
        help="a capability the release (a fork) carries beyond --vllm-version; repeatable",
    )
    p.add_argument("--torch-version", help="default: what the vLLM release requires")
    p.add_argument("--torchvision-version", help="default: what the vLLM release requires")
    p.add_argument("--flashinfer-version", help="default: what the vLLM release requires")
    p.add_argument("--ray-version", help="add Ray (multi-node serving)")
    p.add_argument("--source", choices=["pypi", "git"], default="pypi")
    p.add_argument("--git-repo", help="a vLLM fork (with --source git)")
    p.add_argument("--git-ref", help="branch, tag or commit of --git-repo; locked to its commit sha")
    p.add_argument("--index-url", action="append", help="an extra index (repeat); default: the platform's")
    p.add_argument("--find-links", action="append", default=[], help="a local wheel directory (repeat)")
    p.add_argument("--extra-package", action="append", help="an extra requirement resolved with vLLM (repeat)")
    p.add_argument("--flashinfer-jit-cache-index", help="FlashInfer's index for its prebuilt JIT cache (optional)")
    p.add_argument("--python-version", help="the target's Python (default: gb10 3.12, cpu 3.11)")
    p.add_argument("--arch", help="the target's architecture (gb10 is aarch64; cpu default: this machine's)")
    p.add_argument("--glibc", help="the target's glibc, e.g. 2.39 (default: gb10 DGX OS 2.39, cpu 2.28)")
    p.add_argument("--json", action="store_true", help="print the whole lock as JSON")
    p.add_argument("--output", help="write the lock (JSON, what vllm_install_lock_file takes) to this file")
    p.add_argument("--wheelhouse", help="download every wheel of the lock into this directory")


# The CLI spells the role's install variables as flags.
_CLI_FLAGS = {
    "vllm_install_vllm_source": "--source",
    "vllm_install_vllm_git_repo": "--git-repo",
    "vllm_install_vllm_git_ref": "--git-ref",
    "vllm_install_flashinfer_index_url": "--flashinfer-jit-cache-index",
    "vllm_install_index_urls": "--index-url",
    "vllm_install_lock_find_links": "--find-links",
    "vllm_install_extra_packages": "--extra-package",
}


def _release_inputs(args: argparse.Namespace) -> InstallInputs:
    from .recipes import inputs_from

    values = {
        "platform": args.platform,
        "uv_version": "0.0.0",
        "python_version": args.python_version,
        "vllm_source": args.source,
        "vllm_version": args.vllm_version or DEFAULT_VLLM[Platform(args.platform)],
        "vllm_git_repo": args.git_repo,
        "vllm_git_ref": args.git_ref,
        "torch_version": args.torch_version,
        "torchvision_version": args.torchvision_version,
        "flashinfer_version": args.flashinfer_version,
        "ray_version": args.ray_version,
        "flashinfer_index_url": args.flashinfer_jit_cache_index,
        "index_urls": args.index_url,
        "lock_find_links": args.find_links,
        "extra_packages": args.extra_package,
    }
    try:
        return inputs_from(values)
    except PlanError as exc:
        base = exc.variable.split("[")[0]
        flag = _CLI_FLAGS.get(base, base.replace("vllm_install_", "--").replace("_", "-"))
        raise PlanError(flag, exc.problem, exc.suggestions) from exc


def _release_lock(args: argparse.Namespace) -> str:
    from .recipes import packages_for
    from .resolver import download_wheelhouse, lock_for, lock_json

    platform = Platform(args.platform)
    inputs = _release_inputs(args)
    arch = args.arch or (None if platform is Platform.GB10 else os.uname().machine)
    lock = lock_for(inputs, host_arch=arch, host_glibc=args.glibc, cache_dir=None, naming="cli")
    text = lock_json(lock)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    if args.wheelhouse:
        count = download_wheelhouse(lock, args.wheelhouse, packages_for(inputs).index_urls, tuple(args.find_links))
        print(f"wheelhouse: {count} wheels in {args.wheelhouse}", file=sys.stderr)
    if args.json:
        return text
    rows = [f"release {lock.release_id}  ({lock.platform.value}, {lock.target}, Python {lock.python})"]
    rows += [f"  {name:<20} {value}" for name, value in lock.summary().items()]
    rows.append(
        f"  {len(lock.packages)} packages locked with hashes" + (f"; written to {args.output}" if args.output else "")
    )
    return "\n".join(rows) + "\n"


def _read_log(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _explain_journal(path: str, flags: dict[str, list[str]]) -> int:
    """Print what the log says was loaded and every known signature; non-zero when one is red."""
    from .doctor import Status, log_findings, render

    findings = log_findings("log", _read_log(path), flags)
    if not findings:
        print(f"{path}: no line vLLM writes about what it selected, and no known signature")
        return 0
    print(render(path, findings))
    return 1 if any(f.status is Status.RED for f in findings) else 0


def _read_summary(path: str, name: str) -> dict[str, Any]:
    candidate = Path(path) / "summary.json" if Path(path).is_dir() else Path(path)
    try:
        return check_summary(json.loads(candidate.read_text(encoding="utf-8")), name)
    except (OSError, json.JSONDecodeError) as exc:
        raise PlanError(name, f"{candidate} cannot be read as JSON: {exc}") from exc


def _bench_compare(a: str, b: str) -> str:
    return compare(_read_summary(a, "A"), _read_summary(b, "B"), (a, b))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sparkfleet", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_plan_args(sub.add_parser("plan", help="plan memory, argv and env for a model"))
    explain = sub.add_parser(
        "explain",
        help="every argv entry and env var with its reason and source; with --journal, what a vLLM log says it loaded",
    )
    _add_plan_args(explain, model_optional=True)
    explain.add_argument(
        "--journal",
        metavar="FILE",
        help="a vLLM log (a journal, a container's output, '-' for stdin): the backends it selected, compared with "
        "the plan's flags when a model is given, and every known GB10 signature with its cause and fix",
    )
    cat = sub.add_parser("catalog", help="list the model profiles")
    cat.add_argument("--json", action="store_true")
    mon = sub.add_parser("monitoring", help="print the Prometheus rules or the Grafana dashboard")
    mon.add_argument("artifact", choices=["rules", "dashboard"])
    mon.add_argument("--alerts", default="{}", help="alert thresholds as JSON (the role's monitoring_alerts)")
    rel = sub.add_parser("release", help="releases: resolve and lock a vLLM release for a target")
    _add_release_args(rel.add_subparsers(dest="release_command", required=True).add_parser("lock", help=__doc__))
    bench = sub.add_parser("bench", help="benchmark results: compare two summaries side by side")
    compare_parser = bench.add_subparsers(dest="bench_command", required=True).add_parser(
        "compare", help="what differs between two runs' setups, and each shared point's median and spread"
    )
    compare_parser.add_argument("a", metavar="A", help="a summary.json the benchmark playbook wrote, or its directory")
    compare_parser.add_argument("b", metavar="B", help="another one")
    args = parser.parse_args(argv)
    if getattr(args, "model", "") is None and not getattr(args, "journal", None):
        parser.error("explain needs a model, or --journal FILE, or both")
    try:
        if args.command == "release":
            print(_release_lock(args), end="")
            return 0
        if args.command == "bench":
            print(_bench_compare(args.a, args.b), end="")
            return 0
        if args.command == "catalog":
            print(_catalog(args.json))
            return 0
        if args.command == "monitoring":
            print(_monitoring(args.artifact, args.alerts), end="")
            return 0
        if args.command == "explain" and args.journal and args.model is None:
            return _explain_journal(args.journal, {})
        result, note = _make_plan(args)
        if args.command == "explain" and args.journal:
            return _explain_journal(args.journal, {f.name: f.values for f in result.flags})
    except PlanError as exc:
        print(f"sparkfleet: {exc}", file=sys.stderr)
        return 2
    except (ValidationError, ValueError) as exc:
        print(f"sparkfleet: invalid input: {exc}", file=sys.stderr)
        return 2
    if note and not args.json:
        print(f"note: {note}", file=sys.stderr)
    if args.command == "explain":
        print(render_explain(result), end="")
    elif args.json:
        print(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        print(render_report(result), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
