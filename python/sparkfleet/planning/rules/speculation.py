"""Rules for load strategy, speculative decoding and long context."""

from __future__ import annotations

import json
import posixpath

from ...models import Platform, SpeculativeMethod
from ...sources import SEED_GUIDE
from ...versions import FIRST_SPECULATION_SCHEDULE, capability_origin, has_speculation_schedule
from .base import Entry, Settings, arg, env


def _drafter_config(drafter: str) -> dict[str, object]:
    """A hub id's @REVISION becomes the speculative config's own revision field; a directory is loaded as is."""
    if drafter.startswith(("/", ".", "~")) or "@" not in drafter:
        return {"model": drafter}
    repo, revision = drafter.split("@", 1)
    return {"model": repo, "revision": revision}


def load_strategy(s: Settings) -> list[Entry]:
    if s.load.flag is None:
        return []
    flag, value = s.load.flag
    return [arg(flag, value, reason=f"load {s.load.strategy.value}: {s.load.reason}", source=s.load.source)]


# From this many running requests on, speculation costs more total throughput than it saves latency.
SPECULATION_OFF_AT = 32


def speculation_schedule(s: Settings) -> list[list[int]] | None:
    """K drafted tokens below SPECULATION_OFF_AT running requests, none from there on (vLLM's per-batch-size schedule)."""
    if s.max_num_seqs < SPECULATION_OFF_AT or not has_speculation_schedule(s.version):
        return None
    return [[1, SPECULATION_OFF_AT - 1, s.speculative_tokens], [SPECULATION_OFF_AT, s.max_num_seqs, 0]]


def speculative(s: Settings) -> list[Entry]:
    method = s.intent.speculative
    if method is SpeculativeMethod.NONE:
        return []
    config: dict[str, object] = {"method": method.value, "num_speculative_tokens": s.speculative_tokens}
    source = f"{SEED_GUIDE} §14"
    out: list[Entry] = []
    if method is SpeculativeMethod.NGRAM:
        config.update(prompt_lookup_min=2, prompt_lookup_max=5)
    elif s.intent.drafter:
        config.update(_drafter_config(s.intent.drafter))
        source += f"; drafter {s.intent.drafter} (intent.drafter)"
    elif method is SpeculativeMethod.MTP and s.profile.speculative.mtp_draft_subdir and s.model_dir:
        # A relative path would be read as a hub repository's name: the bundled draft is given by absolute path.
        config["model"] = posixpath.join(s.model_dir, s.profile.speculative.mtp_draft_subdir)
        source += f"; the draft bundled in the model's {s.profile.speculative.mtp_draft_subdir}/ ({SEED_GUIDE} §7.2.3)"
    if method is SpeculativeMethod.MTP and s.profile.speculative.mtp_moe_backend and s.host.platform is Platform.GB10:
        config["moe_backend"] = s.profile.speculative.mtp_moe_backend
        source += f"; the draft's MoE on {config['moe_backend']}: {s.profile.sources['mtp_moe_backend']}"
    schedule = speculation_schedule(s)
    if schedule:
        config["num_speculative_tokens_per_batch_size"] = schedule
        source += (
            f"; off from {SPECULATION_OFF_AT} running requests ({SEED_GUIDE} §14.3, §14.7: it costs throughput under "
            f"load), by vLLM's per-batch-size schedule (PR #32374; the V0 flag is gone), "
            f"checked on {FIRST_SPECULATION_SCHEDULE}+"
        )
    if method is SpeculativeMethod.DFLASH:
        config.setdefault("model", s.profile.speculative.dflash_drafter)
        source += f"; capability dflash: {capability_origin('dflash', s.version, s.host.vllm_capabilities)}"
        out.append(
            env(
                "VLLM_USE_DEEP_GEMM",
                "0",
                reason="DeepGEMM is incompatible with the DFlash draft path",
                source=f"{SEED_GUIDE} §14.7",
            )
        )
    out.insert(
        0,
        arg(
            "--speculative-config",
            json.dumps(config, separators=(",", ":")),
            reason=f"{method.value} speculative decoding: Spark decode is bandwidth-bound",
            source=source,
        ),
    )
    return out


def long_context(s: Settings) -> list[Entry]:
    if s.long_context:
        return [
            env(
                "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
                "1",
                reason=(
                    f"the publisher supports {s.profile.long_context_max} tokens, past the config's "
                    f"{s.profile.native_max_context}; no rope override"
                ),
                source=s.profile.sources["long_context_max"],
            )
        ]
    if not s.yarn:
        return []
    assert s.profile.yarn_hf_overrides is not None
    return [
        arg(
            "--hf-overrides",
            s.profile.yarn_hf_overrides,
            reason="static YaRN past the native context (may dent short-context quality)",
            source=s.profile.sources.get("yarn_hf_overrides", SEED_GUIDE),
        ),
        env(
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
            "1",
            reason="lets max-model-len exceed the config's limit",
            source=f"{SEED_GUIDE} §7.1.2",
        ),
    ]
