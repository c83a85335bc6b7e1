"""Every example in the README and the guides, checked; the guides' command output, regenerated so it cannot drift.

- A `console` block is generated: each `$ sparkfleet ...` line runs (offline, in this process) and what it prints,
  with its exit status when not 0, is the text under it.
- A `bash` block's `sparkfleet` commands run the same way (the exit must be 0), or, for `release lock`, which asks
  the package index, are parsed by the CLI's own parser; its `ansible-playbook` commands are parsed by
  ansible-playbook's own parser, name a playbook that exists, and their `-e` JSON meets the roles' argument specs;
  every block passes `bash -n`.
- A `yaml` block parses; one that holds role variables (an inventory's or a vars file's) is validated against the
  roles' `meta/argument_specs.yml` with Ansible's own ArgumentSpecValidator, and a variable with a role's prefix
  that no role has is refused as a typo.
- A `python` block compiles.
- A `console` block of a command only a converged sandbox host can run (RECORDED) keeps the output recorded there;
  the Molecule verify RECORDED names runs the same command on its host and compares (--recorded), so that output
  cannot drift either.

Run: uv run python scripts/docs_examples.py          (checks; exits 1 naming each failure, prints the counts)
     uv run python scripts/docs_examples.py --write  (rewrites the console blocks' output)
     uv run python scripts/docs_examples.py --recorded COMMAND OUTPUT_FILE [--write]
                                                     (a sandbox command's recorded output against OUTPUT_FILE)
     uv run python scripts/docs_examples.py --recorded-commands VERIFY
                                                     (the RECORDED commands VERIFY runs, as a JSON list)
"""

from __future__ import annotations

import configparser
import contextlib
import difflib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs" / "guides").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# Variables that are Ansible's or the inventory's own, not a role's.
NOT_ROLE_VARIABLES = re.compile(r"^(ansible_|vault_)")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    language: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks(doc: Path) -> Iterator[Block]:
    text = doc.read_text()
    for match in FENCE.finditer(text):
        yield Block(doc, text.count("\n", 0, match.start()) + 1, match.group(1), match.group(2))


def commands(script: str) -> list[str]:
    """The block's commands, continuation lines joined, comments and heredoc bodies left out."""
    found: list[str] = []
    pending, heredoc = "", ""
    for raw in script.splitlines():
        if heredoc:
            heredoc = "" if raw.strip() == heredoc else heredoc
            continue
        line = (pending + " " + raw.strip()).strip() if pending else raw.strip()
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        pending = ""
        if line and not line.startswith("#"):
            found.append(line)
            if marker := re.search(r"<<-?'?(\w+)'?", line):
                heredoc = marker.group(1)
    return found


def cli_words(command: str) -> list[str] | None:
    """The sparkfleet CLI's arguments of a command line (after `uv run`, env assignments), else None."""
    words = shlex.split(command, comments=True)
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        words = words[1:]
    if words[:2] == ["uv", "run"]:
        words = words[2:]
    return words[1:] if words[:1] == ["sparkfleet"] else None


