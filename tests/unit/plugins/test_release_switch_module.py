"""The release_switch module run by ansible itself on this machine: switch, previous, prune, refusals."""

from __future__ import annotations

import os
from pathlib import Path

from adhoc import run_module


def make_root(tmp_path: Path, names: list[str]) -> Path:
    """Releases with increasing modification times, each with its build inputs."""
    for age, name in enumerate(names):
        release = tmp_path / "releases" / name
        (tmp_path / "build" / name).mkdir(parents=True)
        release.mkdir(parents=True)
        os.utime(release, (1_700_000_000 + age, 1_700_000_000 + age))
    return tmp_path


def test_switch_keeps_previous_prunes_old_and_then_changes_nothing(tmp_path: Path) -> None:
    root = make_root(tmp_path, ["r1", "r2", "r3", "r4"])
    (root / "current").symlink_to(root / "releases" / "r1")
    args = {"root": str(root), "release": str(root / "releases" / "r4"), "keep": 2}
    checked = run_module("release_switch", args, "--check", "--diff")
    assert checked["changed"] is True and checked["pruned"] == [str(root / "releases" / "r2"), str(root / "build" / "r2")]
    assert os.readlink(root / "current") == str(root / "releases" / "r1") and (root / "releases" / "r2").is_dir()
    done = run_module("release_switch", args)
    assert done["current"] == str(root / "releases" / "r4") and done["previous"] == str(root / "releases" / "r1")
    assert os.readlink(root / "current") == str(root / "releases" / "r4")
    assert os.readlink(root / "previous") == str(root / "releases" / "r1")
    # r1 is older than the two newest but is the rollback target; r2 goes with its build inputs.
    assert sorted(path.name for path in (root / "releases").iterdir()) == ["r1", "r3", "r4"]
    assert sorted(path.name for path in (root / "build").iterdir()) == ["r1", "r3", "r4"]
    again = run_module("release_switch", args)
    assert again["changed"] is False and again["pruned"] == []


def test_a_rollback_swaps_current_and_previous_and_prunes_nothing(tmp_path: Path) -> None:
    root = make_root(tmp_path, ["old", "new"])
    (root / "current").symlink_to(root / "releases" / "new")
    (root / "previous").symlink_to(root / "releases" / "old")
    done = run_module("release_switch", {"root": str(root), "release": str(root / "releases" / "old")})
    assert done["changed"] is True and done["pruned"] == []
    assert os.readlink(root / "current") == str(root / "releases" / "old")
    assert os.readlink(root / "previous") == str(root / "releases" / "new")
    # "old" was built before releases kept their own record: none, and its instances follow the stock tables.
    assert done["record"] is None


def test_a_first_switch_has_no_previous(tmp_path: Path) -> None:
    root = make_root(tmp_path, ["only"])
    # The release's own record, as its smoke step wrote it, comes back for the play to plan against.
    (root / "releases" / "only" / ".sparkfleet-record.json").write_text('{"vllm_version": "0.32.0", "architectures": []}')
    done = run_module("release_switch", {"root": str(root), "release": str(root / "releases" / "only"), "keep": 0})
    assert done["changed"] is True and done["previous"] == "" and done["pruned"] == []
    assert done["record"] == {"vllm_version": "0.32.0", "architectures": []}
    assert not (root / "previous").exists() and (root / "releases" / "only").is_dir()


def test_refusals_change_nothing(tmp_path: Path) -> None:
    root = make_root(tmp_path, ["r1"])
    (root / "current").symlink_to(root / "releases" / "r1")
    for args, message in [
        ({"release": str(root / "releases" / "missing")}, "is not a release directory"),
        ({"release": str(tmp_path)}, "is not a release directory"),
        ({"release": str(root / "releases" / "r1"), "keep": -1}, "is negative"),
    ]:
        result = run_module("release_switch", {"root": str(root), **args})
        assert result.get("failed") is True and message in str(result["msg"]), result
        assert os.readlink(root / "current") == str(root / "releases" / "r1")


def test_check_mode_accepts_a_release_the_run_would_build(tmp_path: Path) -> None:
    root = make_root(tmp_path, ["r1"])
    (root / "current").symlink_to(root / "releases" / "r1")
    args = {"root": str(root), "release": str(root / "releases" / "unbuilt"), "keep": 0}
    checked = run_module("release_switch", args, "--check", "--diff")
    assert checked["changed"] is True and checked["pruned"] == [] and checked["previous"] == str(root / "releases" / "r1")
    assert os.readlink(root / "current") == str(root / "releases" / "r1") and not (root / "previous").exists()
    assert run_module("release_switch", args).get("failed") is True


