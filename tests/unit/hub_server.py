"""A local stand-in for the Hugging Face Hub's file endpoint, for HF_ENDPOINT in tests.

It answers `/{org}/{name}/resolve/{revision}/{file}` (HEAD and GET, with Range), and the file tree and
repository info `hf download` lists first (`/api/models/{org}/{name}/tree|revision/{revision}`), the way the hub does for
huggingface_hub: X-Repo-Commit, ETag and Content-Length on success, and the X-Error-Code refusals it maps to
RepositoryNotFoundError, GatedRepoError, RevisionNotFoundError and EntryNotFoundError. Safetensors files are
virtual: a real header (real tensor names, dtypes and shapes) followed by data that exists only as a length,
so a test can prove that planning read headers and never tensor data (`data_bytes_served`).

The tree listing carries what the hub's does: each file's size and git blob id, and for LFS files (weights,
by suffix) `lfs: {oid, size, pointerSize}` with the sha256 of the content; a file's ETag is that sha256 for an
LFS file and its git blob id otherwise, so the client's cache keeps every file in a blob of its own.
"""

from __future__ import annotations

import hashlib
import json
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote

DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "U8": 1, "I8": 1}


@dataclass
class VirtualSafetensors:
    """A safetensors file whose tensor data is never materialised."""

    tensors: dict[str, tuple[str, tuple[int, ...]]]
    header: bytes = b""
    data_length: int = 0
    _sha256: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        offset = 0
        entries: dict[str, object] = {"__metadata__": {"format": "pt"}}
        for name, (dtype, shape) in self.tensors.items():
            size = DTYPE_BYTES[dtype]
            for dim in shape:
                size *= dim
            entries[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
            offset += size
        body = json.dumps(entries).encode()
        body += b" " * (-len(body) % 8)
        self.header = struct.pack("<Q", len(body)) + body
        self.data_length = offset

    def __len__(self) -> int:
        return len(self.header) + self.data_length

    def sha256(self) -> str:
        """The sha256 of the header and the zeros that stand for the data. Past HASHED_VIRTUAL_BYTES it is a
        stand-in digest (of the header and the length), not the content's: hashing the planner tests' 16 GB of
        virtual zeros on every listing would dominate them, and no test verifies a file that large."""
        if self._sha256 is None:
            if len(self) > HASHED_VIRTUAL_BYTES:
                digest = hashlib.sha256(b"virtual " + self.header + str(len(self)).encode())
            else:
                digest = hashlib.sha256(self.header)
                zeros, left = bytes(1 << 20), self.data_length
                while left:
                    digest.update(zeros[: min(left, len(zeros))])
                    left -= min(left, len(zeros))
            self._sha256 = digest.hexdigest()
        return self._sha256


HASHED_VIRTUAL_BYTES = 256 * 1024 * 1024
# What the hub keeps in LFS (a repository's .gitattributes): weights and other binaries.
LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".onnx", ".msgpack", ".h5", ".model", ".ckpt")


def git_blob_id(content: bytes) -> str:
    """git's object id of a file: sha1 of "blob <length>\\0" and the content."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def content_sha256(content: bytes | VirtualSafetensors) -> str:
    return content.sha256() if isinstance(content, VirtualSafetensors) else hashlib.sha256(content).hexdigest()


def lfs_pointer(content: bytes | VirtualSafetensors) -> bytes:
    """The pointer git keeps in place of an LFS file."""
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{content_sha256(content)}\nsize {len(content)}\n"
    ).encode()


@dataclass
class Repo:
    files: dict[str, bytes | VirtualSafetensors]
    revisions: dict[str, str] = field(default_factory=lambda: {"main": "a" * 40})
    gated_token: str | None = None

    def is_lfs(self, name: str) -> bool:
        return isinstance(self.files[name], VirtualSafetensors) or name.endswith(LFS_SUFFIXES)

    def etag(self, name: str) -> str:
        content = self.files[name]
        if self.is_lfs(name):
            return content_sha256(content)
        assert isinstance(content, bytes)
        return git_blob_id(content)

    def tree_entry(self, name: str) -> dict[str, object]:
        content = self.files[name]
        entry: dict[str, object] = {"type": "file", "path": name, "size": len(content)}
        if self.is_lfs(name):
            pointer = lfs_pointer(content)
            entry |= {"oid": git_blob_id(pointer), "lfs": {"oid": content_sha256(content), "size": len(content),
                                                           "pointerSize": len(pointer)}}  # fmt: skip
        else:
            assert isinstance(content, bytes)
            entry["oid"] = git_blob_id(content)
        return entry

    def tree(self, under: str, recursive: bool) -> list[dict[str, object]]:
        """The hub's /tree answer: the files and folders under a folder, every level down when recursive."""
        prefix = f"{under.strip('/')}/" if under.strip("/") else ""
        folders: set[str] = set()
        files: list[str] = []
        for name in self.files:
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix) :].split("/")
            for depth in range(1, len(rest)):
                if recursive or depth == 1:
                    folders.add(prefix + "/".join(rest[:depth]))
            if recursive or len(rest) == 1:
                files.append(name)
        listed: list[dict[str, object]] = [
            {"type": "directory", "path": f, "oid": hashlib.sha1(f.encode()).hexdigest()} for f in sorted(folders)
        ]
        return listed + [self.tree_entry(name) for name in sorted(files)]


