"""Ask the installed vLLM's own parser whether it accepts each instance's argv, before a unit switches to it.

Run by the vllm_serve role with the release's interpreter, as root, before any unit is written. It reads
{"release": PATH, "plans": {NAME: {"argv": [...]}}} on stdin (the host plan's instances and ranks). An
instance whose release and argv passed before (the digest in STAMP) is not parsed again, so a no-op
converge imports nothing. Each other argv goes through vLLM's `make_arg_parser`,
`validate_parsed_serve_args` and `AsyncEngineArgs.from_cli_args`, with no GPU and no model load. Prints
one JSON object per line ({"name", "ok", "error", "seconds"}) and exits 1 when any argv is refused, naming
the flag vLLM rejected and the release, so nothing switches.

Usage: sparkfleet_argv_check.py STAMP record|check < plans.json
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import sys
import time
from typing import Any

# vLLM moved its serve CLI between releases: 0.33 entrypoints/common, 0.2x-0.32 launchers, older openai.
CLI_MODULES = ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.openai.cli_args")
PARSER_MODULES = ("vllm.utils.argparse_utils", "vllm.utils")


class Refused(Exception):  # noqa: N818 - existing name, kept: typing only, no renames
    pass


def digest(item: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps([item["release"], item["argv"]]).encode()).hexdigest()


def read_stamp(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def write_stamp(path: str, stamp: dict[str, str]) -> None:
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(stamp, handle, sort_keys=True)
    os.replace(tmp, path)


def _first(modules: tuple[str, ...], name: str) -> Any:
    for module in modules:
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if found is not None:
            return found
    raise ImportError(f"{name} is in none of {', '.join(modules)}")


def parse(argv: list[str]) -> None:
    from vllm.engine.arg_utils import AsyncEngineArgs

    flexible = _first(PARSER_MODULES, "FlexibleArgumentParser")

    class RaisingParser(flexible):  # type: ignore[misc, valid-type]
        def error(self, message: str) -> None:
            raise Refused(message)

    if argv[:2] != ["vllm", "serve"] or len(argv) < 3:
        raise Refused(f"not a vllm serve command line: {argv[:3]}")
    parser = _first(CLI_MODULES, "make_arg_parser")(RaisingParser(prog="vllm serve"))
    args = parser.parse_args(argv[2:])
    args.model = argv[2]
    _first(CLI_MODULES, "validate_parsed_serve_args")(args)
    AsyncEngineArgs.from_cli_args(args)


def main() -> int:
    # vLLM logs to stdout: its lines go to stderr, and only this program's JSON lines reach stdout.
    results = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    cli = argparse.ArgumentParser()
    cli.add_argument("stamp")
    cli.add_argument("mode", choices=("record", "check"), help="check (check mode) leaves the stamp as it is")
    options = cli.parse_args()
    given = json.load(sys.stdin)
    items = [{"name": name, "release": given["release"], "argv": plan["argv"]} for name, plan in given["plans"].items()]
    stamp = read_stamp(options.stamp)
    refused = 0
    for item in items:
        key = digest(item)
        if stamp.get(item["name"]) == key:
            print(json.dumps({"name": item["name"], "ok": True, "checked": False}), file=results)
            continue
        started = time.monotonic()
        try:
            parse([str(word) for word in item["argv"]])
        except (Refused, ValueError, TypeError, SystemExit) as exc:
            refused += 1
            error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, Refused) else str(exc)
            print(json.dumps({"name": item["name"], "ok": False, "error": error, "release": item["release"]}), file=results)
            continue
        stamp[item["name"]] = key
        seconds = round(time.monotonic() - started, 2)
        print(json.dumps({"name": item["name"], "ok": True, "checked": True, "seconds": seconds}), file=results)
    if options.mode == "record":
        write_stamp(options.stamp, stamp)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
