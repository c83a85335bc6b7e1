"""What one decode step reads, by tensor class, from a checkpoint's safetensors headers (names, dtypes, shapes, byte
spans): the output head, the dense rest, shared and routed experts, the input embedding, and what a text decode step
never reads (MTP layers past the decoder's last layer, vision and audio towers). Pure: the caller reads the headers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..errors import PlanError
from ..models.speed import DecodeReads
from .config import EXPERTS_KEYS, LAYERS_KEYS, TOP_K_KEYS, text_config

# Dotted name segments of the encoders and projectors a multimodal checkpoint carries beside its language model.
TOWER_SEGMENTS = frozenset(
    {
        "visual", "vision_tower", "vision_model", "vision_encoder", "vision", "audio_tower", "audio_model",
        "audio_encoder", "audio", "multi_modal_projector", "mm_projector", "embed_vision", "embed_audio",
        "image_newline", "speech_encoder", "sound_encoder",
    }
)  # fmt: skip
EMBEDDING_SEGMENTS = frozenset({"embed_tokens", "wte", "word_embeddings", "tok_embeddings"})
# A tensor that scales or offsets packed weights: bytes a step reads, no weights of its own.
_NOT_WEIGHTS = re.compile(r"(scale|zero|zp|g_idx|absmax|_max$|_min$)", re.IGNORECASE)
# How many weights one stored element packs: 4-bit values two to a byte (NVFP4, MXFP4, compressed-tensors) and eight
# to an int32 (GPTQ and AWQ qweight).
_PACKED = {"U8": 2, "I8": 2, "I32": 8}
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


class TensorClass(str, Enum):
    HEAD = "head"
    EMBEDDING = "embedding"
    DENSE = "dense"
    SHARED_EXPERTS = "shared experts"
    ROUTED_EXPERTS = "routed experts"
    MTP = "mtp"
    TOWER = "tower"


@dataclass(frozen=True)
class Tensor:
    """One header entry."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int

    @property
    def weights(self) -> int:
        """Weights it holds (packed values unpacked); 0 for a scale, zero point or index."""
        if _NOT_WEIGHTS.search(self.name.rsplit(".", 1)[-1]):
            return 0
        return math.prod(self.shape) * _PACKED.get(self.dtype, 1)


def header_tensors(header: dict[str, Any]) -> list[Tensor]:
    """The entries of one safetensors header (its JSON), without its __metadata__."""
    out = []
    for name, entry in header.items():
        if name == "__metadata__" or not isinstance(entry, dict):
            continue
        start, end = entry["data_offsets"]
        out.append(Tensor(name, str(entry["dtype"]), tuple(int(d) for d in entry["shape"]), int(end) - int(start)))
    return out


def classify(name: str, decoder_layers: int) -> TensorClass:
    segments = name.split(".")
    if TOWER_SEGMENTS.intersection(segments):
        return TensorClass.TOWER
    if "mtp" in segments or any(s.startswith("mtp_") for s in segments):
        return TensorClass.MTP
    layer = _LAYER.search(name)
    if layer and int(layer.group(1)) >= decoder_layers:
        # DeepSeek-style checkpoints append their MTP layers after the decoder's last (model.layers.61 of 61).
        return TensorClass.MTP
    if "lm_head" in segments:
        return TensorClass.HEAD
    if EMBEDDING_SEGMENTS.intersection(segments):
        return TensorClass.EMBEDDING
    if any(s.startswith("shared_expert") for s in segments):
        return TensorClass.SHARED_EXPERTS
    if "experts" in segments:
        return TensorClass.ROUTED_EXPERTS
    return TensorClass.DENSE


def _first_int(text: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    value = next((text[k] for k in keys if isinstance(text.get(k), int) and not isinstance(text.get(k), bool)), None)
    return int(value) if value else None


def decode_reads(tensors: Iterable[Tensor], config: dict[str, Any], source: str) -> DecodeReads:
    """Sum the headers' tensors by class; the expert count and top-k come from the config."""
    text = text_config(config)
    layers = _first_int(text, LAYERS_KEYS)
    if not layers:
        raise PlanError("model", f"{source}: no num_hidden_layers to tell the decoder's layers from MTP layers")
    size = dict.fromkeys(TensorClass, 0)
    weights = dict.fromkeys(TensorClass, 0)
    for tensor in tensors:
        kind = classify(tensor.name, layers)
        size[kind] += tensor.nbytes
        weights[kind] += tensor.weights
    experts, top_k = _first_int(text, EXPERTS_KEYS), _first_int(text, TOP_K_KEYS)
    routed = size[TensorClass.ROUTED_EXPERTS]
    if routed and not (experts and top_k and top_k < experts):
        raise PlanError(
            "model",
            f"{source}: {routed / 1e9:.2f} GB of routed experts in the headers, but the config gives no expert count "
            f"and top-k ({' / '.join(EXPERTS_KEYS)}; {' / '.join(TOP_K_KEYS)})",
        )
    tied = size[TensorClass.HEAD] == 0
    if tied and not size[TensorClass.EMBEDDING]:
        raise PlanError("model", f"{source}: the headers hold neither an output head nor an input embedding")
    head, embedding = (TensorClass.EMBEDDING, TensorClass.HEAD) if tied else (TensorClass.HEAD, TensorClass.EMBEDDING)
    share = top_k / experts if routed and experts and top_k else 0.0
    every_step = (head, TensorClass.DENSE, TensorClass.SHARED_EXPERTS)
    return DecodeReads(
        head_bytes=size[head],
        dense_bytes=size[TensorClass.DENSE],
        shared_expert_bytes=size[TensorClass.SHARED_EXPERTS],
        routed_expert_bytes=routed,
        embedding_bytes=size[embedding],
        unread_bytes=size[TensorClass.MTP] + size[TensorClass.TOWER],
        active_params=max(round(sum(weights[k] for k in every_step) + share * weights[TensorClass.ROUTED_EXPERTS]), 1),
        total_params=max(sum(weights.values()), 1),
        experts=experts if routed else None,
        experts_per_token=top_k if routed else None,
        tied_embeddings=tied,
        source=f"{source} safetensors headers",
    )
