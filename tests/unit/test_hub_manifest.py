"""Stage by the index (issue 46, item 1): a hub model is fetched as the files serving reads, recorded as a
manifest beside the pin, verified on every host and repaired file by file.

Everything runs for real against the hub stand-in: huggingface_hub lists the tree, the `hf` CLI downloads,
and the host script the role runs (roles/model_stage/files/hub_manifest.py) verifies and clears.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hub_server import Hub, HubServer, Repo, VirtualSafetensors
from test_hub import CONFIGS

from sparkfleet.hostconfig.cluster import NodeFacts, cluster_problems
from sparkfleet.manifest import Manifest, ManifestError, RepoEntry, index_paths, manifest_digest, select

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "roles" / "model_stage" / "files" / "hub_manifest.py"
HF = Path(sys.executable).parent / "hf"
OSS = "openai/gpt-oss-120b"
COMMIT = "b5c939de8f754692c1647ca79fbf85e8c1e70f8a"
SHARDS = [f"model-0000{n}-of-00002.safetensors" for n in range(3)]
SERVING = [
    "chat_template.jinja",
    "config.json",
    "generation_config.json",
    "model.safetensors.index.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
]


def experts(layers: range, width: int) -> dict[str, tuple[str, tuple[int, ...]]]:
    """A few MoE layers of MXFP4 blocks and bf16 scales: small, but real headers with real names."""
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
    for i in layers:
        tensors[f"model.layers.{i}.mlp.experts.gate_up_proj_blocks"] = ("U8", (4, width, 90))
        tensors[f"model.layers.{i}.mlp.experts.gate_up_proj_scales"] = ("U8", (4, width, 6))
        tensors[f"model.layers.{i}.self_attn.q_proj.weight"] = ("BF16", (64, width))
    return tensors


def gpt_oss_repo() -> Repo:
    """openai/gpt-oss-120b's layout: the serving files, an index over three shards, the reference checkpoint
    again under original/ (its own config, params and shards) and Apple's under metal/, and the repository's
    documents."""
    shards = {name: VirtualSafetensors(experts(range(4 * n, 4 * n + 4), 800 + 160 * n)) for n, name in enumerate(SHARDS)}
    index = {
        "metadata": {"total_size": sum(s.data_length for s in shards.values())},
        "weight_map": {tensor: name for name, shard in shards.items() for tensor in shard.tensors},
    }
    original = {
        f"original/model--0000{n}-of-00002.safetensors": VirtualSafetensors(experts(range(6 * n, 6 * n + 6), 900))
        for n in (1, 2)
    }
    files: dict[str, bytes | VirtualSafetensors] = {
        ".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n*.bin filter=lfs diff=lfs merge=lfs -text\n",
        "README.md": b"# gpt-oss-120b\n" + b"Welcome to the gpt-oss series.\n" * 200,
        "LICENSE": b"Apache License\nVersion 2.0, January 2004\n" * 100,
        "USAGE_POLICY": b"We aim for our tools to be used safely.\n",
        "config.json": (CONFIGS / "openai--gpt-oss-120b.json").read_bytes(),
        "generation_config.json": json.dumps({"bos_token_id": 199998, "eos_token_id": [200002, 199999]}).encode(),
        "tokenizer.json": json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}}).encode(),
        "tokenizer_config.json": json.dumps(
            {"model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast"}
        ).encode(),
        "special_tokens_map.json": json.dumps({"eos_token": "<|return|>"}).encode(),
        "chat_template.jinja": b"{%- for message in messages %}<|start|>{{ message.role }}<|message|>{% endfor %}",
        "model.safetensors.index.json": json.dumps(index).encode(),
        **shards,
        "original/config.json": json.dumps({"num_hidden_layers": 36, "num_experts": 128}).encode(),
        "original/params.json": json.dumps({"dim": 2880}).encode(),
        "original/dtypes.json": json.dumps({"embedding.weight": "BF16"}).encode(),
        "original/model.safetensors.index.json": json.dumps(
            {"weight_map": {"a": "model--00001-of-00002.safetensors"}}
        ).encode(),
        **original,
        "metal/model.bin": bytes(range(256)) * 16384,
    }
    return Repo(files=files, revisions={"main": COMMIT})


@pytest.fixture
def hub() -> Iterator[HubServer]:
    with HubServer(Hub({OSS: gpt_oss_repo()})) as server:
        yield server


def hub_env(server: HubServer | str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    endpoint = server if isinstance(server, str) else server.endpoint
    return env | {"HF_ENDPOINT": endpoint, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_ETAG_TIMEOUT": "3"}


CONTROLLER = """
import json, sys
from pathlib import Path
from sparkfleet.errors import PlanError
from sparkfleet.hubpins import stage_manifest
repo, commit, pins, extra = sys.argv[1], sys.argv[2], Path(sys.argv[3]), tuple(json.loads(sys.argv[4]))
try:
    manifest, path = stage_manifest(repo, commit, pins, extra)
    print(json.dumps({"path": str(path), **manifest.as_dict()}))
