"""What a built vLLM release implements, as the release itself says (sparkfleet/release/record_reader.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from ..versions import VllmVersion
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


# A side release's name (vllm_install_releases[].name, an instance's release): it names a directory and a label.
RELEASE_NAME_PATTERN = r"^[a-z0-9][a-z0-9.-]{0,39}$"


class SideRelease(Strict):
    """A release installed beside the host's main one (vllm_install_releases): what an instance that names it, or
    that the main release cannot load, is planned against and runs from."""

    name: Annotated[str, Field(pattern=RELEASE_NAME_PATTERN)]
    vllm_version: Annotated[str, Field(min_length=1, max_length=80)]
    # The release id and its directory on the host, once locked (None while only planned).
    id: str | None = None
    path: str | None = None
    capabilities: tuple[str, ...] = ()
    prebuilt_kernels: str | None = None
    record: ReleaseRecord | None = None

    @model_validator(mode="after")
    def _version_of_the_record(self) -> SideRelease:
        """Its record names the version it was built as: the release is that one (as for the main release)."""
        if self.record is not None and VllmVersion.parse(self.record.vllm_version) != VllmVersion.parse(self.vllm_version):
            raise ValueError(
                f"vllm_version {self.vllm_version} is not the release record's own version {self.record.vllm_version}"
            )
        return self


class ReleaseChoice(Strict):
    """The release an instance runs from and why: None name is the host's main release (`current`)."""

    name: str | None = None
    id: str | None = None
    path: str | None = None
    vllm_version: str
    why: str
