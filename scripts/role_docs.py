"""Render each role's README.md from its meta/argument_specs.yml (one source: the spec Ansible validates with), and
the intent's options in vllm_serve's spec from the planner's Intent (one source: the model the planner validates with).

Run: uv run python scripts/role_docs.py          (writes roles/*/README.md)
     uv run python scripts/role_docs.py --check  (exits 1 naming each README that is not what its spec says)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from sparkfleet.models import Intent
from sparkfleet.planargs import NOT_ON_THE_COMMAND_LINE, intent_flag

ROOT = Path(__file__).resolve().parent.parent
ROLES = ROOT / "roles"
_MARKUP = [
    (re.compile(r"L\(([^,()]+),\s*([^()]+)\)"), r"[\1](\2)"),
    (re.compile(r"[CMO]\(([^()]*(?:\([^()]*\)[^()]*)*)\)"), r"`\1`"),
    (re.compile(r"I\(([^()]+)\)"), r"*\1*"),
    (re.compile(r"B\(([^()]+)\)"), r"**\1**"),
    (re.compile(r"U\(([^()]+)\)"), r"\1"),
]


def prose(text: str | list[str] | None) -> str:
    """Ansible's documentation markup as Markdown; a list of paragraphs joined by blank lines."""
    paragraphs = text if isinstance(text, list) else [text or ""]
    out = []
    for paragraph in paragraphs:
        text = paragraph
        for pattern, replacement in _MARKUP:
            text = pattern.sub(replacement, text)
        out.append(" ".join(text.split()))
    return "\n\n".join(out)


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n\n", "<br>").replace("\n", " ")


def default_of(option: dict[str, Any]) -> str:
    if option.get("required"):
        return "required"
    if "default" not in option or option["default"] is None:
        return ""
    return f"`{json.dumps(option['default'])}`"


def kind_of(option: dict[str, Any]) -> str:
    kind = option.get("type", "str")
    return f"{kind} of {option['elements']}" if "elements" in option else kind


def table(options: dict[str, dict[str, Any]]) -> list[str]:
    rows = ["| variable | type | default | what it does |", "|---|---|---|---|"]
    for name, option in options.items():
        choices = f" One of: {', '.join(f'`{c}`' for c in option['choices'])}." if "choices" in option else ""
        rows.append(
            f"| `{name}` | {kind_of(option)} | {default_of(option)} | {cell(prose(option.get('description')))}{choices} |"
        )
    return rows


