"""The files module and its action run by ansible itself on this machine."""

from __future__ import annotations

import os
from pathlib import Path

from adhoc import run_module


def entry(path: Path, content: str, **extra: str) -> dict[str, str]:
    return {"dest": str(path), "content": content, **extra}


def test_writes_checks_diffs_and_then_changes_nothing(tmp_path: Path) -> None:
    old = tmp_path / "old.conf"
    old.write_text("a=1\n")
    old.chmod(0o600)
    wanted = [entry(old, "a=2\n", mode="0644"), entry(tmp_path / "new.conf", "b=1\n", mode="0640")]
    checked = run_module("files", {"files": wanted}, "--check", "--diff")
    assert checked["changed"] is True and checked["changed_files"] == [str(old), str(tmp_path / "new.conf")]
    assert old.read_text() == "a=1\n" and not (tmp_path / "new.conf").exists()
    diff = checked["diff"]
    assert isinstance(diff, list)
    assert diff[0] == {"before_header": str(old), "after_header": str(old), "before": "a=1\n", "after": "a=2\n"}
    assert diff[1]["before"] == "" and diff[1]["after"] == "b=1\n"
    written = run_module("files", {"files": wanted})
    assert written["changed"] is True and "diff" not in written
    assert old.read_text() == "a=2\n" and oct(old.stat().st_mode & 0o777) == "0o644"
    assert oct((tmp_path / "new.conf").stat().st_mode & 0o777) == "0o640"
    again = run_module("files", {"files": wanted}, "--diff")
    assert again["changed"] is False and again["changed_files"] == [] and "diff" not in again
    # Only a file whose attribute alone differs is reported, and its content is not rewritten.
    old.chmod(0o600)
    fixed = run_module("files", {"files": wanted})
    assert fixed["changed_files"] == [str(old)]
    assert fixed["files"] == [
        {"dest": str(old), "changed": True, "content_changed": False},
        {"dest": str(tmp_path / "new.conf"), "changed": False, "content_changed": False},
    ]


