"""The planner's boundary types: what it reads (host facts, model profile, intent) and what it returns."""

from __future__ import annotations

from .base import GIB, WILDCARDS, Strict
from .host import HostFacts, Platform, known_capabilities
from .intent import (
    ClusterBackend,
    Intent,
    KnownAnswer,
    KvDtype,
    LoadStrategy,
    NodePlacement,
    ServeProfile,
    SpeculativeMethod,
)
from .plan import AnswerCheck, EnvVar, Flag, MemoryBreakdown, Reason, ServePlan, SystemdLimits, command_line, planned_flag
from .profile import (
    COMPRESS_RATIOS,
    AttentionShape,
    CheckpointFormat,
    CompressedMlaShape,
    MlaShape,
    ModelProfile,
    ProfileArg,
    ProfileEnv,
    SpeculativeSupport,
    StateLayerKind,
    StateLayers,
    TemplateKwargs,
    check_template_kwargs,
)

__all__ = [
    "COMPRESS_RATIOS",
    "GIB",
    "WILDCARDS",
    "AnswerCheck",
    "AttentionShape",
    "CheckpointFormat",
    "ClusterBackend",
    "CompressedMlaShape",
    "EnvVar",
    "Flag",
    "HostFacts",
    "Intent",
    "KnownAnswer",
    "KvDtype",
    "LoadStrategy",
    "MemoryBreakdown",
    "MlaShape",
    "ModelProfile",
    "NodePlacement",
    "Platform",
    "ProfileArg",
    "ProfileEnv",
    "Reason",
    "ServePlan",
    "ServeProfile",
    "SpeculativeMethod",
    "SpeculativeSupport",
    "StateLayerKind",
    "StateLayers",
    "Strict",
    "SystemdLimits",
    "TemplateKwargs",
    "check_template_kwargs",
    "command_line",
    "known_capabilities",
    "planned_flag",
]
