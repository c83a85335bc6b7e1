"""What clients of an instance should ask for: the output-token budget a reasoning model needs per request.

A reasoning model writes its trace before its answer, and the trace spends the request's max_tokens: a low cap
ends the request mid-thought with no content (seed 004: content null) and breaks tool-call parsing (seed 002
§7.3.1, the most common "tool calling doesn't work" cause on Nemotron-3-Nano).
"""

from __future__ import annotations

import dataclasses

from ..models import ModelProfile
from ..sources import SEED_SM121


@dataclasses.dataclass(frozen=True)
class TokenBudget:
    max_tokens: int
    reason: str
    source: str


# Seed 004: at least 512 for any reasoning model, 1024 or more for tool calling or complex prompts.
REASONING_MIN = 512
TOOL_CALLING_MIN = 1024


def token_budget(profile: ModelProfile) -> TokenBudget | None:
    """The smallest max_tokens a request should give this model, or None for a model that answers at once."""
    if profile.reasoning_max_tokens is not None:
        return TokenBudget(
            profile.reasoning_max_tokens,
            "its reasoning trace comes before the answer and spends the request's max_tokens: a lower cap truncates "
            "it mid-thought, which returns empty content and breaks tool-call parsing",
            profile.sources["reasoning_max_tokens"],
        )
    if profile.reasoning_parser is None:
        return None
    tools = profile.tool_call_parser is not None
    return TokenBudget(
        TOOL_CALLING_MIN if tools else REASONING_MIN,
        "a reasoning model's trace spends max_tokens before any content"
        + (", and a tool call comes after it" if tools else "")
        + ": a lower cap returns content null",
        f"{SEED_SM121}: max_tokens at least 512 for reasoning models, 1024 or higher for tool calling",
    )
