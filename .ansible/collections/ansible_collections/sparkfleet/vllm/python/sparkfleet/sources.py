"""Short names for the field reports and vLLM facts that rules and numbers cite."""

from __future__ import annotations

SEED_MISTRAL = "seed 000 (Mistral-Small-4-119B NVFP4 on DGX Spark, haruni.net, 2026-03)"
SEED_VLLM_BLOG = "seed 001 (vLLM on the DGX Spark, vLLM team blog, 2026-06)"
SEED_GUIDE = "seed 002 (practical vLLM on DGX Spark guide, 2026-06)"
SEED_NANO = "seed 003 (Nemotron-3-Nano NVFP4 memory study on DGX Spark, 2026-03)"
SEED_SM121 = "seed 004 (vLLM 0.19 on SM121 field notes, single and two-node)"
VLLM_SEM = "vllm-semantics.md"


def vllm(section: str) -> str:
    return f"{VLLM_SEM} {section} (read from vLLM's released wheels)"
