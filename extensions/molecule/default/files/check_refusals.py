#!/usr/bin/env python3
"""Run the site playbook once over every bad input and check each is refused, naming its variable.

Usage: check_refusals.py CASES_JSON

CASES_JSON holds {"project", "inventory", "host", "host_vars", "workdir", "cases": [{"name", "vars", "expect"}]}.
Each case becomes an inventory host of its own (an alias of HOST with host_vars and the case's variables as its
host variables: host_vars holds what the inventory derives from where it lies, as inventory_dir), so one
ansible-playbook run checks them all: its start-up, the host facts and the shared preflight are paid once, not
once per case. Host variables rank above the group variables a case overrides, as extra vars did. A case passes
when its host failed, changed nothing (its recap), and one of its failures says the case's expected words.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

GROUP = "refusals"


def alias(index: int) -> str:
    return f"refused-{index:02d}"


def write_inventory(path: Path, host: str, host_vars: dict[str, Any], cases: list[dict[str, Any]]) -> None:
    """The cases as hosts of a group under sparks, so the sparks group's variables apply to them too."""
    hosts = {alias(i): {"ansible_host": host, **host_vars, **case["vars"]} for i, case in enumerate(cases)}
    path.write_text(json.dumps({"sparks": {"children": {GROUP: {"hosts": hosts}}}}, indent=1) + "\n", encoding="utf-8")


def failure_messages(report: dict[str, Any], host: str) -> list[str]:
    """Every message of a task that failed on this host (a failed loop's items included)."""
    messages: list[str] = []
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            result = task.get("hosts", {}).get(host)
            if not result or not (result.get("failed") or result.get("unreachable")):
                continue
            messages.append(str(result.get("msg", "")))
            messages.extend(str(item.get("msg", "")) for item in result.get("results", []))
    return messages


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def verdicts(report: dict[str, Any], cases: list[dict[str, Any]]) -> list[str]:
    """One line per case, 'ok ...' or 'FAIL ...'."""
    lines = []
    stats = report.get("stats", {})
    for i, case in enumerate(cases):
        host = alias(i)
        counts = stats.get(host, {})
        said = [flat(message) for message in failure_messages(report, host)]
        problems = []
        if not counts.get("failures") and not counts.get("unreachable"):
            problems.append("the run did not fail")
        if counts.get("changed", 0) != 0:
            problems.append(f"it changed {counts['changed']} things")
        if not any(flat(case["expect"]) in message for message in said):
            problems.append(f"no failure says {case['expect']!r}; it said {said}")
        verdict = "ok" if not problems else "FAIL"
        lines.append(f"{verdict} {case['name']} ({host})" + (": " + "; ".join(problems) if problems else ""))
    return lines


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    cases: list[dict[str, Any]] = spec["cases"]
    workdir = Path(spec["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    inventory = workdir / "refusals.yml"
    write_inventory(inventory, spec["host"], spec["host_vars"], cases)
    # The report is the JSON callback's alone: no other callback writes to stdout (the preload writes nothing).
    env = dict(
        os.environ,
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_CALLBACKS_ENABLED="sparkfleet.vllm.preload",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_NOCOLOR="1",
    )
    started = time.monotonic()
    run = subprocess.run(
        [
            "ansible-playbook",
            f"--inventory={spec['inventory']}",
            f"--inventory={inventory}",
            f"--limit={GROUP}",
            f"{spec['project']}/playbooks/site.yml",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.monotonic() - started
    try:
        report, _ = json.JSONDecoder().raw_decode(run.stdout[run.stdout.index("{") :])
    except ValueError:
        print(f"FAIL the run's report is not JSON (exit {run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
        return 1
    lines = verdicts(report, cases)
    print("\n".join(lines))
    print(f"{sum(line.startswith('ok ') for line in lines)}/{len(cases)} refused as expected in one run of {took:.0f} s")
    return 0 if all(line.startswith("ok ") for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
