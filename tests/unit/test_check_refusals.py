"""The refusal check of Molecule's default scenario: one run over every case, each judged on its own host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import load_file

check = load_file("extensions/molecule/default/files/check_refusals.py")

CASES = [
    {"name": "root user", "vars": {"sparkfleet_user": "root"}, "expect": "would run  model code\nas root"},
    {"name": "bad port", "vars": {"front_door_port": 8000}, "expect": "front_door_port: 8000 is the port"},
]


def report(results: dict[str, list[dict[str, Any]]], stats: dict[str, dict[str, int]]) -> dict[str, Any]:
    tasks = [
        {"task": {"name": f"task {i}"}, "hosts": {host: result}}
        for host, rs in results.items()
        for i, result in enumerate(rs)
    ]
    return {"plays": [{"play": {"name": "site"}, "tasks": tasks}], "stats": stats}


def test_each_case_is_a_host_of_its_own_under_sparks_with_its_variables_over_the_shared_ones(tmp_path: Path) -> None:
    inventory = tmp_path / "refusals.yml"
    check.write_inventory(inventory, "sparkfleet-molecule", {"sandbox_checkout": "/src", "sparkfleet_user": "kept"}, CASES)
    hosts = json.loads(inventory.read_text())["sparks"]["children"]["refusals"]["hosts"]
    assert hosts == {
        "refused-00": {"ansible_host": "sparkfleet-molecule", "sandbox_checkout": "/src", "sparkfleet_user": "root"},
        "refused-01": {
            "ansible_host": "sparkfleet-molecule",
            "sandbox_checkout": "/src",
            "sparkfleet_user": "kept",
            "front_door_port": 8000,
        },
    }


def test_a_case_passes_on_its_own_message_whitespace_aside_even_from_a_failed_loop_item() -> None:
    said = report(
        {
            "refused-00": [{"changed": False}, {"failed": True, "msg": '"root" would run model code as root'}],
            "refused-01": [
                {
                    "failed": True,
                    "msg": "One or more items failed",
                    "results": [{"msg": "front_door_port:  8000 is the port of instance tiny"}],
                }
            ],
        },
        {"refused-00": {"failures": 1, "changed": 0}, "refused-01": {"failures": 1, "changed": 0}},
    )
    assert check.verdicts(said, CASES) == ["ok root user (refused-00)", "ok bad port (refused-01)"]


def test_a_case_fails_when_its_host_ran_through_changed_something_or_said_something_else() -> None:
    said = report(
        {"refused-00": [{"changed": True}], "refused-01": [{"failed": True, "msg": "front_door_port: 8000 is the port"}]},
        {"refused-00": {"failures": 0, "changed": 3}, "refused-01": {"failures": 1, "changed": 1}},
    )
    first, second = check.verdicts(said, CASES)
    assert (
        first.startswith("FAIL root user")
        and "did not fail" in first
        and "changed 3" in first
        and "no failure says" in first
    )
    assert second.startswith("FAIL bad port") and "changed 1" in second and "no failure says" not in second


def test_another_hosts_message_does_not_pass_a_case() -> None:
    said = report(
        {"refused-01": [{"failed": True, "msg": '"root" would run model code as root'}]},
        {"refused-00": {"failures": 1, "changed": 0}, "refused-01": {"failures": 1, "changed": 0}},
    )
    assert check.verdicts(said, CASES)[0].startswith("FAIL root user (refused-00): no failure says")
