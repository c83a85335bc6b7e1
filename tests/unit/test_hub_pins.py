"""Hub revisions pinned to commits on the controller (issue 19, part 3): a branch is resolved once, staged
and served at that commit, and a later run that sees the branch move reports it and stays unless asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hub_server import Hub, HubServer, Repo

OLD, NEW = "1" * 40, "2" * 40
REPO = "sparkfleet-test/pinned"
SCRIPT = """
import json, sys
from pathlib import Path
from sparkfleet.errors import PlanError
from sparkfleet.hubpins import pin_revision
repo, revision, pins, repin = sys.argv[1], sys.argv[2] or None, Path(sys.argv[3]), sys.argv[4] == "1"
try:
    print(json.dumps(pin_revision(repo, revision, pins, "2026-11-24T10:00:00Z", repin=repin).as_dict()))
except PlanError as exc:
    print(json.dumps({"refused": str(exc)}))
"""


@pytest.fixture
def hub() -> Iterator[HubServer]:
    repo = Repo(files={"config.json": b"{}"}, revisions={"main": OLD, "v1": OLD})
    with HubServer(Hub({REPO: repo})) as server:
        yield server


def pin(endpoint: str, pins: Path, revision: str = "main", repin: bool = False, repo: str = REPO) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env |= {"HF_ENDPOINT": endpoint, "HF_HOME": str(pins.parent / "hf"), "HF_HUB_ETAG_TIMEOUT": "3"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, repo, revision, str(pins), "1" if repin else "0"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return dict(json.loads(done.stdout))


def test_a_branch_is_pinned_once_and_a_move_is_reported_not_followed(hub: HubServer, tmp_path: Path) -> None:
    pins = tmp_path / "pins"
    first = pin(hub.endpoint, pins)
    assert first["commit"] == OLD and first["moved"] is False and first["pinned_at"] == "2026-11-24T10:00:00Z"
    stored = json.loads((pins / "sparkfleet-test--pinned@main.json").read_text())
    assert stored["commit"] == OLD and stored["revision"] == "main"
    hub.hub.repos[REPO].revisions["main"] = NEW  # a new commit lands on main
    later = pin(hub.endpoint, pins)
    assert later["commit"] == OLD and later["current"] == NEW and later["moved"] is True
    moved = pin(hub.endpoint, pins, repin=True)
    assert moved["commit"] == NEW and moved["moved"] is False
    assert json.loads((pins / "sparkfleet-test--pinned@main.json").read_text())["commit"] == NEW


def test_a_commit_pins_itself_without_asking_the_hub(hub: HubServer, tmp_path: Path) -> None:
    asked = len(hub.hub.requests)
    assert pin(hub.endpoint, tmp_path / "pins", revision=OLD)["commit"] == OLD
    assert len(hub.hub.requests) == asked and not (tmp_path / "pins").exists()


def test_an_unreachable_hub_keeps_the_pin_and_refuses_a_first_one(hub: HubServer, tmp_path: Path) -> None:
    pins = tmp_path / "pins"
    assert pin(hub.endpoint, pins)["commit"] == OLD
    held = pin("http://127.0.0.1:9", pins)  # nothing listens on the discard port
    assert held["commit"] == OLD and held["current"] is None and held["moved"] is False
    refused = pin("http://127.0.0.1:9", pins, revision="v1")
    assert refused["refused"].startswith("model: ") and REPO in refused["refused"]


def test_a_pin_that_is_not_one_is_refused_naming_where_it_lives(hub: HubServer, tmp_path: Path) -> None:
    pins = tmp_path / "pins"
    pins.mkdir()
    (pins / "sparkfleet-test--pinned@main.json").write_text(json.dumps({"schema": 1, "id": REPO, "revision": "main"}))
    refused = pin(hub.endpoint, pins)["refused"]
    assert refused.startswith("model_stage_pin_dir: ") and "remove it to pin again" in refused


def test_a_revision_that_does_not_exist_is_refused_naming_the_model(hub: HubServer, tmp_path: Path) -> None:
    refused = pin(hub.endpoint, tmp_path / "pins", revision="no-such-branch")["refused"]
    assert refused == f"model: {REPO} has no revision 'no-such-branch'; try a branch, tag or commit of the repository"


def test_a_model_planned_before_staging_is_served_at_its_pinned_commit() -> None:
    from sparkfleet.boundary.adapters import host_plan

    facts = {"platform": "gb10", "compute_capability": "12.1", "mem_total_bytes": 130662924288, "vllm_version": "0.32.0"}
    catalog = {"id": "openai/gpt-oss-120b", "path": "openai/gpt-oss-120b", "commit": OLD}
    planned = host_plan(facts, [{"name": "oss", "model": catalog, "intent": {"max_context": 8192}}], "vllm_serve_instances")
    argv = planned.instances["oss"].argv
    assert argv[2] == "openai/gpt-oss-120b" and argv[argv.index("--revision") + 1] == OLD
    # A staged copy is loaded from its snapshot directory: the path is the pin, no --revision needed.
    staged = {**catalog, "path": f"/var/lib/sparkfleet/hf/hub/models--openai--gpt-oss-120b/snapshots/{OLD}"}
    served = host_plan(facts, [{"name": "oss", "model": staged, "intent": {"max_context": 8192}}], "vllm_serve_instances")
    assert "--revision" not in served.instances["oss"].argv


def test_references_carry_the_pinned_commit_and_directories_stay_as_they_are() -> None:
    from pinned_refs import pinned_refs

    pins = {REPO: {"commit": OLD}}
    entries = [
        {"id": REPO, "revision": "main"},
        {"id": "local/dir", "src": "/srv/m"},
        "other/model",
        {"id": "o/r", "revision": "v2"},
    ]
    assert pinned_refs(entries, pins) == [
        {"id": REPO, "revision": OLD}, {"id": "local/dir"}, {"id": "other/model"}, {"id": "o/r", "revision": "v2"},
    ]  # fmt: skip


def test_the_download_model_stage_runs_stages_exactly_the_pinned_commit_with_the_token_from_a_file(tmp_path: Path) -> None:
    """hub.yml's command, run for real: `hf download ID --revision COMMIT FILE...` (the manifest's files), the
    token only in HF_TOKEN_PATH."""
    from ansible_collections.sparkfleet.vllm.plugins.module_utils.model_state import resolve_model

    hf = Path(sys.executable).parent / "hf"
    if not hf.exists():
        pytest.skip("the hf CLI of huggingface_hub is not installed next to this Python (scripts/lib.sh: ensure_hf)")
    token = "hf_sparkfleetPinnedDownload0123456789"
    files = {"config.json": b'{"model_type": "llama"}', "model.safetensors": b"\0" * 64}
    with HubServer(Hub({REPO: Repo(files=files, revisions={"main": NEW}, gated_token=token)})) as server:
        token_file = tmp_path / "token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        env |= {"HF_ENDPOINT": server.endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1"}
        argv = [str(hf), "download", REPO, "--revision", NEW, "config.json", "model.safetensors"]
        refused = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert refused.returncode != 0  # gated: no token, no files
        with_token = env | {"HF_TOKEN_PATH": str(token_file)}
        done = subprocess.run(argv, env=with_token, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert token not in done.stdout + done.stderr
    pinned = resolve_model({"id": REPO, "revision": NEW}, str(tmp_path / "hf"), None)
    assert pinned["complete"] and pinned["path"].endswith(f"/snapshots/{NEW}")
    # A download by commit writes no branch ref: looked up by id alone (main) the model is not there, which is
    # why every reader asks for the pinned commit (pinned_refs).
    assert not resolve_model({"id": REPO}, str(tmp_path / "hf"), None)["complete"]
