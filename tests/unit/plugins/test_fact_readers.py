from __future__ import annotations

import json
import os
from pathlib import Path

from ansible_collections.sparkfleet.vllm.plugins.module_utils import host_state, model_state


def hub_model(hf_home: Path, model_id: str, revision: str = "abc123", shards: int = 2) -> Path:
    repo = hf_home / "hub" / ("models--" + model_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    (repo / "blobs").mkdir()
    (snapshot / "config.json").write_text(json.dumps({"model_type": "llama"}))
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    index = {"metadata": {"total_size": 1000 * shards}, "weight_map": {f"w{i}": name for i, name in enumerate(names)}}
    (snapshot / "model.safetensors.index.json").write_text(json.dumps(index))
    for name in names:
        (snapshot / name).write_bytes(b"\0" * 1000)
    return snapshot


def test_hub_model_resolves_through_refs_and_is_complete(tmp_path: Path) -> None:
    snapshot = hub_model(tmp_path, "org/model")
    found = model_state.resolve_model({"id": "org/model"}, str(tmp_path), str(tmp_path / "store"))
    assert found["path"] == str(snapshot) and found["source"] == "hub" and found["complete"]
    assert found["weight_bytes"] == 2000 and found["config"] == {"model_type": "llama"}


def test_hub_model_with_a_missing_shard_or_a_partial_blob_is_incomplete(tmp_path: Path) -> None:
    snapshot = hub_model(tmp_path, "org/model")
    (snapshot / "model-00002-of-00002.safetensors").unlink()
    assert not model_state.resolve_model({"id": "org/model"}, str(tmp_path), None)["complete"]
    (snapshot / "model-00002-of-00002.safetensors").write_bytes(b"\0")
    (snapshot.parent.parent / "blobs" / "deadbeef.incomplete").write_bytes(b"")
    assert not model_state.resolve_model({"id": "org/model"}, str(tmp_path), None)["complete"]


def test_pinned_revision_and_missing_model(tmp_path: Path) -> None:
    hub_model(tmp_path, "org/model", revision="f00d")
    assert model_state.resolve_model({"id": "org/model", "revision": "f00d"}, str(tmp_path), None)["complete"]
    missing = model_state.resolve_model({"id": "org/other"}, str(tmp_path), None)
    assert missing["present"] is False and missing["complete"] is False


def test_local_model_needs_a_manifest_that_matches_the_files(tmp_path: Path) -> None:
    model = tmp_path / "store" / "sandbox" / "tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"\0" * 10)
    found = model_state.resolve_model({"id": "sandbox/tiny"}, None, str(tmp_path / "store"))
    assert found["source"] == "local" and found["present"] and not found["complete"]
    manifest = {"files": {"config.json": 2, "model.safetensors": 10}}
    (model / model_state.MANIFEST).write_text(json.dumps(manifest))
    assert model_state.resolve_model({"id": "sandbox/tiny"}, None, str(tmp_path / "store"))["complete"]
    (model / "model.safetensors").write_bytes(b"\0" * 5)
    assert not model_state.resolve_model({"id": "sandbox/tiny"}, None, str(tmp_path / "store"))["complete"]


def test_release_is_reported_through_the_current_link(tmp_path: Path) -> None:
    release = tmp_path / "releases" / "cpu-0.32.0-abc"
    dist = release / "lib" / "python3.11" / "site-packages" / "vllm-0.32.0+cpu.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n")
    (tmp_path / "current").symlink_to(release)
    assert host_state.describe_release(str(tmp_path / "current")) == {
        "path": str(release),
        "id": "cpu-0.32.0-abc",
        "vllm_version": "0.32.0+cpu",
        "capabilities": [],
        "record": None,
    }
    assert host_state.describe_release(str(tmp_path / "missing")) is None
    # A fork release's manifest records what it declared it carries beyond its version.
    (release / ".sparkfleet-release.json").write_text(
        json.dumps({"release_id": "cpu-0.32.0-abc", "capabilities": ["dflash"]})
    )
    assert host_state.describe_release(str(tmp_path / "current"))["capabilities"] == ["dflash"]
    # What the build implements, as its smoke step wrote it, for the planner to hold its plans to.
    (release / ".sparkfleet-record.json").write_text(json.dumps({"vllm_version": "0.32.0+cpu", "architectures": []}))
    assert host_state.describe_release(str(tmp_path / "current"))["record"]["vllm_version"] == "0.32.0+cpu"