except PlanError as exc:
    print(json.dumps({"refused": str(exc)}))
"""


def controller_manifest(server: HubServer | str, tmp: Path, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """What the hub_pin lookup records on the controller: stage_manifest in a process of its own (huggingface_hub
    reads HF_ENDPOINT and HF_HOME when imported)."""
    done = subprocess.run(
        [sys.executable, "-c", CONTROLLER, OSS, COMMIT, str(tmp / "pins"), json.dumps(list(extra))],
        env=hub_env(server, tmp / "controller-hf"), capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return dict(json.loads(done.stdout))


def host(hf_home: Path, manifest: dict[str, Any], *args: str) -> dict[str, Any]:
    """The host script as hub.yml runs it: the release's python, the manifest on stdin."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.read_text(), "--hf-home", str(hf_home), *args],
        input=json.dumps(manifest), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def file_gets(server: HubServer) -> list[str]:
    """The files the stand-in sent (GET of /resolve/), in the order asked."""
    marker = f"GET /{OSS}/resolve/{COMMIT}/"
    return [r.removeprefix(marker) for r in server.hub.requests if r.startswith(marker)]


def stage(server: HubServer, hf_home: Path, manifest: dict[str, Any], *verify: str) -> dict[str, Any]:
    """hub.yml's steps: verify (recording what passes); only when something is missing or failed, clear it,
    `hf download` exactly those files at the pinned commit, and verify again."""
    first = host(hf_home, manifest, "verify", "--record", *verify)
    if not first["fetch"]:
        return {"first": first, "removed": [], "after": first}
    removed = host(hf_home, manifest, "remove", *first["fetch"])["removed"]
    argv = [str(HF), "download", OSS, "--revision", COMMIT, *first["fetch"]]
    done = subprocess.run(argv, env=hub_env(server, hf_home), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return {"first": first, "removed": removed, "after": host(hf_home, manifest, "verify", "--record")}


def staged_facts(hf_home: Path) -> dict[str, Any]:
    from ansible_collections.sparkfleet.vllm.plugins.module_utils.model_state import resolve_model

    found = resolve_model({"id": OSS, "revision": COMMIT}, str(hf_home), None)
    assert isinstance(found, dict)
    return dict(found)


def snapshot(hf_home: Path) -> Path:
    return hf_home / "hub" / f"models--{OSS.replace('/', '--')}" / "snapshots" / COMMIT


needs_hf = pytest.mark.skipif(
    not HF.exists(), reason="the hf CLI of huggingface_hub is not installed next to this Python (scripts/lib.sh: ensure_hf)"
)


def test_a_gpt_oss_shaped_repository_is_staged_as_its_index_shards_and_serving_files(hub: HubServer, tmp_path: Path) -> None:
    manifest = controller_manifest(hub, tmp_path)
    assert [f["path"] for f in manifest["files"]] == sorted(SERVING + SHARDS)
    whole = sum(len(content) for content in hub.hub.repos[OSS].files.values())
    assert manifest["repo_bytes"] == whole
    print(
        f"\ngpt-oss-120b-shaped stand-in: selected {manifest['bytes']:,} bytes in {len(manifest['files'])} files "
        f"of the repository's {whole:,} bytes in {len(hub.hub.repos[OSS].files)} files "
        f"({100 * manifest['bytes'] / whole:.1f}%); the real repository: 65.28 GB of 195.76 GB"
    )
    # Checksums as the hub gives them: the LFS sha256 for the shards, the git blob id for the rest.
    by_path = {f["path"]: f for f in manifest["files"]}
    assert set(by_path[SHARDS[0]]) == {"path", "size", "sha256"} and set(by_path["config.json"]) == {
        "path",
        "size",
        "git_sha1",
    }
    assert manifest["digest"] == manifest_digest(OSS, COMMIT, manifest["files"])
    # Kept beside the pins, and what the controller read of the hub: the tree and the one index, no weights.
    assert Path(manifest["path"]) == tmp_path / "pins" / f"openai--gpt-oss-120b@{COMMIT}.manifest.json"
    assert file_gets(hub) == ["model.safetensors.index.json"]


@needs_hf
def test_hosts_fetch_only_the_manifest_and_a_second_run_fetches_nothing(hub: HubServer, tmp_path: Path) -> None:
    manifest = controller_manifest(hub, tmp_path)
    hf_home, asked = tmp_path / "host-hf", len(file_gets(hub))
    first = stage(hub, hf_home, manifest)
    assert first["first"]["fetch_bytes"] == manifest["bytes"]  # the space check's figure: all of it, nothing more
    assert sorted(file_gets(hub)[asked:]) == sorted(SERVING + SHARDS)
    assert first["after"]["failing"] == [] and first["after"]["recorded"] is True
    on_disk = sorted(str(p.relative_to(snapshot(hf_home))) for p in snapshot(hf_home).rglob("*") if not p.is_dir())
    assert on_disk == sorted(SERVING + SHARDS)
    facts = staged_facts(hf_home)
    assert facts["complete"] and facts["failing"] == [] and facts["manifest_digest"] == manifest["digest"]

    requests = len(hub.hub.requests)
    again = stage(hub, hf_home, manifest)
    assert again["first"]["fetch"] == [] and again["first"]["hashed"] == [] and again["first"]["recorded"] is False
    assert len(hub.hub.requests) == requests, "a second run asked the hub"


@needs_hf
def test_a_truncated_and_a_corrupted_shard_are_named_and_fetched_again_alone(hub: HubServer, tmp_path: Path) -> None:
    manifest = controller_manifest(hub, tmp_path)
    hf_home = tmp_path / "host-hf"
    stage(hub, hf_home, manifest)
    sizes = {f["path"]: f["size"] for f in manifest["files"]}
    truncated, corrupted = snapshot(hf_home) / SHARDS[0], snapshot(hf_home) / SHARDS[2]
    with open(truncated, "r+b") as handle:
        handle.truncate(sizes[SHARDS[0]] // 2)
    data = bytearray(corrupted.read_bytes())
    data[len(data) // 2] ^= 0x01
    corrupted.write_bytes(bytes(data))

    # Before a start: the facts' stat check names both, without reading a byte of them.
    facts = staged_facts(hf_home)
    assert not facts["complete"]
    assert facts["failing"] == [
        {"path": SHARDS[0], "why": f"{sizes[SHARDS[0]] // 2} bytes, not {sizes[SHARDS[0]]}"},
        {"path": SHARDS[2], "why": "changed since its checksum was verified"},
    ]
    asked = len(file_gets(hub))
    repaired = stage(hub, hf_home, manifest)
    assert repaired["first"]["failing"] == [
        {"path": SHARDS[0], "why": f"{sizes[SHARDS[0]] // 2} bytes, not {sizes[SHARDS[0]]}"},
        {"path": SHARDS[2], "why": "sha256 differs"},
    ]
    assert repaired["first"]["hashed"] == [SHARDS[2]]  # only the file that changed is read
    assert sorted(file_gets(hub)[asked:]) == sorted([SHARDS[0], SHARDS[2]])
    # Each failing file's snapshot link and its blob, nothing else.
    assert len(repaired["removed"]) == 4 and all(f"models--openai--gpt-oss-120b{os.sep}" in p for p in repaired["removed"])
    assert repaired["after"]["failing"] == [] and staged_facts(hf_home)["complete"]


@needs_hf
def test_a_change_that_keeps_size_and_time_is_found_by_checksums_on_demand(hub: HubServer, tmp_path: Path) -> None:
    manifest = controller_manifest(hub, tmp_path)
    hf_home = tmp_path / "host-hf"
    stage(hub, hf_home, manifest)
    shard = snapshot(hf_home) / SHARDS[1]
    before = shard.stat()
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert host(hf_home, manifest, "verify")["failing"] == []  # size, time and inode as they passed: not re-read
    checked = host(hf_home, manifest, "verify", "--checksums")
    assert checked["failing"] == [{"path": SHARDS[1], "why": "sha256 differs"}] and len(checked["hashed"]) == len(
        manifest["files"]
    )
    asked = len(file_gets(hub))
    assert stage(hub, hf_home, manifest, "--checksums")["after"]["failing"] == []
    assert file_gets(hub)[asked:] == [SHARDS[1]]


def test_the_manifest_is_kept_and_used_offline_and_extra_files_list_again(hub: HubServer, tmp_path: Path) -> None:
    first = controller_manifest(hub, tmp_path)
    offline = controller_manifest("http://127.0.0.1:9", tmp_path)  # nothing listens on the discard port
    assert offline == first
    with_original = controller_manifest(hub, tmp_path, ("original/*",))
    added = {f["path"] for f in with_original["files"]} - {f["path"] for f in first["files"]}
    assert added == {p for p in hub.hub.repos[OSS].files if p.startswith("original/")}
    assert with_original["digest"] != first["digest"] and with_original["extra_files"] == ["original/*"]
    refused = controller_manifest(hub, tmp_path, ("orignal/*",))["refused"]
    assert refused == f"model_stage_models: {OSS}@{COMMIT[:12]}: extra_files pattern 'orignal/*' matches no file"


def test_the_host_script_refuses_a_manifest_that_is_not_whole(tmp_path: Path) -> None:
    files = [{"path": "config.json", "size": 2, "git_sha1": "0" * 40}]
    good = {"id": OSS, "commit": COMMIT, "files": files, "digest": manifest_digest(OSS, COMMIT, files)}
    assert host(tmp_path, good, "verify")["failing"] == [{"path": "config.json", "why": "missing"}]
    for bad in (
        good | {"digest": "0" * 64},
        good | {"files": [{"path": "../../etc/passwd", "size": 2, "git_sha1": "0" * 40}]},
    ):
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT.read_text(), "--hf-home", str(tmp_path), "verify"],
            input=json.dumps(bad), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 1 and done.stderr.startswith("hub_manifest: ")


def test_clearing_a_file_never_touches_what_lies_outside_the_models_cache(tmp_path: Path) -> None:
    other = tmp_path / "hub" / "models--other--model" / "blobs" / "f00d"
    other.parent.mkdir(parents=True)
    other.write_bytes(b"another model's weights")
    link = snapshot(tmp_path) / "config.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(other)
    files = [{"path": "config.json", "size": 3, "git_sha1": "1" * 40}]
    manifest = {"id": OSS, "commit": COMMIT, "files": files, "digest": manifest_digest(OSS, COMMIT, files)}
    assert host(tmp_path, manifest, "verify")["failing"] == [{"path": "config.json", "why": "23 bytes, not 3"}]
    assert host(tmp_path, manifest, "remove", "config.json")["removed"] == [str(link)]
    assert other.read_bytes() == b"another model's weights"


def test_a_file_that_is_not_a_regular_file_fails_without_being_opened(tmp_path: Path) -> None:
    """The cache is the service user's: a FIFO (or a device) planted where an empty file belongs would hold the
    verification's read forever; it is named and cleared instead."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = snapshot(tmp_path) / "added_tokens.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(fifo)
    files = [{"path": "added_tokens.json", "size": 0, "git_sha1": "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"}]
    manifest = {"id": OSS, "commit": COMMIT, "files": files, "digest": manifest_digest(OSS, COMMIT, files)}
    assert host(tmp_path, manifest, "verify")["failing"] == [{"path": "added_tokens.json", "why": "not a regular file"}]
    assert host(tmp_path, manifest, "remove", "added_tokens.json")["removed"] == [str(link)] and fifo.exists()


def entries(*paths: str) -> list[RepoEntry]:
    return [RepoEntry(p, 10 + len(p), f"{abs(hash(p)):040x}"[:40], None) for p in paths]


def test_a_single_file_model_with_its_tokenizer_is_staged_without_an_index() -> None:
    """The Molecule sandbox's tiny llama: no index, one model.safetensors."""
    listing = entries(
        "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
        "special_tokens_map.json", "README.md", ".gitattributes",
    )  # fmt: skip
    chosen = select("sandbox/tiny", COMMIT, listing, {})
    assert [f.path for f in chosen.files] == [
        "config.json", "generation_config.json", "model.safetensors", "special_tokens_map.json", "tokenizer.json",
        "tokenizer_config.json",
    ]  # fmt: skip


def test_a_bundled_drafter_is_kept_and_other_formats_are_never_fetched() -> None:
    index = json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})
    drafter_index = json.dumps({"weight_map": {"x": "model.safetensors"}})
    listing = entries(
        "config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors", "consolidated.safetensors", "pytorch_model.bin", "model.gguf",
        "onnx/model.onnx", "flax_model.msgpack", "tf_model.h5", "modeling_custom.py", "vocab.json", "merges.txt",
        "hf_quant_config.json", "1_Pooling/config.json", "modules.json",
        "mtp/config.json", "mtp/model.safetensors.index.json", "mtp/model.safetensors", "mtp/README.md",
        "original/config.json", "original/consolidated.safetensors", "metal/model.bin",
        "images/diagram.png", "docs/config.json",
    )  # fmt: skip
    assert index_paths(listing) == ["model.safetensors.index.json", "mtp/model.safetensors.index.json"]
    indexes = {"model.safetensors.index.json": index, "mtp/model.safetensors.index.json": drafter_index}
    chosen = [f.path for f in select("org/m", COMMIT, listing, indexes).files]
    assert chosen == [
        "1_Pooling/config.json", "config.json", "hf_quant_config.json", "merges.txt", "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors", "model.safetensors.index.json", "modeling_custom.py", "modules.json",
        "mtp/config.json", "mtp/model.safetensors", "mtp/model.safetensors.index.json", "vocab.json",
    ]  # fmt: skip


