"""Issue 49.7: the NVLS reason says what is known; the report it cites was retracted as a cure."""

from __future__ import annotations

from sparkfleet.hostconfig.cluster import NcclLibraries, nccl_choice


def test_nvls_stays_off_as_a_precaution_citing_the_retraction() -> None:
    _, env = nccl_choice(NcclLibraries(pip="/venv/nvidia/nccl/lib/libnccl.so.2", pip_version="2.30.4"), "pip", "spark01")
    nvls = next(e for e in env if e.name == "NCCL_NVLS_ENABLE")
    assert nvls.value == "0"
    assert "cure" in nvls.reason and "precaution" in nvls.reason and "cures it" not in nvls.source
    assert "retracted" in nvls.source and "nccl#2167" in nvls.source