def test_unset_attributes_are_kept(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.write_text("x")
    kept.chmod(0o604)
    assert run_module("files", {"files": [entry(kept, "y")]})["changed"] is True
    assert kept.read_text() == "y" and oct(kept.stat().st_mode & 0o777) == "0o604"


def test_a_refused_file_and_those_after_it_stay_as_they_were(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text("good\n")
    second.write_text("untouched\n")
    result = run_module(
        "files",
        {"files": [entry(first, "bad\n", validate="grep -q good %s"), entry(second, "changed\n")]},
    )
    assert result.get("failed") is True and f"{first} was left as it was" in str(result["msg"])
    assert first.read_text() == "good\n" and second.read_text() == "untouched\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["first", "second"]


def test_parent_directory_is_created_only_when_asked(tmp_path: Path) -> None:
    nested = tmp_path / "unit.d" / "90.conf"
    refused = run_module("files", {"files": [entry(nested, "[Service]\n")]})
    assert refused.get("failed") is True and "set parent_mode" in str(refused["msg"])
    created = run_module("files", {"files": [entry(nested, "[Service]\n", parent_mode="0750")]})
    assert created["changed"] is True and nested.read_text() == "[Service]\n"
    assert oct(nested.parent.stat().st_mode & 0o777) == "0o750"


def test_secret_files_are_written_but_never_shown(tmp_path: Path) -> None:
    secret = tmp_path / "instance.env"
    result = run_module(
        "files", {"files": [entry(secret, "KEY=hunter2-secret\n", mode="0600", diff=False)]}, "--diff", "-vvv"
    )
    assert result["changed"] is True and "hunter2-secret" not in str(result)
    assert secret.read_text() == "KEY=hunter2-secret\n" and oct(secret.stat().st_mode & 0o777) == "0o600"


def test_absent_paths_go_in_the_same_call_and_a_directory_is_refused(tmp_path: Path) -> None:
    kept, stale, link = tmp_path / "kept", tmp_path / "stale.conf", tmp_path / "stale-link"
    stale.write_text("old\n")
    link.symlink_to(tmp_path / "nowhere")
    wanted = {"files": [entry(kept, "k\n")], "absent": [str(stale), str(link), str(tmp_path / "never")]}
    checked = run_module("files", wanted, "--check", "--diff")
    assert checked["removed"] == [str(stale), str(link)] and stale.exists() and link.is_symlink()
    assert {"before_header": str(stale), "after_header": str(stale), "prepared": "(removed)"} in checked["diff"]
    done = run_module("files", wanted)
    assert done["changed_files"] == [str(kept), str(stale), str(link)]
    assert not stale.exists() and not link.is_symlink() and kept.read_text() == "k\n"
    assert run_module("files", wanted)["changed"] is False
    refused = run_module("files", {"files": [entry(kept, "other\n")], "absent": [str(tmp_path)]})
    assert refused.get("failed") is True and "is a directory" in str(refused["msg"]) and kept.read_text() == "k\n"


def test_bad_entries_fail_before_any_change(tmp_path: Path) -> None:
    good = tmp_path / "good"
    for files, message in [
        ([entry(good, "x"), {"dest": "relative", "content": "x"}], "is not an absolute path"),
        ([entry(good, "x"), entry(good, "y")], "is listed twice"),
        ([entry(good, "x"), entry(tmp_path, "y")], "is a directory"),
        ([{"dest": str(good), "content": 3}], "content must be text"),
        ([], "(absent) is required"),
    ]:
        result = run_module("files", {"files": files})
        assert result.get("failed") is True and message in str(result["msg"]), result
        assert not good.exists()


def test_the_action_turns_target_syslog_off_and_builds_diffs_here() -> None:
    """Whole files are module arguments: the action must keep them out of the host's journal."""
    from unittest.mock import MagicMock

    from ansible_collections.sparkfleet.vllm.plugins.action.files import ActionModule

    task = MagicMock(args={"files": [{"dest": "/etc/x.conf", "content": "new\n"}]}, async_val=0, check_mode=False)
    action = ActionModule(task, MagicMock(), MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    seen: dict[str, object] = {}

    def execute_module(module_name: str, module_args: dict[str, object], task_vars: dict[str, object]) -> dict[str, object]:
        seen.update(module_name=module_name, task_vars=task_vars)
        return {"changed": True, "files": [{"dest": "/etc/x.conf", "changed": True, "before": "old\n"}]}

    action._execute_module = execute_module  # type: ignore[method-assign]
    result = action.run(task_vars={"inventory_hostname": "h"})
    assert seen["module_name"] == "sparkfleet.vllm.files"
    assert seen["task_vars"] == {"inventory_hostname": "h", "ansible_no_target_syslog": True}
    assert result["diff"] == [
        {"before_header": "/etc/x.conf", "after_header": "/etc/x.conf", "before": "old\n", "after": "new\n"}
    ]
    assert "before" not in result["files"][0]


class _AttributesOnly:
    """Just what write() asks of AnsibleModule: the wanted mode applied to a path."""

    @staticmethod
    def load_file_common_arguments(args: dict[str, str | None]) -> dict[str, str | None]:
        return args

    @staticmethod
    def set_fs_attributes_if_different(args: dict[str, str | None], _changed: bool) -> bool:
        if args["mode"]:
            os.chmod(str(args["path"]), int(str(args["mode"]), 8))
        return True


def test_a_secret_is_never_in_a_file_wider_than_its_final_mode(tmp_path: Path, monkeypatch) -> None:
    from ansible_collections.sparkfleet.vllm.plugins.modules import files as files_module

    modes_with_data: list[str] = []  # every mode the temporary file took while it held bytes
    real_chmod = os.chmod

    def watching(path: str, mode: int) -> None:
        real_chmod(path, mode)
        if os.path.getsize(path):
            modes_with_data.append(oct(mode))

    monkeypatch.setattr(files_module.os, "chmod", watching)
    old_umask = os.umask(0o022)  # a new file's default would be 0644
    try:
        secret = tmp_path / "ray-auth-token"
        spec = {"dest": str(secret), "owner": None, "group": None, "mode": "0600", "validate": None}
        files_module.write(_AttributesOnly(), spec, b"hunter2-secret")
    finally:
        os.umask(old_umask)
    assert modes_with_data == []
    assert secret.read_bytes() == b"hunter2-secret" and oct(secret.stat().st_mode & 0o777) == "0o600"


_SNOOPER = r"""
import os, sys, time
directory, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
os.setgid(65534); os.setuid(65534)  # nobody: another account on the host
held = {}
print("ready", flush=True)
while time.monotonic() < deadline and not os.path.exists(os.path.join(directory, "done")):
    for name in os.listdir(directory):
        if name.startswith(".sparkfleet-") and name not in held:
            try:
                held[name] = os.open(os.path.join(directory, name), os.O_RDONLY)
            except OSError:
                pass
leaked = sum(1 for fd in held.values() if os.read(fd, 4096))
print(f"opened {len(held)} leaked {leaked}", flush=True)
"""


def test_another_account_racing_first_writes_never_reads_a_secret(tmp_path: Path, monkeypatch) -> None:
    """200 first writes of a 0600 secret while a process of another uid opens every temporary file it sees
    and reads it once the writes are done: a descriptor opened in any gap would read the secret."""
    import subprocess
    import sys
    import time

    from ansible_collections.sparkfleet.vllm.plugins.modules import files as files_module

    if os.geteuid() != 0:
        import pytest

        pytest.skip("needs root to run the racing process as another uid")
    import shutil
    import tempfile

    del tmp_path  # pytest's is private to root: the other uid must reach the directory, as it can /etc
    directory = Path(tempfile.mkdtemp(prefix="sparkfleet-race-"))
    directory.chmod(0o755)
    real_chmod = os.chmod

    def slow_chmod(path: str, mode: int) -> None:
        # The real module stats and looks up owners between its calls: give the racing uid that time.
        real_chmod(path, mode)
        time.sleep(0.002)

    monkeypatch.setattr(files_module.os, "chmod", slow_chmod)
    snooper = subprocess.Popen([sys.executable, "-c", _SNOOPER, str(directory), "120"], stdout=subprocess.PIPE, text=True)
    assert snooper.stdout is not None and snooper.stdout.readline().strip() == "ready"
    old_umask = os.umask(0o022)  # a new file's default would be 0644
    try:
        for trial in range(200):
            spec = {"dest": str(directory / f"key-{trial}"), "owner": None, "group": None, "mode": "0600", "validate": None}
            files_module.write(_AttributesOnly(), spec, b"hunter2-secret")
    finally:
        os.umask(old_umask)
        (directory / "done").touch()
    report = snooper.communicate(timeout=60)[0].split()
    modes = {oct((directory / f"key-{t}").stat().st_mode & 0o777) for t in range(200)}
    shutil.rmtree(directory)
    opened, leaked = int(report[1]), int(report[3])
    assert leaked == 0, f"another uid read {leaked} secrets through descriptors opened during first writes"
    assert modes == {"0o600"}
    del opened  # how many temporaries it could open at all: 0 now, a count before the fix


def test_directories_are_made_and_fixed_before_the_files_and_then_nothing_changes(tmp_path: Path) -> None:
    nested, fixed = tmp_path / "a" / "b", tmp_path / "c"
    fixed.mkdir(mode=0o700)
    wanted = {
        "directories": [{"path": str(nested), "mode": "2750"}, {"path": str(fixed), "mode": "0755"}],
        "files": [entry(nested / "unit.conf", "x=1\n", mode="0644")],
    }
    checked = run_module("files", wanted, "--check", "--diff")
    assert checked["changed"] is True and not (tmp_path / "a").exists()
    assert checked["changed_directories"] == [str(nested), str(fixed)]
    diff = checked["diff"]
    assert isinstance(diff, list) and diff[0]["before"] == {"path": str(nested), "state": "absent"}
    written = run_module("files", wanted)
    assert written["changed"] is True and written["changed_files"] == [str(nested / "unit.conf")]
    assert oct(nested.stat().st_mode & 0o7777) == "0o2750" and oct(fixed.stat().st_mode & 0o777) == "0o755"
    again = run_module("files", wanted)
    assert again["changed"] is False and again["changed_directories"] == []


def test_a_file_where_a_directory_is_wanted_fails_before_any_change(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    wanted = {
        "directories": [{"path": str(tmp_path / "new")}, {"path": str(tmp_path / "file")}],
        "files": [entry(tmp_path / "written.conf", "x\n")],
    }
    result = run_module("files", wanted)
    assert result.get("failed") is True and "exists and is not a directory" in str(result["msg"])
    assert not (tmp_path / "new").exists() and not (tmp_path / "written.conf").exists()


def test_a_validator_not_on_the_host_is_named_and_nothing_is_replaced(tmp_path: Path) -> None:
    kept = tmp_path / "rules.yml"
    kept.write_text("old\n")
    wanted = [entry(kept, "new\n", validate="/nonexistent/promtool check rules %s"), entry(tmp_path / "after", "x\n")]
    result = run_module("files", {"files": wanted})
    assert result.get("failed") is True and result["validator_missing"] == "/nonexistent/promtool"
    assert "is not on this host" in str(result["msg"])
    assert kept.read_text() == "old\n" and not (tmp_path / "after").exists()
    assert [path.name for path in tmp_path.iterdir()] == ["rules.yml"]


def test_a_new_directory_starts_from_its_seed_without_following_links_and_only_once(tmp_path: Path) -> None:
    """Issue 47: an instance's own caches start as a copy of the shared ones the service user wrote; root copies
    them, so no link in them is read through, and the copies are the new owner's."""
    seed = tmp_path / "shared"
    (seed / "kernels").mkdir(parents=True)
    (seed / "kernels" / "a.so").write_bytes(b"\x7fELF" + b"x" * 3_000_000)
    (seed / "kernels" / "a.so").chmod(0o4755)
    (seed / "index").write_text("1\n")
    (seed / "index").chmod(0o600)
    (seed / "secret").symlink_to("/etc/shadow")
    (seed / "etc").symlink_to("/etc")
    os.mkfifo(seed / "pipe")
    made = tmp_path / "own" / "torch-compile"
    wanted = {"directories": [{"path": str(made), "owner": "nobody", "group": "nogroup", "mode": "0700", "seed": str(seed)}]}
    checked = run_module("files", wanted, "--check")
    assert checked["changed_directories"] == [str(made)] and not made.exists()
    result = run_module("files", wanted)
    assert result["changed_directories"] == [str(made)]
    assert sorted(p.name for p in made.iterdir()) == ["etc", "index", "kernels", "secret"]
    assert (made / "kernels" / "a.so").read_bytes() == (seed / "kernels" / "a.so").read_bytes()
    assert oct((made / "kernels" / "a.so").stat().st_mode & 0o7777) == "0o755"  # no set-ID on a copy
    assert oct((made / "index").stat().st_mode & 0o777) == "0o600"
    assert os.readlink(made / "secret") == "/etc/shadow" and os.readlink(made / "etc") == "/etc"
    owners = {(p.lstat().st_uid, p.lstat().st_gid) for p in [made, *made.rglob("*")]}
    nobody = (made.stat().st_uid, made.stat().st_gid)
    assert owners == {nobody} and nobody[0] != 0
    # Made once: a later run copies nothing more, and the seed is never changed.
    (seed / "later").write_text("new\n")
    again = run_module("files", wanted)
    assert again["changed"] is False and not (made / "later").exists()
    assert (seed / "index").read_text() == "1\n" and (seed / "kernels" / "a.so").stat().st_mode & 0o4000


def test_templates_are_rendered_here_with_their_vars_and_written_like_files(tmp_path: Path) -> None:
    template = tmp_path / "unit.j2"
    template.write_text("name={{ __who.name }} host={{ inventory_hostname }}\n")
    dest = tmp_path / "unit.conf"
    spec = {"src": str(template), "dest": str(dest), "vars": {"__who": {"name": "tiny"}}, "mode": "0640"}
    checked = run_module("files", {"templates": [spec]}, "--check", "--diff")
    assert checked["changed"] is True and not dest.exists()
    assert checked["diff"][0]["after"] == "name=tiny host=localhost\n"
    written = run_module("files", {"files": [entry(tmp_path / "first", "1\n")], "templates": [spec]})
    # The files first, then the templates, in one call.
    assert written["changed_files"] == [str(tmp_path / "first"), str(dest)]
    assert dest.read_text() == "name=tiny host=localhost\n" and oct(dest.stat().st_mode & 0o777) == "0o640"
    assert run_module("files", {"templates": [spec]})["changed"] is False


def test_a_template_entry_without_its_source_or_with_an_unknown_key_fails_before_any_change(tmp_path: Path) -> None:
    dest = tmp_path / "never"
    missing = run_module("files", {"templates": [{"dest": str(dest)}]})
    assert missing.get("failed") is True and "templates[0]" in str(missing["msg"]) and "src" in str(missing["msg"])
    unknown = run_module("files", {"templates": [{"src": "x.j2", "dest": str(dest), "content": "y"}]})
    assert unknown.get("failed") is True and "unknown keys ['content']" in str(unknown["msg"])
    assert not dest.exists()


def test_a_tree_is_taken_back_whole_without_following_a_link_out_of_it(tmp_path: Path) -> None:
    """Issue 61: a model store an earlier release left to the service user becomes the stager's, everything in it,
    group and other write taken away; a link planted in it is changed itself, never what it points at."""
    outside = tmp_path / "outside"
    outside.write_text("not the store's\n")
    outside.chmod(0o666)
    store = tmp_path / "models"
    (store / "org" / "model").mkdir(parents=True)
    weights = store / "org" / "model" / "model.safetensors"
    weights.write_bytes(b"w" * 1024)
    weights.chmod(0o664)
    (store / "org" / "model" / "planted").symlink_to(outside)
    for path in (store, store / "org", store / "org" / "model", weights):
        os.lchown(path, 65534, 65534)
    os.lchown(store / "org" / "model" / "planted", 65534, 65534)
    wanted = {"directories": [{"path": str(store), "owner": "root", "group": "root", "mode": "0750", "tree": True}]}
    checked = run_module("files", wanted, "--check")
    assert checked["changed"] is True and weights.stat().st_uid == 65534
    taken = run_module("files", wanted)
    assert taken["changed"] is True
    for path in (store / "org", store / "org" / "model", weights, store / "org" / "model" / "planted"):
        info = os.lstat(path)
        assert (info.st_uid, info.st_gid) == (0, 0), path
    assert oct(weights.stat().st_mode & 0o777) == "0o644"
    assert oct(outside.stat().st_mode & 0o777) == "0o666" and outside.stat().st_uid == os.getuid()
    assert run_module("files", wanted)["changed"] is False
