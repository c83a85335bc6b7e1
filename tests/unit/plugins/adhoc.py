"""Run one of the collection's modules through ansible itself, on this machine, and return its result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

COLLECTIONS = Path(__file__).resolve().parents[3] / ".cache" / "pytest-collections"


def run_module(module: str, args: dict[str, object], *extra: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """The collection's MODULE (or any module by its fully qualified name) with ARGS, on localhost."""
    environment = dict(
        os.environ,
        **(env or {}),
        ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS),
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        # Not the checkout's preload callback: it imports the whole library into each ad-hoc run (0.75 s a call, 63
        # calls) for modules that load only what they use.
        ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_roles",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
    )
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible"),
            "localhost",
            "-c",
            "local",
            "-i",
            "localhost,",
            "-m",
            module if "." in module else f"sparkfleet.vllm.{module}",
            "-a",
            json.dumps(args),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    # -v lines may come before the JSON document and the checkout's roles-timing recap after it.
    start = done.stdout.find("{\n")
    document, _ = json.JSONDecoder().raw_decode(done.stdout[max(start, 0) :])
    result: dict[str, object] = document["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return result
