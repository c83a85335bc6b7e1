"""What the user asks for: the intent of one served instance."""

from __future__ import annotations

import ipaddress
import re
from enum import Enum
from typing import Annotated

from pydantic import Field, field_validator

from .base import WILDCARDS, Strict
from .layout import ClusterBackend
from .profile import _ONE_LINE, TemplateKwargs, check_template_kwargs


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
    """How vLLM reads the checkpoint (sparkfleet.planning.loading): auto picks by platform, filesystem and room."""

    AUTO = "auto"
    MMAP = "mmap"
    EAGER = "eager"
    PREFETCH = "prefetch"
    FASTSAFETENSORS = "fastsafetensors"
    INSTANTTENSOR = "instanttensor"


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
    # A 4-bit cache: a sparse MLA's nvfp4_ds_mla record, on a release that serves it on GB10 (sparkfleet.kv.sparse).
    NVFP4 = "nvfp4"


_SERVED_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:-]{0,127}$")
# A drafter is a hub id (ORG/NAME[@REVISION]) or an absolute directory: it reaches the unit's ExecStart
# and comments, so nothing that could end a line, start an option or climb out of a path.
_DRAFTER_HUB = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}(@[\w./-]{1,255})?", re.ASCII)
_COMMIT = re.compile(r"[0-9a-f]{40}", re.ASCII)
# A Unix socket under /run (AF_UNIX paths are at most 107 bytes).
_SOCKET_PATH = r"^/run/[a-z0-9][a-z0-9.-]{0,62}/[a-z0-9][a-z0-9.-]{0,30}\.sock$"
_DRAFTER_DIR = re.compile(r"(/[A-Za-z0-9_][A-Za-z0-9._@+-]{0,254}){1,32}", re.ASCII)


