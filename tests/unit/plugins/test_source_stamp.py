"""The source_stamp lookup refuses a controller model directory that links out of itself."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest
from ansible.errors import AnsibleLookupError

ROOT = Path(__file__).resolve().parents[3]


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("source_stamp", ROOT / "plugins/lookup/source_stamp.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lookup = load()


def model(tmp_path: Path) -> Path:
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "config.json").write_text("{}")
    (directory / "model.safetensors").write_bytes(b"\0" * 16)
    return directory


def test_a_plain_directory_is_stamped_from_names_sizes_and_times(tmp_path: Path) -> None:
    directory = model(tmp_path)
    first = lookup.stamp(str(directory))
    assert first == lookup.stamp(str(directory)) and first.startswith("sha256:")
    os.utime(directory / "config.json", ns=(1, 1))
    assert lookup.stamp(str(directory)) != first


def test_links_inside_the_directory_are_fine(tmp_path: Path) -> None:
    directory = model(tmp_path)
    (directory / "alias.json").symlink_to("config.json")
    lookup.stamp(str(directory))


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_a_link_out_of_the_directory_is_refused_naming_it(tmp_path: Path, kind: str) -> None:
    secret = tmp_path / "home" / ".ssh"
    secret.mkdir(parents=True)
    (secret / "id_ed25519").write_text("PRIVATE")
    directory = model(tmp_path)
    if kind == "file":
        (directory / "tokenizer.json").symlink_to(secret / "id_ed25519")
    else:
        (directory / "extra").symlink_to(secret)
    with pytest.raises(AnsibleLookupError, match="links to .*outside the model directory"):
        lookup.stamp(str(directory))


def test_a_hub_cache_snapshot_may_link_into_its_own_blobs_only(tmp_path: Path) -> None:
    repo = tmp_path / "hub" / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "abc").write_text("{}")
    snapshot = repo / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to("../../blobs/abc")
    lookup.stamp(str(snapshot))
    (tmp_path / "elsewhere").write_text("x")
    (snapshot / "other.json").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(AnsibleLookupError, match="other.json"):
        lookup.stamp(str(snapshot))
