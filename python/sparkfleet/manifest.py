"""What model_stage fetches of a hub repository, and the manifest every host of a fleet verifies.

A repository often holds the same weights several times over: openai/gpt-oss-120b is 195.76 GB as a whole
and 65.28 GB in the shards its model.safetensors.index.json names (sparkrun, docs/MODEL_CACHE.md); its
`original/` (the reference implementation's checkpoint) and `metal/` (Apple's) are other formats vLLM never
reads. So a staging fetches what serving reads and nothing else:

- the configs (config.json, generation_config.json, quantization configs such as ModelOpt's
  hf_quant_config.json, Mistral's params.json), the tokenizer and chat template files, the processor configs,
  the pooling configs of an embedding model, and the remote-code *.py at the top level;
- the weights: exactly the shards the safetensors index's weight_map names, or model.safetensors alone; only
  a repository without safetensors gets its PyTorch weights (pytorch_model.bin[.index.json]) instead;
- a bundled model, a folder with its own config.json and safetensors (a drafter's eagle/, mtp/, draft/), by
  the same rule, unless it is one of the other-format folders (original/, metal/, onnx/);
- whatever the model entry's extra_files patterns ask for, even from those folders.

GGUF, ONNX, msgpack, h5, TensorFlow and PyTorch copies of safetensors weights are never fetched unless asked.

Each selected file is recorded with its size and checksum: the hub's sha256 for LFS files (the tree listing's
lfs.oid), the git blob id otherwise. The digest of that manifest is what the ranks of a cluster compare.
Pure: the listing and the index texts come in, the selection goes out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

MANIFEST_SCHEMA = 1
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
BIN_INDEX = "pytorch_model.bin.index.json"
BIN_SINGLE = "pytorch_model.bin"

# Read by transformers' AutoConfig / AutoTokenizer / AutoProcessor, vLLM's quantization and pooling loaders.
SERVING_NAMES = frozenset(
    {
        "config.json",
        "generation_config.json",
        "hf_quant_config.json",
        "quantize_config.json",
        "quant_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "tokenizer.model",
        "tiktoken.model",
        "tekken.json",
        # Mistral's own format (consolidated.safetensors): its config, which vLLM's mistral config format reads.
        "params.json",
        "special_tokens_map.json",
        "merges.txt",
        "added_tokens.json",
        "chat_template.json",
        "chat_template.jinja",
        "preprocessor_config.json",
        "processor_config.json",
        "video_preprocessor_config.json",
        "modules.json",
        "sentence_bert_config.json",
        "config_sentence_transformers.json",
    }
)
# Matched against a name within its model's folder (never across folders): vocab.json / vocab.txt, the
# chat templates a template directory or a model names, remote code, *.tiktoken vocabularies.
SERVING_PATTERNS = ("vocab.*", "*.jinja", "*.py", "*.tiktoken")
# A sentence-transformers pooling layer's own config (1_Pooling/config.json): vLLM's pooler reads it.
POOLING_CONFIG = "*_Pooling/config.json"
# Other formats of the weights the top level already has: never a bundled model of their own.
OTHER_FORMAT_DIRS = frozenset({"original", "metal", "onnx"})

Checksum = Literal["sha256", "git_sha1"]


class ManifestError(ValueError):
    """A listing that cannot be staged as asked: an index naming a file the repository lacks, a pattern
    matching nothing, or no weights vLLM can load."""


@dataclass(frozen=True)
class RepoEntry:
    """One file of the hub's tree listing at a commit."""

    path: str
    size: int
    blob_id: str
    lfs_sha256: str | None = None

    @classmethod
    def from_listing(cls, item: Mapping[str, Any]) -> RepoEntry:
        """An entry of the hub's /tree answer ({path, size, oid, lfs: {oid, size}}), or huggingface_hub's
        RepoFile as a dict ({path, size, blob_id, lfs: {sha256, size}})."""
        lfs = item.get("lfs") or None
        sha = (lfs.get("oid") or lfs.get("sha256")) if isinstance(lfs, Mapping) else None
        return cls(str(item["path"]), int(item["size"]), str(item.get("oid") or item.get("blob_id")), sha)


@dataclass(frozen=True)
class ManifestFile:
    path: str
    size: int
    checksum: Checksum
    digest: str

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, self.checksum: self.digest}


@dataclass(frozen=True)
class Manifest:
    """The files a commit is staged as, each with its size and checksum."""

    repo_id: str
    commit: str
    files: tuple[ManifestFile, ...]
    extra_files: tuple[str, ...] = ()
    # What the whole repository holds at the commit, for the report (not part of the digest).
    repo_bytes: int = 0

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def digest(self) -> str:
        return manifest_digest(self.repo_id, self.commit, [f.as_dict() for f in self.files])

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": MANIFEST_SCHEMA,
            "id": self.repo_id,
            "commit": self.commit,
            "extra_files": list(self.extra_files),
            "repo_bytes": self.repo_bytes,
            "bytes": self.bytes,
            "digest": self.digest,
            "files": [f.as_dict() for f in self.files],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        files = tuple(
            ManifestFile(str(f["path"]), int(f["size"]), "sha256", str(f["sha256"]))
            if "sha256" in f
            else ManifestFile(str(f["path"]), int(f["size"]), "git_sha1", str(f["git_sha1"]))
            for f in data["files"]
        )
        return cls(
            str(data["id"]),
            str(data["commit"]),
            files,
            tuple(str(p) for p in data.get("extra_files", ())),
            int(data.get("repo_bytes", 0)),
        )


