"""The planner's boundary types: what it reads (host facts, model profile, intent) and what it returns."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from enum import Enum
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .versions import CAPABILITIES, VllmVersion

GIB = 1024**3


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# Addresses that mean "every interface": loopback reaches them from the same host.
WILDCARDS = ("0.0.0.0", "::")


# --------------------------------------------------------------------------- host


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


# --------------------------------------------------------------------------- model profile


class CheckpointFormat(str, Enum):
    MODELOPT_NVFP4 = "modelopt-nvfp4"
    CT_NVFP4 = "compressed-tensors-nvfp4"
    FP8 = "fp8"
    MXFP4 = "mxfp4"
    AWQ_INT4 = "awq-int4"
    GPTQ_INT4 = "gptq-int4"
    BF16 = "bf16"

    @property
    def is_fp4(self) -> bool:
        return self in {CheckpointFormat.MODELOPT_NVFP4, CheckpointFormat.CT_NVFP4, CheckpointFormat.MXFP4}


class AttentionShape(Strict):
    """KV heads and head size of one kind of attention layer."""

    kv_heads: Annotated[int, Field(gt=0)]
    head_dim: Annotated[int, Field(gt=0)]


class MlaShape(Strict):
    kv_lora_rank: Annotated[int, Field(gt=0)]
    qk_rope_head_dim: Annotated[int, Field(gt=0)]


class StateLayerKind(str, Enum):
    MAMBA2 = "mamba2"
    GATED_DELTANET = "gated-deltanet"


class StateLayers(Strict):
    """Layers whose cache is a per-sequence state, constant in sequence length (vllm-semantics §2.5)."""

    kind: StateLayerKind
    count: Annotated[int, Field(gt=0)]
    conv_dim: Annotated[int, Field(gt=0)]
    conv_kernel: Annotated[int, Field(gt=1)]
    state_shape: tuple[int, int, int]
    state_dtype_bytes: Literal[2, 4] = 4
    conv_dtype_bytes: Literal[2, 4] = 2


class SpeculativeSupport(Strict):
    mtp: bool = False
    mtp_layers: int = 0
    mtp_default_tokens: int = 3
    # A draft shipped inside the model's own directory (such as 'assistant'): vLLM is given its absolute path.
    mtp_draft_subdir: str | None = None
    mtp_draft_weights_gib: Annotated[float, Field(ge=0)] = 0.0
    mtp_requires_fp8_kv: bool = False
    dflash_drafter: str | None = None
    dflash_drafter_weights_gib: float = 0.0
    dflash_default_tokens: int = 15

    @field_validator("mtp_draft_subdir")
    @classmethod
    def _inside_the_model(cls, value: str | None) -> str | None:
        path = PurePosixPath(value or ".")
        if value is not None and (path.is_absolute() or ".." in path.parts or not path.parts):
            raise ValueError(f"mtp_draft_subdir {value!r}: a directory inside the model's own, such as 'assistant'")
        return value


class Patch(Strict):
    name: str
    description: str
    target: str
    source: str


class ProfileEnv(Strict):
    name: str
    value: str
    reason: str
    source: str


class ProfileArg(Strict):
    flag: str
    value: str | None = None
    reason: str
    source: str


# One line of printable text: it travels in a JSON request body, never to a shell or a unit file.
_ONE_LINE = re.compile(r"[^\x00-\x1f\x7f-\x9f\u2028\u2029]+")

# Keyword arguments for the model's chat template (chat_template_kwargs), such as enable_thinking: names
# the template reads, one-line scalar values; they reach a JSON argv word and every request's body.
_TEMPLATE_KWARG = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_NOT_TEMPLATE_KWARGS = frozenset({"chat_template", "tokenize"})
TemplateKwargs = Annotated[dict[str, bool | int | float | str], Field(max_length=16)]


def check_template_kwargs(value: dict[str, object] | None) -> dict[str, object] | None:
    for name, item in (value or {}).items():
        if not _TEMPLATE_KWARG.fullmatch(name):
            raise ValueError(f"chat_template_kwargs: {name!r} is not a template variable name (letters, digits, _)")
        if name in _NOT_TEMPLATE_KWARGS:
            # vLLM answers every request that carries one of these with an error (renderers/hf.py, 0.32).
            raise ValueError(f"chat_template_kwargs: {name!r} is not a template setting: vLLM refuses it in every request")
        if isinstance(item, str) and (len(item) > 256 or (item and not _ONE_LINE.fullmatch(item))):
            raise ValueError(f"chat_template_kwargs.{name}: one line of printable text, at most 256 characters")
    return value


class ModelProfile(Strict):
    id: str
    description: str = ""
    architecture: str
    weights_gib: Annotated[float, Field(gt=0)]
    # The largest safetensors file, when the staged files were read (what eager loading holds at once).
    largest_shard_gib: Annotated[float, Field(gt=0)] | None = None
    hidden_size: Annotated[int, Field(gt=0)]
    vocab_size: Annotated[int, Field(gt=0)]
    num_layers: Annotated[int, Field(gt=0)]
    full_attention_layers: Annotated[int, Field(ge=0)]
    sliding_attention_layers: Annotated[int, Field(ge=0)] = 0
    sliding_window: Annotated[int, Field(gt=0)] | None = None
    kv_heads: Annotated[int, Field(gt=0)]
    head_dim: Annotated[int, Field(gt=0)]
    # Full-attention layers with a shape of their own (Gemma-4's global layers); else kv_heads x head_dim.
    full_attention_shape: AttentionShape | None = None
    mla: MlaShape | None = None
    state_layers: StateLayers | None = None
    # What vLLM serves by default (sparkfleet.contextlimit: its own derivation from config.json).
    native_max_context: Annotated[int, Field(gt=0)]
    # A longer max_model_len vLLM accepts with no env (the config's own model_max_length), when there is one.
    config_max_length: Annotated[int, Field(gt=0)] | None = None
    checkpoint_format: CheckpointFormat
    dtype: Literal["bfloat16", "float16"] = "bfloat16"
    moe: bool = False
    multimodal: bool = False
    reasoning_parser: str | None = None
    # What the model card tells clients to send (e.g. a model that must think to answer well); intent overrides.
    chat_template_kwargs: TemplateKwargs = Field(default_factory=dict)

    @field_validator("chat_template_kwargs")
    @classmethod
    def _profile_template_kwargs(cls, value: dict[str, object]) -> dict[str, object]:
        return check_template_kwargs(value) or {}

    reasoning_parser_plugin: str | None = None
    tool_call_parser: str | None = None
    # config.json's model_type: with the target vLLM's registry it decides whether the repository's code is needed.
    model_type: str | None = None
    # config.json's auto_map names the repository's own classes (sparkfleet.remotecode decides if vLLM runs them).
    config_auto_map: bool = False
    # tokenizer_config.json's auto_map names the repository's own tokenizer classes.
    tokenizer_auto_map: bool = False
    # The code files the auto_maps name (what --trust-remote-code would run), when read.
    remote_code_files: tuple[str, ...] = ()
    force_attention_backend: bool = True
    kv_fp8_supported: bool = True
    kv_fp8_recommended: bool = False
    yarn_hf_overrides: str | None = None
    # How far the publisher supports the model past native_max_context (config max_position_embeddings)
    # with no rope override: vLLM only needs VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 to accept it.
    long_context_max: Annotated[int, Field(gt=0)] | None = None
    tensor_parallel_max: int | None = None
    speculative: SpeculativeSupport = SpeculativeSupport()
    min_vllm: str = "0.17.0"
    # When min_vllm stands only for capabilities (DFlash arrived in 0.21): a fork release below it
    # that declares them all can serve the model.
    min_vllm_capabilities: tuple[str, ...] = ()
    env: tuple[ProfileEnv, ...] = ()
    extra_args: tuple[ProfileArg, ...] = ()
    patches: tuple[Patch, ...] = ()
    quirks: tuple[str, ...] = ()
    extra_overhead_gib: Annotated[float, Field(ge=0)] = 0.0
    sources: dict[str, str]

    @model_validator(mode="after")
    def _every_number_has_a_source(self) -> ModelProfile:
        needed = {"weights_gib", "num_layers", "kv_heads", "head_dim", "native_max_context", "hidden_size"}
        if self.mla:
            needed.add("mla")
        if self.full_attention_shape:
            needed.add("full_attention_shape")
        if self.state_layers:
            needed.add("state_layers")
        if self.sliding_window:
            needed.add("sliding_window")
        if self.extra_overhead_gib:
            needed.add("extra_overhead_gib")
        if self.long_context_max:
            needed.add("long_context_max")
        missing = sorted(needed - self.sources.keys())
        if missing:
            raise ValueError(f"profile {self.id}: no source for {', '.join(missing)}")
        attention = self.full_attention_layers + self.sliding_attention_layers
        if attention == 0:
            raise ValueError(f"profile {self.id}: a model needs at least one attention layer")
        if self.sliding_attention_layers and not self.sliding_window:
            raise ValueError(f"profile {self.id}: sliding layers need sliding_window")
        if self.long_context_max is not None and self.long_context_max <= self.native_max_context:
            raise ValueError(
                f"profile {self.id}: long_context_max {self.long_context_max} must exceed native_max_context "
                f"{self.native_max_context}"
            )
        return self

    @field_validator("min_vllm")
    @classmethod
    def _min_vllm_is_a_version(cls, value: str) -> str:
        VllmVersion.parse(value)
        return value

    @field_validator("min_vllm_capabilities")
    @classmethod
    def _known_min_capabilities(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return known_capabilities(value)

    @property
    def min_version(self) -> VllmVersion:
        return VllmVersion.parse(self.min_vllm)

    @property
    def attention_layers(self) -> int:
        return self.full_attention_layers + self.sliding_attention_layers


# --------------------------------------------------------------------------- intent


class ServeProfile(str, Enum):
    INTERACTIVE = "interactive"
    THROUGHPUT = "throughput"
    MEMORY_SAVER = "memory-saver"


class SpeculativeMethod(str, Enum):
    NONE = "none"
    NGRAM = "ngram"
    SUFFIX = "suffix"
    MTP = "mtp"
    DFLASH = "dflash"
    # Separate drafter checkpoints; both are in vLLM's SpeculativeMethod from 0.17.0 (SUPPORTED_MIN) on,
    # read in the 0.17.0 and 0.32.0 wheels' config/speculative.py.
    EAGLE3 = "eagle3"
    DRAFT_MODEL = "draft_model"

    @property
    def takes_drafter(self) -> bool:
        """A method whose draft can come from a separate checkpoint (intent.drafter)."""
        return self in {
            SpeculativeMethod.MTP,
            SpeculativeMethod.DFLASH,
            SpeculativeMethod.EAGLE3,
            SpeculativeMethod.DRAFT_MODEL,
        }

    @property
    def needs_drafter(self) -> bool:
        """A method that has no draft without a separate checkpoint."""
        return self in {SpeculativeMethod.EAGLE3, SpeculativeMethod.DRAFT_MODEL}


class KnownAnswer(Strict):
    """A question whose answer a correct server gives; answer None for a base model (detectors only)."""

    question: Annotated[str, Field(min_length=1, max_length=500)]
    answer: Annotated[str, Field(min_length=1, max_length=100)] | None

    @field_validator("question", "answer")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None and (not _ONE_LINE.fullmatch(value) or not value.strip()):
            raise ValueError("one line of printable text, no control characters")
        return value


class LoadStrategy(str, Enum):
    """How vLLM reads the checkpoint (sparkfleet.loading): auto picks by platform, filesystem and room."""

    AUTO = "auto"
    MMAP = "mmap"
    EAGER = "eager"
    PREFETCH = "prefetch"
    FASTSAFETENSORS = "fastsafetensors"
    INSTANTTENSOR = "instanttensor"


class ClusterBackend(str, Enum):
    """How the ranks of a multi-node instance find each other: vLLM's own launch (one unit per node, the mp
    executor) or a Ray cluster; auto takes native where the release has it."""

    AUTO = "auto"
    NATIVE = "native"
    RAY = "ray"


class NodePlacement(Strict):
    """Where one rank of a native multi-node instance runs: its node rank, the head's link address (rank 0
    serves the API there) and this node's own link address. The roles read both from ray_cluster_interface."""

    rank: Annotated[int, Field(ge=0, le=63)]
    master_addr: str
    host_ip: str

    @field_validator("master_addr", "host_ip")
    @classmethod
    def _ipv4(cls, value: str) -> str:
        try:
            ipaddress.IPv4Address(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an IPv4 address (the cluster link's, ray_cluster_interface)") from None
        return value


class KvDtype(str, Enum):
    AUTO = "auto"
    FP8 = "fp8"
    BF16 = "bf16"


_SERVED_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:-]{0,127}$")
# A drafter is a hub id (ORG/NAME[@REVISION]) or an absolute directory: it reaches the unit's ExecStart
# and comments, so nothing that could end a line, start an option or climb out of a path.
_DRAFTER_HUB = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}(@[\w./-]{1,255})?", re.ASCII)
_COMMIT = re.compile(r"[0-9a-f]{40}", re.ASCII)
# A Unix socket under /run (AF_UNIX paths are at most 107 bytes).
_SOCKET_PATH = r"^/run/[a-z0-9][a-z0-9.-]{0,62}/[a-z0-9][a-z0-9.-]{0,30}\.sock$"
_DRAFTER_DIR = re.compile(r"(/[A-Za-z0-9_][A-Za-z0-9._@+-]{0,254}){1,32}", re.ASCII)