def run_cli(args: list[str]) -> tuple[int, str]:
    """The CLI in this process, offline: what it prints (stdout and stderr) and its exit status."""
    from sparkfleet.cli import main

    out = io.StringIO()
    offline = mock.patch.dict(os.environ, {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    with offline, contextlib.chdir(ROOT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            status = main(args)
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else 1
    return status, out.getvalue()


# Commands whose work needs what a check cannot have: each is parsed by the CLI's own parser, its work left out.
PARSED_ONLY = {
    ("release", "lock"): ("_release_lock", "they ask the package index"),
    ("bench", "compare"): ("_bench_compare", "they read a benchmark run's results"),
}


def parse_cli(args: list[str]) -> str | None:
    """A command through the CLI's own parser, its work not done: None, or its complaint."""
    with mock.patch(f"sparkfleet.cli.{PARSED_ONLY[args[0], args[1]][0]}", return_value=""):
        status, said = run_cli(args)
    return None if status == 0 else said.strip()


# Commands whose output only a converged sandbox host gives, each with the Molecule verify that runs it there and
# compares its output with the guide's (--recorded); the check here makes sure that verify still runs it.
DOOR_CLIENT = "extensions/molecule/default/verify_door_client.yml"
RECORDED = {
    "uv run python benchmarks/exposure.py --host sparkfleet-molecule": "extensions/molecule/default/verify_exposure.yml",
    "curl -s --cacert /etc/nginx/sparkfleet/tls/door.crt https://127.0.0.1/v1/models": DOOR_CLIENT,
    (
        "curl -s --cacert /etc/nginx/sparkfleet/tls/door.crt https://127.0.0.1/v1/chat/completions"
        """ -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d '{"model": "sandbox/tiny-llama","""
        """ "messages": [{"role": "user", "content": "What is 12*17? Answer with the number only."}], "max_tokens": 8,"""
        """ "temperature": 0}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["choices"][0]["message"]"""
        """["content"])'"""
    ): DOOR_CLIENT,
}


def console_output(text: str, files: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """A console block with each `$ ` command's output regenerated (a RECORDED command's kept), and each command
    that failed to run; `files` are the guide's own files (its blocks that open with `# NAME`) a listing reads."""
    files = files or {}
    lines, failures, regenerating = [], [], False
    for line in text.splitlines():
        if line.startswith("$ "):
            lines.append(line)
            regenerating = line[2:] not in RECORDED
            if not regenerating:
                continue
            args = cli_words(line[2:])
            if args is None and listing(line[2:]):
                status, said = run_listing(line[2:], files)
            elif args is None:
                failures.append(f"not a sparkfleet command, a playbook listing nor one a sandbox records: {line}")
                continue
            else:
                status, said = run_cli(args)
            lines.extend(said.rstrip().splitlines())
            if status:
                lines.append(f"(exit {status})")
        elif not regenerating:
            lines.append(line)
    return "\n".join(lines) + "\n", failures


def listing(command: str) -> bool:
    """An ansible-playbook run that only lists (its tags, tasks or hosts): it reads the playbooks, touches no host."""
    words = shlex.split(command)
    return words[:1] == ["ansible-playbook"] and bool({"--list-tags", "--list-tasks"} & set(words))


def run_listing(command: str, files: dict[str, str]) -> tuple[int, str]:
    """The listing, run by ansible-playbook in a directory that holds the guide's files, with this checkout as the
    installed sparkfleet.vllm: its standard output and exit status."""
    with tempfile.TemporaryDirectory(prefix="docs-example-") as tmp:
        for name, text in files.items():
            (Path(tmp) / name).write_text(text)
        collection = Path(tmp) / "collections" / "ansible_collections" / "sparkfleet" / "vllm"
        collection.parent.mkdir(parents=True)
        collection.symlink_to(ROOT)
        env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(Path(tmp) / "collections"), "ANSIBLE_NOCOLOR": "1"}
        env.pop("ANSIBLE_CONFIG", None)
        playbook = Path(sys.executable).parent / "ansible-playbook"
        done = subprocess.run(
            [str(playbook), *shlex.split(command)[1:]], cwd=tmp, env=env, capture_output=True, text=True, check=False
        )
    return done.returncode, done.stdout


def guide_files(doc: Path) -> dict[str, str]:
    """The files a guide shows whole: its YAML blocks that open with a `# NAME` comment."""
    found: dict[str, str] = {}
    for block in blocks(doc) if doc.exists() else ():
        first = block.text.splitlines()[0] if block.text else ""
        if block.language == "yaml" and re.fullmatch(r"# [\w.-]+\.ya?ml", first):
            found[first[2:]] = block.text
    return found


def recorded_output(command: str) -> tuple[Path, str] | None:
    """The guide that shows `command`'s recorded output, and that output."""
    for doc in DOCS:
        for block in blocks(doc):
            if block.language == "console" and f"$ {command}\n" in block.text:
                after = block.text.split(f"$ {command}\n", 1)[1]
                return doc, after.split("\n$ ", 1)[0].rstrip("\n") + "\n"
    return None


def compare_recorded(command: str, output: Path, rewrite: bool) -> int:
    """A sandbox's output of `command` against the guide's: 0 when they agree (or the guide was rewritten to it)."""
    found = recorded_output(command)
    if found is None:
        print(f"no guide shows the output of: {command}", file=sys.stderr)
        return 1
    doc, shown = found
    name = doc.relative_to(ROOT) if doc.is_relative_to(ROOT) else doc
    live = "\n".join(line.rstrip() for line in output.read_text().rstrip("\n").splitlines()) + "\n"
    if live == shown:
        print(f"{name}: the recorded output of {command!r} is what it prints on this host")
        return 0
    if rewrite:
        doc.write_text(doc.read_text().replace(f"$ {command}\n{shown}", f"$ {command}\n{live}", 1))
        print(f"{name}: rewrote the recorded output of {command!r}")
        return 0
    diff = difflib.unified_diff(shown.splitlines(), live.splitlines(), "the guide", "this host", lineterm="")
    print(f"{name}: the output of {command!r} differs on this host (rerun with --write):", file=sys.stderr)
    print("\n".join(diff), file=sys.stderr)
    return 1


def role_options() -> dict[str, tuple[str, dict[str, Any]]]:
    """Every role option, with its role and spec (each role's entry points together)."""
    options: dict[str, tuple[str, dict[str, Any]]] = {}
    for spec_file in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        role = spec_file.parent.parent.name
        for entry_point in yaml.safe_load(spec_file.read_text())["argument_specs"].values():
            for name, spec in (entry_point.get("options") or {}).items():
                options.setdefault(name, (role, spec))
    return options


def role_prefixes(options: dict[str, tuple[str, dict[str, Any]]]) -> tuple[str, ...]:
    """The prefixes role variables carry: each role's name, and the first word of an option named otherwise (webui_)."""
    return tuple(
        sorted(
            {role + "_" for role, _ in options.values()}
            | {name.split("_")[0] + "_" for name, (role, _) in options.items() if not name.startswith(role)}
        )
    )


def vars_failures(variables: dict[str, Any], options: dict[str, tuple[str, dict[str, Any]]]) -> list[str]:
    """Role variables against the roles' argument specs, as Ansible validates them."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    failures, by_role = [], {}
    for name, value in variables.items():
        if NOT_ROLE_VARIABLES.match(name):
            continue
        if name not in options:
            if name.startswith(role_prefixes(options)):
                failures.append(f"{name}: no role has this variable")
            continue
        role, spec = options[name]
        templated = isinstance(value, str) and "{{" in value and spec.get("type") not in (None, "str", "path", "raw")
        if not templated:
            by_role.setdefault(role, {})[name] = (spec, value)
    for role, entries in by_role.items():
        validator = ArgumentSpecValidator({name: spec for name, (spec, _) in entries.items()})
        result = validator.validate({name: value for name, (_, value) in entries.items()})
        failures += [f"{role}: {message}" for message in result.error_messages if "missing required" not in message]
    return failures


def inventory_vars(document: Any) -> dict[str, Any] | None:
    """The variables a YAML example sets: an inventory's groups' and hosts' vars, or a vars file's."""
    if not isinstance(document, dict):
        return None
    groups = [g for g in document.values() if isinstance(g, dict) and ({"hosts", "vars", "children"} & set(g))]
    if not groups:
        options = role_options()
        return document if any(k in options or k.startswith(role_prefixes(options)) for k in document) else None
    found: dict[str, Any] = {}
    for group in groups:
        found.update(group.get("vars") or {})
        for host_vars in (group.get("hosts") or {}).values():
            found.update(host_vars or {})
    return found


def playbook_failures(command: str, options: dict[str, tuple[str, dict[str, Any]]]) -> list[str]:
    """An ansible-playbook command line through ansible-playbook's own parser; its playbook and its -e JSON."""
    from ansible import context
    from ansible.cli.playbook import PlaybookCLI
    from ansible.utils.context_objects import GlobalCLIArgs

    words = shlex.split(command, comments=True)
    try:
        PlaybookCLI(words).parse()
        playbooks, extra_vars = list(context.CLIARGS["args"]), list(context.CLIARGS["extra_vars"])
    except SystemExit:
        return [f"ansible-playbook refuses its arguments: {command}"]
    finally:
        # ansible-playbook's parsed arguments are a process-wide singleton: cleared for the next command.
        GlobalCLIArgs._Singleton__instance = None  # type: ignore[attr-defined]
    failures = []
    for playbook in playbooks:
        name = playbook.removeprefix("sparkfleet.vllm.")
        if not ((ROOT / "playbooks" / f"{name}.yml").exists() or (ROOT / name).exists()):
            failures.append(f"no playbook {playbook}")
    for extra in extra_vars:
        if extra.lstrip().startswith("{"):
            failures += vars_failures(json.loads(extra), options)
    return failures


def check_block(block: Block, options: dict[str, tuple[str, dict[str, Any]]], counts: Counter[str]) -> list[str]:
    failures: list[str] = []
    if block.language == "console":
        regenerated, failures = console_output(block.text, guide_files(block.doc))
        said = [line[2:] for line in block.text.splitlines() if line.startswith("$ ")]
        counts["CLI commands run, their output compared"] += sum(cli_words(c) is not None for c in said)
        counts["ansible-playbook listings run, their output compared"] += sum(listing(c) for c in said)
        counts["sandbox commands, their recorded output compared by a Molecule verify"] += sum(c in RECORDED for c in said)
        if regenerated != block.text:
            failures.append("its output is not what the commands print now (scripts/docs_examples.py --write)")
    elif block.language == "bash":
        syntax = subprocess.run(["bash", "-n"], input=block.text, text=True, capture_output=True, check=False)
        failures += [syntax.stderr.strip()] if syntax.returncode else []
        counts["shell blocks through bash -n"] += 1
        for command in commands(block.text):
            args = cli_words(command)
            if args is not None and tuple(args[:2]) in PARSED_ONLY:
                failures += [f"{command}: {said}"] if (said := parse_cli(args)) else []
                counts[f"CLI commands parsed, not run ({PARSED_ONLY[tuple(args[:2])][1]})"] += 1
            elif args is not None:
                status, said = run_cli(args)
                failures += [f"{command}: exit {status}: {said[-600:]}"] if status else []
                counts["CLI commands run"] += 1
            elif command.startswith("ansible-playbook "):
                failures += [f"{command}: {f}" for f in playbook_failures(command, options)]
                counts["ansible-playbook commands parsed and their variables validated"] += 1
    elif block.language == "yaml":
        document = yaml.safe_load(block.text)
        variables = inventory_vars(document)
        if variables is not None:
            failures += vars_failures(variables, options)
            counts["YAML blocks validated against the roles' argument specs"] += 1
        else:
            counts["YAML blocks parsed"] += 1
    elif block.language == "ini":
        configparser.ConfigParser().read_string(block.text, block.where)
        counts["INI blocks parsed"] += 1
    elif block.language == "python":
        compile(block.text, block.where, "exec")
        counts["Python blocks compiled"] += 1
    else:
        counts[f"{block.language or 'plain'} blocks (output shown, not run)"] += 1
    return [f"{block.where}: {failure}" for failure in failures]


LINKS = ROOT / "docs" / "docsite" / "links.yml"


def guide_links() -> str:
    """docs/docsite/links.yml: the collection reference's links to each guide (antsibull-docs reads it)."""
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    repository = galaxy["repository"].removeprefix("https://github.com/")
    links = {
        "edit_on_github": {"repository": repository, "branch": "main", "path_prefix": ""},
        "extra_links": [
            {
                "description": guide.read_text().splitlines()[0].removeprefix("# "),
                "url": f"{galaxy['repository']}/blob/main/{guide.relative_to(ROOT)}",
            }
            for guide in DOCS[1:]
        ],
    }
    header = "# Generated by scripts/docs_examples.py --write from the guides' titles; antsibull-docs links them.\n"
    return header + yaml.dump(links, Dumper=IndentedDumper, sort_keys=False, width=120)


class IndentedDumper(yaml.SafeDumper):
    """Lists indented under their key, as yamllint's configuration here asks."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def write() -> None:
    LINKS.parent.mkdir(exist_ok=True)
    LINKS.write_text(guide_links())
    for doc in DOCS:
        text = doc.read_text()
        for block in reversed(list(blocks(doc))):
            if block.language == "console":
                regenerated, failures = console_output(block.text, guide_files(doc))
                if failures:
                    raise SystemExit(f"{block.where}: {failures}")
                text = text.replace(f"```console\n{block.text}```", f"```console\n{regenerated}```", 1)
        doc.write_text(text)


def check() -> tuple[list[str], Counter[str]]:
    options, counts, failures = role_options(), Counter[str](), []
    if not LINKS.exists() or LINKS.read_text() != guide_links():
        failures.append(f"{LINKS.relative_to(ROOT)} does not link every guide by its title (--write)")
    readme = DOCS[0].read_text()
    failures += [
        f"README.md does not link {g.relative_to(ROOT)}" for g in DOCS[1:] if f"({g.relative_to(ROOT)})" not in readme
    ]
    for doc in DOCS:
        for block in blocks(doc):
            failures += check_block(block, options, counts)
    return failures + recorded_failures(), counts


def recorded_failures() -> list[str]:
    """Each RECORDED command is shown by a guide and run by its verify, which compares the two."""
    failures = []
    for command, verify in RECORDED.items():
        if recorded_output(command) is None:
            failures.append(f"RECORDED: no guide shows the output of {command!r}")
        runs = (ROOT / verify).read_text()
        if (command not in runs and "--recorded-commands" not in runs) or "--recorded" not in runs:
            failures.append(f"RECORDED: {verify} does not run {command!r} and compare it (--recorded)")
    return failures


def main() -> int:
    if sys.argv[1:2] == ["--recorded-commands"] and len(sys.argv) == 3:
        print(json.dumps([command for command, verify in RECORDED.items() if verify == sys.argv[2]]))
        return 0
    if sys.argv[1:2] == ["--recorded"] and len(sys.argv) in (4, 5):
        return compare_recorded(sys.argv[2], Path(sys.argv[3]), rewrite=sys.argv[4:] == ["--write"])
    if sys.argv[1:] == ["--write"]:
        write()
    failures, counts = check()
    for kind, count in sorted(counts.items()):
        print(f"{count:4d} {kind}")
    for failure in failures:
        print(f"FAIL {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
