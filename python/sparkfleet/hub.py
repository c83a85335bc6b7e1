"""Plan a Hugging Face model before downloading it: config.json plus the safetensors headers, nothing else.

All hub I/O of the library lives here, through huggingface_hub, so HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE,
gated repositories, revisions and the local cache behave as they do for `hf download` and vLLM. Weights are
never fetched: huggingface_hub's get_safetensors_metadata reads each shard's header with an HTTP range
request, which gives every tensor's dtype and byte span, hence the exact weight bytes. What the headers gave
is kept under HF_HOME/sparkfleet (a few KB per commit), so the same plan works offline from the cache.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .errors import PlanError
from .models import ModelProfile, ProfileArg
from .models.speed import DecodeReads
from .reading.arithmetic import speed_reading
from .reading.config import profile_from_config
from .reading.tensors import Tensor, decode_reads

# ORG/NAME with an optional @REVISION (a branch, tag or commit), as the hub spells repository ids.
MODEL_REF = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96})(?:@(?P<revision>[\w./-]{1,255}))?$", re.ASCII)
SUMMARY_SCHEMA = 1
COMMIT = re.compile(r"[0-9a-f]{40}")
T = TypeVar("T")


def parse_model_ref(ref: str) -> tuple[str, str | None]:
    match = MODEL_REF.fullmatch(ref)
    if not match:
        raise PlanError(
            "model",
            f"{ref!r} is not a catalog id, a model directory or a hub id",
            ("ORG/NAME or ORG/NAME@REVISION (a branch, tag or commit)", "sparkfleet catalog to list ids"),
        )
    return match["repo"], match["revision"]


@dataclass(frozen=True)
class WeightSummary:
    """What the safetensors headers say: bytes of tensor data per dtype, over how many files."""

    bytes_by_dtype: dict[str, int]
    files: int
    # What a decode step reads, by tensor class (sparkfleet.reading.tensors), or why the headers gave no such reading;
    # both None in a summary kept before sparkfleet read it (read again when the hub is reachable).
    reads: DecodeReads | None = None
    reads_gap: str | None = None

    @property
    def total(self) -> int:
        return sum(self.bytes_by_dtype.values())

    def describe(self) -> str:
        total = self.total or 1
        shares = ", ".join(f"{dtype} {100 * size / total:.0f}%" for dtype, size in sorted(self.bytes_by_dtype.items()))
        return f"{self.total / 1024**3:.2f} GiB in {self.files} safetensors file(s): {shares}"


@dataclass(frozen=True)
class HubModel:
    repo_id: str
    revision: str | None
    commit: str
    config: dict[str, Any]
    weights: WeightSummary

    @property
    def source(self) -> str:
        return f"hub {self.repo_id}@{self.commit[:12]}"


def summarise(files_metadata: dict[str, Any], config: dict[str, Any], source: str) -> WeightSummary:
    """Sum each tensor's byte span (data_offsets) per dtype, and per tensor class, over every shard's header."""
    by_dtype: dict[str, int] = {}
    tensors: list[Tensor] = []
    for file_metadata in files_metadata.values():
        for name, tensor in file_metadata.tensors.items():
            start, end = tensor.data_offsets
            by_dtype[tensor.dtype] = by_dtype.get(tensor.dtype, 0) + (end - start)
            tensors.append(Tensor(name, str(tensor.dtype), tuple(int(d) for d in tensor.shape), end - start))
    try:
        return WeightSummary(by_dtype, len(files_metadata), reads=decode_reads(tensors, config, source))
    except PlanError as exc:
        return WeightSummary(by_dtype, len(files_metadata), reads_gap=exc.problem)


def _summary_path(repo_id: str, commit: str) -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HOME) / "sparkfleet" / "safetensors" / repo_id.replace("/", "--") / f"{commit}.json"


def _load_summary(path: Path) -> WeightSummary | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if data.get("schema") != SUMMARY_SCHEMA:
        return None
    reads = DecodeReads.model_validate(data["reads"]) if isinstance(data.get("reads"), dict) else None
    return WeightSummary(
        {str(k): int(v) for k, v in data["bytes_by_dtype"].items()}, int(data["files"]), reads, data.get("reads_gap")
    )


def _store_summary(path: Path, summary: WeightSummary) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps(
        {
            "schema": SUMMARY_SCHEMA,
            "bytes_by_dtype": summary.bytes_by_dtype,
            "files": summary.files,
            "reads": summary.reads.model_dump() if summary.reads else None,
            "reads_gap": summary.reads_gap,
        }
    )
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
        handle.write(body)
    os.replace(handle.name, path)


class HubUnreachableError(PlanError):
    """The hub could not be asked (offline, or no connection): what it would have said is not known."""


def hub_error(exc: Exception, repo_id: str, revision: str | None) -> PlanError:
    """One clear refusal per way the hub says no (huggingface_hub.errors)."""
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        LocalEntryNotFoundError,
        NotASafetensorsRepoError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = constants.ENDPOINT
    if isinstance(exc, GatedRepoError):
        return PlanError(
            "model",
            f"{repo_id} is gated on {where}: accept its terms on the model page, then give a token that has access",
            ("HF_TOKEN=hf_... (or hf auth login)",),
        )
    if isinstance(exc, RepositoryNotFoundError):
        return PlanError(
            "model",
            f"{repo_id}: no such model on {where}, or it is private and no token with access was given",
            ("check the id (ORG/NAME)", "HF_TOKEN=hf_... for a private repository", "sparkfleet catalog"),
        )
    if isinstance(exc, RevisionNotFoundError):
        return PlanError("model", f"{repo_id} has no revision {revision!r}", ("a branch, tag or commit of the repository",))
    if isinstance(exc, LocalEntryNotFoundError):
        offline = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else f"{where} could not be reached"
        return HubUnreachableError(
            "model",
            f"{repo_id}{'@' + revision if revision else ''} is not in the local hub cache and {offline}",
            ("plan it once with the hub reachable (it is then cached)", "a staged model directory"),
        )
    if isinstance(exc, EntryNotFoundError):
        return PlanError("model", f"{repo_id} has no config.json: not a transformers model vLLM can load by id")
    if isinstance(exc, NotASafetensorsRepoError):
        return PlanError(
            "model",
            f"{repo_id} publishes no safetensors weights, so their size cannot be read without downloading them",
            ("--weights-gib G (the size of its weights)",),
        )
    said = str(exc).splitlines()[0][:200] if str(exc) else ""
    if isinstance(exc, transport_errors()):
        return HubUnreachableError("model", f"{repo_id}: the hub at {where} could not be reached: {said}")
    return PlanError("model", f"{repo_id}: the hub at {where} answered {type(exc).__name__}: {said}")


def quietly(call: Callable[[], T]) -> T:
    """Run a hub call without its progress bar: it would write to stderr inside an Ansible worker."""
    from huggingface_hub.utils.tqdm import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    was_disabled = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        return call()
    finally:
        if not was_disabled:
            enable_progress_bars()


def transport_errors() -> tuple[type[Exception], ...]:
    """A refused or dropped connection surfaces as the HTTP client's own error: httpx under huggingface_hub
    1.x, httpx2 under 2.x."""
    errors: list[type[Exception]] = []
    for name in ("httpx2", "httpx"):
        try:
            errors.append(importlib.import_module(name).HTTPError)
        except ImportError:
            continue
    return tuple(errors)


def read_hub_model(ref: str, *, weights_known: bool = False) -> HubModel:
    """config.json (through the hub cache) and the weights' safetensors headers of ORG/NAME[@REVISION].

    With weights_known (the caller gives the size), a repository without safetensors is still planned.
    """
    from huggingface_hub import HfApi, constants, hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, NotASafetensorsRepoError, SafetensorsParsingError

    repo_id, revision = parse_model_ref(ref)
    failures: tuple[type[Exception], ...] = (
        HfHubHTTPError,
        NotASafetensorsRepoError,
        OSError,
        ValueError,
        *transport_errors(),
    )
    try:
        config_path = Path(hf_hub_download(repo_id, "config.json", revision=revision))
        commit = config_path.parent.name
        config = json.loads(config_path.read_text())
        summary_path = _summary_path(repo_id, commit)
        summary = _load_summary(summary_path)
        if summary is None and constants.HF_HUB_OFFLINE and weights_known:
            summary = WeightSummary({}, 0)
        if summary is None and constants.HF_HUB_OFFLINE:
            raise PlanError(
                "model",
                f"{repo_id}@{commit[:12]}: its config.json is cached but its safetensors headers were never read, "
                "and HF_HUB_OFFLINE is set",
                ("plan it once with the hub reachable", "--weights-gib G"),
            )
        # A summary kept before sparkfleet read what a step reads is read again while the hub answers.
        unclassified = summary is not None and summary.files and summary.reads is None and summary.reads_gap is None
        if summary is None or (unclassified and not constants.HF_HUB_OFFLINE):
            try:
                metadata = quietly(lambda: HfApi().get_safetensors_metadata(repo_id, revision=commit))
            except NotASafetensorsRepoError:
                if not weights_known:
                    raise
                summary = WeightSummary({}, 0)
            else:
                summary = summarise(metadata.files_metadata, config, f"hub {repo_id}@{commit[:12]}")
                _store_summary(summary_path, summary)
    except PlanError:
        raise
    except SafetensorsParsingError as exc:
        raise PlanError("model", f"{repo_id}: a safetensors header could not be parsed: {exc}") from exc
    except failures as exc:
        raise hub_error(exc, repo_id, revision) from exc
    return HubModel(repo_id, revision, commit, config, summary)


def snapshot_dir(hf_home: str, repo_id: str, commit: str) -> str:
    """Where the hub cache under HF_HOME holds a repository's files at one commit (what model_stage downloads)."""
    return f"{hf_home.rstrip('/')}/hub/models--{repo_id.replace('/', '--')}/snapshots/{commit}"


