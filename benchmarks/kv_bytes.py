"""KV bytes per token: the planner, for every catalog profile and every real config fixture, next to published figures.

    uv run python benchmarks/kv_bytes.py [--vllm]

Per model: the layer kinds, KV bytes per token on one GPU (bf16 and fp8 KV), per-sequence state bytes for hybrids,
tokens per block by kind (GB10), the published figure where one exists, and, for catalog profiles that have a
fixture config, whether the curated profile lays KV out exactly as its own config.json does. With --vllm it
first runs tests/vllm/check_kv_geometry.py (through scripts/kv-geometry), which compares the planner with
the KV cache config vLLM itself builds for a tiny model of each family's layer structure, and prints beside each
row the verdict for the family whose layout it shares (layer kinds, MLA, per-kind shapes, state kind).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

from sparkfleet.catalog import load_catalog
from sparkfleet.kv.cache import geometry
from sparkfleet.kv.indexed import indexed_geometry
from sparkfleet.kv.packed import packed_geometry
from sparkfleet.models import CompressedMlaShape, IndexedPool, ModelProfile, PackedMlaPool, RingKind
from sparkfleet.reading.config import profile_from_config

CONFIGS = Path(__file__).parents[1] / "tests" / "fixtures" / "configs"
# Published KV bytes per token (bf16, whole model, one GPU), each with where it is stated.
PUBLISHED = {
    "meta-llama/Llama-3.1-8B-Instruct": (
        131072,
        "128 KiB/token: 32 layers x 8 KV heads x 128 x 2 (K,V) x 2 bytes, as widely quoted",
    ),
    "deepseek-ai/DeepSeek-V3": (70272, "DeepSeek-V2/V3 papers: MLA caches (d_c + d_h^R) = 576 elements per layer per token"),
    "nvidia/Llama-3_3-Nemotron-Super-49B-v1": (
        200704,
        "issue 21: 49 attention blocks (31 no_op) x 2 (K,V) x 8 KV heads x 128 x 2 bytes",
    ),
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


ROOT = Path(__file__).parents[1]


def layout_family(profile: ModelProfile) -> str:
    """The tiny-model family in tests/vllm/check_kv_geometry.py that has this profile's KV layout."""
    if profile.architecture == "DeciLMForCausalLM":
        return "nemotron_nas"
    layout = profile.kv_layout
    if isinstance(layout, PackedMlaPool):
        return "deepseek_v4"
    if isinstance(layout, IndexedPool):
        return "glm5_next" if layout.ring.kind is RingKind.KPOOL else "qwen4_exp"
    if profile.mla:
        return "deepseek_v3"
    if profile.state_layers:
        if profile.state_layers.kind.value == "mamba2":
            return "nemotron_h"
        qwen3_5 = str(profile.model_type or "").startswith("qwen3_5")
        return ("qwen3_5_moe_text" if "moe" in str(profile.model_type) else "qwen3_5_text") if qwen3_5 else "qwen3_next"
    if profile.full_attention_shape:
        return "gemma4"
    if profile.sliding_attention_layers:
        return "gemma3" if profile.sliding_attention_layers > profile.full_attention_layers else "gpt_oss"
    return "llama"


def vllm_verdicts() -> dict[str, str]:
    """family -> 'equal' or 'DIFFERS', from vLLM's own KV cache config for each tiny model."""
    done = subprocess.run([str(ROOT / "scripts" / "kv-geometry")], capture_output=True, text=True, check=False)
    verdicts: dict[str, str] = {}
    for line in done.stdout.splitlines():
        match = re.match(r"^(ok|FAIL)\s+(\w+)", line)
        if match and verdicts.get(match[2]) != "vLLM: DIFFERS":
            verdicts[match[2]] = "vLLM: equal" if match[1] == "ok" else "vLLM: DIFFERS"
    return verdicts


def fixture(name: str) -> ModelProfile:
    return profile_from_config(name.replace("--", "/"), json.loads((CONFIGS / f"{name}.json").read_text()), 1, name)


