"""Issue 62, speed for any checkpoint: what a decode step reads, by tensor class, from the safetensors headers of a
local directory or a hub repository, and a GB10 plan that predicts from it or says which figure it lacks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import spark
from hub_server import VirtualSafetensors

from sparkfleet.localmodel import profile_from_dir
from sparkfleet.models import Intent
from sparkfleet.planning.planner import plan
from sparkfleet.reading.tensors import Tensor, TensorClass, classify, decode_reads

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
QWEN3_MOE = CONFIGS / "Qwen--Qwen3-30B-A3B.json"


@pytest.mark.parametrize(
    ("name", "layers", "expected"),
    [
        # DeepSeek-V3 (61 decoder layers; its MTP layer is model.layers.61).
        ("model.layers.3.mlp.experts.12.gate_proj.weight", 61, TensorClass.ROUTED_EXPERTS),
        ("model.layers.3.mlp.shared_experts.down_proj.weight_scale_inv", 61, TensorClass.SHARED_EXPERTS),
        ("model.layers.3.mlp.gate.weight", 61, TensorClass.DENSE),
        ("model.layers.0.self_attn.kv_a_proj_with_mqa.weight", 61, TensorClass.DENSE),
        ("model.layers.61.mlp.experts.0.up_proj.weight", 61, TensorClass.MTP),
        ("model.layers.61.embed_tokens.weight", 61, TensorClass.MTP),
        ("lm_head.weight", 61, TensorClass.HEAD),
        ("model.embed_tokens.weight", 61, TensorClass.EMBEDDING),
        # Qwen3-Next: a named MTP block and a gated shared expert.
        ("mtp.layers.0.mlp.experts.3.down_proj.weight", 48, TensorClass.MTP),
        ("model.layers.7.mlp.shared_expert_gate.weight", 48, TensorClass.SHARED_EXPERTS),
        # Gemma 3 and Qwen2.5-VL: towers and projectors a text decode step never reads.
        ("vision_tower.vision_model.encoder.layers.3.mlp.fc1.weight", 62, TensorClass.TOWER),
        ("multi_modal_projector.mm_input_projection_weight", 62, TensorClass.TOWER),
        ("language_model.model.embed_tokens.weight", 62, TensorClass.EMBEDDING),
        ("visual.blocks.0.attn.qkv.weight", 28, TensorClass.TOWER),
        # gpt-oss: the experts fused, packed MXFP4 blocks and their scales.
        ("model.layers.0.mlp.experts.gate_up_proj_blocks", 36, TensorClass.ROUTED_EXPERTS),
        ("model.layers.0.mlp.router.weight", 36, TensorClass.DENSE),
    ],
)
def test_each_tensor_is_classed_by_its_name(name: str, layers: int, expected: TensorClass) -> None:
    assert classify(name, layers) is expected


def qwen3_moe_tensors(config: dict[str, int]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Qwen3-30B-A3B's tensors with the shapes its config gives (the layout of Qwen/Qwen3-30B-A3B's shards)."""
    hidden, heads, kv, dim = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"], 128
    experts, inner, vocab = config["num_experts"], config["moe_intermediate_size"], config["vocab_size"]
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {"model.embed_tokens.weight": ("BF16", (vocab, hidden))}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        tensors |= {
            p + "self_attn.q_proj.weight": ("BF16", (heads * dim, hidden)),
            p + "self_attn.k_proj.weight": ("BF16", (kv * dim, hidden)),
            p + "self_attn.v_proj.weight": ("BF16", (kv * dim, hidden)),
            p + "self_attn.o_proj.weight": ("BF16", (hidden, heads * dim)),
            p + "self_attn.q_norm.weight": ("BF16", (dim,)),
            p + "self_attn.k_norm.weight": ("BF16", (dim,)),
            p + "input_layernorm.weight": ("BF16", (hidden,)),
            p + "post_attention_layernorm.weight": ("BF16", (hidden,)),
            p + "mlp.gate.weight": ("BF16", (experts, hidden)),
        }
        for e in range(experts):
            q = f"{p}mlp.experts.{e}."
            tensors |= {
                q + "gate_proj.weight": ("BF16", (inner, hidden)),
                q + "up_proj.weight": ("BF16", (inner, hidden)),
                q + "down_proj.weight": ("BF16", (hidden, inner)),
            }
    return tensors | {"model.norm.weight": ("BF16", (hidden,)), "lm_head.weight": ("BF16", (vocab, hidden))}