def test_a_pruned_release_takes_its_compile_caches_and_never_follows_a_link(tmp_path: Path) -> None:
    """Issue 64: compile caches of removed releases were never pruned. Each kind's directory of the pruned release goes,
    the shared one and every instance's; a cache an instance's account replaced with a link is left and reported."""
    root = make_root(tmp_path / "opt", ["r1", "r2", "r3"])
    (root / "current").symlink_to(root / "releases" / "r2")
    caches = tmp_path / "cache"
    kept_elsewhere = tmp_path / "elsewhere" / "r1"
    kept_elsewhere.mkdir(parents=True)
    for parent in (caches, caches / "instances" / "chat", caches / "instances" / "tiny"):
        for kind in ("vllm", "triton"):
            for release in ("r1", "r3"):
                (parent / kind / release).mkdir(parents=True)
                (parent / kind / release / "kernel.so").write_text("x")
    (caches / "instances" / "tiny" / "triton" / "r1" / "kernel.so").unlink()
    (caches / "instances" / "tiny" / "triton" / "r1").rmdir()
    (caches / "instances" / "tiny" / "triton" / "r1").symlink_to(kept_elsewhere)
    args = {"root": str(root), "release": str(root / "releases" / "r3"), "keep": 1, "cache_dir": str(caches),
            "cache_kinds": ["vllm", "triton"]}  # fmt: skip
    done = run_module("release_switch", args)
    gone = {str(p) for p in (caches / "vllm" / "r1", caches / "triton" / "r1", caches / "instances" / "chat" / "vllm" / "r1",
                             caches / "instances" / "chat" / "triton" / "r1", caches / "instances" / "tiny" / "vllm" / "r1")}  # fmt: skip
    assert gone <= set(done["pruned"]) and str(root / "releases" / "r1") in done["pruned"]
    assert not any(os.path.lexists(p) for p in gone)
    assert done["caches_left"] == [str(caches / "instances" / "tiny" / "triton" / "r1")]
    assert kept_elsewhere.is_dir() and (caches / "instances" / "tiny" / "triton" / "r1").is_symlink()
    # The current and previous releases' caches stay.
    assert (caches / "vllm" / "r3" / "kernel.so").exists() and (caches / "instances" / "chat" / "triton" / "r3").is_dir()


def test_the_caches_pruned_are_those_the_unit_compiles_into() -> None:
    import yaml

    roles = Path(__file__).resolve().parents[3] / "roles"
    kinds = yaml.safe_load((roles / "sparkfleet" / "vars" / "main.yml").read_text())["sparkfleet_release_cache_names"]
    unit = (roles / "vllm_serve" / "templates" / "vllm.service.j2").read_text()
    per_release = [word.split("~ '/")[1].split("'")[0] for word in unit.split("__vllm_serve_cache_base ")[1:]
                   if "__vllm_serve_kernels" in word.split(")")[0]]  # fmt: skip
    assert sorted(per_release) == sorted(kinds)


def test_a_release_installed_beside_current_is_never_pruned_and_not_counted(tmp_path: Path) -> None:
    # side is older than every main release but one: keep 1 would prune it, were it not pinned.
    root = make_root(tmp_path, ["r1", "side", "r2", "r3"])
    (root / "current").symlink_to(root / "releases" / "r2")
    args = {
        "root": str(root),
        "release": str(root / "releases" / "r3"),
        "keep": 1,
        "pinned": [str(root / "releases" / "side")],
    }
    done = run_module("release_switch", args)
    # r3 is kept (newest), r2 is previous, side is pinned: only r1 goes.
    assert done["pruned"] == [str(root / "releases" / "r1"), str(root / "build" / "r1")]
    assert sorted(path.name for path in (root / "releases").iterdir()) == ["r2", "r3", "side"]
    unpinned = run_module("release_switch", {**args, "pinned": [], "keep": 0})
    assert unpinned["pruned"] == [str(root / "releases" / "side"), str(root / "build" / "side")]


def test_a_release_a_unit_still_runs_from_is_never_pruned_until_the_unit_is_gone(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root", ["side", "r1", "r2"])
    units = tmp_path / "units"
    units.mkdir()
    (root / "current").symlink_to(root / "releases" / "r2")
    (root / "previous").symlink_to(root / "releases" / "r1")
    # An instance no longer listed whose unit is still installed: it runs from the unlisted side release.
    unit = units / "sparkfleet-vllm-tiny-old.service"
    unit.write_text(f"[Service]\nExecStart={root}/releases/side/bin/vllm serve /models/tiny\n")
    args = {"root": str(root), "release": str(root / "releases" / "r2"), "keep": 0, "units_dir": str(units)}
    kept = run_module("release_switch", args)
    assert kept["changed"] is False and kept["pruned"] == [] and kept["in_use"] == [str(root / "releases" / "side")]
    assert (root / "releases" / "side").is_dir() and (root / "build" / "side").is_dir()
    unit.unlink()
    gone = run_module("release_switch", args)
    assert gone["pruned"] == [str(root / "releases" / "side"), str(root / "build" / "side")] and gone["in_use"] == []
    assert sorted(path.name for path in (root / "releases").iterdir()) == ["r1", "r2"]
