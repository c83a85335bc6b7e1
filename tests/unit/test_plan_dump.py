"""The plan dump that proves a refactor changed no plan (issue 48): it dumps real plans and finds any difference."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "plan_dump.py"
_spec = importlib.util.spec_from_file_location("plan_dump", SCRIPT)
assert _spec and _spec.loader
plan_dump = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plan_dump)


def test_a_case_is_the_plan_the_cli_prints_and_a_refusal_its_message() -> None:
    planned = json.loads(plan_dump.dump_one(["nvidia/Gemma-4-31B-IT-NVFP4", *plan_dump.HOSTS["gb10-0.33"]]))
    assert planned["plan"]["platform"] == "gb10" and planned["plan"]["vllm_version"] == "0.33.0"
    refused = json.loads(plan_dump.dump_one(["nvidia/Gemma-4-31B-IT-NVFP4", "--platform", "gb10", "--context", "-5"]))
    assert set(refused) == {"refused"} and refused["refused"]


def test_every_catalog_model_is_dumped_on_each_host_and_profile() -> None:
    names = [name for name, _ in plan_dump.cases()]
    assert len(names) == len(set(names))
    catalog = [n for n in names if n.startswith("catalog/")]
    assert len(catalog) == len(plan_dump.load_catalog()) * len(plan_dump.HOSTS) * (len(plan_dump.PROFILES) * 2 + 1)
    assert len([n for n in names if n.startswith("fixtures/")]) == len(list(plan_dump.FIXTURES.glob("*.json"))) * 3


def test_compare_finds_a_changed_missing_or_added_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    for root in (before, after):
        (root / "catalog" / "m").mkdir(parents=True)
        (root / "catalog" / "m" / "a.json").write_text('{"plan": 1}\n')
    assert plan_dump.compare(before, after, {}) == 0
    (after / "catalog" / "m" / "a.json").write_text('{"plan": 2}\n')
    (after / "catalog" / "m" / "b.json").write_text("{}\n")
    assert plan_dump.compare(before, after, {}) == 1
    said = capsys.readouterr().out
    assert "catalog/m/a.json" in said and "catalog/m/b.json (only after)" in said
    (tmp_path / "empty").mkdir()
    assert plan_dump.compare(tmp_path / "empty", after, {}) == 1


def test_a_declared_rename_is_the_only_difference_allowed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    for root, source, memory in ((before, "sparkfleet.door", 1), (after, "sparkfleet.hostconfig.door", 1)):
        (root / "m").mkdir(parents=True)
        (root / "m" / "a.json").write_text(json.dumps({"source": f"issue 30; {source}", "gib": memory}))
    renamed = {"sparkfleet.door": "sparkfleet.hostconfig.door"}
    assert plan_dump.compare(before, after, {}) == 1
    assert plan_dump.compare(before, after, renamed) == 0
    assert "differ only by sparkfleet.door -> sparkfleet.hostconfig.door" in capsys.readouterr().out
    # A rename hides nothing else: a number that changed beside it is still a difference.
    (after / "m" / "a.json").write_text(json.dumps({"source": "issue 30; sparkfleet.hostconfig.door", "gib": 2}))
    assert plan_dump.compare(before, after, renamed) == 1


def test_what_a_host_is_given_is_dumped_for_every_unit_kind_and_door() -> None:
    names = [name for name, _ in plan_dump.host_dump.cases()]
    assert len(names) == len(set(names))
    kinds = {name.split("/")[1].split("-")[0] for name in names if name.startswith("sandbox/")}
    assert kinds == {kind.value for kind in plan_dump.host_dump.hardening.UnitKind}
    door = json.loads(plan_dump.dump_host(dict(plan_dump.host_dump.cases())["door/two-behind-door-clients-webui.json"]))
    assert [route["instance"] for route in door["routes"]] == ["chat", "coder"] and door["webui"]["port"] == 8443
    refused = json.loads(plan_dump.dump_host(lambda: plan_dump.host_dump.hardening.sandbox(
        plan_dump.host_dump.hardening.UnitKind.LINK_TEST, plan_dump.host_dump.Platform.GB10
    )))  # fmt: skip
    assert set(refused) == {"refused"}
