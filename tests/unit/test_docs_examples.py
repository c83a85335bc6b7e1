"""The README and the guides (issue 65): every example holds, every output is what the commands print now, the
README is a landing page that maps every guide, and each guide opens with its commands."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("docs_examples", ROOT / "scripts" / "docs_examples.py")
assert _spec and _spec.loader
docs_examples = importlib.util.module_from_spec(_spec)
sys.modules["docs_examples"] = docs_examples  # its dataclass looks its module up
_spec.loader.exec_module(docs_examples)

GUIDES = sorted((ROOT / "docs" / "guides").glob("*.md"))


def test_every_example_holds_and_every_output_is_current() -> None:
    failures, counts = docs_examples.check()
    assert failures == []
    assert counts["CLI commands run, their output compared"] >= 10
    assert counts["YAML blocks validated against the roles' argument specs"] >= 5
    assert counts["ansible-playbook commands parsed and their variables validated"] >= 5


def test_a_broken_example_is_caught() -> None:
    """The checker fails on a typo'd variable, a wrong type, a stale output and a command the CLI refuses."""
    options = docs_examples.role_options()
    inventory = "sparks:\n  vars:\n    vllm_serve_instance: []\n    vllm_serve_watchdog: maybe\n"
    block = docs_examples.Block(ROOT / "x.md", 1, "yaml", inventory)
    failures = docs_examples.check_block(block, options, docs_examples.Counter())
    assert any("vllm_serve_instance: no role has this variable" in f for f in failures)
    assert any("vllm_serve_watchdog" in f and "bool" in f for f in failures)
    stale = docs_examples.Block(ROOT / "x.md", 1, "console", "$ sparkfleet catalog\nan old table\n")
    assert any(
        "not what the commands print now" in f for f in docs_examples.check_block(stale, options, docs_examples.Counter())
    )
    refused = docs_examples.Block(ROOT / "x.md", 1, "bash", "uv run sparkfleet plan --context many x\n")
    assert any("exit 2" in f for f in docs_examples.check_block(refused, options, docs_examples.Counter()))
    playbook = docs_examples.Block(ROOT / "x.md", 1, "bash", "ansible-playbook -i inv sparkfleet.vllm.nosuch\n")
    assert any("no playbook" in f for f in docs_examples.check_block(playbook, options, docs_examples.Counter()))


def test_the_readme_is_a_landing_page_that_maps_every_guide() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 160
    assert "## Quick start" in readme and "scripts/site" in readme and "scripts/test" in readme
    for guide in GUIDES:
        assert f"(docs/guides/{guide.name})" in readme, guide.name


def test_each_guide_opens_with_its_commands() -> None:
    for guide in GUIDES:
        lines = guide.read_text().splitlines()
        first_block = next(i for i, line in enumerate(lines) if re.match(r"```(console|bash|yaml)$", line))
        assert first_block <= 12, f"{guide.name}: its first commands come at line {first_block + 1}"
