"""The plan's inputs from the command line: host, model, drafter, intent and placement, read from argparse."""

from __future__ import annotations

import argparse
import json
import os
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any

import psutil
from pydantic import ValidationError
from pydantic.fields import FieldInfo

from .catalog import get_profile, recipe_intent
from .errors import PlanError, from_validation
from .hub import HubUnreachableError, profile_from_hub, read_hub_model
from .localmodel import profile_from_dir
from .models import (
    GIB,
    HostFacts,
    Intent,
    ModelProfile,
    NodePlacement,
    Platform,
    ReleaseRecord,
    ServePlan,
)
from .planning.choices import DEFAULT_VLLM
from .planning.memory import GB10_REFERENCE_TOTAL_GIB
from .planning.planner import plan
from .release import Lock, record
from .versions import CAPABILITIES, VllmVersion


def _local_platform() -> Platform:
    return Platform.GB10 if os.path.exists("/proc/driver/nvidia/gpus") else Platform.CPU


def _base_profile(model: str, weights_known: bool) -> tuple[ModelProfile, str, str | None]:
    """(profile, what vLLM loads, a note): a model directory, a catalog id, else ORG/NAME[@REV] on the hub."""
    if os.path.isdir(model):
        return profile_from_dir(model, weights_known), model, None
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
        return profile_from_dir(ref, weights_known, "--drafter", "--drafter-weights-gib"), os.path.abspath(ref), None
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


def _release(args: argparse.Namespace) -> Lock | None:
    """The release lock --lock names, read whole; a bad one is refused naming --lock."""
    if not getattr(args, "lock", None):
        return None
    try:
        return Lock.model_validate_json(Path(args.lock).read_text())
    except (OSError, ValueError) as exc:
        first = str(exc).splitlines()[0]
        fix = ("a release's .sparkfleet-lock.json",)
        raise PlanError("--lock", f"{args.lock} is not a release lock: {first}", fix) from exc


def _host(args: argparse.Namespace) -> tuple[HostFacts, str | None]:
    release = _release(args)
    if release is not None:
        args.platform, args.vllm_version = release.platform.value, release.vllm_version
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
        flashinfer_kernels=release.prebuilt_kernels if release is not None else None,
        release_record=getattr(args, "loaded_record", None),
    )
    return host, note


# The intent's fields the command line spells otherwise, and those it does not take (each with why).
INTENT_FLAGS = {"max_context": "--context", "tensor_parallel_size": "--tp", "pipeline_parallel_size": "--pp",
                "decode_context_parallel_size": "--dcp", "allow_yarn": "--yarn"}  # fmt: skip
NOT_ON_THE_COMMAND_LINE = {
    "socket": "set by the host plan behind the front door, never by a user",
    "answer_check": "a question and its answer: the vllm_serve role's intent.answer_check",
}
# Read like a model (its config.json and safetensors headers) by an argument of its own: add_plan_args's --drafter.
READ_LIKE_A_MODEL = {"drafter"}


def intent_flag(field: str) -> str:
    return INTENT_FLAGS.get(field, "--" + field.replace("_", "-"))


def _types(annotation: Any) -> tuple[Any, ...]:
    """The types a field's annotation allows, Annotated and None taken off."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Annotated:
        return _types(args[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(t for arg in args for t in _types(arg) if t is not types.NoneType)
    return (annotation,)


class GivenOption(argparse.Action):
    """Stores an intent option's value and notes it was given: a value equal to its default is still one asked."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        setattr(namespace, self.dest, values)
        namespace.intent_given = (getattr(namespace, "intent_given", None) or set()) | {self.dest}


def _intent_argument(name: str, field: FieldInfo) -> dict[str, Any]:
    """The argparse settings of one intent field: its type, choices and default from the model, its help from the
    field's description (the one text of it)."""
    allowed = _types(field.annotation)
    default = field.default.value if isinstance(field.default, Enum) else field.default
    settings: dict[str, Any] = {"help": field.description, "dest": name}
    if bool in allowed:
        return settings | {"action": "store_true"}
    settings["action"] = GivenOption
    if name == "chat_template_kwargs":
        return settings | {"metavar": "JSON", "help": f"{field.description}, as JSON"}
    kind = allowed[0]
    if isinstance(kind, type) and issubclass(kind, Enum):
        return settings | {"choices": [member.value for member in kind], "default": default}
    return settings | {"type": kind if kind in (int, float) else str, "default": default}


def add_intent_args(p: argparse.ArgumentParser) -> None:
    for name, field in Intent.model_fields.items():
        if name not in NOT_ON_THE_COMMAND_LINE and name not in READ_LIKE_A_MODEL:
            p.add_argument(intent_flag(name), **_intent_argument(name, field))


