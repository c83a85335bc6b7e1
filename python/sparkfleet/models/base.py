"""The base of every boundary type: strict, frozen pydantic models, and the units they share."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

GIB = 1024**3


def cdiv(a: int, b: int) -> int:
    """a / b rounded up, as vLLM's cdiv: the blocks, pages and groups that hold `a` of something."""
    return -(-a // b)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# Addresses that mean "every interface": loopback reaches them from the same host.
WILDCARDS = ("0.0.0.0", "::")