def packed_row(profile: ModelProfile, shape: CompressedMlaShape, origin: str, verdicts: dict[str, str]) -> str:
    """DeepSeek-V4: vLLM keeps fp8_ds_mla whatever the dtype; bytes per token are those beyond the windows."""
    geo = packed_geometry(shape, kv_cache_dtype="auto")
    ratios = shape.compress_ratios
    kinds = f"window:{ratios.count(1)} r4:{ratios.count(4)} r128:{ratios.count(128)}"
    blocks = "/".join(str(size) for size in sorted({g.block_size for g in geo.groups}, reverse=True))
    check = verdicts.get("deepseek_v4", "")
    check = f"{check} (deepseek_v4 layout); " if check else ""
    check += f"{geo.bytes_per_block:,} B per block, {len(geo.groups)} groups"
    per_token = int(geo.bytes_per_token)
    return f"{profile.id[:52]:<52} {origin:<8} {kinds:<34} {per_token:>9,} {per_token:>9,} {0.0:>8} {blocks:>9}  {check}"


def row(profile: ModelProfile, origin: str, verdicts: dict[str, str]) -> str:
    if isinstance(profile.kv_layout, PackedMlaPool):
        return packed_row(profile, profile.kv_layout.shape, origin, verdicts)
    bf16 = geometry(profile, kv_cache_dtype="auto")
    fp8 = geometry(profile, kv_cache_dtype="fp8")
    kinds = " ".join(f"{kind.value}:{count}" for kind, count in bf16.layers_by_kind.items())
    if profile.state_layers:
        kinds += f" {profile.state_layers.kind.value}:{profile.state_layers.count}"
    blocks = "/".join(str(size) for size in bf16.block_size_by_kind.values())
    state = f"{bf16.state_bytes_per_layer * (profile.state_layers.count if profile.state_layers else 0) / 2**20:.1f}"
    published, note = PUBLISHED.get(profile.id, (None, ""))
    family = layout_family(profile)
    check = f"{verdicts[family]} ({family} layout)" if family in verdicts else ""
    if published is not None:
        error = 100 * (bf16.bytes_per_token - published) / published
        check = (check + "; " if check else "") + f"published {published:,} ({error:+.1f}%)"
    if isinstance(profile.kv_layout, IndexedPool):
        # The pool vLLM packs (sparkfleet.kv.indexed), checked against vLLM's own packing by tests/vllm/kv_indexed.py.
        packed = indexed_geometry(profile, kv_cache_dtype="auto")
        blocks = str(packed.block_size)
        check = (check + "; " if check else "") + f"{packed.bytes_per_block:,} B per block, {len(packed.groups)} groups"
    if origin == "catalog" and profile.id in CATALOG_FIXTURES:
        same = geometry(fixture(CATALOG_FIXTURES[profile.id]), kv_cache_dtype="auto") == bf16
        check = (check + "; " if check else "") + ("= its config.json" if same else "DIFFERS from its config.json")
    return (
        f"{profile.id[:52]:<52} {origin:<8} {kinds:<34} {bf16.bytes_per_token:>9,} {fp8.bytes_per_token:>9,} "
        f"{state:>8} {blocks:>9}  {check}{'  [' + note + ']' if note and published else ''}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", action="store_true", help="compare each layout with vLLM's own (scripts/kv-geometry)")
    args = parser.parse_args()
    verdicts = vllm_verdicts() if args.vllm else {}
    header = f"{'model':<52} {'from':<8} {'layers by kind':<34} {'bf16 B/tok':>9} {'fp8 B/tok':>9} {'stateMiB':>8}"
    print(f"{header} {'blocks':>9}  check")
    for profile in load_catalog().values():
        print(row(profile, "catalog", verdicts))
    for path in sorted(CONFIGS.glob("*.json")):
        print(row(fixture(path.stem), "config", verdicts))


if __name__ == "__main__":
    main()
