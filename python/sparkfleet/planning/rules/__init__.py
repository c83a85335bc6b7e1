"""Flag and environment rules: each turns resolved settings into argv / env entries with a reason.

Rules hold no memory arithmetic (that is memory.py and the kv package) and no version numbers of their own
(those are versions.py). A rule that does not apply returns nothing.
"""

from __future__ import annotations

from .base import DEFAULT_PTXAS, Entry, Rule, Settings, arg, env, is_gb10
from .chat import chat_template_defaults, chat_template_file, parsers, template_kwargs
from .kernels import caching, graphs, kernels
from .platform import internal_channels, platform_env
from .serving import (
    NATIVE_SOURCE,
    context_and_batching,
    memory_flags,
    model_loading,
    parallelism,
    served_identity,
)
from .speculation import load_strategy, long_context, speculative

RULES: tuple[Rule, ...] = (
    served_identity,
    model_loading,
    load_strategy,
    context_and_batching,
    memory_flags,
    parallelism,
    kernels,
    graphs,
    caching,
    parsers,
    chat_template_defaults,
    chat_template_file,
    speculative,
    long_context,
    platform_env,
    internal_channels,
)


def apply(settings: Settings) -> list[Entry]:
    entries: list[Entry] = []
    for rule in RULES:
        entries.extend(rule(settings))
    return entries


__all__ = [
    "DEFAULT_PTXAS",
    "NATIVE_SOURCE",
    "RULES",
    "Entry",
    "Rule",
    "Settings",
    "apply",
    "arg",
    "caching",
    "chat_template_defaults",
    "chat_template_file",
    "context_and_batching",
    "env",
    "graphs",
    "internal_channels",
    "is_gb10",
    "kernels",
    "load_strategy",
    "long_context",
    "memory_flags",
    "model_loading",
    "parallelism",
    "parsers",
    "platform_env",
    "served_identity",
    "speculative",
    "template_kwargs",
]
