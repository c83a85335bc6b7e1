"""The directories module run by ansible itself on this machine: create, fix modes, check mode, refusal."""

from __future__ import annotations

from pathlib import Path

from adhoc import run_module as run_collection_module


def run_module(paths: list[dict[str, str]], *extra: str) -> dict[str, object]:
    return run_collection_module("directories", {"paths": paths}, *extra)


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