def test_a_staged_model_is_as_staged_while_sizes_and_times_match(tmp_path: Path) -> None:
    model = tmp_path / "store" / "m"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    weights = model / "model.safetensors"
    weights.write_bytes(b"\0" * 10)
    recorded = {
        "config.json": [2, (model / "config.json").stat().st_mtime],
        "model.safetensors": [10, weights.stat().st_mtime],
    }
    (model / model_state.MANIFEST).write_text(json.dumps({"source": "sha256:abc", "files": recorded}))
    found = model_state.resolve_model({"id": "m"}, None, str(tmp_path / "store"))
    assert found["complete"] and found["source_stamp"] == "sha256:abc"
    # Rewritten in place with the same size: the time moved, so the model is no longer as staged.
    weights.write_bytes(b"\1" * 10)
    os.utime(weights, (1, 1))
    assert not model_state.resolve_model({"id": "m"}, None, str(tmp_path / "store"))["complete"]


def test_a_model_reports_its_largest_shard_and_its_filesystem(tmp_path: Path) -> None:
    snapshot = hub_model(tmp_path / "hf", "org/model", shards=3)
    (snapshot / "model-00002-of-00003.safetensors").write_bytes(b"\0" * 2500)
    mounts = tmp_path / "mounts"
    mounts.write_text(
        f"/dev/vda / ext4 rw 0 0\nserver:/export {tmp_path / 'hf'} nfs4 rw 0 0\ntmpfs {tmp_path}/other tmpfs rw 0 0\n"
    )
    found = model_state.describe_model(str(snapshot))
    assert found["largest_weight_file_bytes"] == 2500
    assert model_state.filesystem_type(str(snapshot), str(mounts)) == "nfs4"
    assert model_state.filesystem_type(str(tmp_path / "elsewhere"), str(mounts)) == "ext4"
    assert model_state.filesystem_type(str(snapshot), str(tmp_path / "no-such-table")) is None


def test_storage_is_measured_at_the_nearest_existing_directory(tmp_path: Path) -> None:
    found = model_state.describe_storage(str(tmp_path / "not" / "yet" / "made"))
    assert found["measured_at"] == str(tmp_path)
    assert found["free_bytes"] > 0 and found["device"] == os.stat(tmp_path).st_dev
    assert found["path"] == str(tmp_path / "not" / "yet" / "made")


def test_accounts_by_prefix_are_reported_beside_the_named_ones() -> None:
    """The instance accounts are looked up by their prefix before the host plan names them (issue 47)."""
    import pwd

    first = pwd.getpwall()[0]
    prefix = first.pw_name[:2]
    found = host_state.accounts(["root", "no-such-account-here"], ["root"], prefix)
    expected = {e.pw_name for e in pwd.getpwall() if e.pw_name.startswith(prefix)}
    assert expected <= set(found["users"]) and found["users"]["no-such-account-here"] is None
    assert found["users"][first.pw_name]["uid"] == first.pw_uid
    assert set(found["users"]) == expected | {"root", "no-such-account-here"}
    assert host_state.accounts([], [], None) == {"users": {}, "groups": {}}


def test_releases_beside_current_are_reported_by_the_name_their_manifest_carries(tmp_path: Path) -> None:
    for name, version, side in (("cpu-0.32.0-abc", "0.32.0+cpu", None), ("cpu-0.30.0-def", "0.30.0+cpu", "older")):
        release = tmp_path / "releases" / name
        dist = release / "lib" / "python3.11" / "site-packages" / f"vllm-{version}.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
        manifest = {"release_id": name, "side_name": side, "vllm_version": version.split("+")[0]}
        (release / ".sparkfleet-release.json").write_text(json.dumps(manifest))
    (tmp_path / "releases" / "cpu-0.30.0-def" / ".sparkfleet-record.json").write_text(
        json.dumps({"vllm_version": "0.30.0+cpu", "architectures": ["LlamaForCausalLM"]})
    )
    (tmp_path / "current").symlink_to(tmp_path / "releases" / "cpu-0.32.0-abc")
    assert host_state.side_releases(str(tmp_path / "current")) == [
        {
            "name": "older",
            "vllm_version": "0.30.0",
            "id": "cpu-0.30.0-def",
            "path": str(tmp_path / "releases" / "cpu-0.30.0-def"),
            "capabilities": [],
            "prebuilt_kernels": None,
            "record": {"vllm_version": "0.30.0+cpu", "architectures": ["LlamaForCausalLM"]},
        }
    ]
    # A host that never installed a release has none beside it.
    assert host_state.side_releases(str(tmp_path / "nowhere" / "current")) == []


def test_the_release_files_have_one_name_for_the_roles_the_modules_and_the_library() -> None:
    import yaml

    from sparkfleet.release.record import RECORD_FILE

    published = yaml.safe_load((Path(__file__).parents[3] / "roles" / "sparkfleet" / "vars" / "main.yml").read_text())
    assert published["sparkfleet_release_record_file"] == host_state.RELEASE_RECORD == RECORD_FILE
    assert published["sparkfleet_release_manifest_file"] == host_state.RELEASE_MANIFEST
