"""What every rule reads (Settings) and writes (Entry), and how an entry is made."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...models import (
    ClusterBackend,
    HostFacts,
    Intent,
    ModelProfile,
    NodePlacement,
    Platform,
)
from ...versions import VllmVersion
from ..choices import Resolved
from ..loading import LoadChoice
from ..remotecode import CodeVerdict

DEFAULT_PTXAS = "/usr/local/cuda/bin/ptxas"


@dataclass(frozen=True)
class Entry:
    kind: str  # "arg" or "env"
    name: str
    values: tuple[str, ...]
    reason: str
    source: str

    @property
    def item(self) -> str:
        if self.kind == "env":
            return f"{self.name}={self.values[0]}"
        return " ".join((self.name, *self.values))


@dataclass(frozen=True)
class Settings:
    """Everything the planner resolved before rules run: the intent resolved against the host and the model
    (`resolved`, held once) and what sizing and consent decided; the resolved values read through it."""

    host: HostFacts
    profile: ModelProfile
    intent: Intent
    resolved: Resolved
    model_ref: str
    # Where the model's files are on the host (staged, or where model_stage will put them); None when unknown.
    model_dir: str | None
    # The KV pool's bytes (None where the intent sets gpu_memory_utilization and vLLM sizes it) and the utilization.
    kv_cache_memory_bytes: int | None
    gpu_memory_utilization: float
    load: LoadChoice
    # Parallel kernel compiles the first start may run (FlashInfer's MAX_JOBS); 0 where none are planned.
    jit_jobs: int
    # How a multi-node instance's ranks meet (None on one node) and where this rank runs (native only).
    cluster_backend: ClusterBackend | None = None
    placement: NodePlacement | None = None
    # Why vLLM runs the repository's code (consented and needed); None: --trust-remote-code stays out.
    remote_code: CodeVerdict | None = None

    @property
    def served_name(self) -> str:
        return self.intent.served_name or self.profile.id

    @property
    def version(self) -> VllmVersion:
        return self.resolved.version

    @property
    def max_model_len(self) -> int:
        return self.resolved.max_model_len

    @property
    def max_num_seqs(self) -> int:
        return self.resolved.max_num_seqs

    @property
    def max_num_batched_tokens(self) -> int:
        return self.resolved.max_num_batched_tokens

    @property
    def kv_cache_dtype(self) -> str:
        """auto or fp8."""
        return self.resolved.kv_cache_dtype

    @property
    def speculative_tokens(self) -> int:
        return self.resolved.speculative_tokens

    @property
    def capture_sizes(self) -> tuple[int, ...]:
        return self.resolved.capture_sizes

    @property
    def enforce_eager(self) -> bool:
        return self.resolved.enforce_eager

    @property
    def prefix_caching(self) -> bool:
        return self.resolved.prefix_caching

    @property
    def yarn(self) -> bool:
        return self.resolved.yarn

    @property
    def long_context(self) -> bool:
        return self.resolved.long_context


def arg(name: str, *values: str | int | float, reason: str, source: str) -> Entry:
    return Entry("arg", name, tuple(str(v) for v in values), reason, source)


def env(name: str, value: str, *, reason: str, source: str) -> Entry:
    return Entry("env", name, (value,), reason, source)


Rule = Callable[[Settings], list[Entry]]


def is_gb10(s: Settings) -> bool:
    return s.host.platform is Platform.GB10
