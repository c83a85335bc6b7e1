"""What a built vLLM release implements, as the release itself says: run by that release's own Python.

Standalone on purpose (the standard library and the release's vllm, never sparkfleet): it runs inside a release's venv,
a stock wheel, a fork's build or a nightly alike, and prints one JSON object, which sparkfleet.release.record reads:
- the version the build reports;
- its model registry (ModelRegistry, after the general plugins load, as `vllm serve` loads them);
- every option of its serve parser with its choices (--kv-cache-dtype and --moe-backend among them);
- the attention backends it registers (the names --attention-backend takes) and the KV cache dtypes it takes.

Usage: RELEASE/bin/python record_reader.py; a release's smoke step runs release_record() in its own interpreter and
writes the record beside the release's lock (sparkfleet.recipes.steps).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def serve_parser() -> argparse.ArgumentParser:
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    try:  # vLLM 0.33 moved the serve CLI's arguments to entrypoints/common
        from vllm.entrypoints.common.cli_args import make_arg_parser
    except ImportError:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
    parser: argparse.ArgumentParser = make_arg_parser(FlexibleArgumentParser())
    return parser


def options(parser: argparse.ArgumentParser) -> dict[str, list[str] | None]:
    """Each long option the parser accepts and its choices (None: any value, or a switch). Read from the parser's own
    table of option strings: 0.33 hides --no-enable-x from an action's option strings but still accepts it."""
    found: dict[str, list[str] | None] = {}
    for name, action in parser._option_string_actions.items():
        if name.startswith("--"):
            found[name] = sorted(str(c) for c in action.choices) if action.choices is not None else None
    return dict(sorted(found.items()))


def attention_backends() -> list[str]:
    """The attention backends the build registers (--attention-backend takes these names)."""
    try:
        from vllm.v1.attention.backends.registry import AttentionBackendEnum
    except ImportError:  # a build without the registry names none
        return []
    return sorted(member.name for member in AttentionBackendEnum)


def kv_cache_dtypes() -> list[str]:
    """The KV cache dtypes the build's CacheConfig takes (config/cache.py CacheDType): 0.33's parser no longer lists
    them as choices of --kv-cache-dtype."""
    import typing

    from vllm.config import cache

    return sorted(str(value) for value in typing.get_args(cache.CacheDType))


def release_record() -> dict[str, object]:
    """The record, read in this interpreter (the release's own)."""
    from vllm.model_executor.models import ModelRegistry
    from vllm.plugins import load_general_plugins

    import vllm

    load_general_plugins()
    return {
        "vllm_version": vllm.__version__,
        "architectures": sorted(ModelRegistry.get_supported_archs()),
        "flags": options(serve_parser()),
        "attention_backends": attention_backends(),
        "kv_cache_dtypes": kv_cache_dtypes(),
    }


def main() -> int:
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    json.dump(release_record(), sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
