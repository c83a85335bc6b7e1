from __future__ import annotations

import pytest

from sparkfleet.versions import EnvState, VllmVersion, env_state, has_flag


def test_versions_order_numerically_not_as_strings() -> None:
    assert VllmVersion.parse("0.9.0") < VllmVersion.parse("0.17.0") < VllmVersion.parse("0.32.0+cpu")
    assert str(VllmVersion.parse("v0.23")) == "0.23.0"
    with pytest.raises(ValueError, match="not a vLLM version"):
        VllmVersion.parse("main")


@pytest.mark.parametrize(
    ("flag", "version", "present"),
    [
        ("--cuda-graph-sizes", "0.12.0", True),
        ("--cuda-graph-sizes", "0.13.0", False),
        ("--moe-backend", "0.16.0", False),
        ("--moe-backend", "0.17.0", True),
        ("--linear-backend", "0.21.0", False),
    ],
)
def test_flag_history(flag: str, version: str, present: bool) -> None:
    assert has_flag(VllmVersion.parse(version), flag) is present


@pytest.mark.parametrize(
    ("name", "version", "state"),
    [
        ("VLLM_ATTENTION_BACKEND", "0.14.0", EnvState.DEPRECATED),
        ("VLLM_ATTENTION_BACKEND", "0.15.0", EnvState.REMOVED),
        ("VLLM_USE_FLASHINFER_MOE_FP4", "0.23.0", EnvState.DEPRECATED),
        ("VLLM_TEST_FORCE_FP8_MARLIN", "0.29.0", EnvState.REMOVED),
        ("VLLM_MXFP4_BACKEND", "0.19.0", EnvState.ABSENT),
        ("VLLM_MARLIN_USE_ATOMIC_ADD", "0.33.0", EnvState.HONOURED),
    ],
)
def test_env_history(name: str, version: str, state: EnvState) -> None:
    assert env_state(VllmVersion.parse(version), name) is state