def stage_sparse(directory: Path, tensors: dict[str, tuple[str, tuple[int, ...]]], shards: int) -> None:
    """Real safetensors files whose data is a hole: a 61 GB checkpoint costs a few MB of headers on disk."""
    names = list(tensors)
    per = -(-len(names) // shards)
    for n in range(shards):
        shard = VirtualSafetensors({k: tensors[k] for k in names[n * per : (n + 1) * per]})
        path = directory / f"model-{n + 1:05d}-of-{shards:05d}.safetensors"
        with path.open("wb") as handle:
            handle.write(shard.header)
            handle.truncate(len(shard))


def test_a_local_moe_checkpoint_reads_as_its_card_counts_it_and_gets_a_speed(tmp_path: Path) -> None:
    config = json.loads(QWEN3_MOE.read_text())
    (tmp_path / "config.json").write_text(json.dumps(config))
    stage_sparse(tmp_path, qwen3_moe_tensors(config), shards=16)
    profile = profile_from_dir(tmp_path)
    reads = profile.decode_reads
    assert reads is not None and profile.parameters is None
    # The model card (Qwen/Qwen3-30B-A3B): "30.5B in total and 3.3B activated", embeddings counted in both.
    assert reads.total_params / 1e9 == pytest.approx(30.5, rel=0.005)
    assert (reads.active_params + reads.embedding_bytes / 2) / 1e9 == pytest.approx(3.3, rel=0.02)
    assert (reads.experts, reads.experts_per_token, reads.tied_embeddings) == (128, 8, False)
    result = plan(spark(), profile, Intent(max_context=32768, concurrency=4), model_ref=str(tmp_path))
    assert result.speed is not None and not [w for w in result.warnings if w.startswith("no speed")]
    # One stream's step at 1,024 tokens: the head, 48 layers' attention, norms and router, 8 of 128 experts, in BF16,
    # and 1,024 tokens of BF16 KV (48 layers x K and V x 4 heads x 128).
    weights = 2 * (151936 * 2048 + 2048 + 48 * (2 * 4096 * 2048 + 2 * 512 * 2048 + 2 * 128 + 2 * 2048 + 128 * 2048))
    weights += 2 * 48 * 8 * 3 * 768 * 2048
    kv = 1024 * 48 * 2 * 4 * 128 * 2
    assert result.speed.bytes_per_step_gb == pytest.approx((weights + kv) / 1e9, abs=0.006)
    assert result.speed.decode.low < result.speed.decode.value < result.speed.decode.high


def test_headers_that_cannot_be_read_leave_the_plan_and_fall_back_to_the_config_saying_why(tmp_path: Path) -> None:
    config = json.loads(QWEN3_MOE.read_text())
    (tmp_path / "config.json").write_text(json.dumps(config))
    with (tmp_path / "model.safetensors").open("wb") as handle:
        handle.truncate(60 * 2**30)
    profile = profile_from_dir(tmp_path)
    assert profile.decode_reads is None and "is not a safetensors file" in profile.sources["parameters"]
    result = plan(spark(), profile, Intent(max_context=32768, concurrency=4), model_ref=str(tmp_path))
    assert result.speed is not None and "counted by config arithmetic" in result.speed.basis[0]
    assert not [w for w in result.warnings if w.startswith("no speed")]


def test_routed_experts_without_an_expert_count_are_a_gap_not_a_guess() -> None:
    tensors = [
        Tensor("lm_head.weight", "BF16", (8, 4), 64),
        Tensor("model.layers.0.mlp.experts.0.up_proj.weight", "BF16", (4, 4), 32),
    ]
    with pytest.raises(Exception, match="no expert count"):
        decode_reads(tensors, {"num_hidden_layers": 1}, "a test checkpoint")


def test_packed_fp4_counts_two_weights_a_byte_and_its_scales_none() -> None:
    tensors = [
        Tensor("model.embed_tokens.weight", "BF16", (16, 8), 256),
        Tensor("model.layers.0.mlp.down_proj.weight", "U8", (8, 4), 32),
        Tensor("model.layers.0.mlp.down_proj.weight_scale", "F8_E4M3", (8, 1), 8),
        Tensor("model.layers.0.mlp.down_proj.weight_scale_2", "F32", (), 4),
    ]
    reads = decode_reads(tensors, {"num_hidden_layers": 1, "tie_word_embeddings": True}, "a test checkpoint")
    # Tied: the embedding is the head a step reads whole; the dense layer's bytes are as stored, scales included.
    assert (reads.head_bytes, reads.dense_bytes, reads.embedding_bytes, reads.tied_embeddings) == (256, 44, 0, True)
    assert reads.total_params == 16 * 8 + 8 * 4 * 2


def test_sparse_staging_really_is_sparse(tmp_path: Path) -> None:
    """The fixture above must not write 61 GB: its files' blocks are the headers'."""
    config = json.loads(QWEN3_MOE.read_text())
    stage_sparse(tmp_path, qwen3_moe_tensors(config), shards=4)
    on_disk = sum(os.stat(p).st_blocks * 512 for p in tmp_path.glob("*.safetensors"))
    assert on_disk < 64 * 2**20


def test_only_the_shards_the_index_maps_are_read(tmp_path: Path) -> None:
    """A Mistral repository's consolidated.safetensors beside its shards holds the same weights again."""
    config = json.loads(QWEN3_MOE.read_text())
    (tmp_path / "config.json").write_text(json.dumps(config))
    tensors = qwen3_moe_tensors(config)
    stage_sparse(tmp_path, tensors, shards=4)
    whole = VirtualSafetensors(tensors)
    with (tmp_path / "consolidated.safetensors").open("wb") as handle:
        handle.write(whole.header)
        handle.truncate(len(whole))
    index = {
        "weight_map": {name: f"model-{1 + i * 4 // len(tensors):05d}-of-00004.safetensors" for i, name in enumerate(tensors)}
    }
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    reads = profile_from_dir(tmp_path).decode_reads
    assert reads is not None and reads.total_params / 1e9 == pytest.approx(30.5, rel=0.005)
