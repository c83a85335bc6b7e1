"""Rules for reasoning and tool parsers and the chat template defaults."""

from __future__ import annotations

import json

from ...models import (
    Intent,
    ModelProfile,
)
from ...sources import SEED_GUIDE
from ...versions import has_flag
from .base import Entry, Settings, arg


def parsers(s: Settings) -> list[Entry]:
    out: list[Entry] = []
    if s.profile.reasoning_parser_plugin:
        out.append(
            arg(
                "--reasoning-parser-plugin",
                s.profile.reasoning_parser_plugin,
                reason="the model's reasoning parser ships with the checkpoint",
                source=s.profile.sources.get("reasoning_parser", SEED_GUIDE),
            )
        )
    if s.profile.reasoning_parser:
        out.append(
            arg(
                "--reasoning-parser",
                s.profile.reasoning_parser,
                reason="splits the <think> block into reasoning_content",
                source=s.profile.sources.get("reasoning_parser", SEED_GUIDE),
            )
        )
    if s.profile.tool_call_parser:
        out.append(
            arg(
                "--enable-auto-tool-choice",
                reason="agents send tool_choice=auto; without it every tool request is HTTP 400",
                source=f"{SEED_GUIDE} §7.1.1",
            )
        )
        out.append(
            arg(
                "--tool-call-parser",
                s.profile.tool_call_parser,
                reason="parser must match the model family's tool-call format",
                source=s.profile.sources.get("tool_call_parser", SEED_GUIDE),
            )
        )
    return out


def template_kwargs(profile: ModelProfile, intent: Intent) -> dict[str, bool | int | float | str]:
    """The chat template settings every request gets: the profile's, then the intent's over them."""
    return {**profile.chat_template_kwargs, **(intent.chat_template_kwargs or {})}


def chat_template_defaults(s: Settings) -> list[Entry]:
    kwargs = template_kwargs(s.profile, s.intent)
    if not kwargs or not has_flag(s.version, "--default-chat-template-kwargs"):
        return []
    return [
        arg(
            "--default-chat-template-kwargs",
            json.dumps(kwargs, sort_keys=True, separators=(",", ":")),
            reason="every client that sends no chat_template_kwargs gets what the readiness check was judged with "
            "(a request's own still wins)",
            source=f"{SEED_GUIDE} §7.2.2 (server-wide --default-chat-template-kwargs); intent.chat_template_kwargs",
        )
    ]


def chat_template_file(s: Settings) -> list[Entry]:
    if not s.intent.chat_template:
        return []
    fix = s.profile.chat_template_fix
    return [
        arg(
            "--chat-template",
            s.intent.chat_template,
            reason=f"replaces the model's own chat template: {fix}" if fix else "replaces the model's own chat template",
            source=s.profile.sources.get("chat_template_fix", "intent.chat_template"),
        )
    ]