def manifest_digest(repo_id: str, commit: str, files: Iterable[Mapping[str, Any]]) -> str:
    """sha256 of the canonical manifest: id, commit and every file's path, size and checksum, sorted by path.

    The host script (roles/model_stage/files/hub_manifest.py) computes the same from the same JSON: two
    ranks that report one digest stage the very same bytes."""
    rows = sorted(
        [str(f["path"]), int(f["size"]), "sha256" if "sha256" in f else "git_sha1", str(f.get("sha256") or f["git_sha1"])]
        for f in files
    )
    body = json.dumps({"id": repo_id, "commit": commit, "files": rows}, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def _folder(path: str) -> str:
    return path.rpartition("/")[0]


def _name(path: str) -> str:
    return path.rpartition("/")[2]


def bundled_folders(paths: Iterable[str]) -> list[str]:
    """Folders that are models of their own (a config.json and safetensors directly in them), outside the
    other-format folders: the top level ("") always, then e.g. a drafter's eagle/ or mtp/."""
    by_folder: dict[str, set[str]] = {}
    for path in paths:
        by_folder.setdefault(_folder(path), set()).add(_name(path))
    found = [""]
    for folder, names in sorted(by_folder.items()):
        if not folder or OTHER_FORMAT_DIRS.intersection(folder.split("/")):
            continue
        if "config.json" in names and any(n.endswith(".safetensors") for n in names):
            found.append(folder)
    return found


def _in(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def index_paths(entries: Iterable[RepoEntry]) -> list[str]:
    """The weight indexes whose text `select` needs (each model folder's model.safetensors.index.json, or its
    pytorch_model.bin.index.json where it has no safetensors): what the controller reads before selecting."""
    paths = {e.path for e in entries}
    wanted = []
    for folder in bundled_folders(paths):
        has_safetensors = any(_folder(p) == folder and p.endswith(".safetensors") for p in paths)
        name = INDEX if has_safetensors else BIN_INDEX
        if _in(folder, name) in paths:
            wanted.append(_in(folder, name))
    return wanted


def _weights(folder: str, paths: set[str], indexes: Mapping[str, str]) -> set[str]:
    """One model folder's weight files: its index's shards, or its single file."""
    here = {p for p in paths if _folder(p) == folder}
    has_safetensors = any(p.endswith(".safetensors") for p in here)
    index, single = (INDEX, SINGLE) if has_safetensors else (BIN_INDEX, BIN_SINGLE)
    index_path = _in(folder, index)
    if index_path in here:
        if index_path not in indexes:
            raise ManifestError(f"{index_path} was not read: its weight_map names the shards to fetch")
        try:
            weight_map = json.loads(indexes[index_path])["weight_map"]
            shards = {_in(folder, str(shard)) for shard in weight_map.values()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ManifestError(f"{index_path} has no weight_map naming its shards: {exc}") from exc
        missing = sorted(shards - paths)
        if missing:
            raise ManifestError(f"{index_path} names shards the repository does not hold: {', '.join(missing[:5])}")
        return {index_path} | shards
    if _in(folder, single) in here:
        return {_in(folder, single)}
    # Shards without an index: every safetensors file of the folder (never another format beside them).
    return {p for p in here if p.endswith(".safetensors")}


def _serving(folder: str, paths: set[str]) -> set[str]:
    chosen = set()
    for path in paths:
        if _folder(path) == folder:
            name = _name(path)
            if name in SERVING_NAMES or any(fnmatchcase(name, pattern) for pattern in SERVING_PATTERNS):
                chosen.add(path)
        elif _folder(_folder(path)) == folder and fnmatchcase(path[len(folder) + 1 if folder else 0 :], POOLING_CONFIG):
            chosen.add(path)
    return chosen


def _checksummed(entry: RepoEntry) -> ManifestFile:
    if entry.lfs_sha256:
        return ManifestFile(entry.path, entry.size, "sha256", entry.lfs_sha256)
    return ManifestFile(entry.path, entry.size, "git_sha1", entry.blob_id)


def select(
    repo_id: str,
    commit: str,
    entries: Iterable[RepoEntry],
    indexes: Mapping[str, str],
    extra_files: Iterable[str] = (),
) -> Manifest:
    """The files serving needs (module docstring), plus those the extra_files patterns (fnmatch, `*` crosses
    folders) match. `indexes` maps each of `index_paths(entries)` to its text."""
    listing = {e.path: e for e in entries}
    paths = set(listing)
    extras = tuple(extra_files)
    chosen: set[str] = set()
    top_weights = _weights("", paths, indexes)
    if not top_weights:
        raise ManifestError(
            f"{repo_id}@{commit[:12]} has no safetensors or PyTorch weights at its top level (GGUF and ONNX are not "
            "served): extra_files can name what to fetch"
        )
    chosen |= top_weights
    for folder in bundled_folders(paths):
        chosen |= _serving(folder, paths)
        if folder:
            chosen |= _weights(folder, paths, indexes)
    for pattern in extras:
        matched = {p for p in paths if fnmatchcase(p, pattern)}
        if not matched:
            raise ManifestError(f"{repo_id}@{commit[:12]}: extra_files pattern {pattern!r} matches no file")
        chosen |= matched
    files = tuple(_checksummed(listing[p]) for p in sorted(chosen))
    return Manifest(repo_id, commit, files, extras, sum(e.size for e in listing.values()))
