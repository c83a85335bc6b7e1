"""What the planner reads of a host."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from ..versions import CAPABILITIES, VllmVersion
from .base import GIB, Strict
from .release import ReleaseRecord


class Platform(str, Enum):
    GB10 = "gb10"
    CPU = "cpu"


def known_capabilities(value: tuple[str, ...]) -> tuple[str, ...]:
    unknown = sorted(set(value) - CAPABILITIES.keys())
    if unknown:
        known = ", ".join(sorted(CAPABILITIES))
        raise ValueError(f"{', '.join(unknown)}: not a capability sparkfleet plans for (known: {known})")
    return value


class HostFacts(Strict):
    platform: Platform
    arch: str = "aarch64"
    gpu_name: str | None = None
    compute_capability: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    ptxas_path: str | None = None
    mem_total_bytes: Annotated[int, Field(gt=0)]
    mem_available_bytes: Annotated[int, Field(ge=0)] | None = None
    # GB10: CUDA's own figures (cuMemGetInfo after dropping the page cache), what vLLM's start check reads; the
    # ceiling is the most CUDA reported free with no sparkfleet instance running (host_facts' cuda_ceiling_file).
    cuda_free_bytes: Annotated[int, Field(ge=0)] | None = None
    cuda_total_bytes: Annotated[int, Field(gt=0)] | None = None
    cuda_ceiling_bytes: Annotated[int, Field(ge=0)] | None = None
    # An x86 CPU with AMX tiles: vLLM's CPU platform then runs its AMX MLA kernel on 128-token blocks.
    cpu_amx_tile: bool = False
    # The sparkfleet vLLM units active or starting when CUDA was read (their memory is in use in cuda_free_bytes).
    running_instances: tuple[str, ...] | None = None
    unified_memory: bool = True
    vllm_version: str | None = None
    # Capabilities the release declares beyond its base version (a fork); versions.CAPABILITIES.
    vllm_capabilities: tuple[str, ...] = ()
    # FlashInfer's kernels prebuilt in the release for its exact version (release.prebuilt_kernels); None: the
    # first start compiles them.
    flashinfer_kernels: str | None = None
    # What the release's own build implements (its registry, its parser's options): planned against where read.
    release_record: ReleaseRecord | None = None

    @model_validator(mode="before")
    @classmethod
    def _version_of_the_record(cls, data: object) -> object:
        """A record names the version it was built as: the host's vLLM is that one, and no other."""
        if not isinstance(data, dict) or data.get("release_record") is None:
            return data
        record = data["release_record"]
        built = record.vllm_version if isinstance(record, ReleaseRecord) else str(record.get("vllm_version", ""))
        named = data.get("vllm_version")
        if named is not None and VllmVersion.parse(str(named)) != VllmVersion.parse(built):
            raise ValueError(f"vllm_version {named} is not the release record's own version {built}")
        return data | {"vllm_version": named if named is not None else str(VllmVersion.parse(built))}

    @field_validator("vllm_capabilities")
    @classmethod
    def _known_capabilities(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return known_capabilities(value)

    @property
    def mem_total_gib(self) -> float:
        return self.mem_total_bytes / GIB
