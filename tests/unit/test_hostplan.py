from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from conftest import cpu_host, spark
from hypothesis import given
from hypothesis import strategies as st

from sparkfleet.boundary.adapters import host_plan, plain
from sparkfleet.catalog import get_profile
from sparkfleet.errors import InfeasibleError, PlanError
from sparkfleet.models import Intent
from sparkfleet.planning.hostplan import (
    INSTANCE_ACCOUNT_PREFIX,
    InstanceRequest,
    footprint_gib,
    instance_account,
    own_account,
    plan_host,
)
from sparkfleet.planning.planner import plan

ROOT = Path(__file__).resolve().parents[2]

NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"


def request(name: str, port: int, host: str = "127.0.0.1", **intent: object) -> InstanceRequest:
    return InstanceRequest(
        name=name,
        profile=get_profile(NANO),
        model_ref=NANO,
        intent=Intent(trust_remote_code=True, port=port, host=host, **intent),
    )  # type: ignore[arg-type]


def test_two_instances_that_fit_are_planned_side_by_side() -> None:
    result = plan_host(spark(), [request("a", 8000, max_context=32768), request("b", 8001, max_context=32768)])
    assert set(result.instances) == {"a", "b"}
    assert result.footprint_gib == pytest.approx(sum(footprint_gib(p) for p in result.instances.values()), abs=0.02)
    assert result.footprint_gib <= result.usable_gib


def test_port_clash_names_the_second_instance_and_a_free_port() -> None:
    with pytest.raises(PlanError) as err:
        plan_host(
            spark(),
            [request("a", 8000), request("b", 8000, host="0.0.0.0", allow_unauthenticated_bind=True)],
            "vllm_serve_instances",
        )
    assert err.value.variable == "vllm_serve_instances[1].port"
    assert "port 8001" in str(err.value)


def test_same_port_on_different_addresses_is_allowed() -> None:
    plan_host(spark(), [request("a", 8000, host="127.0.0.1"), request("b", 8000, host="127.0.0.2", max_context=8192)])


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(PlanError, match=r"instances\[1\]\.name"):
        plan_host(spark(), [request("a", 8000), request("a", 8001)])


def test_instances_that_fit_alone_but_not_together_are_refused() -> None:
    big = {"profile": "throughput", "max_context": 65536}
    with pytest.raises(InfeasibleError) as err:
        plan_host(spark(), [request("a", 8000, **big), request("b", 8001, **big)], "vllm_serve_instances")
    assert err.value.variable == "vllm_serve_instances"
    assert "together" in str(err.value)


def test_an_instance_error_names_its_list_entry() -> None:
    with pytest.raises(PlanError) as err:
        plan_host(spark(), [request("a", 8000), request("b", 8001, host="0.0.0.0")], "vllm_serve_instances")
    assert err.value.variable.startswith("vllm_serve_instances[1] (b) intent.host")


def test_adapter_plans_a_staged_catalog_model_from_its_path() -> None:
    staged = {
        "id": NANO,
        "path": "/var/lib/sparkfleet/huggingface/hub/models--x/snapshots/abc",
        "present": True,
        "config": {},
    }
    facts = cpu_host().model_dump(mode="json") | {"platform": "gb10", "mem_total_bytes": spark().mem_total_bytes}
    result = host_plan(
        facts, [{"name": "nano", "model": staged, "intent": {"max_context": 8192, "trust_remote_code": True}}]
    )
    served = result.instances["nano"]
    assert served.argv[2] == staged["path"] and served.model == staged["path"]


def test_adapter_plans_dflash_on_a_fork_whose_facts_declare_it() -> None:
    """What vllm_serve hands the filter: the host facts plus the release's version and declared capabilities."""
    facts = spark("0.19.0").model_dump(mode="json")
    instance = {"name": "aeon", "model": "AEON-7/DFlash-Qwen3.5-27B-Uncensored-NVFP4"}
    instance["intent"] = {"speculative": "dflash", "max_context": 32768, "concurrency": 1, "trust_remote_code": True}
    with pytest.raises(PlanError, match="a fork release that declares dflash"):
        host_plan(facts, [instance])
    served = host_plan(facts | {"vllm_capabilities": ["dflash"]}, [instance]).instances["aeon"]
    assert any("declared by the release" in reason.source for reason in served.reasons)


def test_adapter_refuses_an_unstaged_local_model() -> None:
    with pytest.raises(PlanError, match=r"instances\[0\].model: local/x: no config.json"):
        host_plan(
            cpu_host().model_dump(mode="json"), [{"name": "x", "model": {"id": "local/x", "path": "/m", "present": False}}]
        )