def served_at(profile: ModelProfile, commit: str, source: str) -> ModelProfile:
    """The profile served at one commit: vLLM loads exactly that snapshot, offline, whatever a branch says."""
    if not COMMIT.fullmatch(commit):
        raise PlanError("model", f"{commit!r} is not a commit (40 hexadecimal digits)")
    pinned = ProfileArg(
        flag="--revision",
        value=commit,
        reason="serve the commit whose config and weights were planned and staged, not whatever a branch names later",
        source=source,
    )
    return profile.model_copy(update={"extra_args": (*profile.extra_args, pinned)})


def profile_from_hub(model: HubModel) -> ModelProfile:
    """The planner's profile of a hub model, served at the very commit that was planned."""
    profile = profile_from_config(model.repo_id, model.config, model.weights.total, model.source)
    weights = model.weights
    kept = "its headers were kept before sparkfleet read them by tensor class: plan once with the hub reachable"
    gap = weights.reads_gap or ("no safetensors in the repository" if not weights.files else kept)
    profile = speed_reading(profile, model.config, weights.reads, gap)
    sources = dict(profile.sources) | {"weights_gib": f"{model.source} safetensors headers: {model.weights.describe()}"}
    planned = f"{model.source} ({model.revision or 'main'} when planned)"
    return served_at(profile.model_copy(update={"sources": sources}), model.commit, planned)


def describe(ref: str) -> dict[str, Any]:
    """What the planner needs of a hub model that is not staged yet, in the shape model_facts describes a
    staged one ({id, path, config, weight_bytes}); a catalog id is left to its curated profile, unread."""
    from .catalog import load_catalog

    repo_id = parse_model_ref(ref)[0]
    if repo_id in load_catalog():
        return {"id": repo_id, "catalog": True}
    model = read_hub_model(ref)
    return {
        "id": repo_id,
        "path": repo_id,
        "present": True,
        "config": model.config,
        "weight_bytes": model.weights.total,
        "commit": model.commit,
        "source": model.source,
    }
