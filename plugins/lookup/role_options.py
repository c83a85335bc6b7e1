# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: role_options
short_description: The options of this collection's roles that take a given type, read from their argument specs
version_added: 0.2.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Reads every entry point of every role's C(meta/argument_specs.yml) in this collection and returns the
    options whose type is one of the terms, each once, as C({name, type}).
  - The shared role refuses such an option given as text before any host is touched. A role's argument spec
    validation accepts the text C("false") for a boolean without converting it, and Jinja then reads it as true
    (C(-e name=value) and INI inventories pass text).
options:
  _terms:
    description: Option types, as argument specs name them (bool, int, float, ...).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: List the boolean and integer options
  ansible.builtin.debug:
    msg: "{{ query('sparkfleet.vllm.role_options', 'bool', 'int') | map(attribute='name') | list }}"
"""

RETURN = r"""
_raw:
  description: One C({name, type}) per option, sorted by name.
  type: list
  elements: dict
"""

from pathlib import Path
from typing import Any

import yaml
from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

ROLES = Path(__file__).resolve().parents[2] / "roles"


def options_of_types(roles: Path, types: set[str]) -> list[dict[str, str]]:
    """Every option of the given types in every entry point of every role under roles/, each name once."""
    found: dict[str, str] = {}
    for spec_file in sorted(roles.glob("*/meta/argument_specs.yml")):
        specs: dict[str, Any] = (yaml.safe_load(spec_file.read_text(encoding="utf-8")) or {}).get("argument_specs", {})
        for entry in specs.values():
            for name, option in (entry.get("options") or {}).items():
                kind = option.get("type", "str")
                if kind in types and found.setdefault(name, kind) != kind:
                    raise AnsibleLookupError(
                        f"role_options: {name} is typed {found[name]} in one spec and {kind} in another"
                    )
    return [{"name": name, "type": kind} for name, kind in sorted(found.items())]


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Any = None, **kwargs: Any) -> list[dict[str, str]]:
        if not terms:
            raise AnsibleLookupError("role_options: name at least one option type, such as bool")
        return options_of_types(ROLES, {str(term) for term in terms})
