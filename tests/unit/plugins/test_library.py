"""The library the collection ships: its controller requirements, its version and the errors of skew."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleError
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils import library

import sparkfleet
from sparkfleet.errors import PlanError
from sparkfleet.release import LOCK_SCHEMA, check_lock_schema

ROOT = Path(__file__).resolve().parents[3]


def _requirement_lines(text: str) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


def test_requirements_txt_is_the_packages_dependencies() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert _requirement_lines((ROOT / "requirements.txt").read_text(encoding="utf-8")) == project["dependencies"]


def test_the_library_is_the_collections_version() -> None:
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text(encoding="utf-8"))
    assert sparkfleet.__version__ == galaxy["version"] == library.collection_version()


def test_the_plugins_run_the_copy_shipped_in_the_collection() -> None:
    planner = library.load("sparkfleet.planning.planner")
    assert Path(planner.__file__).resolve().is_relative_to(ROOT / "python" / "sparkfleet")


def test_unmet_requirements_say_what_is_missing_or_what_was_found() -> None:
    pydantic_version = sys.modules["pydantic"].VERSION
    unmet = library.unmet_requirements(
        ["# a comment", "pydantic>=2.7", "no-such-package-sparkfleet-test>=1", "pydantic<2  # too old for us", ""]
    )
    assert unmet == [
        "no-such-package-sparkfleet-test>=1 (not installed)",
        f"pydantic<2 (found {pydantic_version})",
    ]


def test_a_missing_controller_package_names_the_one_line_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("pydantic>=2.7\nno-such-package-sparkfleet-test>=1\n", encoding="utf-8")
    monkeypatch.setattr(library, "REQUIREMENTS", requirements)
    library._ready.cache_clear()
    try:
        with pytest.raises(AnsibleError) as raised:
            library.load("sparkfleet.planning.planner")
    finally:
        library._ready.cache_clear()
    message = str(raised.value)
    assert "no-such-package-sparkfleet-test>=1 (not installed)" in message
    assert f"run '{sys.executable} -m pip install -r {requirements}'" in message


def test_a_lock_from_another_schema_names_both_versions_and_the_fix() -> None:
    newer = json.dumps({"schema_version": LOCK_SCHEMA + 1, "sparkfleet_version": "9.0.0"})
    with pytest.raises(PlanError) as raised:
        check_lock_schema(newer, "locks/gb10.json", "vllm_install_lock_file")
    message = str(raised.value)
    assert message.startswith("vllm_install_lock_file: locks/gb10.json was written by sparkfleet 9.0.0")
    assert f"sparkfleet {sparkfleet.__version__} (lock schema {LOCK_SCHEMA})" in message
    assert f"the sparkfleet CLI {sparkfleet.__version__}" in message
    check_lock_schema(json.dumps({"schema_version": LOCK_SCHEMA}), "locks/gb10.json", "vllm_install_lock_file")
    with pytest.raises(PlanError, match="not a sparkfleet release lock"):
        check_lock_schema("[1]", "locks/gb10.json", "vllm_install_lock_file")


def test_the_preload_callback_loads_every_module_a_plugin_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    from ansible_collections.sparkfleet.vllm.plugins.callback import preload

    loaded_by_plugins = {
        name
        for path in (ROOT / "plugins").rglob("*.py")
        if path.parent.name != "callback"
        for name in re.findall(r'\bload\("(sparkfleet[a-z_.]*)"\)', path.read_text(encoding="utf-8"))
    }
    assert loaded_by_plugins and set(preload.LIBRARY_MODULES) == loaded_by_plugins

    loaded: list[str] = []
    monkeypatch.setattr(preload, "load", loaded.append)
    preload.CallbackModule().v2_playbook_on_start(None)
    assert loaded == list(preload.LIBRARY_MODULES)


def test_the_preload_callback_leaves_a_missing_package_to_the_task_that_needs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ansible_collections.sparkfleet.vllm.plugins.callback import preload

    def refuse(name: str) -> None:
        raise AnsibleError("the sparkfleet.vllm collection needs Python packages on the controller")

    monkeypatch.setattr(preload, "load", refuse)
    preload.CallbackModule().v2_playbook_on_start(None)  # no exception: the run goes on
