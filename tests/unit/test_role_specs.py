"""Each role's argument_specs and its defaults say the same thing (issue 31): every default is documented,
with the value the role really takes, and nothing is documented with a default the role does not have.

Every role depends on the sparkfleet role, whose defaults it sees as its own: a shared setting (where the
front door is, read by several roles) has its default there and its documentation with the role it belongs to.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p for p in (ROOT / "roles").iterdir() if p.is_dir())
SHARED = ROOT / "roles" / "sparkfleet"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) if path.exists() else None


def defaults_of(role: Path) -> dict[str, Any]:
    return load(role / "defaults" / "main.yml") or {}


def options_of(role: Path) -> dict[str, dict[str, Any]]:
    specs = load(role / "meta" / "argument_specs.yml")
    assert specs and "main" in specs["argument_specs"], f"{role.name} has no argument_specs for its main entry point"
    options: dict[str, dict[str, Any]] = {}
    for entry_point in specs["argument_specs"].values():
        options.update(entry_point.get("options") or {})
    return options


def depends_on_shared(role: Path) -> bool:
    meta = load(role / "meta" / "main.yml") or {}
    return any(
        (d["role"] if isinstance(d, dict) else d) == "sparkfleet.vllm.sparkfleet" for d in meta.get("dependencies") or []
    )


def derived_default_documented(option: dict[str, Any], default: object) -> bool:
    """A default computed from another variable cannot be a typed spec default (antsibull-docs refuses a template
    as a bool): the spec leaves it out and its description names the variable it follows."""
    if not (isinstance(default, str) and "{{" in default) or option.get("type") in (None, "str", "path", "raw"):
        return False
    followed = re.findall(r"\{\{\s*([a-z_][a-z0-9_]*)", default)
    description = " ".join(option.get("description") or [])
    return "default" not in option and bool(followed) and all(f"C({name})" in description for name in followed)


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_argument_specs_and_defaults_agree(role: Path) -> None:
    options, defaults = options_of(role), defaults_of(role)
    documented_elsewhere = set().union(*(options_of(other) for other in ROLES)) if role == SHARED else set()
    undocumented = sorted(set(defaults) - set(options) - documented_elsewhere)
    assert undocumented == [], f"{role.name}: defaults with no argument spec: {undocumented}"
    # What the role sees: the shared role's defaults under its own. An option with no default is unset (None).
    seen = {**(defaults_of(SHARED) if depends_on_shared(role) else {}), **defaults}
    disagree = {
        name: (option.get("default"), seen.get(name, "<no default>"))
        for name, option in options.items()
        if ("default" in option or name in seen)
        and option.get("default") != seen.get(name, "<no default>")
        and not derived_default_documented(option, seen.get(name))
    }
    assert disagree == {}, f"{role.name}: argument spec default vs the defaults the role sees: {disagree}"
    required_with_default = sorted(n for n, o in options.items() if o.get("required") and n in seen)
    assert required_with_default == [], f"{role.name}: required, yet defaults give a value: {required_with_default}"


def test_a_shared_default_is_documented_by_exactly_one_role() -> None:
    shared = set(defaults_of(SHARED)) - set(options_of(SHARED))
    for name in shared:
        owners = [role.name for role in ROLES if name in options_of(role)]
        assert len(owners) == 1, f"{name}: documented by {owners or 'no role'}"


def test_each_roles_readme_is_what_its_argument_specs_say() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "role_docs.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def role_calls(playbook: Path) -> list[dict[str, Any]]:
    """Every import_role / include_role of a playbook's plays and task files, blocks and rescues included."""
    found: list[dict[str, Any]] = []

    def walk(tasks: list[dict[str, Any]]) -> None:
        for task in tasks or []:
            for section in ("block", "rescue", "always"):
                walk(task.get(section) or [])
            for action in ("ansible.builtin.import_role", "ansible.builtin.include_role"):
                if action in task:
                    found.append(task[action])

    for play in load(playbook):
        for section in ("pre_tasks", "tasks", "post_tasks"):
            walk(play.get(section) or [])
    return found


@pytest.mark.parametrize("playbook", ["site.yml", "upgrade.yml"])
def test_a_role_goes_unvalidated_only_where_the_preflight_validated_what_it_takes(playbook: str) -> None:
    """A role applied without validation (rolespec_validate: false, or an entry point with no argument spec, such as
    apply) is one whose arguments the shared preflight validated: the entry point it validated takes every option
    of the role's main entry point."""
    preflight = {
        call["name"]: call.get("tasks_from", "main")
        for call in yaml.safe_load((ROOT / "playbooks" / "tasks" / "preflight.yml").read_text())
        for call in [call.get("ansible.builtin.import_role") or call.get("ansible.builtin.include_role") or {}]
        if call
    }
    unvalidated = []
    for call in role_calls(ROOT / "playbooks" / playbook):
        specs = load(ROOT / "roles" / call["name"].rsplit(".", 1)[1] / "meta" / "argument_specs.yml")["argument_specs"]
        if call.get("rolespec_validate") is False or call.get("tasks_from", "main") not in specs:
            unvalidated.append((call["name"], specs))
    assert unvalidated, f"{playbook} validates every role it applies: drop this test's case"
    for role, specs in unvalidated:
        assert role in preflight, f"{playbook}: {role} is applied unvalidated, and the preflight never validates it"
        assert specs[preflight[role]]["options"] == specs["main"]["options"], (
            f"{playbook}: {role} is applied unvalidated, and the preflight validated its {preflight[role]} entry "
            "point, whose options differ from main's"
        )
