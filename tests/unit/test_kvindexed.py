"""GLM-5-Next's and Qwen4-Exp's packed pool (sparkfleet.kv.indexed), at the shapes third-party transcriptions of their
config.json give. tests/vllm/kv_indexed.py checks the same layouts against vLLM's own alignment and packing; these
figures are worked by hand from vLLM's source, named at each step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkfleet.errors import PlanError
from sparkfleet.kv.cache import GroupKind, StateCheckpoints, state_checkpoints
from sparkfleet.kv.indexed import PackedKvGeometry, indexed_geometry, ring_tokens
from sparkfleet.models import IndexedPool, ModelProfile, Platform, cdiv
from sparkfleet.reading.config import profile_from_config
from sparkfleet.versions import VllmVersion

GIB = 1024**3

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
# Text configs as third-party transcriptions of their config.json give them (tests/fixtures/configs/README.md).
GLM_5_3_FLASH = json.loads((CONFIGS / "zai-org--GLM-5.3-Flash.json").read_text())
QWEN_3_8_FLASH_NEXT = json.loads((CONFIGS / "Qwen--Qwen3.8-Flash-Next.json").read_text())


def profile(config: dict[str, object]) -> ModelProfile:
    return profile_from_config("org/model", config, 100 * GIB, "test")


def on_gb10(profile: ModelProfile, release: str = "0.32.0", **options: int | bool) -> PackedKvGeometry:
    """The pool a GB10 plan uses, with the state checkpoints that release exports there."""
    checkpoints = state_checkpoints(profile, Platform.GB10, VllmVersion.parse(release))
    return indexed_geometry(profile, kv_cache_dtype="auto", checkpoints=checkpoints, **options)  # type: ignore[arg-type]


def groups(profile: ModelProfile, **options: int | bool) -> list[tuple[str, int, int]]:
    return sorted((g.kind.value, g.layers, g.block_size) for g in on_gb10(profile, **options).groups)


def test_glm_5_3_flash_pool_packs_latent_indexer_ring_and_kda_states() -> None:
    geo = on_gb10(profile(GLM_5_3_FLASH))
    # KDA state 147,456 + 4,194,304 B; 128-token steps of the 1,024-B latent until a page holds it (34 steps), then a
    # multiple of the indexer's 64 pools of 4 tokens (256): 4352.
    assert geo.block_size == 4352
    # The widest group is the 11 MLA layers: a latent page of 4352 x 1024 B and an indexer page of 4352 / 4 x 132 B each.
    assert geo.bytes_per_block == 11 * (4352 * 1024 + 4352 // 4 * 132) == 50_600_704
    # 34 KDA states fit at most 11 to a block of that width, so four groups; the 11 rings share one.
    assert groups(profile(GLM_5_3_FLASH)) == [
        ("full", 22, 4352),
        ("ring", 11, 4),
        ("state", 8, 4352),
        ("state", 8, 4352),
        ("state", 9, 4352),
        ("state", 9, 4352),
    ]
    # A request: its context in 4352-token blocks; per state group two live states (prefix caching) and FlashKDA's
    # prefill checkpoint; one ring block.
    assert geo.blocks_per_request(32768, 8192) == cdiv(32768, 4352) + 4 * (2 + 1) + 1


def test_qwen_3_8_flash_next_pool_keeps_the_n_gram_state_in_a_group_of_its_own() -> None:
    geo = on_gb10(profile(QWEN_3_8_FLASH_NEXT))
    # Gated-DeltaNet's 3,207,168-B state over the QSA layer's 2,048 B per token, in 16-token steps: 1568.
    assert geo.block_size == 1568
    # The widest group: 12 QSA pages of 1568 x 2048 B and their compressed keys, 1568 / 4 x 256 B.
    assert geo.bytes_per_block == 12 * (1568 * 2048 + 1568 // 4 * 256)
    # The n-gram state is held whole on every rank (tp_replicated), so vLLM never groups it with the sharded ones.
    assert ("state", 1, 1568) in groups(profile(QWEN_3_8_FLASH_NEXT))
    assert geo.blocks_per_request(32768, 8192) == cdiv(32768, 1568) + 4 * 2 + 1


def test_tensor_parallel_shards_the_linear_state_but_not_the_n_gram_state() -> None:
    model = profile(QWEN_3_8_FLASH_NEXT)
    one = indexed_geometry(model, kv_cache_dtype="auto")
    two = indexed_geometry(model, kv_cache_dtype="auto", tensor_parallel=2)
    # Half the state over half the KV heads per rank: the same block.
    assert two.block_size == one.block_size == 1568
    # Without the n-gram layer a rank's groups lose one state group, and nothing else changes.
    alone = indexed_geometry(model.model_copy(update={"replicated_state_layers": None}), kv_cache_dtype="auto")
    assert len(one.groups) == len(alone.groups) + 1


@pytest.mark.parametrize(("speculative", "glm_ring", "qwen_ring"), [(0, 4, 4), (1, 8, 8), (4, 8, 8), (5, 16, 12)])
def test_the_rings_hold_the_open_group_and_every_draft(speculative: int, glm_ring: int, qwen_ring: int) -> None:
    # GLM-5-Next rounds its pools up to a power of two (Glm5NextTailCache); Qwen4-Exp to whole groups (QSAKeyStateCache).
    glm, qwen = profile(GLM_5_3_FLASH).kv_layout, profile(QWEN_3_8_FLASH_NEXT).kv_layout
    assert isinstance(glm, IndexedPool) and isinstance(qwen, IndexedPool)
    glm, qwen = glm.ring, qwen.ring
    assert (ring_tokens(glm, speculative), ring_tokens(qwen, speculative)) == (glm_ring, qwen_ring)


def test_a_ring_that_does_not_divide_the_block_is_refused_as_vllm_refuses_it() -> None:
    # 5 drafts: a 12-token ring, and 12 does not divide Qwen4-Exp's block, which vLLM asserts at start.
    with pytest.raises(PlanError) as refused:
        indexed_geometry(profile(QWEN_3_8_FLASH_NEXT), kv_cache_dtype="auto", speculative_tokens=5)
    assert refused.value.variable == "intent.num_speculative_tokens" and "does not divide" in refused.value.problem


def test_without_prefix_caching_a_state_group_holds_one_live_state_and_no_checkpoint() -> None:
    cached = on_gb10(profile(GLM_5_3_FLASH))
    plain = on_gb10(profile(GLM_5_3_FLASH), prefix_caching=False)
    states = sum(1 for g in cached.groups if g.kind is GroupKind.STATE)
    assert cached.blocks_per_request(32768, 8192) - plain.blocks_per_request(32768, 8192) == 2 * states


def test_flash_kda_checkpoints_only_where_gb10_runs_flash_kda() -> None:
    v032 = VllmVersion.parse("0.32.0")
    assert state_checkpoints(profile(GLM_5_3_FLASH), Platform.GB10, v032) == StateCheckpoints(blocks=1)
    # 64-wide KDA heads take the Triton prefill, and so does the CPU platform: no checkpoint.
    narrow = {**GLM_5_3_FLASH, "linear_attn_config": {"num_heads": 64, "head_dim": 64, "short_conv_kernel_size": 4}}
    assert state_checkpoints(profile(narrow), Platform.GB10, v032) == StateCheckpoints()
    assert state_checkpoints(profile(GLM_5_3_FLASH), Platform.CPU, v032) == StateCheckpoints()
    assert on_gb10(profile(GLM_5_3_FLASH)).state_blocks_per_request == 3


def test_qwen4_exp_on_vllm_0_33_checkpoints_both_state_kinds_on_a_64_token_grid() -> None:
    # 0.32 runs Gated-DeltaNet's prefill on Triton: no checkpoint, 16-token steps to 1568.
    assert (
        on_gb10(profile(QWEN_3_8_FLASH_NEXT)).block_size,
        on_gb10(profile(QWEN_3_8_FLASH_NEXT)).state_blocks_per_request,
    ) == (1568, 2)
    # 0.33 runs FlashInfer's (128-wide keys on SM 12.x), and the n-gram convolution exports on the same grid
    # (ple_layer.py): 64-token steps to 1600, and a checkpoint block in every state group.
    newer = on_gb10(profile(QWEN_3_8_FLASH_NEXT), "0.33.0")
    assert (newer.block_size, newer.state_blocks_per_request) == (1600, 3)


@pytest.mark.parametrize("ratio", [None, 1, "4"])
def test_a_qsa_config_without_a_compress_ratio_is_refused_naming_the_field(ratio: object) -> None:
    config = {k: v for k, v in QWEN_3_8_FLASH_NEXT.items() if k != "indexer_compress_ratio"}
    if ratio is not None:
        config["indexer_compress_ratio"] = ratio
    with pytest.raises(PlanError) as refused:
        profile(config)
    assert refused.value.variable == "model" and "indexer_compress_ratio" in refused.value.problem
