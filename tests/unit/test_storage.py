"""Staging refuses what does not fit with the numbers, per filesystem (what a hub model fetches: test_hub_manifest.py)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from storage_check import storage_check

from sparkfleet.models import GIB
from sparkfleet.storage import Need, Space, problems


def space(free_gib: float, device: int = 1, path: str = "/var/lib/sparkfleet/huggingface") -> Space:
    return Space(path=path, measured_at=path, free_bytes=int(free_gib * GIB), device=device, fs_type="ext4")


def test_what_fits_with_the_margin_passes_and_what_does_not_is_refused_with_the_numbers() -> None:
    needs = [Need(id="org/a", bytes=60 * GIB, into="hf_home")]
    assert problems(needs, {"hf_home": space(75)}, margin_gib=10) == []
    [refusal] = problems(needs, {"hf_home": space(65)}, margin_gib=10)
    assert "org/a (60.0 GiB)" in refusal and "65.0 GiB is free" in refusal and "10 GiB free" in refusal
    assert "/var/lib/sparkfleet/huggingface (ext4)" in refusal


def test_models_on_one_filesystem_are_summed_and_two_filesystems_are_checked_apart() -> None:
    needs = [Need(id="org/a", bytes=30 * GIB, into="hf_home"), Need(id="org/b", bytes=30 * GIB, into="model_store")]
    shared = {"hf_home": space(65), "model_store": space(65, path="/var/lib/sparkfleet/models")}
    assert len(problems(needs, shared, margin_gib=10)) == 1
    apart = {"hf_home": space(65), "model_store": space(65, device=2, path="/srv/models")}
    assert problems(needs, apart, margin_gib=10) == []


def test_the_filter_names_missing_facts_and_bad_input() -> None:
    storage = {"hf_home": space(100).model_dump()}
    assert storage_check([{"id": "a/b", "bytes": 1, "into": "hf_home"}], storage, 10) == []
    with pytest.raises(AnsibleFilterError, match="no free-space facts for model_store"):
        storage_check([{"id": "a/b", "bytes": 1, "into": "model_store"}], storage, 10)
    with pytest.raises(AnsibleFilterError, match="storage_check"):
        storage_check([{"id": "a/b", "bytes": -1, "into": "hf_home"}], storage, 10)
