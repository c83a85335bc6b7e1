"""Verify a hub model's snapshot against the manifest the controller recorded (model_stage), and clear what fails.

Run with the release's python (standard library only); the manifest ({id, commit, digest, files: [{path, size,
sha256 | git_sha1}]}) comes on stdin, the hub cache is HF_HOME/hub (`--hf-home`).

  verify [--checksums] [--record]   sizes always; a checksum for each file that changed (size, mtime or inode
                                     differ from what the last verification recorded), or every file with
                                     --checksums. Prints {failing: [{path, why}], fetch, fetch_bytes, ...}.
  remove PATH...                     clears failing files from the cache so that `hf download` fetches them
                                     again: the snapshot's link and the blob it names. Prints {removed}.

The record (--record) lives beside the snapshots, HF_HOME/hub/models--ORG--NAME/sparkfleet/COMMIT.json: the
manifest and, for each file that passed, the size, mtime and inode it passed with. model_facts reads it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
from stat import S_ISREG
from typing import Any

RECORD_SCHEMA = 1
CHUNK = 8 << 20
COMMIT = re.compile(r"[0-9a-f]{40}")
CHECKSUM = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def digest_of(repo_id: str, commit: str, files: list[dict[str, Any]]) -> str:
    """sha256 of the canonical manifest, as sparkfleet.manifest.manifest_digest computes it."""
    rows = sorted(
        [str(f["path"]), int(f["size"]), "sha256" if "sha256" in f else "git_sha1", str(f.get("sha256") or f["git_sha1"])]
        for f in files
    )
    body = json.dumps({"id": repo_id, "commit": commit, "files": rows}, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def checked_manifest(data: Any) -> dict[str, Any]:
    """The manifest, refused unless whole: a commit, safe relative paths, checksums, and the digest it claims."""
    whole = isinstance(data, dict) and COMMIT.fullmatch(str(data.get("commit"))) and isinstance(data.get("files"), list)
    if not whole:
        raise SystemExit("hub_manifest: the manifest needs an id, a commit and files")
    for entry in data["files"]:
        path = str(entry.get("path", ""))
        parts = path.split("/")
        if not path or path.startswith("/") or any(part in ("", ".", "..") for part in parts):
            raise SystemExit(f"hub_manifest: {path!r} is not a path inside the repository")
        if not CHECKSUM.fullmatch(str(entry.get("sha256") or entry.get("git_sha1") or "")):
            raise SystemExit(f"hub_manifest: {path} has no checksum")
    if digest_of(str(data["id"]), data["commit"], data["files"]) != data.get("digest"):
        raise SystemExit("hub_manifest: the manifest's files do not give its digest")
    return dict(data)


def repo_dir(hf_home: str, repo_id: str) -> str:
    return os.path.join(hf_home, "hub", "models--" + repo_id.replace("/", "--"))


def record_path(repo: str, commit: str) -> str:
    return os.path.join(repo, "sparkfleet", commit + ".json")


def file_hash(path: str, entry: dict[str, Any]) -> str:
    """The hub's checksum of a file: sha256 for LFS files, git's blob id ("blob <len>\\0" + content) otherwise."""
    digest = hashlib.sha256() if "sha256" in entry else hashlib.sha1(b"blob %d\0" % os.path.getsize(path))
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def stamp(stat: os.stat_result) -> list[int]:
    """What a file passed with: a download or an edit changes one of these (a new blob is a new inode)."""
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino]


def load_record(path: str, digest: str) -> dict[str, list[int]]:
    """What the last verification of this manifest found good; nothing when it verified another manifest."""
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return {}
    if not isinstance(record, dict) or record.get("schema") != RECORD_SCHEMA or record.get("digest") != digest:
        return {}
    verified = record.get("verified")
    return verified if isinstance(verified, dict) else {}


def verify(manifest: dict[str, Any], hf_home: str, checksums: bool) -> dict[str, Any]:
    repo = repo_dir(hf_home, manifest["id"])
    snapshot = os.path.join(repo, "snapshots", manifest["commit"])
    known = load_record(record_path(repo, manifest["commit"]), manifest["digest"])
    failing: list[dict[str, str]] = []
    verified: dict[str, list[int]] = {}
    hashed: list[str] = []
    hashed_bytes = 0
    for entry in manifest["files"]:
        path, size = entry["path"], int(entry["size"])
        try:
            stat = os.stat(os.path.join(snapshot, path))
        except OSError:
            failing.append({"path": path, "why": "missing"})
            continue
        if not S_ISREG(stat.st_mode):
            failing.append({"path": path, "why": "not a regular file"})
            continue
        if stat.st_size != size:
            failing.append({"path": path, "why": f"{stat.st_size} bytes, not {size}"})
            continue
        if checksums or known.get(path) != stamp(stat):
            hashed.append(path)
            hashed_bytes += size
            kind = "sha256" if "sha256" in entry else "git_sha1"
            if file_hash(os.path.join(snapshot, path), entry) != entry[kind]:
                failing.append({"path": path, "why": f"{'sha256' if kind == 'sha256' else 'git blob id'} differs"})
                continue
        verified[path] = stamp(stat)
    sizes = {entry["path"]: int(entry["size"]) for entry in manifest["files"]}
    return {
        "id": manifest["id"],
        "commit": manifest["commit"],
        "digest": manifest["digest"],
        "files": len(manifest["files"]),
        "bytes": sum(sizes.values()),
        "failing": failing,
        "fetch": [f["path"] for f in failing],
        "fetch_bytes": sum(sizes[f["path"]] for f in failing),
        "hashed": hashed,
        "hashed_bytes": hashed_bytes,
        "verified": verified,
    }


def record(manifest: dict[str, Any], hf_home: str, verified: dict[str, list[int]]) -> bool:
    """Keep what passed beside the snapshots; False when nothing changed. Run as the cache's owner (the role's
    runuser): root never writes into a directory the service user controls."""
    repo = repo_dir(hf_home, manifest["id"])
    if not os.path.isdir(repo):
        return False
    path = record_path(repo, manifest["commit"])
    body = {"schema": RECORD_SCHEMA, "id": manifest["id"], "commit": manifest["commit"], "digest": manifest["digest"],
            "files": manifest["files"], "verified": verified}  # fmt: skip
    try:
        with open(path, encoding="utf-8") as kept:
            if json.load(kept) == body:
                return False
    except (OSError, ValueError):
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(path), delete=False, suffix=".tmp") as handle:
        json.dump(body, handle, indent=1, sort_keys=True)
    os.chmod(handle.name, 0o644)
    os.replace(handle.name, path)
    return True


def inside(path: str, folder: str) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(folder) + os.sep)


def remove(manifest: dict[str, Any], hf_home: str, paths: list[str]) -> list[str]:
    """Clear each failing file from this model's cache: its snapshot link, the blob the link names and the blob
    the hub's checksum names (hf relinks a blob it finds rather than fetch it). A missing file's blob, shared
    with another commit, is kept when it is whole, and a partial download (.incomplete) is left to resume."""
    repo = repo_dir(hf_home, manifest["id"])
    blobs = os.path.join(repo, "blobs")
    snapshot = os.path.join(repo, "snapshots", manifest["commit"])
    entries = {entry["path"]: entry for entry in manifest["files"]}
    removed: list[str] = []

    def drop(path: str) -> None:
        if os.path.lexists(path) and inside(os.path.dirname(path), repo):
            os.unlink(path)
            removed.append(path)

    for path in paths:
        if path not in entries:
            raise SystemExit(f"hub_manifest: {path} is not a file of the manifest")
        entry = entries[path]
        checksum = str(entry.get("sha256") or entry["git_sha1"])
        link = os.path.join(snapshot, path)
        named = os.path.join(blobs, checksum)
        if not os.path.lexists(link) and os.path.isfile(named):
            whole = os.path.getsize(named) == int(entry["size"]) and file_hash(named, entry) == checksum
            if whole:
                continue
        if os.path.lexists(link):
            target = os.path.realpath(link)
            drop(link)
            if inside(target, blobs):
                drop(target)
            drop(named + ".incomplete")
        drop(named)
    return removed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hf-home", required=True)
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("verify")
    check.add_argument("--checksums", action="store_true", help="hash every file, not only those that changed")
    check.add_argument("--record", action="store_true", help="keep what passed beside the snapshots")
    clear = commands.add_parser("remove")
    clear.add_argument("paths", nargs="+")
    args = parser.parse_args(sys.argv[1:])
    try:
        manifest = checked_manifest(json.load(sys.stdin))
    except ValueError as exc:
        raise SystemExit(f"hub_manifest: the manifest on stdin is not JSON: {exc}") from exc
    if args.command == "verify":
        result = verify(manifest, args.hf_home, args.checksums)
        result["recorded"] = record(manifest, args.hf_home, result["verified"]) if args.record else False
        del result["verified"]
    else:
        result = {"removed": remove(manifest, args.hf_home, args.paths)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