@dataclass
class Hub:
    repos: dict[str, Repo]
    data_bytes_served: int = 0
    requests: list[str] = field(default_factory=list)
    # Held before each file body is sent: a slow download, so a test can look at the client while it runs.
    body_delay_seconds: float = 0.0


def _handler(hub: Hub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

        def _refuse(self, status: int, code: str) -> None:
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _answer(self, body: bool) -> None:
            hub.requests.append(f"{self.command} {self.path}")
            parts = self.path.split("?")[0].split("/")
            if len(parts) >= 7 and parts[1:3] == ["api", "models"] and parts[5] in ("tree", "revision"):
                under = unquote("/".join(parts[7:]))
                self._api(f"{parts[3]}/{parts[4]}", parts[5], unquote(parts[6]), under, body)
                return
            if len(parts) < 6 or parts[3] != "resolve":
                self._refuse(404, "RepoNotFound")
                return
            repo_id, revision, filename = f"{parts[1]}/{parts[2]}", unquote(parts[4]), "/".join(parts[5:])
            found = self._repo_at(repo_id, revision)
            if found is None:
                return
            repo, commit = found
            content = repo.files.get(filename)
            if content is None:
                self._refuse(404, "EntryNotFound")
                return
            self._send(content, commit, repo.etag(filename), body)

        def _repo_at(self, repo_id: str, revision: str) -> tuple[Repo, str] | None:
            """The repository and the commit a revision names, or None once the hub's refusal is sent."""
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._refuse(401, "RepoNotFound")
                return None
            if repo.gated_token and self.headers.get("authorization") != f"Bearer {repo.gated_token}":
                self._refuse(401, "GatedRepo")
                return None
            commit = repo.revisions.get(revision) or (revision if revision in repo.revisions.values() else None)
            if commit is None:
                self._refuse(404, "RevisionNotFound")
                return None
            return repo, commit

        def _api(self, repo_id: str, kind: str, revision: str, under: str, body: bool) -> None:
            """The two listing calls `hf download` makes: the file tree and the repository's info at a revision."""
            found = self._repo_at(repo_id, revision)
            if found is None:
                return
            repo, commit = found
            if kind == "tree":
                query = parse_qs(self.path.partition("?")[2])
                answer: object = repo.tree(under, query.get("recursive", ["False"])[0].lower() == "true")
            else:
                answer = {"id": repo_id, "sha": commit, "siblings": [{"rfilename": name} for name in sorted(repo.files)]}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)

        def _send(self, content: bytes | VirtualSafetensors, commit: str, etag: str, body: bool) -> None:
            length = len(content)
            start, end, status = 0, length - 1, 200
            ranged = self.headers.get("range")
            if ranged and ranged.startswith("bytes="):
                first, _, last = ranged[6:].partition("-")
                start, end, status = int(first), min(int(last) if last else length - 1, length - 1), 206
            self.send_response(status)
            self.send_header("X-Repo-Commit", commit)
            self.send_header("ETag", f'"{etag}"')
            self.send_header("Content-Length", str(end - start + 1))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{length}")
            self.end_headers()
            if not body:
                return
            time.sleep(hub.body_delay_seconds)
            if isinstance(content, VirtualSafetensors):
                header = content.header
                hub.data_bytes_served += max(0, end + 1 - max(start, len(header)))
                chunk = header[start : end + 1] + b"\0" * max(0, end + 1 - max(start, len(header)))
            else:
                chunk = content[start : end + 1]
            self.wfile.write(chunk)

    return Handler


class HubServer:
    """Serves a Hub on an address (loopback unless told) and a free port until stopped."""

    def __init__(self, hub: Hub, host: str = "127.0.0.1") -> None:
        self.hub = hub
        self._server = ThreadingHTTPServer((host, 0), _handler(hub))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
