"""DeepSeek-style sparse attention's KV cache on GB10 (DeepSeek-V3.2, GLM-5.x `glm_moe_dsa`), as vLLM builds it.

Each layer keeps its MLA latent as one opaque record a token, and each layer with its own indexer (all of them, or
those `index_topk_freq` / `index_topk_pattern` leave one: the others reuse the previous layer's top-k) the indexer's
key, 132 bytes (sparkfleet.reading.indexers). On SM 12.x the only sparse MLA backend is FlashInfer's
FLASHINFER_MLA_SPARSE_SM120, which takes `auto`, `fp8` and `fp8_e4m3` and serves each as vLLM's `fp8_ds_mla` record
(layers/attention/mla_attention.py _canonicalize_sparse_mla_kv_cache_dtype), in blocks of multiples of 64 tokens
(flashinfer_mla_sparse.py get_supported_kernel_block_sizes); a bfloat16 cache it refuses. vLLM's own `nvfp4_ds_mla`
is SM100 only (flashmla_sparse.py FlashMLASparseBackend.supports_combination); a build that serves a 4-bit record on
SM 12.x declares it (vllm_install_capabilities). Read in vLLM 0.32.0 and 0.33.0.

Pure. Enters: a profile, the platform, the KV dtype the plan resolved and the release's declared capabilities.
Leaves: the record vLLM keeps (its dtype name and bytes) with the reason, or None where this is not a sparse MLA on GB10.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PlanError
from ..models import ModelProfile, Platform, UnifiedPool

# 512 fp8 NoPE values, 4 float32 scales (one per 128 of them) and 64 bfloat16 RoPE values (flashmla_sparse.py's
# layout note; mla_attention.py MLAAttention.get_kv_cache_spec state_content_bytes).
FP8_DS_MLA_BYTES = 656
# vLLM's own 4-bit record: 256 bytes of e2m1 NoPE, 64 fp8 RoPE, 32 fp8 scales; SM100 only.
NVFP4_DS_MLA_SM100_BYTES = 352
# The 4-bit record local-inference-lab/vllm PR 82 serves on SM 12.x: 432 bytes (37,032 against 54,728 bytes a token
# over 79 layers and 22 indexers of a GLM-5.2-class model; ../shared/reference/field-anchors.md, "Frontier layouts").
NVFP4_DS_MLA_SM12X_BYTES = 432
NVFP4_DS_MLA_CAPABILITY = "nvfp4-ds-mla-sm12x"
# Each record by the name vLLM gives it on GB10, as sparse_mla_cache plans it.
RECORD_BYTES = {"fp8_ds_mla": FP8_DS_MLA_BYTES, "nvfp4_ds_mla": NVFP4_DS_MLA_SM12X_BYTES}
# FLASHINFER_MLA_SPARSE_SM120's kernels read 64-token pages.
SPARSE_MLA_BLOCK_GB10 = 64
SOURCE = (
    "vLLM 0.32.0 / 0.33.0: layers/attention/mla_attention.py _canonicalize_sparse_mla_kv_cache_dtype and "
    "MLAAttention.get_kv_cache_spec; v1/attention/backends/mla/flashinfer_mla_sparse.py "
    "FlashInferMLASparseSM120Backend; flashmla_sparse.py (the record layouts, nvfp4_ds_mla SM100 only); "
    "local-inference-lab/vllm PR 82 (nvfp4_ds_mla on SM 12.x, 432 B)"
)


@dataclass(frozen=True)
class SparseMlaCache:
    """The record vLLM keeps a token a layer, by the name vLLM gives its dtype."""

    kv_cache_dtype: str
    record_bytes: int
    why: str


def is_sparse_mla(profile: ModelProfile) -> bool:
    """An MLA with an indexer in one pool (DeepSeek-V3.2, GLM-5.x); GLM-5-Next's and DeepSeek-V4's pools are their own."""
    return profile.mla is not None and profile.indexer_bytes_per_token > 0 and isinstance(profile.kv_layout, UnifiedPool)


def sparse_mla_cache(
    profile: ModelProfile, platform: Platform, asked: str, capabilities: tuple[str, ...]
) -> SparseMlaCache | None:
    """The record for `asked` ("auto", "fp8", "bfloat16" or "nvfp4"); None off GB10 or for another layout."""
    if platform is not Platform.GB10 or not is_sparse_mla(profile):
        return None
    mla = profile.mla
    assert mla is not None
    if (mla.kv_lora_rank, mla.qk_rope_head_dim) != (512, 64):
        raise PlanError(
            "model",
            f"{profile.id}: a sparse MLA with a latent of {mla.kv_lora_rank} + {mla.qk_rope_head_dim}; vLLM's sparse "
            "records on GB10 hold 512 + 64 (DeepSeek-V3.2's geometry) only",
        )
    if asked == "bfloat16":
        raise PlanError(
            "intent.kv_cache_dtype",
            f"bf16: vLLM's only sparse MLA backend on GB10 (FLASHINFER_MLA_SPARSE_SM120) keeps {profile.id}'s cache in "
            "its fp8_ds_mla record and refuses a bfloat16 one",
            ("kv_cache_dtype auto (fp8_ds_mla, 656 B a token a layer)", "kv_cache_dtype fp8"),
        )
    if asked == "nvfp4":
        if NVFP4_DS_MLA_CAPABILITY not in capabilities:
            raise PlanError(
                "intent.kv_cache_dtype",
                f"nvfp4: vLLM's nvfp4_ds_mla record ({NVFP4_DS_MLA_SM100_BYTES} B) runs on SM100 only and GB10 is "
                f"SM 12.1 (flashmla_sparse.py); declaring {', '.join(capabilities) or 'none'}, this release has no 4-bit "
                "sparse record",
                (
                    "kv_cache_dtype auto (fp8_ds_mla)",
                    f"a fork release that declares {NVFP4_DS_MLA_CAPABILITY} (local-inference-lab/vllm PR 82, "
                    f"{NVFP4_DS_MLA_SM12X_BYTES} B; vllm_install_capabilities)",
                ),
            )
        return SparseMlaCache(
            "nvfp4_ds_mla",
            NVFP4_DS_MLA_SM12X_BYTES,
            f"nvfp4_ds_mla, {NVFP4_DS_MLA_SM12X_BYTES} B a token a layer: the release declares "
            f"{NVFP4_DS_MLA_CAPABILITY} (local-inference-lab/vllm PR 82)",
        )
    return SparseMlaCache(
        "fp8_ds_mla",
        FP8_DS_MLA_BYTES,
        f"fp8_ds_mla, {FP8_DS_MLA_BYTES} B a token a layer: FLASHINFER_MLA_SPARSE_SM120, GB10's only sparse MLA "
        f"backend, serves {asked} as it",
    )
