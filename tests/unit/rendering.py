"""Render a role's template with Ansible's own templating and the collection's filters, as the template
action does. Ansible's collection loader takes over the ansible_collections package for the whole process,
which other tests import as plain modules: templates render in a process of their own, one JSON line each
(their string literals keep their backslash escapes, as the template action leaves them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
COLLECTIONS = ROOT / ".cache" / "pytest-collections"

_RENDERER = r"""
import json, sys
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template
init_plugin_loader([sys.argv[1]])
template = trust_as_template(open(sys.argv[2]).read())
for line in sys.stdin:
    request = json.loads(line)
    variables = {k: trust_as_template(v) if k in request["templates"] else v for k, v in request["vars"].items()}
    try:
        text = Templar(loader=DataLoader(), variables=variables).template(template, escape_backslashes=False)
        print(json.dumps({"text": str(text)}), flush=True)
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
"""


class RenderRefusedError(Exception):
    pass


class TemplateRenderer:
    """One renderer process for one template; `render(variables)` returns the text or raises RenderRefusedError.
    `templates` names the variables that are templates themselves (role defaults that refer to each other)."""

    def __init__(self, template: Path, templates: list[str] | None = None) -> None:
        if not (COLLECTIONS / "ansible_collections" / "sparkfleet" / "vllm").exists():
            pytest.skip("the collection link (.cache/pytest-collections) is made by the suite's conftest")
        self.templates = templates or []
        self.process = subprocess.Popen(
            [sys.executable, "-c", _RENDERER, str(COLLECTIONS), str(template)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip

    def render(self, variables: dict[str, Any]) -> str:
        requests, answers = self.process.stdin, self.process.stdout
        assert requests is not None and answers is not None
        requests.write(json.dumps({"vars": variables, "templates": self.templates}) + "\n")
        requests.flush()
        answer = json.loads(answers.readline())
        if "error" in answer:
            raise RenderRefusedError(answer["error"])
        return str(answer["text"])

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