class LazyList(list):  # type: ignore[type-arg]
    """Stands in for ansible-core 2.19's lazy containers: items resolve only through Python-level access."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        return (str(item).upper() for item in super().__iter__())


def test_plain_resolves_lazy_containers_through_python_iteration() -> None:
    assert plain({"a": LazyList(["x", "y"]), "b": ({"c": 1},)}) == {"a": ["X", "Y"], "b": [{"c": 1}]}


def on_demand(name: str, port: int, idle: int = 900, **intent: object) -> InstanceRequest:
    return request(name, port, **intent).model_copy(update={"on_demand": True, "idle_stop_after_s": idle})


def test_on_demand_instances_need_to_fit_only_one_at_a_time_beside_the_always_on_ones() -> None:
    big = {"max_context": 262144, "concurrency": 32}
    always = request("a", 8000, max_context=32768)
    result = plan_host(spark(), [always, on_demand("b", 8001, **big), on_demand("c", 8002, idle=120, **big)])
    always_gib = footprint_gib(result.instances["a"])
    largest = max(footprint_gib(result.instances[n]) for n in ("b", "c"))
    assert set(result.on_demand) == {"b", "c"} and result.on_demand["c"].idle_stop_after_s == 120
    assert result.on_demand["b"].footprint_gib == pytest.approx(footprint_gib(result.instances["b"]), abs=0.01)
    assert result.on_demand_budget_gib == pytest.approx(result.usable_gib - always_gib, abs=0.02)
    assert result.footprint_gib == pytest.approx(always_gib + largest, abs=0.02)
    assert result.footprint_gib <= result.usable_gib
    # Together the two on-demand ones would not fit: that is the activator's to keep apart.
    assert result.on_demand["b"].footprint_gib + result.on_demand["c"].footprint_gib > result.on_demand_budget_gib


def test_an_on_demand_instance_that_cannot_fit_beside_the_always_on_ones_is_refused() -> None:
    big = {"profile": "throughput", "max_context": 65536}
    with pytest.raises(InfeasibleError) as err:
        plan_host(spark(), [request("a", 8000, **big), on_demand("b", 8001, **big)], "vllm_serve_instances")
    assert err.value.variable == "vllm_serve_instances[1].on_demand"
    assert "beside them on its own" in err.value.problem and "(a)" in err.value.problem


def test_adapter_reads_on_demand_and_refuses_what_it_cannot_use() -> None:
    facts = cpu_host().model_dump(mode="json") | {"platform": "gb10", "mem_total_bytes": spark().mem_total_bytes}
    tiny = {"name": "t", "model": NANO, "intent": {"max_context": 8192, "trust_remote_code": True}}
    result = host_plan(facts, [tiny | {"on_demand": True, "idle_stop_after": 60}], "vllm_serve_instances")
    assert result.on_demand["t"].idle_stop_after_s == 60
    cases = {
        "on_demand": ({"on_demand": "yes"}, "is not true or false"),
        "idle_stop_after": ({"idle_stop_after": 60}, "on_demand instance only"),
    }
    for field, (extra, problem) in cases.items():
        with pytest.raises(PlanError) as err:
            host_plan(facts, [tiny | extra], "vllm_serve_instances")
        assert err.value.variable == f"vllm_serve_instances[0].{field}" and problem in err.value.problem
    with pytest.raises(PlanError) as err:
        host_plan(facts, [tiny | {"on_demand": True, "idle_stop_after": 5}], "vllm_serve_instances")
    assert err.value.variable == "vllm_serve_instances[0].idle_stop_after" and "60" in err.value.problem


def test_each_instance_runs_as_an_account_of_its_own_named_after_its_unit() -> None:
    result = plan_host(spark(), [request("a", 8000, max_context=32768), request("chat-2", 8001, max_context=32768)])
    assert result.accounts == {"a": "sparkfleet-vllm-a", "chat-2": "sparkfleet-vllm-chat-2"}


@given(st.from_regex(r"[a-z0-9][a-z0-9-]{0,39}", fullmatch=True), st.from_regex(r"[a-z0-9][a-z0-9-]{0,39}", fullmatch=True))
def test_account_names_fit_linux_and_two_names_never_share_one(first: str, second: str) -> None:
    for name in (first, second):
        account = instance_account(name)
        assert len(account) <= 32 and account.startswith(INSTANCE_ACCOUNT_PREFIX)
        assert re.fullmatch(r"[a-z_][a-z0-9_-]*", account)
    assert (instance_account(first) == instance_account(second)) == (first == second)


def test_an_instance_ray_runs_shares_the_service_users_account_with_rays_workers() -> None:
    ray = Intent(trust_remote_code=True, nodes=2, tensor_parallel_size=2, max_context=8192, cluster_backend="ray")  # type: ignore[arg-type]
    served = plan(spark(), get_profile(NANO), ray, model_ref=NANO)
    assert not own_account(served)
    assert own_account(plan(spark(), get_profile(NANO), Intent(trust_remote_code=True, max_context=8192), model_ref=NANO))


def test_the_roles_look_instance_accounts_up_by_the_planners_prefix() -> None:
    published = yaml.safe_load((ROOT / "roles" / "sparkfleet" / "vars" / "main.yml").read_text())
    assert published["sparkfleet_instance_account_prefix"] == INSTANCE_ACCOUNT_PREFIX
