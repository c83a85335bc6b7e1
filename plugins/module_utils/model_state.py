# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is staged on a host: each model's config, weights and completeness, and the space models are written to."""

from __future__ import annotations

import glob
import json
import os


def describe_model(path):
    config_path = os.path.join(path, "config.json")
    if not os.path.isfile(config_path):
        return {"path": path, "present": False}
    with open(config_path, encoding="utf-8") as handle:
        config = json.load(handle)
    weights = 0
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as handle:
            weights = json.load(handle).get("metadata", {}).get("total_size") or 0
    shards = [os.path.getsize(f) for f in glob.glob(os.path.join(path, "*.safetensors"))]
    if not weights:
        weights = sum(shards)
    found = {"path": path, "present": True, "config": config, "weight_bytes": int(weights)}
    # The tokenizer's own classes (tokenizer_config.json auto_map) need the repository's code too.
    tokenizer_path = os.path.join(path, "tokenizer_config.json")
    if os.path.isfile(tokenizer_path):
        try:
            with open(tokenizer_path, encoding="utf-8") as handle:
                found["tokenizer_auto_map"] = isinstance(json.load(handle).get("auto_map"), dict)
        except (OSError, ValueError, AttributeError):
            found["tokenizer_auto_map"] = False
    found["fs_type"] = filesystem_type(path)
    if shards:
        found["largest_weight_file_bytes"] = max(shards)
    return found


def describe_storage(path):
    """Free bytes and filesystem of the directory a model will be written to (or its nearest existing parent)."""
    existing = os.path.abspath(path)
    while not os.path.isdir(existing) and existing != os.path.dirname(existing):
        existing = os.path.dirname(existing)
    stats = os.statvfs(existing)
    return {
        "path": path,
        "measured_at": existing,
        "free_bytes": stats.f_bavail * stats.f_frsize,
        "device": os.stat(existing).st_dev,
        "fs_type": filesystem_type(existing),
    }


def filesystem_type(path, mounts="/proc/self/mounts"):
    """The type of the filesystem holding path: the longest mount point that contains it."""
    try:
        with open(mounts, encoding="utf-8") as handle:
            table = [line.split()[1:3] for line in handle if len(line.split()) >= 3]
    except OSError:
        return None
    real = os.path.realpath(path)
    best, kind = "", None
    for escaped, fstype in table:
        point = escaped.replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fstype
    return kind


def hub_snapshot(hf_home, model_id, revision):
    """The snapshot directory the hub cache holds for a revision (a commit, or a branch / tag through refs/)."""
    repo = os.path.join(hf_home, "hub", "models--" + model_id.replace("/", "--"))
    rev = revision or "main"
    ref_file = os.path.join(repo, "refs", rev)
    if os.path.isfile(ref_file):
        with open(ref_file, encoding="utf-8") as handle:
            rev = handle.read().strip()
    return repo, os.path.join(repo, "snapshots", rev)


def hub_complete(repo, snapshot):
    """All files the weight index names are in the snapshot and no download is half done."""
    if glob.glob(os.path.join(repo, "blobs", "*.incomplete")):
        return False
    index = os.path.join(snapshot, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as handle:
            shards = set(json.load(handle).get("weight_map", {}).values())
        return all(os.path.isfile(os.path.join(snapshot, shard)) for shard in shards)
    return bool(glob.glob(os.path.join(snapshot, "*.safetensors")))


def hub_verified(repo, snapshot):
    """What model_stage's last verification of the snapshot's manifest recorded (hub_manifest.py), checked
    cheaply: every file present at its size, and unchanged (size, mtime, inode) since its checksum passed.
    None when no manifest was verified there (a model staged before manifests, or by hand)."""
    path = os.path.join(repo, "sparkfleet", os.path.basename(snapshot) + ".json")
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
        files = record["files"]
        verified = record.get("verified") or {}
        digest = record["digest"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    failing = []
    for entry in files:
        name, size = entry["path"], int(entry["size"])
        try:
            found = os.stat(os.path.join(snapshot, name))
        except OSError:
            failing.append({"path": name, "why": "missing"})
            continue
        if found.st_size != size:
            failing.append({"path": name, "why": "%d bytes, not %d" % (found.st_size, size)})
        elif verified.get(name) != [found.st_size, found.st_mtime_ns, found.st_ino]:
            why = "changed since its checksum was verified" if name in verified else "checksum not verified"
            failing.append({"path": name, "why": why})
    return {
        "manifest_digest": digest,
        "manifest_files": len(files),
        "manifest_bytes": sum(int(entry["size"]) for entry in files),
        "failing": failing,
    }


MANIFEST = ".sparkfleet-staged.json"


def file_matches(path, recorded):
    """A file is as staged when its size (and, in newer manifests, its modification time) is unchanged."""
    if not os.path.isfile(path):
        return False
    found = os.stat(path)
    if isinstance(recorded, list):
        size, mtime = recorded
        return found.st_size == size and found.st_mtime == mtime
    return found.st_size == recorded


def local_staged(path):
    """Whether every file of the manifest model_stage wrote is as it was staged, and the source stamp it recorded."""
    manifest = os.path.join(path, MANIFEST)
    if not os.path.isfile(manifest):
        return False, None
    with open(manifest, encoding="utf-8") as handle:
        recorded = json.load(handle)
    files = recorded.get("files", {})
    complete = bool(files) and all(file_matches(os.path.join(path, name), value) for name, value in files.items())
    return complete, recorded.get("source")


def resolve_model(ref, hf_home, model_store):
    model_id = ref.get("id")
    if not model_id:
        return None
    if model_store:
        local = os.path.join(model_store, model_id)
        if os.path.isfile(os.path.join(local, "config.json")):
            found = describe_model(local)
            complete, source_stamp = local_staged(local)
            found.update(id=model_id, source="local", complete=complete, source_stamp=source_stamp)
            found.update(manifest_digest=None, failing=[])
            return found
    if hf_home:
        repo, snapshot = hub_snapshot(hf_home, model_id, ref.get("revision"))
        found = describe_model(snapshot)
        complete = found["present"] and hub_complete(repo, snapshot)
        verified = hub_verified(repo, snapshot) if found["present"] else None
        found.update(verified or {"manifest_digest": None, "failing": []})
        found.update(id=model_id, source="hub", complete=complete and not found["failing"])
        return found
    return {"id": model_id, "path": None, "present": False, "complete": False}