class Intent(Strict):
    """What the user asks of one instance. Each field's description is the one text of it: the CLI's help
    (sparkfleet.planargs), the vllm_serve role's docs (scripts/role_docs.py) and this model read it."""

    max_context: Annotated[int, Field(ge=256)] | None = Field(
        None,
        description="the longest request in tokens (prompt and answer); default the model's native limit, at most 65536",
    )
    concurrency: Annotated[int, Field(ge=1, le=1024)] = Field(
        4, description="requests served at once at max_context; the KV cache is sized for them"
    )
    profile: ServeProfile = Field(
        ServeProfile.INTERACTIVE,
        description="what the flags favour: interactive (latency), throughput (batch size) or memory-saver (room)",
    )
    kv_cache_dtype: KvDtype = Field(
        KvDtype.AUTO,
        description="the KV cache's element type: auto (fp8 where the model recommends it, its MTP draft needs it or the "
        "profile is memory-saver, else the model's own), fp8, bf16, or nvfp4 (a sparse MLA's 4-bit record, on a "
        "release that serves it on GB10); a sparse MLA (DeepSeek-V3.2, GLM-5.x) on GB10 keeps vLLM's fp8_ds_mla record "
        "for auto and fp8",
    )
    speculative: SpeculativeMethod = Field(
        SpeculativeMethod.NONE, description="speculative decoding: none, ngram, suffix, mtp, dflash, eagle3 or draft_model"
    )
    moe_backend: Annotated[str, Field(pattern=r"^[a-z0-9_-]{1,40}$")] | None = Field(
        None,
        description="the MoE kernel, in place of the plan's (Marlin for FP4 MoE on a Spark), to A/B it on your build; "
        "checked against the release's choices where they were read",
    )
    attention_backend: Annotated[str, Field(pattern=r"^[A-Za-z0-9_]{1,40}$")] | None = Field(
        None,
        description="the attention kernel, in place of the plan's (Triton on a Spark, or the model's recipe's own), to "
        "A/B it on your build: e.g. TRITON_ATTN for Qwen3-Coder-Next, whose recipe runs FLASHINFER where seed 004 "
        "advises against FlashInfer for FP8 models",
    )
    load: LoadStrategy = Field(
        LoadStrategy.AUTO,
        description="how vLLM reads the checkpoint; auto picks by platform, filesystem and the memory free while loading",
    )
    num_speculative_tokens: Annotated[int, Field(ge=1, le=32)] | None = Field(
        None, description="draft tokens per step (1 to 32); default the model's own for mtp and dflash, else the method's"
    )
    drafter: str | None = Field(
        None,
        description="a separate draft checkpoint for mtp, dflash, eagle3 or draft_model: a hub id ORG/NAME[@REVISION] "
        "or an absolute directory",
    )
    drafter_weights_gib: Annotated[float, Field(gt=0)] | None = Field(
        None, description="the drafter's weights in GiB, for one known only by its size (else read from its safetensors)"
    )
    served_name: str | None = Field(None, description="the model name clients ask for; default the model id")
    host: str = Field("127.0.0.1", description="the address vLLM binds (behind the front door: none, a Unix socket)")
    port: Annotated[int, Field(ge=1, le=65535)] = Field(8000, description="the port vLLM binds")
    socket: Annotated[str, Field(pattern=_SOCKET_PATH)] | None = Field(
        None,
        description="set by the host plan, never by a user: behind the front door a single-node instance serves on "
        "this Unix socket (vLLM's --uds) instead of host:port, in a network namespace of its own",
    )
    api_key: bool = Field(False, description="require VLLM_API_KEY, read from the instance's env file")
    allow_unauthenticated_bind: bool = Field(
        False, description="let an instance without an API key bind beyond loopback (refused otherwise)"
    )
    tensor_parallel_size: Annotated[int, Field(ge=1, le=64)] = Field(1, description="tensor parallel size")
    pipeline_parallel_size: Annotated[int, Field(ge=1, le=64)] = Field(1, description="pipeline parallel size")
    decode_context_parallel_size: Annotated[int, Field(ge=1, le=64)] = Field(
        1,
        description="decode context parallel: the tensor-parallel ranks split each sequence's KV by token (MLA models; "
        "divides tensor_parallel_size)",
    )
    nodes: Annotated[int, Field(ge=1, le=64)] = Field(
        1, description="the Sparks one instance spans (the members of its cluster, the head first)"
    )
    cluster_backend: ClusterBackend = Field(
        ClusterBackend.AUTO,
        description="how a multi-node instance's ranks meet: vLLM's own launch (native) or Ray; auto: native where "
        "vLLM has it",
    )
    cluster_port: Annotated[int, Field(ge=1024, le=65535)] = Field(
        29500, description="rank 0's torch.distributed rendezvous port of a native multi-node instance (--master-port)"
    )
    allow_yarn: bool = Field(False, description="allow a context above the native limit (static YaRN)")
    allow_long_context: bool = Field(
        False,
        description="allow a context above the config's limit that the publisher supports without a rope override",
    )
    trust_remote_code: bool | str = Field(
        False,
        description="run the Python code the model (or drafter) repository ships where the target vLLM needs it: "
        "true, or the commit (40 hexadecimal digits) whose code you read",
    )
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] | None = Field(
        None,
        description="the share of memory vLLM may take (--gpu-memory-utilization); default the plan's own, refused "
        "where the host cannot give it",
    )
    max_num_batched_tokens: Annotated[int, Field(ge=256)] | None = Field(
        None, description="tokens one scheduler step takes; default by profile and concurrency"
    )
    min_decode_tps: Annotated[float, Field(gt=0, le=10000)] | None = Field(
        None,
        description="the slowest decode (tokens/s) each concurrent request may get on a Spark: the planner caps "
        "concurrency to keep it, by its speed prediction",
    )
    max_request_mib: Annotated[int, Field(ge=1, le=1024)] | None = Field(
        None,
        description="the largest request body (MiB) the front door forwards to this instance; default sized to the context",
    )
    answer_check: KnownAnswer | None = Field(
        None,
        description="the question (and answer) this instance is ready by, where the default (sparkfleet.planning.answers) "
        "does not fit it",
    )
    chat_template_kwargs: TemplateKwargs | None = Field(
        None,
        description="the chat template settings every request gets (e.g. {enable_thinking: false}), over the model "
        "profile's own: the server's default and the readiness check's",
    )
    chat_template: str | None = Field(
        None,
        description="a chat template file on the host that replaces the model's own (vLLM's --chat-template); the "
        "vllm_serve role writes an instance's chat_template (a controller file) there",
    )
    host_reserve_gib: Annotated[float, Field(ge=0)] | None = Field(
        None, description="memory (GiB) the plan leaves to the host and its other services; default the platform's reserve"
    )

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

    @field_validator("chat_template")
    @classmethod
    def _template_file(cls, value: str | None) -> str | None:
        if value is not None and (
            any(part in (".", "..") for part in value.split("/")) or not _DRAFTER_DIR.fullmatch(value)
        ):
            raise ValueError("chat_template: an absolute file path on the host (letters, digits and ._@+-, no '..')")
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