def test_pytorch_weights_only_where_there_are_no_safetensors_and_no_weights_is_refused() -> None:
    bin_only = entries("config.json", "pytorch_model.bin", "tokenizer.json")
    assert [f.path for f in select("org/b", COMMIT, bin_only, {}).files] == [
        "config.json",
        "pytorch_model.bin",
        "tokenizer.json",
    ]
    with pytest.raises(ManifestError, match="no safetensors or PyTorch weights"):
        select("org/g", COMMIT, entries("config.json", "model-Q4_K_M.gguf"), {})
    broken = entries("config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors")
    lacking = json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})
    with pytest.raises(ManifestError, match="names shards the repository does not hold: model-00002-of-00002"):
        select("org/i", COMMIT, broken, {"model.safetensors.index.json": lacking})


def test_a_manifest_round_trips_and_its_digest_ignores_order() -> None:
    listing = entries("config.json", "model.safetensors")
    manifest = select("org/m", COMMIT, listing, {})
    assert Manifest.from_dict(manifest.as_dict()) == manifest
    files = manifest.as_dict()["files"]
    assert manifest_digest("org/m", COMMIT, list(reversed(files))) == manifest.digest
    assert manifest_digest("org/m", "f" * 40, files) != manifest.digest


def test_a_rank_staged_from_another_manifest_is_named_with_its_failing_files() -> None:
    def node(models: dict[str, Any]) -> NodeFacts:
        return NodeFacts.model_validate({"release_id": "r", "versions": {"ray": "2.60.0"}, "models": models})

    head = {OSS: {"complete": True, "manifest_digest": "a" * 64, "failing": [], "path": "/x", "config": {}}}
    other = {OSS: {"complete": True, "manifest_digest": "b" * 64, "failing": []}}
    failing = {
        OSS: {"complete": False, "manifest_digest": "a" * 64, "failing": [{"path": SHARDS[1], "why": "sha256 differs"}]}
    }
    nodes = {"spark01": node(head), "spark02": node(head), "spark03": node(other), "spark04": node(failing)}
    assert cluster_problems("spark01", nodes, "eth0") == [
        f"spark03 has {OSS} staged as manifest bbbbbbbbbbbb, the head spark01 as aaaaaaaaaaaa (other files or another "
        "commit): stage every node from one pin",
        f"spark04 does not have {OSS} staged completely (every node loads its own copy): {SHARDS[1]} (sha256 differs) "
        "failed verification",
    ]
    # The bare booleans of older facts compare completeness alone.
    assert cluster_problems("spark01", {"spark01": node({OSS: True}), "spark02": node(other)}, "eth0") == []
    unverified: dict[str, Any] = {OSS: {"complete": True, "manifest_digest": None, "failing": []}}
    assert cluster_problems("spark01", {"spark01": node(head), "spark02": node(unverified)}, "eth0") == [
        f"spark02 has {OSS} staged as manifest none (never verified), the head spark01 as aaaaaaaaaaaa (other files "
        "or another commit): stage every node from one pin"
    ]


