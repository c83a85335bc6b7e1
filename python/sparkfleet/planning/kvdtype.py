"""The KV cache dtype an instance runs with: fp8 or the model dtype, or a sparse MLA's record on GB10 (fp8_ds_mla, or a
build's 4-bit nvfp4_ds_mla). Pure."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PlanError
from ..kv.sparse import SparseMlaCache, is_sparse_mla, sparse_mla_cache
from ..models import Intent, KvDtype, ModelProfile, Platform, ServeProfile, SpeculativeMethod


@dataclass(frozen=True)
class ResolvedKv:
    # As vLLM names it: auto, fp8, or a sparse MLA's record (fp8_ds_mla, nvfp4_ds_mla).
    kv_cache_dtype: str
    record: SparseMlaCache | None = None


def resolve_kv_dtype(profile: ModelProfile, intent: Intent, platform: Platform, capabilities: tuple[str, ...]) -> ResolvedKv:
    """A sparse MLA on GB10 keeps the record its one backend serves; any other layout auto or fp8."""
    if intent.kv_cache_dtype is KvDtype.NVFP4 and not (platform is Platform.GB10 and is_sparse_mla(profile)):
        raise PlanError(
            "intent.kv_cache_dtype",
            f"nvfp4: sparkfleet plans a 4-bit KV cache only as a sparse MLA's nvfp4_ds_mla record on GB10 (DeepSeek-V3.2, "
            f"GLM-5.x); {profile.id} on {platform.value} is not one. vLLM 0.32 / 0.33 read a plain nvfp4 cache only "
            "with FlashInfer's attention (v1/attention/backends/flashinfer.py supports_kv_cache_dtype, its FA2 path on "
            "SM 12.x; never for MLA, config/vllm.py), which the plans do not run on sm_121: the seeds pin Triton "
            "attention there, FlashInfer's crashing or mis-computing (seed 004; seed 002 §14.7)",
            ("kv_cache_dtype fp8", "kv_cache_dtype auto"),
        )
    asked = {KvDtype.BF16: "bfloat16", KvDtype.NVFP4: "nvfp4"}.get(intent.kv_cache_dtype) or dense_kv_dtype(profile, intent)
    record = sparse_mla_cache(profile, platform, asked, capabilities)
    if record is not None:
        return ResolvedKv(record.kv_cache_dtype, record)
    return ResolvedKv(dense_kv_dtype(profile, intent))


def dense_kv_dtype(profile: ModelProfile, intent: Intent) -> str:
    """auto or fp8 for every layout but a sparse MLA's on GB10: what the intent asks, or what the profile recommends."""
    dflash = intent.speculative is SpeculativeMethod.DFLASH
    mtp_fp8 = intent.speculative is SpeculativeMethod.MTP and profile.speculative.mtp_requires_fp8_kv
    if intent.kv_cache_dtype is KvDtype.FP8:
        if not profile.kv_fp8_supported:
            raise PlanError(
                "intent.kv_cache_dtype",
                f"fp8 KV gives scrambled output with {profile.id}",
                ("kv_cache_dtype bf16",),
            )
        if dflash:
            raise PlanError(
                "intent.kv_cache_dtype",
                "DFlash drafts need a BF16 KV cache",
                ("kv_cache_dtype bf16", "speculative mtp or ngram"),
            )
        return "fp8"
    if intent.kv_cache_dtype is KvDtype.BF16:
        if mtp_fp8:
            raise PlanError(
                "intent.kv_cache_dtype",
                f"the MTP draft of {profile.id} needs an fp8 KV cache",
                ("kv_cache_dtype fp8", "speculative none"),
            )
        return "auto"
    if dflash or not profile.kv_fp8_supported:
        return "auto"
    saver = intent.profile is ServeProfile.MEMORY_SAVER and not profile.kv_fp8_avoided
    wants_fp8 = profile.kv_fp8_recommended or mtp_fp8 or saver
    return "fp8" if wants_fp8 else "auto"
