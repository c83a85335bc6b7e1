"""What the planner reads of a host."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from pydantic import Field, field_validator

from ..versions import CAPABILITIES
from .base import GIB, Strict


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
    unified_memory: bool = True
    vllm_version: str | None = None
    # Capabilities the release declares beyond its base version (a fork); versions.CAPABILITIES.
    vllm_capabilities: tuple[str, ...] = ()
    # FlashInfer's kernels prebuilt in the release for its exact version (release.prebuilt_kernels); None: the
    # first start compiles them.
    flashinfer_kernels: str | None = None

    @field_validator("vllm_capabilities")
    @classmethod
    def _known_capabilities(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return known_capabilities(value)

    @property
    def mem_total_gib(self) -> float:
        return self.mem_total_bytes / GIB
