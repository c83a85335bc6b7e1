"""The metrics gate's program (monitoring role): the nftables table it loads, from its settings (issue 47)."""

from __future__ import annotations

import importlib.util
import json
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "roles" / "monitoring" / "files" / "sparkfleet_metrics_gate.py"
_spec = importlib.util.spec_from_file_location("sparkfleet_metrics_gate", SCRIPT)
assert _spec and _spec.loader
gate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gate)


def test_the_table_resets_every_other_accounts_local_connection_to_the_ports() -> None:
    text = gate.ruleset([9100, 9090, 9100], [101, 0])
    # Declared, deleted and made again in one transaction: the ports are never open between two rule sets.
    assert text.splitlines()[:3] == [
        "table inet sparkfleet_metrics",
        "delete table inet sparkfleet_metrics",
        "table inet sparkfleet_metrics {",
    ]
    assert "tcp dport { 9090, 9100 } fib daddr type local meta skuid != { 0, 101 } counter reject with tcp reset" in text
    assert "type filter hook output priority filter; policy accept;" in text


def test_no_ports_loads_an_empty_table_and_root_always_reads() -> None:
    assert "dport" not in gate.ruleset([], [101])
    assert "skuid != { 0 }" in gate.ruleset([9100], [])


def test_accounts_that_do_not_exist_are_left_out_and_named() -> None:
    root = pwd.getpwuid(0).pw_name
    assert gate.reader_uids([root, "no-such-reader-account"]) == ([0], ["no-such-reader-account"])


def test_the_program_hands_nft_the_table_and_names_the_missing(tmp_path: Path) -> None:
    """Run for real with a stand-in nft first on PATH that records what it was given."""
    settings = tmp_path / "metrics-gate.json"
    settings.write_text(json.dumps({"ports": [9100], "readers": [pwd.getpwuid(0).pw_name, "no-such-reader"]}))
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nft").write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/argv\ncat > {tmp_path}/stdin\n')
    (fake / "nft").chmod(0o755)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(settings)], capture_output=True, text=True, check=False,
        env={"PATH": f"{fake}:/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "argv").read_text().split() == ["-f", "-"]
    assert (tmp_path / "stdin").read_text() == gate.ruleset([9100], [0])
    assert "no-such-reader" in done.stderr and "ports [9100]: readers uid [0]" in done.stdout


def test_a_refused_table_fails_the_unit(tmp_path: Path) -> None:
    settings = tmp_path / "metrics-gate.json"
    settings.write_text(json.dumps({"ports": [9100], "readers": []}))
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nft").write_text("#!/bin/sh\ncat >/dev/null\nexit 1\n")
    (fake / "nft").chmod(0o755)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(settings)], capture_output=True, text=True, check=False,
        env={"PATH": f"{fake}:/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 1


@pytest.mark.parametrize("argv", [[], ["a", "b"]])
def test_usage(argv: list[str]) -> None:
    assert gate.main(["gate", *argv]) == 2
