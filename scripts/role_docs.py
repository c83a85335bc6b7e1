"""Render each role's README.md from its meta/argument_specs.yml (one source: the spec Ansible validates with).

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
    for role in sorted(p for p in ROLES.iterdir() if (p / "meta" / "argument_specs.yml").exists()):
        readme, text = role / "README.md", render(role)
        if "--check" in sys.argv[1:]:
            if not readme.exists() or readme.read_text(encoding="utf-8") != text:
                stale.append(str(readme.relative_to(ROOT)))
        else:
            readme.write_text(text, encoding="utf-8")
    if stale:
        print(f"not what the argument specs say (run scripts/role_docs.py): {', '.join(stale)}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
