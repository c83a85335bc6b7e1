"""The README and the guides (issue 65): every example holds, every output is what the commands print now, the
README is a landing page that maps every guide, and each guide opens with its commands."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

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
    assert counts["ansible-playbook listings run, their output compared"] >= 1
    assert counts["sandbox commands, their recorded output compared by a Molecule verify"] >= 3
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
    listing = docs_examples.Block(
        ROOT / "x.md", 1, "console", "$ ansible-playbook sparkfleet.vllm.site --list-tags\nno tags\n"
    )
    assert any(
        "not what the commands print now" in f for f in docs_examples.check_block(listing, options, docs_examples.Counter())
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


def test_a_sandbox_commands_recorded_output_is_compared_rewritten_and_must_be_run_by_its_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A guide's output that only a sandbox host gives is compared with that host's (trailing blanks aside), a drift
    fails with a diff until --write takes the host's, and a verify that stops running the command is caught."""
    command = "uv run python benchmarks/x.py --host h"
    guide = tmp_path / "guide.md"
    guide.write_text(f"# A guide\n\n```console\n$ {command}\nunit a 1.0 OK\nunit b 2.6 OK\n```\n\nThe why.\n")
    monkeypatch.setattr(docs_examples, "DOCS", [guide])
    monkeypatch.setattr(docs_examples, "RECORDED", {command: "extensions/molecule/default/verify_noop.yml"})
    live = tmp_path / "live.txt"
    live.write_text("unit a 1.0 OK\nunit b 2.6 OK   \n\n")
    assert docs_examples.compare_recorded(command, live, rewrite=False) == 0
    live.write_text("unit a 1.0 OK\nunit b 3.1 OK\n")
    assert docs_examples.compare_recorded(command, live, rewrite=False) == 1
    said = capsys.readouterr().err
    assert "-unit b 2.6 OK" in said and "+unit b 3.1 OK" in said and "--write" in said
    assert docs_examples.compare_recorded(command, live, rewrite=True) == 0
    assert "$ uv run python benchmarks/x.py --host h\nunit a 1.0 OK\nunit b 3.1 OK\n```\n\nThe why.\n" in guide.read_text()
    assert docs_examples.compare_recorded("uv run python benchmarks/y.py", live, rewrite=False) == 1
    # The console block keeps the recorded output: nothing regenerates it here.
    block = next(docs_examples.blocks(guide))
    assert docs_examples.console_output(block.text) == (block.text, [])
    # verify_noop.yml does not run the command: the check says nothing would compare it.
    assert any("does not run" in f for f in docs_examples.recorded_failures())
