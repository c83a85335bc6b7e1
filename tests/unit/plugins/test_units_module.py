"""The units module's decisions, run by ansible itself against a recording stand-in for systemctl.

The stand-in keeps each unit's state in a JSON file and logs every verb it is asked for; the real
systemd runs the module in Molecule's scenarios (every role's units go through it there).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from adhoc import run_module

STAND_IN = r"""#!/usr/bin/env python3
import json, os, sys
state_file = os.environ["UNITS_STATE"]
units = json.load(open(state_file))
args = [a for a in sys.argv[1:] if a != "--"]
with open(state_file + ".log", "a") as log:
    log.write(" ".join(args) + "\n")
verb = args[0]
if verb == "daemon-reload":
    sys.exit(0)
if verb == "show":
    unit = units.get(args[2], {"load": "not-found", "active": "inactive", "file": ""})
    print(f"LoadState={unit['load']}\nActiveState={unit['active']}\nUnitFileState={unit['file']}")
    sys.exit(0)
unit = units.setdefault(args[1], {"load": "not-found", "active": "inactive", "file": ""})
if verb == "is-enabled":
    print(unit["file"] or "not-found")
    sys.exit(0 if unit["file"] in ("enabled", "static") else 1)
if unit["load"] != "loaded":
    sys.exit(5)
if verb in ("start", "restart"):
    unit["active"] = "active"
elif verb == "stop":
    unit["active"] = "inactive"
elif verb == "enable":
    unit["file"] = "enabled"
elif verb == "disable":
    unit["file"] = "disabled"
json.dump(units, open(state_file, "w"))
"""


def host(tmp_path: Path, units: dict[str, dict[str, str]]) -> dict[str, str]:
    """A PATH whose systemctl is the stand-in, with UNITS as the starting state."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(STAND_IN)
    systemctl.chmod(0o755)
    (tmp_path / "units.json").write_text(json.dumps(units))
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "UNITS_STATE": str(tmp_path / "units.json")}


def verbs(tmp_path: Path) -> list[str]:
    log = tmp_path / "units.json.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if not line.startswith(("show", "is-enabled"))]


def unit(active: str = "inactive", file: str = "disabled", load: str = "loaded") -> dict[str, str]:
    return {"load": load, "active": active, "file": file}


def test_acts_only_where_a_unit_differs_and_then_changes_nothing(tmp_path: Path) -> None:
    env = host(tmp_path, {"a.service": unit(), "b.timer": unit("active", "enabled"), "c.service": unit("active", "enabled")})
    wanted = {
        "units": [
            {"name": "a.service", "enabled": True, "state": "started"},
            {"name": "b.timer", "enabled": True, "state": "started"},
            {"name": "c.service", "enabled": False, "state": "stopped"},
        ]
    }
    checked = run_module("units", wanted, "--check", env=env)
    assert checked["changed"] is True and checked["changed_units"] == ["a.service", "c.service"]
    assert [entry["actions"] for entry in checked["units"]] == [["enable", "start"], [], ["disable", "stop"]]
    assert verbs(tmp_path) == [], "check mode ran a verb"
    done = run_module("units", wanted, env=env)
    assert done["changed_units"] == ["a.service", "c.service"]
    assert verbs(tmp_path) == ["enable a.service", "start a.service", "disable c.service", "stop c.service"]
    again = run_module("units", wanted, env=env)
    assert again["changed"] is False and again["changed_units"] == []
    assert again["units"][0]["status"] == {
        "LoadState": "loaded",
        "ActiveState": "active",
        "UnitFileState": "enabled",
        "IsEnabled": "enabled",
    }


def test_a_restart_and_a_daemon_reload_always_act(tmp_path: Path) -> None:
    env = host(tmp_path, {"a.service": unit("active", "enabled")})
    done = run_module("units", {"daemon_reload": True, "units": [{"name": "a.service", "state": "restarted"}]}, env=env)
    assert done["changed"] is True and verbs(tmp_path) == ["daemon-reload", "restart a.service"]
    reload_only = run_module("units", {"daemon_reload": True, "units": [{"name": "a.service", "state": "started"}]}, env=env)
    assert reload_only["changed"] is True and reload_only["changed_units"] == []


def test_a_static_unit_counts_as_enabled(tmp_path: Path) -> None:
    env = host(tmp_path, {"a.service": unit("active", "static")})
    result = run_module("units", {"units": [{"name": "a.service", "enabled": True, "state": "started"}]}, env=env)
    assert result["changed"] is False and verbs(tmp_path) == []


def test_a_missing_unit_fails_to_start_and_is_left_alone_when_it_is_to_stop(tmp_path: Path) -> None:
    env = host(tmp_path, {"here.service": unit("active", "enabled")})
    retired = run_module("units", {"units": [{"name": "gone.service", "enabled": False, "state": "stopped"}]}, env=env)
    assert retired["changed"] is False and verbs(tmp_path) == []
    started = run_module(
        "units",
        {"units": [{"name": "here.service", "state": "restarted"}, {"name": "gone.service", "state": "started"}]},
        env=env,
    )
    assert started.get("failed") is True
    assert "gone.service is not loaded (not-found)" in str(started["msg"])
    # What came before the failure in the list was done, and is reported.
    assert verbs(tmp_path) == ["restart here.service"]


def test_a_group_is_acted_on_in_order_and_may_be_empty(tmp_path: Path) -> None:
    env = host(tmp_path, {"x-a.service": unit(), "x-b.service": unit("active", "enabled")})
    wanted = {
        "units": [
            {"names": ["x-a.service", "x-b.service"], "enabled": True, "state": "started"},
            {"names": [], "enabled": False, "state": "stopped"},
        ]
    }
    done = run_module("units", wanted, env=env)
    assert [entry["name"] for entry in done["units"]] == ["x-a.service", "x-b.service"]
    assert done["changed_units"] == ["x-a.service"] and verbs(tmp_path) == ["enable x-a.service", "start x-a.service"]


def test_check_mode_reports_a_unit_this_run_would_write(tmp_path: Path) -> None:
    env = host(tmp_path, {})
    checked = run_module(
        "units", {"units": [{"name": "new.service", "enabled": True, "state": "started"}]}, "--check", env=env
    )
    assert checked["changed"] is True and checked["units"][0]["actions"] == ["enable", "start"]
    assert verbs(tmp_path) == []


def test_names_are_checked_before_anything_runs(tmp_path: Path) -> None:
    env = host(tmp_path, {"a.service": unit()})
    bare = run_module(
        "units", {"units": [{"name": "a.service", "state": "started"}, {"name": "nginx", "state": "started"}]}, env=env
    )
    assert bare.get("failed") is True and "'nginx' is not a full unit name" in str(bare["msg"])
    twice = run_module("units", {"units": [{"name": "a.service"}, {"name": "a.service", "state": "started"}]}, env=env)
    assert twice.get("failed") is True and "listed twice" in str(twice["msg"])
    both = run_module("units", {"units": [{"name": "a.service", "names": ["a.service"], "state": "started"}]}, env=env)
    assert both.get("failed") is True and "units[0]: set exactly one of name and names" in str(both["msg"])
    assert verbs(tmp_path) == []
