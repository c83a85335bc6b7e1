"""The lookup the shared role reads to refuse a typed option given as text (-e name=value passes text)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleLookupError
from ansible_collections.sparkfleet.vllm.plugins.lookup.role_options import ROLES, LookupModule, options_of_types


def test_it_reads_every_roles_specs_and_returns_each_typed_option_once() -> None:
    found = options_of_types(ROLES, {"bool", "int", "float"})
    names = [option["name"] for option in found]
    assert names == sorted(set(names))
    assert {"name": "vllm_serve_watchdog", "type": "bool"} in found
    assert {"name": "front_door_port", "type": "int"} in found
    assert {"name": "model_stage_free_margin_gib", "type": "float"} in found
    # Every bool, int and float option of every entry point, and nothing else.
    expected: dict[str, str] = {}
    for spec_file in ROLES.glob("*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(spec_file.read_text(encoding="utf-8"))["argument_specs"].values():
            for name, option in (entry.get("options") or {}).items():
                if option.get("type", "str") in {"bool", "int", "float"}:
                    expected[name] = option["type"]
    assert {option["name"]: option["type"] for option in found} == expected
    assert options_of_types(ROLES, {"bool"}) == [option for option in found if option["type"] == "bool"]


def test_an_option_typed_two_ways_is_an_error(tmp_path: Path) -> None:
    for role, kind in (("a", "bool"), ("b", "int")):
        spec = tmp_path / role / "meta" / "argument_specs.yml"
        spec.parent.mkdir(parents=True)
        spec.write_text(yaml.safe_dump({"argument_specs": {"main": {"options": {"shared_flag": {"type": kind}}}}}))
    with pytest.raises(AnsibleLookupError, match="shared_flag is typed bool in one spec and int in another"):
        options_of_types(tmp_path, {"bool", "int"})


def test_the_lookup_needs_a_type() -> None:
    with pytest.raises(AnsibleLookupError, match="name at least one option type"):
        LookupModule().run([])
