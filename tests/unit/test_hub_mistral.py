"""Staging a Mistral-format checkpoint (issue 64): Mistral-Small-4 keeps its weights in consolidated.safetensors with
params.json and tekken.json beside its config.json and no safetensors index (seed 000 §8: "is not a safetensors
repo"). A stand-in repository of that shape, listed by huggingface_hub, downloaded by the hf CLI and verified by the
host script the role runs: its config, params, tokenizer and weights are staged, its documents are not."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_server import Hub, HubServer, Repo, VirtualSafetensors
from test_hub_manifest import CONTROLLER, HF, host, hub_env, needs_hf

from sparkfleet.manifest import RepoEntry, select

MISTRAL = "mistralai/Mistral-Small-4-119B-2603-NVFP4"
COMMIT = "4c0ffee4c0ffee4c0ffee4c0ffee4c0ffee4c0ff"
STAGED = ["config.json", "consolidated.safetensors", "generation_config.json", "params.json", "tekken.json"]


def mistral_repo() -> Repo:
    weights = VirtualSafetensors({f"layers.{i}.attention.wq.weight": ("U8", (64, 512)) for i in range(4)})
    files: dict[str, bytes | VirtualSafetensors] = {
        ".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
        "README.md": b"# Mistral Small 4\n" * 100,
        "config.json": json.dumps(
            {"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3"}
        ).encode(),
        "params.json": json.dumps({"dim": 4096, "n_layers": 36, "vision_encoder": {"hidden_size": 1024}}).encode(),
        "tekken.json": json.dumps({"config": {"pattern": "x"}, "vocab": []}).encode(),
        "generation_config.json": json.dumps({"bos_token_id": 1, "eos_token_id": 2}).encode(),
        "consolidated.safetensors": weights,
    }
    return Repo(files=files, revisions={"main": COMMIT})


@pytest.fixture
def hub() -> Iterator[HubServer]:
    with HubServer(Hub({MISTRAL: mistral_repo()})) as server:
        yield server


def test_the_selection_takes_params_and_the_consolidated_weights() -> None:
    repo = mistral_repo()
    entries = [RepoEntry(name, len(content), "0" * 40, None) for name, content in repo.files.items()]
    assert sorted(f.path for f in select(MISTRAL, COMMIT, entries, {}).files) == STAGED


@needs_hf
def test_a_mistral_format_repository_is_staged_whole_and_verified(hub: HubServer, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CONTROLLER, MISTRAL, COMMIT, str(tmp_path / "pins"), "[]"],
        env=hub_env(hub, tmp_path / "controller-hf"), capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    manifest = json.loads(done.stdout)
    assert [f["path"] for f in manifest["files"]] == STAGED
    hf_home = tmp_path / "host-hf"
    first = host(hf_home, manifest, "verify", "--record")
    assert sorted(first["fetch"]) == STAGED
    argv = [str(HF), "download", MISTRAL, "--revision", COMMIT, *first["fetch"]]
    fetched = subprocess.run(argv, env=hub_env(hub, hf_home), capture_output=True, text=True, timeout=120, check=False)
    assert fetched.returncode == 0, fetched.stderr
    after = host(hf_home, manifest, "verify", "--record")
    assert after["fetch"] == [] and after["failing"] == []
    snapshot = hf_home / "hub" / f"models--{MISTRAL.replace('/', '--')}" / "snapshots" / COMMIT
    assert sorted(p.name for p in snapshot.iterdir()) == STAGED
    from ansible_collections.sparkfleet.vllm.plugins.module_utils.model_state import resolve_model

    found = resolve_model({"id": MISTRAL, "revision": COMMIT}, str(hf_home), None)
    assert isinstance(found, dict) and found["complete"] and found["weight_bytes"] > 0, found
