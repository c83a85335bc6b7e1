"""Each role's argument_specs and its defaults say the same thing (issue 31): every default is documented,
with the value the role really takes, and nothing is documented with a default the role does not have."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p for p in (Path(__file__).resolve().parents[2] / "roles").iterdir() if p.is_dir())


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) if path.exists() else None


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_argument_specs_and_defaults_agree(role: Path) -> None:
    specs = load(role / "meta" / "argument_specs.yml")
    assert specs and "main" in specs["argument_specs"], f"{role.name} has no argument_specs for its main entry point"
    defaults = load(role / "defaults" / "main.yml") or {}
    options: dict[str, dict[str, Any]] = {}
    for entry_point in specs["argument_specs"].values():
        options.update(entry_point.get("options") or {})
    undocumented = sorted(set(defaults) - set(options))
    assert undocumented == [], f"{role.name}: defaults with no argument spec: {undocumented}"
    # An option with no default is unset (None); a required one has no default at all.
    disagree = {
        name: (option.get("default"), defaults.get(name, "<not in defaults>"))
        for name, option in options.items()
        if ("default" in option or name in defaults) and option.get("default") != defaults.get(name, "<not in defaults>")
    }
    assert disagree == {}, f"{role.name}: argument spec default vs defaults/main.yml: {disagree}"
    required_with_default = sorted(n for n, o in options.items() if o.get("required") and n in defaults)
    assert required_with_default == [], f"{role.name}: required, yet defaults give a value: {required_with_default}"


def test_each_roles_readme_is_what_its_argument_specs_say() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "role_docs.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
