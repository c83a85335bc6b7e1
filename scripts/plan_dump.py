"""Every plan the catalog and the test fixtures give, one JSON file each: proof that a refactor changed no plan.

Issue 48 moves the library into packages and must leave what a user sees unchanged. Run this before and after a
change and compare the two directories:

    uv run python scripts/plan_dump.py .cache/plans-before      # on the commit before
    uv run python scripts/plan_dump.py .cache/plans-after       # on the change
    uv run python scripts/plan_dump.py --compare .cache/plans-before .cache/plans-after

A change that moves a module a reason cites declares it (`--renamed OLD=NEW`): the plans may then differ by that
name alone, and the comparison says in how many.

Each case is what `sparkfleet plan --json` prints for it (a refusal is dumped as its message, so refusals must stay
the same too): every catalog model on a Spark (vLLM 0.33.0 and 0.32.0) and on the cpu platform, under each profile,
with and without fp8 KV, and trusting the repository's code; what a host is given (host_dump.py: host plans, the
front door's and the chat UI's plans, every unit kind's sandbox); every config of tests/fixtures/configs, staged in a
directory of its own under a fixed path (the plans name it). Host memory is given, never read from this machine.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sparkfleet.catalog import load_catalog
from sparkfleet.errors import PlanError
from sparkfleet.planargs import add_plan_args, make_plan

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import host_dump  # noqa: E402 - a sibling script, found once its directory is on the path

FIXTURES = ROOT / "tests" / "fixtures" / "configs"
STAGED = Path("/tmp/sparkfleet-plan-dump-models")
HOSTS = {"gb10-0.33": ["--platform", "gb10", "--vllm-version", "0.33.0", "--memory-gib", "121.69"],
         "gb10-0.32": ["--platform", "gb10", "--vllm-version", "0.32.0", "--memory-gib", "121.69"],
         "cpu-0.32": ["--platform", "cpu", "--vllm-version", "0.32.0", "--memory-gib", "64"]}  # fmt: skip
PROFILES = ("interactive", "throughput", "memory-saver")


def cases() -> Iterator[tuple[str, list[str]]]:
    for model in sorted(load_catalog()):
        for host, host_args in HOSTS.items():
            for profile in PROFILES:
                for kv in ("auto", "fp8"):
                    name = f"catalog/{model.replace('/', '--')}/{host}-{profile}-kv-{kv}.json"
                    yield name, [model, *host_args, "--profile", profile, "--kv-cache-dtype", kv]
            # The models whose own code vLLM would run plan only when asked to trust it.
            yield f"catalog/{model.replace('/', '--')}/{host}-trusted.json", [model, *host_args, "--trust-remote-code"]
    for config in sorted(FIXTURES.glob("*.json")):
        staged = STAGED / config.stem
        staged.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(config, staged / "config.json")
        for host, host_args in HOSTS.items():
            # The fixtures are configs without weights, which a plan refuses unless told their size (issue 49).
            yield f"fixtures/{config.stem}/{host}.json", [str(staged), *host_args, "--weights-gib", "1"]


def dump_one(argv: list[str]) -> str:
    parser = argparse.ArgumentParser()
    add_plan_args(parser)
    try:
        served, note = make_plan(parser.parse_args(argv))
    except (PlanError, ValueError) as exc:
        return json.dumps({"refused": str(exc)}, indent=2) + "\n"
    return json.dumps({"plan": served.model_dump(mode="json"), "note": note}, indent=2) + "\n"


def dump_host(make: Callable[[], Any]) -> str:
    """One host output as JSON (a pydantic model, or a list of them), or its refusal's message."""
    try:
        made = make()
    except (PlanError, ValueError) as exc:
        return json.dumps({"refused": str(exc)}, indent=2) + "\n"
    plain = [m.model_dump(mode="json") for m in made] if isinstance(made, list) else made.model_dump(mode="json")
    return json.dumps(plain, indent=2) + "\n"


def dump(out: Path) -> int:
    count = 0
    for name, argv in cases():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump_one(argv))
        count += 1
    for name, make in host_dump.cases():
        path = out / "host" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump_host(make))
        count += 1
    print(f"{count} plans in {out}")
    return 0


def same_but_renamed(before: Path, after: Path, renamed: dict[str, str]) -> bool:
    """Whether two plans differ only by the declared renames (a module a reason's source names, moved)."""
    text = before.read_text()
    for old, new in renamed.items():
        text = re.sub(rf"{re.escape(old)}\b", new, text)
    return text == after.read_text()


def compare(before: Path, after: Path, renamed: dict[str, str]) -> int:
    differing: list[str] = []
    only_renamed: list[str] = []

    def walk(cmp: filecmp.dircmp[str], prefix: str) -> None:
        differing.extend(f"{prefix}{n} (only before)" for n in cmp.left_only)
        differing.extend(f"{prefix}{n} (only after)" for n in cmp.right_only)
        _, mismatch, errors = filecmp.cmpfiles(cmp.left, cmp.right, cmp.common_files, shallow=False)
        for n in mismatch + errors:
            left, right = Path(cmp.left) / n, Path(cmp.right) / n
            ok = renamed and n in mismatch and same_but_renamed(left, right, renamed)
            (only_renamed if ok else differing).append(f"{prefix}{n}")
        for sub, inner in cmp.subdirs.items():
            walk(inner, f"{prefix}{sub}/")

    walk(filecmp.dircmp(before, after), "")
    total = sum(1 for p in before.rglob("*.json"))
    if total == 0:
        print(f"{before} holds no plan: dump into it first")
        return 1
    if differing:
        print(f"{len(differing)} of {total} plans differ:", *differing[:50], sep="\n  ")
        return 1
    if only_renamed:
        names = ", ".join(f"{old} -> {new}" for old, new in renamed.items())
        print(f"{total} plans: {total - len(only_renamed)} byte-identical, {len(only_renamed)} differ only by {names}")
        return 0
    print(f"{total} plans, byte-identical")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, nargs="?", help="the directory to dump into (made anew)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    parser.add_argument(
        "--renamed",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="with --compare: a module a reason's source names, moved by the change (the only difference allowed)",
    )
    args = parser.parse_args()
    if args.compare:
        pairs = [item.split("=", 1) for item in args.renamed]
        if any(len(pair) != 2 or not all(pair) for pair in pairs):
            parser.error("--renamed takes OLD=NEW, e.g. sparkfleet.requestsize=sparkfleet.planning.requestsize")
        return compare(*args.compare, dict(pairs))
    if args.out is None:
        parser.error("give the directory to dump into, or --compare BEFORE AFTER")
    shutil.rmtree(args.out, ignore_errors=True)
    return dump(args.out)


if __name__ == "__main__":
    sys.exit(main())
