"""The A/B levers an intent pulls in place of the plan's choice (issue 49): each checked against the model and the
release before anything is planned. Pure.

- moe_backend: the MoE kernel (seed 002 §7.1.4 found flashinfer_cutlass faster than Marlin on one model and build).
- attention_backend: the attention kernel (seed 002's Coder-Next recipe runs FlashInfer, seed 004 advises against it
  for FP8 models: the other is one intent away).
"""

from __future__ import annotations

from ..errors import PlanError
from ..models import Intent, ModelProfile, ReleaseRecord
from ..versions import FLAGS, MOE_BACKENDS, VllmVersion, has_flag


def _has(version: VllmVersion, record: ReleaseRecord | None, flag: str) -> bool:
    return flag in record.flags if record is not None else has_flag(version, flag)


def check_attention_backend(intent: Intent, version: VllmVersion, record: ReleaseRecord | None = None) -> None:
    """intent.attention_backend: a release with --attention-backend (its own parser checks the name), and one of the
    backends the build registers where its record was read."""
    asked = intent.attention_backend
    if record is not None and asked is not None and record.attention_backends and asked not in record.attention_backends:
        raise PlanError(
            "intent.attention_backend",
            f"{asked!r} is not an attention backend vLLM {record.vllm_version} as built registers ({record.source})",
            tuple(f"attention_backend {b}" for b in ("FLASHINFER", "TRITON_ATTN") if b in record.attention_backends),
        )
    if asked is not None and not _has(version, record, "--attention-backend"):
        raise PlanError(
            "intent.attention_backend",
            f"vLLM {version} has no --attention-backend (from {FLAGS['--attention-backend'].first})",
            (f"vllm_version {FLAGS['--attention-backend'].first} or newer",),
        )


def check_moe_backend(
    profile: ModelProfile, intent: Intent, version: VllmVersion, record: ReleaseRecord | None = None
) -> None:
    """intent.moe_backend: a model with MoE layers, and one of the release's choices where they were read: the build's
    own record, else the stock wheel's table (vLLM lower-cases the value and reads '-' as '_', as its own --moe-backend
    type does)."""
    asked = intent.moe_backend
    if asked is None:
        return
    if not profile.moe:
        raise PlanError("intent.moe_backend", f"{asked}: {profile.id} has no MoE layers", ("leave moe_backend unset",))
    if not _has(version, record, "--moe-backend"):
        raise PlanError(
            "intent.moe_backend",
            f"vLLM {version} has no --moe-backend (from {FLAGS['--moe-backend'].first})",
            (f"vllm_version {FLAGS['--moe-backend'].first} or newer",),
        )
    choices = record.choices("--moe-backend") if record else MOE_BACKENDS.get(f"{version.major}.{version.minor}.0")
    if choices is not None and asked.lower().replace("-", "_") not in choices:
        raise PlanError(
            "intent.moe_backend",
            f"{asked!r} is not a MoE backend of vLLM {version} (config/kernel.py MoEBackend)",
            tuple(f"moe_backend {c}" for c in ("marlin", "flashinfer_cutlass", "triton") if c in choices),
        )
