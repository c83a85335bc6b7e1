"""What the planner returns: the serve plan, its flags, environment and memory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from .base import Strict
from .host import Platform
from .intent import LoadStrategy
from .layout import ClusterBackend
from .release import ReleaseChoice
from .speed import SpeedPrediction


class Reason(Strict):
    item: str
    reason: str
    source: str


class MemoryBreakdown(Strict):
    """GiB per component of one rank's footprint; host_reserve and headroom are the rest of the box."""

    total: float
    weights: float
    runtime: float
    activation: float
    cudagraph: float
    extra: float
    drafter: float
    kv: float
    process_baseline: float
    host_reserve: float
    headroom: float
    # Held beside the weights while the checkpoint loads (before the KV cache exists); see sparkfleet.planning.loading.
    load_transient: float = 0.0
    # Kernel compiles the first start may run beside the footprint (MAX_JOBS x the seed's per-process figure).
    first_start_compile: float = 0.0
    # A multimodal encoder's profiled batch beyond the activation peak, with its embeddings (sparkfleet.planning.encoder).
    encoder: float = 0.0


class SystemdLimits(Strict):
    memory_max: str
    memory_swap_max: str = "0"


class AnswerCheck(Strict):
    """The first request an instance gets and the one it is judged by (sparkfleet.planning.answers)."""

    path: str = "/v1/chat/completions"
    body: dict[str, object]
    # Text the reply must contain; None: only the garbage detectors judge it (base and pooling models).
    expect: str | None
    reason: str


class Flag(Strict):
    """One vLLM argument of the plan (no values: a switch), with why it is there and where that comes from."""

    name: str
    values: list[str] = Field(default_factory=list)
    reason: str
    source: str


class EnvVar(Strict):
    """One environment variable of the plan, with why it is set and where that comes from."""

    name: str
    value: str
    reason: str
    source: str


def command_line(model: str, flags: list[Flag]) -> list[str]:
    """`vllm serve` with the plan's flags, in order: the one place argv is made."""
    return ["vllm", "serve", model, *(word for flag in flags for word in (flag.name, *flag.values))]


def planned_flag(plan: Mapping[str, Any], name: str) -> list[str] | None:
    """One flag's values in a plan read as JSON ([] for a switch), or None when the plan leaves it to vLLM."""
    return next((list(f.get("values", [])) for f in plan.get("flags", []) if f.get("name") == name), None)


class ServePlan(Strict):
    model: str
    served_name: str
    platform: Platform
    vllm_version: str
    # The vLLM arguments the plan chose, each with its reason; argv is made from them (command_line).
    flags: list[Flag] = Field(default_factory=list)
    argv: list[str]
    # generate (chat and completions) or pooling (embeddings): which paths the instance serves.
    runner: Literal["generate", "pooling"] = "generate"
    # The environment the plan sets, each with its reason; env is made from it.
    environment: list[EnvVar] = Field(default_factory=list)
    env: dict[str, str]
    secret_env: list[str]
    gpu_memory_utilization: float
    kv_cache_memory_bytes: int
    kv_tokens: int
    max_concurrency_at_context: float
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_dtype: str
    block_size: int
    cudagraph_capture_sizes: list[int]
    enforce_eager: bool
    memory: MemoryBreakdown
    required_available_bytes: int
    systemd: SystemdLimits
    answer_check: AnswerCheck
    warnings: list[str]
    reasons: list[Reason]
    mode: Literal["planned", "predicted"] = "planned"
    load_strategy: LoadStrategy = LoadStrategy.MMAP
    # Sparks the model spans (one GPU each); above 1, how its ranks meet (native or ray) and this node's rank.
    nodes: int = 1
    cluster_backend: ClusterBackend | None = None
    node_rank: int = 0
    # A rank above 0 of a native multi-node instance: no API server here, rank 0 on the head serves it.
    headless: bool = False
    # The largest request body the front door forwards to it (sparkfleet.planning.requestsize).
    max_request_mib: int = 32
    # Seconds a start may take (sparkfleet.planning.memguard.start_budget_s); 0 in a plan written before it was planned.
    start_budget_s: int = 0
    # The max_tokens each request should give at least (a reasoning model's trace spends it first); None: no floor.
    min_max_tokens: int | None = None
    # Its speed on its Sparks (sparkfleet.planning.speedplan); None off GB10, in a layout not one GPU a Spark, or
    # without what a step reads (the plan's warnings say which).
    speed: SpeedPrediction | None = None
    # The release beside the host's main one that it runs from, and why (None: the main release, `current`).
    release: ReleaseChoice | None = None

    @model_validator(mode="after")
    def _argv_is_made_from_the_flags(self) -> ServePlan:
        # A plan written before flags were recorded has none: its argv stands as it was.
        if self.flags and self.argv != command_line(self.model, self.flags):
            raise ValueError("argv is made from the flags (command_line); the two disagree")
        if self.environment and self.env != {e.name: e.value for e in self.environment}:
            raise ValueError("env is made from the environment; the two disagree")
        return self

    def flag(self, name: str) -> list[str] | None:
        """One planned flag's values ([] for a switch), or None when the plan leaves it to vLLM."""
        return next((list(f.values) for f in self.flags if f.name == name), None)
