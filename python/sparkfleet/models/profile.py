"""What the planner reads of a model: its catalog profile."""

from __future__ import annotations

import re
from enum import Enum
from pathlib import PurePosixPath
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ..versions import VllmVersion
from .base import Strict
from .host import known_capabilities
from .layout import RecipeLayout
from .speed import DecodeReads, Parameters


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
    # 0 for a NoPE latent (GLM-5-Next).
    qk_rope_head_dim: Annotated[int, Field(ge=0)]
    # The query heads that attend to the latent: what decode context parallel moves between ranks (None: not read).
    heads: Annotated[int, Field(gt=0)] | None = None


# The compress ratios vLLM builds a DeepSeek-V4 layer with (compressor.py asserts 4 or 128; 0 in a config reads as 1).
COMPRESS_RATIOS = (1, 4, 128)


class CompressedMlaShape(Strict):
    """DeepSeek-V4's attention: every layer keeps a sliding-window cache; layers with a compress ratio of 4 or 128
    also keep a compressed MLA cache and compressor states, and ratio-4 layers an indexer (vLLM
    models/deepseek_v4; docs/research/deepseek-v4-kv-layout.md)."""

    # Per main layer, as vLLM reads it: max(1, compress_ratios[i]) (1 = the window cache only).
    compress_ratios: tuple[int, ...] = Field(min_length=1)
    head_dim: Annotated[int, Field(gt=0)]
    index_head_dim: Annotated[int, Field(gt=0)]
    sliding_window: Annotated[int, Field(gt=0)]

    @field_validator("compress_ratios")
    @classmethod
    def _ratios_vllm_builds(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not set(value) <= set(COMPRESS_RATIOS):
            raise ValueError(f"compress ratios {sorted(set(value))}: vLLM builds only 1 (window only), 4 and 128")
        return value


class StateLayerKind(str, Enum):
    MAMBA1 = "mamba1"
    MAMBA2 = "mamba2"
    GATED_DELTANET = "gated-deltanet"
    SHORT_CONV = "short-conv"
    # Kimi Delta Attention (GLM-5-Next's, Kimi-Linear's and Bailing-V3's linear layers; mamba_utils.kda_state_shape).
    KDA = "kda"
    # Lightning linear attention (Bailing-V2.5; mamba_utils.linear_attention_state_shape): no convolution.
    LINEAR = "linear-attention"


class StateLayers(Strict):
    """Layers whose cache is a per-sequence state, constant in sequence length (vllm-semantics §2.5)."""

    kind: StateLayerKind
    count: Annotated[int, Field(gt=0)]
    # 0 (and a kernel of 1) for a state without a convolution (lightning linear attention).
    conv_dim: Annotated[int, Field(ge=0)]
    conv_kernel: Annotated[int, Field(ge=1)]
    # The recurrent state per layer, its first dimension split across tensor-parallel ranks; empty for a
    # short convolution (LFM2), whose whole state is its convolution window.
    state_shape: tuple[int, ...]
    state_dtype_bytes: Literal[2, 4] = 4
    conv_dtype_bytes: Literal[2, 4] = 2

    @field_validator("conv_kernel")
    @classmethod
    def _a_convolution_spans_two_tokens(cls, value: int, info: ValidationInfo) -> int:
        if info.data.get("conv_dim", 0) > 0 and value < 2:
            raise ValueError("a convolution's kernel spans at least 2 tokens")
        return value

    @property
    def conv_holds_speculative_tokens(self) -> bool:
        """Mamba-1's convolution window does not grow with speculative tokens (mamba_utils.mamba1_state_shape)."""
        return self.kind is not StateLayerKind.MAMBA1


class RingKind(str, Enum):
    # GLM-5-Next's pooled indexer (models/glm5next/common/attention.py Glm5NextTailCache): raw key and gate score, the
    # ring rounded up to a power of two pools, and the indexer's DeepGEMM pages of 64 pools on GB10.
    KPOOL = "kpool"
    # Qwen4-Exp's QSA (models/qwen4_exp/common/qsa_cache.py QSAKeyStateCache): the raw key, whole groups.
    QSA = "qsa"


class RingCache(Strict):
    """The raw keys each indexed layer keeps until its group of tokens is pooled or compressed (CircularBufferSpec):
    one bfloat16 page per request, held for the request's life."""

    kind: RingKind
    layers: Annotated[int, Field(gt=0)]
    head_size: Annotated[int, Field(gt=0)]
    # Tokens pooled into one indexer entry (index_kpool) or compressed into one key (indexer_compress_ratio).
    group_tokens: Annotated[int, Field(gt=1)]
    # One entry of the indexer's own key cache: GLM-5-Next's fp8 key and its scales, Qwen4-Exp's bfloat16 key.
    indexer_entry_bytes: Annotated[int, Field(gt=0)]


class UnifiedPool(Strict):
    """vLLM's unified pool: one page size for every group of layers (attention, sliding windows, MLA latents,
    linear-attention and Mamba states), read by sparkfleet.kv.cache."""

    kind: Literal["unified"] = "unified"


class PackedMlaPool(Strict):
    """DeepSeek-V4's compressed sparse MLA: pages of several sizes packed into one pool, with its window and
    compressor-state caches (sparkfleet.kv.packed)."""

    kind: Literal["packed_mla"] = "packed_mla"
    shape: CompressedMlaShape


class IndexedPool(Strict):
    """GLM-5-Next's and Qwen4-Exp's indexed layers: their backends lay the pool out block-outermost, so vLLM packs
    pages of several sizes into one pool, beside the raw-key rings (sparkfleet.kv.indexed)."""

    kind: Literal["indexed"] = "indexed"
    ring: RingCache


# Which pool vLLM builds for a model, and what only that pool needs.
KvLayout = Annotated[UnifiedPool | PackedMlaPool | IndexedPool, Field(discriminator="kind")]


class SpeculativeSupport(Strict):
    mtp: bool = False
    mtp_layers: int = 0
    mtp_default_tokens: int = 3
    # A draft shipped inside the model's own directory (such as 'assistant'): vLLM is given its absolute path.
    mtp_draft_subdir: str | None = None
    mtp_draft_weights_gib: Annotated[float, Field(ge=0)] = 0.0
    mtp_requires_fp8_kv: bool = False
    # The MoE kernel of the MTP draft's own layers on GB10 (the speculative config's moe_backend), where its recipe
    # pins one apart from the target's --moe-backend.
    mtp_moe_backend: Literal["triton", "marlin"] | None = None
    # The model's recipe has seen its MTP draft fall into output loops now and then (its source in sources['mtp_loops']).
    mtp_loops: bool = False
    dflash_drafter: str | None = None
    dflash_drafter_weights_gib: float = 0.0
    # A capability (versions.CAPABILITIES) the release needs beyond dflash for this profile's own drafter.
    dflash_drafter_needs: str | None = None
    dflash_default_tokens: int = 15

    @field_validator("mtp_draft_subdir")
    @classmethod
    def _inside_the_model(cls, value: str | None) -> str | None:
        path = PurePosixPath(value or ".")
        if value is not None and (path.is_absolute() or ".." in path.parts or not path.parts):
            raise ValueError(f"mtp_draft_subdir {value!r}: a directory inside the model's own, such as 'assistant'")
        return value


class ProfileEnv(Strict):
    name: str
    value: str
    reason: str
    source: str


class MediaLimits(Strict):
    """What one request of a multimodal model may carry, as the model's card states it (its source in
    sources['media']): the door's body limit for it follows (sparkfleet.planning.requestsize)."""

    audio_s: Annotated[int, Field(ge=0, le=86_400)] = 0
    video_s: Annotated[int, Field(ge=0, le=86_400)] = 0
    images: Annotated[int, Field(ge=0, le=64)] = 0


EncoderFamily = Literal["qwen3_vl", "pixtral", "gemma4", "radio", "parakeet"]


class EncoderShape(Strict):
    """One modality's encoder tower and the largest item a request may bring it, as vLLM counts it
    (sparkfleet.planning.encoder; a profile's encoders have their source in sources['encoders'])."""

    modality: Literal["image", "video", "audio"]
    family: EncoderFamily
    hidden_size: Annotated[int, Field(gt=0)]
    # The tower's MLP width and heads: what benchmarks/encoder_memory.py builds it with.
    intermediate_size: Annotated[int, Field(gt=0)]
    heads: Annotated[int, Field(gt=0)]
    # Tokens vLLM counts for the largest item when it sizes the encoder budget; None: the model declares the context.
    item_tokens: Annotated[int, Field(gt=0)] | None
    # Tower positions (patches, audio frames) of that item, and how many of them make one language-model embedding.
    item_positions: Annotated[int, Field(gt=0)]
    positions_per_embedding: Annotated[int, Field(ge=1)]
    # The most positions the model's own code runs through the tower at once (its micro-batch), where it has one.
    call_positions: Annotated[int, Field(gt=0)] | None = None

    @model_validator(mode="after")
    def _item_fits_its_tokens(self) -> EncoderShape:
        if self.item_tokens is not None and self.item_positions // self.positions_per_embedding > self.item_tokens:
            raise ValueError(
                f"encoders ({self.modality}): {self.item_positions} positions make "
                f"{self.item_positions // self.positions_per_embedding} embeddings, more than item_tokens {self.item_tokens}"
            )
        return self


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
    kv_layout: KvLayout = UnifiedPool()
    state_layers: StateLayers | None = None
    # A sparse-attention indexer's own key cache, per full-attention layer and token (GLM-5-Next's and
    # DeepSeek-V3.2's, Qwen4-Exp's compressed keys): replicated across tensor-parallel ranks.
    indexer_bytes_per_token: Annotated[int, Field(ge=0)] = 0
    # The full-attention layers that keep an indexer key cache of their own, where index_topk_freq or
    # index_topk_pattern lets the others reuse another layer's top-k (GLM-5.3: 21 of 78); None: every one.
    indexer_layers: Annotated[int, Field(ge=0)] | None = None
    # The tokens a sparse MLA's decode attends to (its indexer's top-k); its indexer still reads every token's key.
    index_topk: Annotated[int, Field(gt=0)] | None = None
    # State layers every tensor-parallel rank holds whole, beside state_layers (Qwen4-Exp's n-gram short convolution,
    # tp_replicated); vLLM pads their page to the attention page as it does state_layers'.
    replicated_state_layers: StateLayers | None = None
    # What vLLM serves by default (sparkfleet.reading.context: its own derivation from config.json).
    native_max_context: Annotated[int, Field(gt=0)]
    # A longer max_model_len vLLM accepts with no env (the config's own model_max_length), when there is one.
    config_max_length: Annotated[int, Field(gt=0)] | None = None
    checkpoint_format: CheckpointFormat
    dtype: Literal["bfloat16", "float16"] = "bfloat16"
    moe: bool = False
    multimodal: bool = False
    # The media one request may carry, where the card states it; a multimodal model without it gets room for images.
    media: MediaLimits | None = None
    # Every modality's encoder: vLLM's profile run drives the one with the most tokens per item; a request may bring
    # any modality's largest item.
    encoders: tuple[EncoderShape, ...] = ()
    # The scheduler's chunk the model's recipe runs (its source in sources['max_num_batched_tokens']), in place of the
    # profile's default: an encoder's output for a whole video or an hour of audio is scheduled in one chunk.
    max_num_batched_tokens: Annotated[int, Field(ge=256)] | None = None
    reasoning_parser: str | None = None
    # What the model card tells clients to send (e.g. a model that must think to answer well); intent overrides.
    chat_template_kwargs: TemplateKwargs = Field(default_factory=dict)

    @field_validator("chat_template_kwargs")
    @classmethod
    def _profile_template_kwargs(cls, value: dict[str, object]) -> dict[str, object]:
        return check_template_kwargs(value) or {}

    reasoning_parser_plugin: str | None = None
    # The max_tokens a request needs at least, where the model's recipe states it (its source in
    # sources['reasoning_max_tokens']); other reasoning models get the general floor (sparkfleet.planning.clients).
    reasoning_max_tokens: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    tool_call_parser: str | None = None
    # config.json's model_type: with the target vLLM's registry it decides whether the repository's code is needed.
    model_type: str | None = None
    # config.json's auto_map names the repository's own classes (sparkfleet.planning.remotecode decides if vLLM runs them).
    config_auto_map: bool = False
    # tokenizer_config.json's auto_map names the repository's own tokenizer classes.
    tokenizer_auto_map: bool = False
    # The code files the auto_maps name (what --trust-remote-code would run), when read.
    remote_code_files: tuple[str, ...] = ()
    force_attention_backend: bool = True
    # The attention backend the model's own Spark recipe runs where vLLM's default falls short (its source in
    # sources['recipe_attention_backend']); a forced Triton backend or DFlash's take precedence.
    recipe_attention_backend: Annotated[str, Field(pattern=r"^[A-Z0-9_]{1,40}$")] | None = None
    kv_fp8_supported: bool = True
    kv_fp8_recommended: bool = False
    # The model's tested recipe keeps its KV cache unquantized though fp8 works: memory-saver leaves it, and an fp8
    # KV the intent asks for is cautioned (its source says why).
    kv_fp8_avoided: bool = False
    yarn_hf_overrides: str | None = None
    # How far the publisher supports the model past native_max_context (config max_position_embeddings)
    # with no rope override: vLLM only needs VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 to accept it.
    long_context_max: Annotated[int, Field(gt=0)] | None = None
    tensor_parallel_max: int | None = None
    # A model too large for one Spark: the layout its recipe serves it on, named where a plan on fewer is refused.
    layout: RecipeLayout | None = None
    # Total and active parameter counts: what a decode step reads, for the speed prediction (sparkfleet.planning.speed).
    parameters: Parameters | None = None
    # The same read from the checkpoint's safetensors headers, by tensor class (hub ids and local directories).
    decode_reads: DecodeReads | None = None
    # Why the headers gave no such reading (a file that is no safetensors, an expert count the config lacks).
    decode_reads_gap: str | None = None
    speculative: SpeculativeSupport = SpeculativeSupport()
    min_vllm: str = "0.17.0"
    # The last release whose stock code serves the checkpoint, where a newer one dropped what it needs (its source
    # in sources['max_vllm']); None: every release from min_vllm on.
    max_vllm: str | None = None
    # When min_vllm stands only for capabilities (DFlash arrived in 0.21): a fork release below it
    # that declares them all can serve the model.
    min_vllm_capabilities: tuple[str, ...] = ()
    env: tuple[ProfileEnv, ...] = ()
    extra_args: tuple[ProfileArg, ...] = ()
    # Why the model's own chat template gives malformed output and where a fixed one comes from; the plan cautions
    # until an instance supplies one (intent.chat_template). Its source is sources['chat_template_fix'].
    chat_template_fix: str | None = None
    # vLLM's own extras the release needs for what this model takes in (vllm[audio] for speech input).
    vllm_extras: tuple[Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,31}$")], ...] = ()
    quirks: tuple[str, ...] = ()
    extra_overhead_gib: Annotated[float, Field(ge=0)] = 0.0
    sources: dict[str, str]

    @model_validator(mode="after")
    def _every_number_has_a_source(self) -> ModelProfile:
        needed = {"weights_gib", "num_layers", "kv_heads", "head_dim", "native_max_context", "hidden_size"}
        if self.mla:
            needed.add("mla")
        if isinstance(self.kv_layout, PackedMlaPool):
            needed.add("compressed_mla")
        if self.full_attention_shape:
            needed.add("full_attention_shape")
        if self.state_layers:
            needed.add("state_layers")
        if self.sliding_window:
            needed.add("sliding_window")
        if self.extra_overhead_gib:
            needed.add("extra_overhead_gib")
        if self.encoders:
            needed.add("encoders")
            modalities = [shape.modality for shape in self.encoders]
            if len(set(modalities)) < len(modalities):
                raise ValueError(f"profile {self.id}: encoders name a modality twice ({', '.join(modalities)})")
        if self.long_context_max:
            needed.add("long_context_max")
        if self.kv_fp8_avoided:
            needed.add("kv_fp8_avoided")
        if self.speculative.mtp_loops:
            needed.add("mtp_loops")
        if self.parameters:
            needed.add("parameters")
        if self.max_vllm:
            needed.add("max_vllm")
        if self.layout:
            needed.add("layout")
        if self.reasoning_max_tokens:
            needed.add("reasoning_max_tokens")
        missing = sorted(needed - self.sources.keys())
        if missing:
            raise ValueError(f"profile {self.id}: no source for {', '.join(missing)}")
        attention = self.full_attention_layers + self.sliding_attention_layers
        if attention == 0:
            raise ValueError(f"profile {self.id}: a model needs at least one attention layer")
        if self.sliding_attention_layers and not self.sliding_window:
            raise ValueError(f"profile {self.id}: sliding layers need sliding_window")
        if self.layout and self.layout.max_context > (self.long_context_max or self.native_max_context):
            raise ValueError(f"profile {self.id}: layout.max_context is past the model's context")
        if self.layout and self.layout.decode_context_parallel_size > 1 and not self.mla:
            raise ValueError(f"profile {self.id}: decode context parallel splits an MLA latent; this model has none")
        if self.long_context_max is not None and self.long_context_max <= self.native_max_context:
            raise ValueError(
                f"profile {self.id}: long_context_max {self.long_context_max} must exceed native_max_context "
                f"{self.native_max_context}"
            )
        return self

    @field_validator("min_vllm", "max_vllm")
    @classmethod
    def _a_version(cls, value: str | None) -> str | None:
        if value is not None:
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
    def max_version(self) -> VllmVersion | None:
        return VllmVersion.parse(self.max_vllm) if self.max_vllm else None

    @property
    def attention_layers(self) -> int:
        return self.full_attention_layers + self.sliding_attention_layers

    @property
    def indexers(self) -> int:  # the layers with a sparse indexer (every attention layer where the config names none)
        return self.indexer_layers or self.full_attention_layers