def test_the_hub_pin_lookup_returns_each_pin_with_its_manifest(hub: HubServer, tmp_path: Path) -> None:
    """Through ansible itself, as model_stage's preflight queries it."""
    sys.path.insert(0, str(Path(__file__).parent / "plugins"))
    from adhoc import run_module  # type: ignore[import-not-found]

    entries = f"[{{'id': '{OSS}', 'revision': 'main', 'extra_files': ['metal/*']}}]"
    query = f"query('sparkfleet.vllm.hub_pin', {entries}, pin_dir='{tmp_path / 'pins'}', endpoint='{hub.endpoint}')"
    result = run_module("ansible.builtin.debug", {"msg": f"{{{{ {query} }}}}"}, env=hub_env(hub, tmp_path / "hf"))
    [pinned] = result["msg"]
    recorded = json.loads(Path(pinned["manifest"]).read_text())
    assert pinned["commit"] == COMMIT and pinned["manifest_digest"] == recorded["digest"]
    assert "metal/model.bin" in [f["path"] for f in recorded["files"]] and pinned["manifest_files"] == 11
    assert pinned["repo_bytes"] == sum(len(c) for c in hub.hub.repos[OSS].files.values())
    assert pinned["manifest_bytes"] == recorded["bytes"] < pinned["repo_bytes"]