def _intent(args: argparse.Namespace, drafter: str | None) -> Intent:
    given = {
        name: getattr(args, name)
        for name in Intent.model_fields
        if name not in {*NOT_ON_THE_COMMAND_LINE, *READ_LIKE_A_MODEL}
    }
    given["chat_template_kwargs"] = _template_kwargs(args.chat_template_kwargs)
    return Intent(**given, drafter=drafter)


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
    p.add_argument(
        "--lock",
        help="a release's lock (its .sparkfleet-lock.json): plan against that release's vLLM and its prebuilt FlashInfer "
        "kernels (none: the first start compiles them, as on the host), in place of --vllm-version and --platform",
    )
    p.add_argument(
        "--release-record",
        metavar="FILE_OR_VENV",
        help="what a release's own build implements: its record (.sparkfleet-record.json) or its venv, read by its own "
        "Python; the plan is held to that build's model registry and its parser's flags and choices (a fork or a "
        "nightly plans what it carries), in place of --vllm-version",
    )
    p.add_argument("--memory-gib", type=float, help="total memory (default: this host's MemTotal)")
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
    p.add_argument("--node-rank", type=int, help="this node's rank of a native multi-node instance (0 serves the API)")
    p.add_argument("--master-addr", help="the head's address on the cluster link (native multi-node)")
    p.add_argument("--host-ip", help="this node's address on the cluster link (native multi-node)")
    add_intent_args(p)
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


def _newest_that_loads(args: argparse.Namespace, profile: ModelProfile, asked: bool) -> str | None:
    """Without --vllm-version (or --lock), a model whose loader stops before the default release plans on the newest
    release that loads it, and says so (issue 63): the refusal is for a release the user named."""
    newest = profile.max_version
    if asked or getattr(args, "lock", None) or newest is None or not VllmVersion.parse(args.vllm_version) > newest:
        return None
    default, args.vllm_version = args.vllm_version, str(newest)
    return (
        f"planned on vLLM {newest}, the newest release that loads {profile.id} (it loads with {profile.min_version} to "
        f"{newest} only; the default is {default}): on a host, a release of it in vllm_install_releases, beside the others"
    )


def _record(args: argparse.Namespace) -> ReleaseRecord | None:
    """The build --release-record names, read; its own version stands for --vllm-version (the two must agree)."""
    if not getattr(args, "release_record", None):
        return None
    built = record.load(Path(args.release_record))
    if args.vllm_version and VllmVersion.parse(args.vllm_version) != VllmVersion.parse(built.vllm_version):
        raise PlanError(
            "--release-record",
            f"{args.release_record} is vLLM {built.vllm_version} as built, not --vllm-version {args.vllm_version}",
            ("drop --vllm-version",),
        )
    args.vllm_version = built.vllm_version
    return built


def _recipe_layout(args: argparse.Namespace, profile: ModelProfile) -> str | None:
    """A model too large for one Spark, asked with no layout of the user's own, is planned on the Sparks its recipe
    serves it on (the profile's layout), and the note says so. An option given on the command line is the user's,
    whatever its value."""
    given: set[str] = getattr(args, "intent_given", None) or set()
    sizes = {"nodes", "tensor_parallel_size", "pipeline_parallel_size", "decode_context_parallel_size"}
    if profile.layout is None or given & sizes:
        return None
    fields = recipe_intent(profile, {name: getattr(args, name) for name in ("max_context", "concurrency") if name in given})
    if "cluster_backend" in given:
        fields.pop("cluster_backend")
    for name, value in fields.items():
        setattr(args, name, value)
    return (
        f"planned on the {args.nodes} Sparks its recipe serves it on (tensor parallel {args.tensor_parallel_size}, "
        f"decode context parallel {args.decode_context_parallel_size}, {args.cluster_backend}) at "
        f"{args.max_context or 'its default'} x {args.concurrency}; --nodes plans another"
    )


def make_plan(args: argparse.Namespace) -> tuple[ServePlan, str | None]:
    args.loaded_record = _record(args)
    asked = args.vllm_version is not None
    args.vllm_version = args.vllm_version or DEFAULT_VLLM[Platform(args.platform)]
    VllmVersion.parse(args.vllm_version)
    base, model_ref, model_note = _base_profile(args.model, weights_known=args.weights_gib is not None)
    profile = _profile(base, args.weights_gib, args.kv_bytes_per_token)
    release_note = _newest_that_loads(args, profile, asked)
    drafter, drafter_ref, drafter_note = _drafter(args.drafter, weights_known=args.drafter_weights_gib is not None)
    host, host_note = _host(args)
    note = "; ".join(n for n in (model_note, release_note, drafter_note, host_note) if n) or None
    model_dir = os.path.abspath(args.model) if os.path.isdir(args.model) else None
    if args.model_dir is not None:
        if not os.path.isabs(args.model_dir):
            raise PlanError("--model-dir", f"{args.model_dir!r} is relative; the directory on the host, from /")
        model_ref = model_dir = os.path.normpath(args.model_dir)
    layout_note = _recipe_layout(args, profile)
    note = "; ".join(n for n in (note, layout_note) if n) or None
    intent = _intent(args, drafter_ref)
    placed = {"model_dir": model_dir, "model_fs": args.model_fs, "placement": _placement(args)}
    return plan(host, profile, intent, model_ref=model_ref, drafter=drafter, **placed), note
