"""The directories module run by ansible itself on this machine: create, fix modes, check mode, refusal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

COLLECTIONS = Path(__file__).resolve().parents[3] / ".cache" / "pytest-collections"


def run_module(paths: list[dict[str, str]], *extra: str) -> dict[str, object]:
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS),
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
    )
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible"),
            "localhost",
            "-c",
            "local",
            "-i",
            "localhost,",
            "-m",
            "sparkfleet.vllm.directories",
            "-a",
            json.dumps({"paths": paths}),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    # The checkout's ansible.cfg adds a roles-timing recap after the JSON document.
    document, _ = json.JSONDecoder().raw_decode(done.stdout)
    result: dict[str, object] = document["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return result


def test_creates_fixes_and_then_changes_nothing(tmp_path: Path) -> None:
    wanted = [{"path": str(tmp_path / "a" / "b"), "mode": "0750"}, {"path": str(tmp_path / "c"), "mode": "0755"}]
    (tmp_path / "c").mkdir(mode=0o700)
    checked = run_module(wanted, "--check", "--diff")
    assert checked["changed"] is True and not (tmp_path / "a").exists()
    assert checked["changed_paths"] == [str(tmp_path / "a" / "b"), str(tmp_path / "c")]
    first = run_module(wanted)
    assert first["changed"] is True
    assert oct((tmp_path / "a" / "b").stat().st_mode & 0o777) == "0o750"
    assert oct((tmp_path / "c").stat().st_mode & 0o777) == "0o755"
    assert run_module(wanted)["changed"] is False


def test_a_file_in_the_way_fails_before_any_change(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    result = run_module([{"path": str(tmp_path / "new")}, {"path": str(tmp_path / "file")}])
    assert result.get("failed") is True and "is not a directory" in str(result["msg"])
    assert not (tmp_path / "new").exists()
