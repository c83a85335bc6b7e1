"""Read what each vLLM release implements from its released wheel: the registry behind remote-code decisions.

For every sampled release this reads, through HTTP ranges of the aarch64 wheel on PyPI (no download):
- `vllm/model_executor/models/registry.py`: the architectures vLLM implements, the ones it dropped
  (`_PREVIOUSLY_SUPPORTED_MODELS`, with the last release that served them) and the ones moved to plugins;
- `vllm/transformers_utils/config.py`: the model types vLLM reads with config classes of its own
  (`_CONFIG_REGISTRY`);
- the wheel's METADATA: the transformers requirement. The newest transformers that satisfies it (what a
  lock resolves) is read the same way: the model types its `CONFIG_MAPPING_NAMES` knows.

It writes python/sparkfleet/vllm_registry.json, a history (first release seen, first release without)
per name, so the planner asks "does vLLM X read this config without the repository's code?" the way
rules ask versions.has_flag. Run it when a vLLM release joins versions.SUPPORTED_MAX:

    uv run python scripts/read_vllm_registry.py 0.17.0 0.18.0 ... 0.33.0
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import sys
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "index"))
from wheel_metadata import RangeFile, wheel_url  # noqa: E402

OUTPUT = ROOT / "python" / "sparkfleet" / "vllm_registry.json"
REGISTRY = "vllm/model_executor/models/registry.py"
CONFIG = "vllm/transformers_utils/config.py"
TRANSFORMERS_AUTO = "transformers/models/auto/configuration_auto.py"
TRANSFORMERS_MAPPINGS = "transformers/models/auto/auto_mappings.py"


def _open_wheel(name: str, version: str, tag: str) -> zipfile.ZipFile:
    return zipfile.ZipFile(io.BufferedReader(RangeFile(wheel_url(name, version, tag)), 1 << 20))


def _dict_keys(node: ast.AST) -> list[str]:
    """String keys of a mapping literal: {...}, LazyConfigDict(a="A", **{"b-c": "B"}), dict(...),
    OrderedDict([(k, v), ...]) or OrderedDict(**{...}, **other)."""
    if isinstance(node, ast.Dict):
        return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    if isinstance(node, ast.List | ast.Tuple):
        return [e.elts[0].value for e in node.elts if isinstance(e, ast.Tuple) and isinstance(e.elts[0], ast.Constant)]
    if isinstance(node, ast.Call):
        keys = [kw.arg for kw in node.keywords if kw.arg]
        for kw in node.keywords:
            if kw.arg is None:
                keys += _dict_keys(kw.value)
        for arg in node.args:
            keys += _dict_keys(arg)
        return keys
    return []


def _assignments(source: str) -> dict[str, ast.AST]:
    found: dict[str, ast.AST] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found[node.target.id] = node.value
    return found


def read_vllm(version: str) -> dict[str, Any]:
    with _open_wheel("vllm", version, "aarch64") as wheel:
        names = wheel.namelist()
        registry = _assignments(wheel.read(REGISTRY).decode())
        config = _assignments(wheel.read(CONFIG).decode())
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        version_file = next((n for n in names if n == "vllm/_version.py"), None)
        commit = ""
        if version_file:
            match = re.search(r"commit_id[^=]*=\s*['\"]([0-9a-f]+)", wheel.read(version_file).decode())
            commit = match.group(1)[:9] if match else ""
    architectures: set[str] = set()
    for name, value in registry.items():
        if name.endswith("_MODELS") and name not in ("_PREVIOUSLY_SUPPORTED_MODELS", "_OOT_SUPPORTED_MODELS"):
            architectures.update(_dict_keys(value))
    previously = registry.get("_PREVIOUSLY_SUPPORTED_MODELS")
    dropped = ast.literal_eval(previously) if isinstance(previously, ast.Dict) else {}
    oot = _dict_keys(registry["_OOT_SUPPORTED_MODELS"]) if "_OOT_SUPPORTED_MODELS" in registry else []
    requirement = next(
        line.split(":", 1)[1].strip()
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:")
        and re.match(r"Requires-Dist:\s*transformers\b", line)
        and "extra ==" not in line
    )
    return {
        "commit": commit,
        "architectures": sorted(architectures - set(oot)),
        "dropped": dropped,
        "plugins": sorted(oot),
        "config_registry": sorted(_dict_keys(config["_CONFIG_REGISTRY"])),
        "transformers_requirement": requirement,
    }


def newest_transformers(requirement: str) -> str:
    spec_text = re.sub(r"^transformers\s*", "", requirement.split(";", maxsplit=1)[0]).strip().strip("()")
    spec = SpecifierSet(spec_text)
    request = urllib.request.Request(
        "https://pypi.org/simple/transformers/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        versions = json.load(response)["versions"]
    allowed = [Version(v) for v in versions if not Version(v).is_prerelease and Version(v) in spec]
    return str(max(allowed))


def _config_mapping_names(source: str) -> set[str]:
    """Every key given to CONFIG_MAPPING_NAMES in a module: its assignments and its .update() calls."""
    keys: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "CONFIG_MAPPING_NAMES" for t in node.targets
        ):
            keys.update(_dict_keys(node.value))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "update"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "CONFIG_MAPPING_NAMES"
        ):
            keys.update(_dict_keys(node))
    return keys


def read_transformers(version: str) -> list[str]:
    """The model types transformers' AutoConfig knows (4.x: configuration_auto.py; 5.x: also auto_mappings.py)."""
    with _open_wheel("transformers", version, "py3-none-any") as wheel:
        names = set(wheel.namelist())
        keys = _config_mapping_names(wheel.read(TRANSFORMERS_AUTO).decode())
        if TRANSFORMERS_MAPPINGS in names:
            keys |= _config_mapping_names(wheel.read(TRANSFORMERS_MAPPINGS).decode())
    return sorted(keys)


