"""Pins and manifests: the commit a hub revision is served at, and the files that commit is staged as.

Both are resolved once on the controller and kept in model_stage_pin_dir, so every host of a fleet, and every
later run, stages the same commit and the same bytes; the hub is asked again only when a pin is moved.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import PlanError
from .hub import COMMIT, hub_error, parse_model_ref, quietly, transport_errors
from .manifest import MANIFEST_SCHEMA, Manifest, ManifestError, RepoEntry, index_paths, select

# --------------------------------------------------------------------------- pins

PIN_SCHEMA = 1


@dataclass(frozen=True)
class HubPin:
    """The commit a hub revision is served at: resolved once, kept on the controller, moved only when asked."""

    repo_id: str
    revision: str
    commit: str
    pinned_at: str
    # The revision's head now; None when the hub could not be asked (the pin still holds).
    current: str | None

    @property
    def moved(self) -> bool:
        return self.current is not None and self.current != self.commit

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.repo_id,
            "revision": self.revision,
            "commit": self.commit,
            "pinned_at": self.pinned_at,
            "current": self.current,
            "moved": self.moved,
        }


def branch_head(repo_id: str, revision: str, endpoint: str | None = None, token: str | None = None) -> str:
    """The commit a branch or tag names on the hub now (one HEAD request for config.json)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError

    failures: tuple[type[Exception], ...] = (HfHubHTTPError, OSError, ValueError, *transport_errors())
    try:
        url = hf_hub_url(repo_id, "config.json", revision=revision, endpoint=endpoint)
        metadata = get_hf_file_metadata(url, token=token or None)
    except failures as exc:
        raise hub_error(exc, repo_id, revision) from exc
    if not metadata.commit_hash or not COMMIT.fullmatch(metadata.commit_hash):
        raise PlanError("model", f"{repo_id}@{revision}: the hub named no commit for it")
    return metadata.commit_hash


def _pin_path(pins_dir: Path, repo_id: str, revision: str) -> Path:
    return pins_dir / f"{repo_id.replace('/', '--')}@{revision.replace('/', '--')}.json"


def pin_revision(
    repo_id: str,
    revision: str | None,
    pins_dir: Path,
    now: str,
    *,
    repin: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
) -> HubPin:
    """The commit to stage and serve for ORG/NAME@REVISION.

    A commit pins itself. A branch or tag is resolved once and the commit kept in `pins_dir`; later runs
    stage and serve that commit, and report when the branch has moved on; `repin` takes the branch's
    head again. A hub that cannot be reached leaves an existing pin in force.
    """
    parse_model_ref(f"{repo_id}@{revision}" if revision else repo_id)
    rev = revision or "main"
    if COMMIT.fullmatch(rev):
        return HubPin(repo_id, rev, rev, "", rev)
    path = _pin_path(pins_dir, repo_id, rev)
    kept = _load_pin(path, repo_id, rev)
    try:
        current: str | None = branch_head(repo_id, rev, endpoint, token)
    except PlanError:
        if kept is None or repin:
            raise
        current = None
    if kept is not None and not repin:
        return HubPin(repo_id, rev, kept[0], kept[1], current)
    assert current is not None
    _keep(path, json.dumps({"schema": PIN_SCHEMA, "id": repo_id, "revision": rev, "commit": current, "pinned_at": now}))
    return HubPin(repo_id, rev, current, now, current)


def _keep(path: Path, text: str) -> None:
    """Write a pin or a manifest whole or not at all: a run stopped mid-write leaves the old one (or none)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
        handle.write(text + "\n")
    os.replace(handle.name, path)


def _kept(path: Path, what: str) -> Any:
    """The JSON kept at `path`, None when there is none; unreadable, it is refused naming the pin directory."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise PlanError("model_stage_pin_dir", f"{path} is not a readable {what}: {exc}") from exc


