"""What a built vLLM release implements, as the release itself says (sparkfleet/release/record_reader.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from .base import Strict


class ReleaseRecord(Strict):
    """A release's own record: the version it reports, its model registry, every option of its serve parser with its
    choices, and its attention backends. Read from the built tree by the release's own Python, so a fork or a nightly
    is planned against what it implements, not against the stock release of its version."""

    vllm_version: Annotated[str, Field(min_length=1, max_length=80)]
    architectures: tuple[str, ...]
    # Each long option of `vllm serve` and its choices; None where it takes any value or is a switch.
    flags: dict[str, tuple[str, ...] | None]
    attention_backends: tuple[str, ...] = ()
    # config/cache.py CacheDType: what --kv-cache-dtype takes (0.33's parser lists no choices for it).
    kv_cache_dtypes: tuple[str, ...] = ()
    # Where the record was read: a release's Python or a record file.
    source: str = ""

    def choices(self, flag: str) -> tuple[str, ...] | None:
        """What the build takes for a flag: its parser's choices, else what its config takes (--kv-cache-dtype)."""
        listed = self.flags.get(flag)
        if listed is None and flag == "--kv-cache-dtype" and self.kv_cache_dtypes:
            return self.kv_cache_dtypes
        return listed