def history(sampled: list[str], present: dict[str, set[str]]) -> dict[str, list[str | None]]:
    """name -> [first release seen, first later release without it (or None)], over the sampled releases."""
    names = set().union(*present.values())
    result: dict[str, list[str | None]] = {}
    for name in sorted(names):
        seen = [v for v in sampled if name in present[v]]
        first = seen[0]
        gone = next((v for v in sampled[sampled.index(first) :] if name not in present[v]), None)
        result[name] = [first, gone]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="+")
    args = parser.parse_args()
    sampled = sorted(args.versions, key=Version)
    releases: dict[str, dict[str, Any]] = {}
    arch: dict[str, set[str]] = {}
    native: dict[str, set[str]] = {}
    transformers_types: dict[str, list[str]] = {}
    dropped: dict[str, str] = {}
    plugins: set[str] = set()
    for version in sampled:
        facts = read_vllm(version)
        transformers = newest_transformers(facts["transformers_requirement"])
        if transformers not in transformers_types:
            transformers_types[transformers] = read_transformers(transformers)
        releases[version] = {
            "commit": facts["commit"],
            "transformers": transformers,
            "transformers_requirement": facts["transformers_requirement"],
        }
        arch[version] = set(facts["architectures"])
        native[version] = set(facts["config_registry"]) | set(transformers_types[transformers])
        dropped.update(facts["dropped"])
        plugins.update(facts["plugins"])
        print(
            f"vllm {version}: {len(arch[version])} architectures, {len(facts['config_registry'])} own configs, "
            f"transformers {transformers} ({len(transformers_types[transformers])} model types)",
            file=sys.stderr,
        )
    document = {
        "about": "Read from vLLM's released aarch64 wheels on PyPI by scripts/read_vllm_registry.py; do not edit.",
        "releases": releases,
        "architectures": history(sampled, arch),
        "native_config_types": history(sampled, native),
        "dropped": dict(sorted(dropped.items())),
        "plugins": sorted(plugins),
    }
    OUTPUT.write_text(json.dumps(document, indent=0, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
