"""Where each instance's model and drafter come from (sparkfleet.modelsource): one decision, in order."""

from __future__ import annotations

from typing import Any

import pytest

from sparkfleet.errors import PlanError
from sparkfleet.modelsource import SourceFacts, planner_instances, source_of

HF, STORE = "/var/lib/sparkfleet/huggingface", "/var/lib/sparkfleet/models"
STAGED = {"id": "org/m", "path": f"{STORE}/org/m", "complete": True, "config": {"model_type": "llama"}}
DESCRIBED = {"id": "/ctl/m", "path": "/ctl/m", "config": {"model_type": "llama"}, "weight_bytes": 1}
HUB = {"id": "org/m", "path": "org/m", "config": {"model_type": "llama"}, "weight_bytes": 2}


def facts(**given: Any) -> SourceFacts:
    return SourceFacts(hf_home=HF, model_store=STORE, **given)


def test_a_complete_staged_copy_comes_first() -> None:
    both = facts(staged={"org/m": STAGED}, hub={"org/m": HUB}, pins={"org/m": {"commit": "c" * 40}})
    assert source_of(both, "org/m", "model") == STAGED


def test_a_controller_directory_is_read_where_model_stage_will_put_it() -> None:
    given = facts(
        staged={"org/m": {"complete": False}},
        stage_entries=[{"id": "org/m", "src": "/ctl/m"}],
        described={"/ctl/m": DESCRIBED},
    )
    assert source_of(given, "org/m", "model") == {**DESCRIBED, "id": "org/m", "path": f"{STORE}/org/m", "fs_type": None}
    assert "fs_type" not in source_of(given, "org/m", "drafter")  # type: ignore[operator]


def test_a_hub_model_is_served_at_its_pin_and_a_drafter_by_its_staged_path() -> None:
    pin = {"commit": "c" * 40}
    given = facts(hub={"org/m": HUB}, pins={"org/m": pin}, stage_entries=[{"id": "org/m"}])
    assert source_of(given, "org/m", "model") == {**HUB, "commit": "c" * 40, "hf_home": HF}
    assert source_of(given, "org/m", "drafter") == HUB
    only_pinned = facts(pins={"org/m": pin})
    assert source_of(only_pinned, "org/m", "model") == {"id": "org/m", "path": "org/m", "commit": "c" * 40, "hf_home": HF}
    assert source_of(only_pinned, "org/m", "drafter") == "org/m"


def test_a_catalog_id_is_passed_as_it_is() -> None:
    assert source_of(facts(stage_entries=[{"id": "nvidia/x"}]), "nvidia/x", "model") == "nvidia/x"


def test_the_planner_request_takes_intent_defaults_and_a_key_only_as_a_flag() -> None:
    given = facts(staged={"org/m": STAGED})
    (plain,) = planner_instances([{"name": "a", "model": "org/m"}], given, host="h", keyed=set(), link={})
    assert plain["intent"] == {"api_key": False, "served_name": "org/m"} and plain["placement"] is None
    (keyed,) = planner_instances(
        [{"name": "a", "model": "org/m", "port": "8001", "host": "127.0.0.1", "on_demand": True}],
        given, host="h", keyed={"a"}, link={},
    )  # fmt: skip
    assert keyed["intent"]["port"] == 8001 and keyed["intent"]["api_key"] is True and keyed["on_demand"] is True


def test_a_native_multi_node_rank_runs_where_the_link_puts_it() -> None:
    given = facts(staged={"org/m": STAGED})
    link = {"master_addr": "10.0.0.1", "host_ip": "10.0.0.2"}
    native = {"name": "a", "model": "org/m", "intent": {"nodes": 2}, "rank": 1}
    ray = {"name": "b", "model": "org/m", "intent": {"nodes": 2, "cluster_backend": "ray"}}
    first, second = planner_instances([native, ray], given, host="h", keyed=set(), link=link)
    assert first["placement"] == {"rank": 1, **link} and second["placement"] is None


@pytest.mark.parametrize("render_only", [False, True])
def test_a_model_nothing_provides_is_refused_unless_only_rendered(render_only: bool) -> None:
    given = facts(render_only=render_only)
    items = [{"name": "a", "model": "org/gone"}]
    if render_only:
        assert planner_instances(items, given, host="h", keyed=set(), link={})[0]["model"] == "org/gone"
        return
    with pytest.raises(PlanError) as exc:
        planner_instances(items, given, host="h", keyed=set(), link={})
    assert exc.value.variable == "vllm_serve_instances[0].model" and "not staged on h" in str(exc.value)


def test_an_instances_chat_template_is_read_from_where_the_role_writes_it() -> None:
    given = facts(staged={"org/m": STAGED}, template_dir="/etc/sparkfleet")
    (planned,) = planner_instances(
        [{"name": "qwen", "model": "org/m", "chat_template": "templates/qwen35.jinja"}],
        given,
        host="h",
        keyed=set(),
        link={},
    )
    assert planned["intent"]["chat_template"] == "/etc/sparkfleet/qwen.chat-template.jinja"
    with pytest.raises(PlanError, match="vllm_serve_instances.chat_template"):
        planner_instances(
            [{"name": "qwen", "model": "org/m", "chat_template": "t.jinja"}],
            facts(staged={"org/m": STAGED}), host="h", keyed=set(), link={},
        )  # fmt: skip


def test_the_unstaged_refusal_names_each_missing_model_by_its_place_and_a_missing_release() -> None:
    from sparkfleet.boundary.filters import unstaged_refusal

    where = {"host": "spark01", "root": "/opt/sparkfleet", "model_store": "/m", "hf_home": "/hf"}
    instances = [{"name": "a", "model": "org/a"}, {"name": "b", "model": "org/b"}]
    staged = {"org/a": {"complete": True}, "org/b": {"complete": False}}
    said = unstaged_refusal(instances, ["org/draft"], staged, {"vllm_version": "0.33.0"}, where)
    assert said == (
        "vllm_serve_instances[1].model: org/b is not staged on spark01 (looked in /m/org/b and /hf/hub); add it to "
        "model_stage_models and run the model_stage role. vllm_serve_instances[*].intent.drafter: org/draft is not "
        "staged on spark01 (looked in /m/org/draft and /hf/hub); add it to model_stage_models and run the model_stage role."
    )
    none = unstaged_refusal(instances, [], staged, None, where, True)
    assert none.startswith("spark01 has no vLLM release at /opt/sparkfleet/current") and "org/b" not in none
    assert unstaged_refusal(instances[:1], [], staged, {"vllm_version": "0.33.0"}, where) == ""