def schema_kind(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    """A JSON schema's type in a few words: its choices, its range, and 'or null' left out (every key may be left out)."""
    if "$ref" in schema:
        target = defs[schema["$ref"].rsplit("/", 1)[-1]]
        return " / ".join(f"`{v}`" for v in target["enum"]) if "enum" in target else "dict (question, answer)"
    if "anyOf" in schema:
        return " or ".join(schema_kind(s, defs) for s in schema["anyOf"] if s.get("type") != "null")
    kind = {"integer": "int", "number": "float", "boolean": "bool", "string": "str", "object": "dict"}[schema["type"]]
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum")
    if low is not None and high is not None:
        return f"{kind} ({'above ' if 'exclusiveMinimum' in schema else ''}{low} to {high})"
    if low is not None:
        return f"{kind} ({'above' if 'exclusiveMinimum' in schema else 'from'} {low})"
    return kind


def intent_table() -> list[str]:
    """Every key of an instance's intent, from the planner's Intent: the one text of each (the CLI's help too)."""
    schema = Intent.model_json_schema()
    rows = ["| key | type | default | `sparkfleet plan` | what it asks for |", "|---|---|---|---|---|"]
    for name, field in schema["properties"].items():
        flag = "" if name in NOT_ON_THE_COMMAND_LINE else f"`{intent_flag(name)}`"
        default = "" if field.get("default") is None else f"`{json.dumps(field['default'])}`"
        rows.append(
            f"| `{name}` | {cell(schema_kind(field, schema.get('$defs', {})))} | {default} | {flag} | "
            f"{cell(field['description'])} |"
        )
    return rows


# The role whose instances take an intent: its README lists the keys (scripts/role_docs.py renders them).
INTENT_ROLE = "vllm_serve"
# The intent's options in that role's argument spec are generated from Intent between these lines.
SPEC_BEGIN = "# BEGIN the intent's options, generated from sparkfleet.models.Intent by scripts/role_docs.py"
SPEC_END = "# END the intent's options"
_ANSIBLE_TYPES = {"integer": "int", "number": "float", "boolean": "bool", "string": "str", "object": "dict"}


def ansible_option(schema: dict[str, Any], defs: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    """One Intent field as an argument spec option: its type, choices and nested options as Ansible validates them.
    A nullable field is never required (Ansible reads null as absent); a union of kinds is raw."""
    option: dict[str, Any] = {"description": description or schema.get("description") or schema.get("title", "")}
    kinds = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    target = kinds[0] if len(kinds) == 1 else None
    if target is not None and "$ref" in target:
        target = defs[target["$ref"].rsplit("/", 1)[-1]]
    if target is None:
        option["type"] = "raw"
    else:
        option["type"] = _ANSIBLE_TYPES[target["type"]]
        if "enum" in target:
            option["choices"] = list(target["enum"])
        if "properties" in target:
            required = set(target.get("required", []))
            option["options"] = {
                name: ansible_option(field, defs, description=field.get("description") or name.replace("_", " "))
                | ({"required": True} if name in required and "anyOf" not in field else {})
                for name, field in target["properties"].items()
            }
    if schema.get("default") is not None:
        option["default"] = schema["default"]
    return option


def intent_options() -> dict[str, Any]:
    schema = Intent.model_json_schema()
    defs = schema.get("$defs", {})
    return {name: ansible_option(field, defs) for name, field in schema["properties"].items()}


class _IndentedLists(yaml.SafeDumper):
    """yamllint's indentation: a list under a key is indented."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def spec_with_intent(text: str) -> str:
    """The role's argument spec text with its generated block made anew from Intent (indented where it stands)."""
    begin, end = text.index(SPEC_BEGIN), text.index(SPEC_END)
    line_start = text.rindex("\n", 0, begin) + 1
    indent = text[line_start:begin]
    body = yaml.dump(intent_options(), Dumper=_IndentedLists, sort_keys=False, width=110, allow_unicode=True)
    block = "".join(f"{indent}{line}\n" if line else "\n" for line in body.splitlines())
    return text[:begin] + SPEC_BEGIN + "\n" + block + indent + text[end:]


def render(role: Path) -> str:
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    main = specs["main"]
    lines = [
        f"# sparkfleet.vllm.{role.name}",
        "",
        "<!-- Generated from meta/argument_specs.yml by scripts/role_docs.py: edit the spec, then run the script. -->",
        "",
        prose(main.get("short_description")),
        "",
    ]
    if main.get("description"):
        lines += [prose(main["description"]), ""]
    lines += ["## Variables", "", *table(main.get("options") or {}), ""]
    if role.name == INTENT_ROLE:
        lines += [
            "## An instance's `intent`",
            "",
            "Generated from the planner's `Intent` (`sparkfleet.models.intent`), whose descriptions are also the "
            "help of `sparkfleet plan`. Every key may be left out.",
            "",
            *intent_table(),
            "",
        ]
    for name, entry in specs.items():
        if name == "main":
            continue
        lines += [f"## Entry point `{name}` (`tasks_from: {name}`)", "", prose(entry.get("short_description")), ""]
        if entry.get("description") and entry["description"] != main.get("description"):
            lines += [prose(entry["description"]), ""]
        if entry.get("options") and entry["options"] == main.get("options"):
            lines += ["It takes the variables of the main entry point.", ""]
        elif entry.get("options"):
            lines += [*table(entry["options"]), ""]
    return "\n".join(lines)


def main() -> int:
    stale = []
    spec = ROLES / INTENT_ROLE / "meta" / "argument_specs.yml"
    current = spec.read_text(encoding="utf-8")
    if spec_with_intent(current) != current:
        if "--check" in sys.argv[1:]:
            stale.append(str(spec.relative_to(ROOT)))
        else:
            spec.write_text(spec_with_intent(current), encoding="utf-8")
    for role in sorted(p for p in ROLES.iterdir() if (p / "meta" / "argument_specs.yml").exists()):
        readme, text = role / "README.md", render(role)
        if "--check" in sys.argv[1:]:
            if not readme.exists() or readme.read_text(encoding="utf-8") != text:
                stale.append(str(readme.relative_to(ROOT)))
        else:
            readme.write_text(text, encoding="utf-8")
    if stale:
        print(f"not what the argument specs and Intent say (run scripts/role_docs.py): {', '.join(stale)}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
