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
    """Everything the planner resolved before rules run."""

    host: HostFacts
    profile: ModelProfile
    intent: Intent
    version: VllmVersion
    model_ref: str
    # Where the model's files are on the host (staged, or where model_stage will put them); None when unknown.
    model_dir: str | None
    served_name: str
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_dtype: str  # "auto" or "fp8"
    speculative_tokens: int
    capture_sizes: tuple[int, ...]
    enforce_eager: bool
    prefix_caching: bool
    kv_cache_memory_bytes: int | None
    gpu_memory_utilization: float
    yarn: bool
    long_context: bool
    load: LoadChoice
    # Parallel kernel compiles the first start may run (FlashInfer's MAX_JOBS); 0 where none are planned.
    jit_jobs: int
    # How a multi-node instance's ranks meet (None on one node) and where this rank runs (native only).
    cluster_backend: ClusterBackend | None = None
    placement: NodePlacement | None = None
    # Why vLLM runs the repository's code (consented and needed); None: --trust-remote-code stays out.
    remote_code: CodeVerdict | None = None


def arg(name: str, *values: str | int | float, reason: str, source: str) -> Entry:
    return Entry("arg", name, tuple(str(v) for v in values), reason, source)


def env(name: str, value: str, *, reason: str, source: str) -> Entry:
    return Entry("env", name, (value,), reason, source)


Rule = Callable[[Settings], list[Entry]]


def is_gb10(s: Settings) -> bool:
    return s.host.platform is Platform.GB10