class Intent(Strict):
    max_context: Annotated[int, Field(ge=256)] | None = None
    concurrency: Annotated[int, Field(ge=1, le=1024)] = 4
    profile: ServeProfile = ServeProfile.INTERACTIVE
    kv_cache_dtype: KvDtype = KvDtype.AUTO
    speculative: SpeculativeMethod = SpeculativeMethod.NONE
    load: LoadStrategy = LoadStrategy.AUTO
    num_speculative_tokens: Annotated[int, Field(ge=1, le=32)] | None = None
    # A separate draft checkpoint (hub id or local directory) for mtp, dflash, eagle3 or draft_model.
    drafter: str | None = None
    # Its weights' size, for a drafter known only by its size (else read from its safetensors).
    drafter_weights_gib: Annotated[float, Field(gt=0)] | None = None
    served_name: str | None = None
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65535)] = 8000
    # Set by the host plan, never by a user: behind the front door a single-node instance serves on this
    # Unix socket (vLLM's --uds) instead of host:port, in a network namespace of its own.
    socket: Annotated[str, Field(pattern=_SOCKET_PATH)] | None = None
    api_key: bool = False
    allow_unauthenticated_bind: bool = False
    tensor_parallel_size: Annotated[int, Field(ge=1, le=64)] = 1
    pipeline_parallel_size: Annotated[int, Field(ge=1, le=64)] = 1
    nodes: Annotated[int, Field(ge=1, le=64)] = 1
    cluster_backend: ClusterBackend = ClusterBackend.AUTO
    # The head's torch.distributed rendezvous port of a native multi-node instance (--master-port).
    cluster_port: Annotated[int, Field(ge=1024, le=65535)] = 29500
    allow_yarn: bool = False
    allow_long_context: bool = False
    # Run the code a model repository ships, where the target vLLM needs it: true, or the commit whose code was read.
    trust_remote_code: bool | str = False
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] | None = None
    max_num_batched_tokens: Annotated[int, Field(ge=256)] | None = None
    # The largest request body the front door forwards to this instance (MiB); null sizes it to the context.
    max_request_mib: Annotated[int, Field(ge=1, le=1024)] | None = None
    # The question this instance is ready by, when the default (sparkfleet.answers) does not fit it.
    answer_check: KnownAnswer | None = None
    # Server-wide chat template settings (e.g. {enable_thinking: false}), over the profile's own.
    chat_template_kwargs: TemplateKwargs | None = None
    host_reserve_gib: Annotated[float, Field(ge=0)] | None = None

    @field_validator("trust_remote_code")
    @classmethod
    def _consent_shape(cls, value: bool | str) -> bool | str:
        if isinstance(value, str) and not _COMMIT.fullmatch(value):
            raise ValueError("trust_remote_code: true, false, or the commit (40 hexadecimal digits) whose code you read")
        return value

    @field_validator("drafter")
    @classmethod
    def _drafter_shape(cls, value: str | None) -> str | None:
        if value is None:
            return value
        climbs = any(part in (".", "..") for part in value.split("/"))
        if climbs or not (_DRAFTER_HUB.fullmatch(value) or _DRAFTER_DIR.fullmatch(value)):
            raise ValueError(
                "drafter: a hub id ORG/NAME[@REVISION] or an absolute directory (letters, digits and ._@+-, "
                "no '..'), nothing else"
            )
        return value

    @field_validator("chat_template_kwargs")
    @classmethod
    def _template_kwargs(cls, value: dict[str, object] | None) -> dict[str, object] | None:
        return check_template_kwargs(value)

    @field_validator("served_name")
    @classmethod
    def _served_name_shape(cls, value: str | None) -> str | None:
        if value is not None and not _SERVED_NAME.fullmatch(value):
            raise ValueError("served_name: letters, digits and ._/:- only, at most 128 characters")
        return value

    @field_validator("host")
    @classmethod
    def _host_is_an_address(cls, value: str) -> str:
        if value == "localhost" or value in WILDCARDS:
            return value
        try:
            ipaddress.ip_address(value)
        except ValueError as exc:
            raise ValueError(f"host: {value!r} is not an IP address (use 127.0.0.1 or 0.0.0.0)") from exc
        return value

    @property
    def binds_loopback_only(self) -> bool:
        if self.socket is not None or self.host == "localhost":
            return True
        if self.host in WILDCARDS:
            return False
        return ipaddress.ip_address(self.host).is_loopback


# --------------------------------------------------------------------------- plan


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
    # Held beside the weights while the checkpoint loads (before the KV cache exists); see sparkfleet.loading.
    load_transient: float = 0.0
    # Kernel compiles the first start may run beside the footprint (MAX_JOBS x the seed's per-process figure).
    first_start_compile: float = 0.0


class SystemdLimits(Strict):
    memory_max: str
    memory_swap_max: str = "0"


class AnswerCheck(Strict):
    """The first request an instance gets and the one it is judged by (sparkfleet.answers)."""

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
    # The largest request body the front door forwards to it (sparkfleet.requestsize).
    max_request_mib: int = 32

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