def _load_pin(path: Path, repo_id: str, revision: str) -> tuple[str, str] | None:
    data = _kept(path, "pin")
    if data is None:
        return None
    if (
        not isinstance(data, dict)
        or data.get("schema") != PIN_SCHEMA
        or data.get("id") != repo_id
        or data.get("revision") != revision
        or not COMMIT.fullmatch(str(data.get("commit", "")))
    ):
        raise PlanError("model_stage_pin_dir", f"{path} is not a pin of {repo_id}@{revision}; remove it to pin again")
    return str(data["commit"]), str(data.get("pinned_at", ""))


# --------------------------------------------------------------------------- manifests

MANIFEST_SUFFIX = ".manifest.json"


def manifest_path(pins_dir: Path, repo_id: str, commit: str) -> Path:
    """Beside the pins: one manifest per commit (a commit's files never change)."""
    return pins_dir / f"{repo_id.replace('/', '--')}@{commit}{MANIFEST_SUFFIX}"


def list_repo_files(
    repo_id: str, commit: str, endpoint: str | None = None, token: str | None = None
) -> tuple[list[RepoEntry], dict[str, str]]:
    """The hub's tree listing at a commit (sizes, blob ids, LFS sha256) and the text of the weight indexes
    the selection reads (a few KB each, through the controller's hub cache)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.hf_api import RepoFile

    failures: tuple[type[Exception], ...] = (HfHubHTTPError, OSError, ValueError, *transport_errors())
    api = HfApi(endpoint=endpoint, token=token or None)
    try:
        tree = quietly(lambda: list(api.list_repo_tree(repo_id, revision=commit, recursive=True)))
        entries = [
            RepoEntry(item.path, int(item.size), str(item.blob_id), item.lfs.sha256 if item.lfs else None)
            for item in tree
            if isinstance(item, RepoFile)
        ]

        def read(name: str) -> str:
            return Path(quietly(lambda: api.hf_hub_download(repo_id, name, revision=commit))).read_text()

        indexes = {name: read(name) for name in index_paths(entries)}
    except failures as exc:
        raise hub_error(exc, repo_id, commit) from exc
    return entries, indexes


def stage_manifest(
    repo_id: str,
    commit: str,
    pins_dir: Path,
    extra_files: tuple[str, ...] = (),
    *,
    endpoint: str | None = None,
    token: str | None = None,
) -> tuple[Manifest, Path]:
    """The files model_stage fetches of ORG/NAME at a commit, with sizes and checksums, kept beside the pins.

    Read from the hub once per commit (and again only when extra_files change), then from `pins_dir`, so a
    fleet's hosts, later runs and an unreachable hub all stage exactly the recorded files."""
    if not COMMIT.fullmatch(commit):
        raise PlanError("model", f"{repo_id}: {commit!r} is not a commit (40 hexadecimal digits)")
    path = manifest_path(pins_dir, repo_id, commit)
    kept = _load_manifest(path, repo_id, commit)
    if kept is not None and kept.extra_files == extra_files:
        return kept, path
    entries, indexes = list_repo_files(repo_id, commit, endpoint, token)
    try:
        manifest = select(repo_id, commit, entries, indexes, extra_files)
    except ManifestError as exc:
        raise PlanError("model_stage_models", str(exc)) from exc
    _keep(path, json.dumps(manifest.as_dict(), indent=1))
    return manifest, path


def _load_manifest(path: Path, repo_id: str, commit: str) -> Manifest | None:
    data = _kept(path, "manifest")
    if data is None:
        return None
    try:
        manifest = Manifest.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError("model_stage_pin_dir", f"{path} is not a manifest ({exc}); remove it to list again") from exc
    if data.get("schema") != MANIFEST_SCHEMA or (manifest.repo_id, manifest.commit) != (repo_id, commit):
        raise PlanError("model_stage_pin_dir", f"{path} is not a manifest of {repo_id}@{commit}; remove it to list again")
    if data.get("digest") != manifest.digest:
        raise PlanError("model_stage_pin_dir", f"{path} was changed after it was written; remove it to list again")
    return manifest
