"""The front door's plan: routes by model name, the allow-list, clients kept as digests, refusals."""

from __future__ import annotations

import hashlib
import json

import pytest
from conftest import spark
from hypothesis import given
from hypothesis import strategies as st

from sparkfleet.boundary.adapters import front_door_plan
from sparkfleet.catalog import get_profile
from sparkfleet.errors import PlanError
from sparkfleet.hostconfig.door import GENERATE_PATHS, METRICS_CLIENT, METRICS_PREFIX, key_digest
from sparkfleet.models import Intent
from sparkfleet.planning.hostplan import HostPlan, InstanceRequest, OnDemand, plan_host
from sparkfleet.planning.requestsize import max_request_mib

NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
KEY_A = "a" * 40
KEY_B = "B-" + "b" * 38


def host(*instances: tuple[str, int, dict[str, object]], behind_door: bool = True) -> HostPlan:
    requests = [
        InstanceRequest(
            name=name,
            profile=get_profile(NANO),
            model_ref=NANO,
            intent=Intent.model_validate(
                {"trust_remote_code": True, "port": port, "max_context": 8192, "concurrency": 1} | intent
            ),
        )
        for name, port, intent in instances
    ]
    return plan_host(spark(), requests, "vllm_serve_instances", behind_door)


TWO = (("coder", 8000, {"served_name": "coder"}), ("chat", 8001, {"served_name": "chat"}))


def door(plan: HostPlan, **settings: object) -> dict[str, object]:
    return front_door_plan(plan.model_dump(mode="json"), settings).model_dump(mode="json")


def test_each_model_name_routes_to_its_instances_socket() -> None:
    result = door(host(*TWO), clients=[{"name": "alice", "key": KEY_A}])
    routes = {r["served_name"]: (r["instance"], r["upstream"], r["paths"]) for r in result["routes"]}  # type: ignore[union-attr]
    assert routes == {
        "chat": ("chat", "unix:/run/sparkfleet-vllm-chat/api.sock", list(GENERATE_PATHS)),
        "coder": ("coder", "unix:/run/sparkfleet-vllm-coder/api.sock", list(GENERATE_PATHS)),
    }
    assert result["paths"] == sorted(GENERATE_PATHS)
    assert [m["id"] for m in result["models"]["data"]] == ["chat", "coder"]  # type: ignore[index]


def test_an_instance_on_tcp_is_routed_to_its_loopback_port() -> None:
    result = door(host(*TWO, behind_door=False))
    assert {r["instance"]: r["upstream"] for r in result["routes"]} == {  # type: ignore[union-attr]
        "chat": "127.0.0.1:8001",
        "coder": "127.0.0.1:8000",
    }


def test_behind_the_door_vllm_serves_on_its_socket_and_not_on_a_port() -> None:
    plan = host(*TWO)
    chat = plan.instances["chat"]
    assert chat.argv[chat.argv.index("--uds") + 1] == "/run/sparkfleet-vllm-chat/api.sock"
    assert "--host" not in chat.argv and "--port" not in chat.argv
    endpoint = plan.endpoints["chat"]
    assert endpoint.socket == "/run/sparkfleet-vllm-chat/api.sock"
    assert endpoint.runtime_directory == "sparkfleet-vllm-chat"
    assert endpoint.local_url == "http+unix://%2Frun%2Fsparkfleet-vllm-chat%2Fapi.sock"
    assert any(r.item.startswith("--uds") and "door" in r.reason for r in chat.reasons)


def test_the_metrics_key_is_the_doors_own_client_and_no_user_may_take_its_name() -> None:
    result = door(host(*TWO), clients=[{"name": "alice", "key": KEY_A}], metrics_key=KEY_B)
    assert {"name": METRICS_CLIENT, "key_sha256": key_digest(KEY_B)} in result["clients"]  # type: ignore[operator]
    assert result["metrics_prefix"] == METRICS_PREFIX and result["metrics_client"] == METRICS_CLIENT
    with pytest.raises(PlanError) as err:
        door(host(*TWO), clients=[{"name": METRICS_CLIENT, "key": KEY_A}], metrics_key=KEY_B)
    assert err.value.variable == "front_door_clients[0].name"


def test_keys_leave_the_planner_only_as_digests() -> None:
    result = door(host(*TWO), clients=[{"name": "alice", "key": KEY_A}, {"name": "bob", "key": KEY_B}])
    assert result["clients"] == [
        {"name": "alice", "key_sha256": hashlib.sha256(KEY_A.encode()).hexdigest()},
        {"name": "bob", "key_sha256": key_digest(KEY_B)},
    ]
    text = json.dumps(result)
    assert KEY_A not in text and KEY_B not in text


def test_an_instance_bound_beyond_loopback_is_refused_by_the_door() -> None:
    public = host(("open", 8000, {"host": "0.0.0.0", "allow_unauthenticated_bind": True}))
    with pytest.raises(PlanError) as err:
        door(public)
    assert err.value.variable == "vllm_serve_instances (open).host"
    assert "loopback only" in err.value.problem


def test_one_model_name_on_two_instances_is_refused() -> None:
    with pytest.raises(PlanError, match="routes by the model name"):
        door(host(("a", 8000, {"served_name": "same"}), ("b", 8001, {"served_name": "same"})))


@pytest.mark.parametrize(("port", "why"), [(8001, "port of instance chat"), (9090, "Prometheus")])
def test_a_door_port_that_clashes_is_refused(port: int, why: str) -> None:
    with pytest.raises(PlanError) as err:
        door(host(*TWO), port=port)
    assert err.value.variable == "front_door_port"
    assert why in err.value.problem


@pytest.mark.parametrize(
    ("clients", "variable"),
    [
        ([{"name": "alice", "key": "short"}], "front_door_clients[0].key"),
        ([{"name": "alice", "key": KEY_A + "\n"}], "front_door_clients[0].key"),
        ([{"name": "alice", "key": KEY_A + '"; return 200;'}], "front_door_clients[0].key"),
        ([{"name": "alice"}], "front_door_clients[0]"),
        ([{"name": "Alice Smith", "key": KEY_A}], "front_door_clients[0].name"),
        ([{"name": "alice\n", "key": KEY_A}], "front_door_clients[0].name"),
        ([{"name": "alice", "key": KEY_A}, {"name": "alice", "key": KEY_B}], "front_door_clients[1].name"),
        ([{"name": "alice", "key": KEY_A}, {"name": "bob", "key": KEY_A}], "front_door_clients[1].key"),
    ],
)
def test_bad_clients_are_refused_naming_the_entry(clients: list[dict[str, str]], variable: str) -> None:
    with pytest.raises(PlanError) as err:
        door(host(*TWO), clients=clients)
    assert str(err.value).startswith(variable)
    assert KEY_A not in str(err.value)


@pytest.mark.parametrize(
    ("setting", "variable"),
    [
        ({"address": "every"}, "front_door_address"),
        ({"server_name": "spark01\nserver_name evil"}, "front_door_server_name"),
        ({"tls": "none"}, "front_door_tls"),
        ({"limits": {"concurrency": 0}}, "front_door_limits.concurrency"),
        ({"limits": {"burst_size": 3}}, "front_door_limits.burst_size"),
    ],
)
def test_bad_settings_name_their_variable(setting: dict[str, object], variable: str) -> None:
    with pytest.raises(PlanError) as err:
        door(host(*TWO), **setting)
    assert str(err.value).startswith(variable)


@given(
    st.text(min_size=1, max_size=80).filter(lambda s: any(not (c.isascii() and (c.isalnum() or c in "._~+/=-")) for c in s))
)
def test_a_key_with_anything_a_header_or_config_could_split_is_refused_unshown(key: str) -> None:
    with pytest.raises(PlanError) as err:
        front_door_plan(
            {
                "instances": {},
                "endpoints": {},
                "footprint_gib": 0,
                "usable_gib": 1,
                "mem_total_gib": 1,
                "host_reserve_gib": 0,
            },
            {"clients": [{"name": "x", "key": key * 40}]},
        )
    assert err.value.variable == "front_door_clients[0].key"
    assert key * 40 not in str(err.value)


def test_on_demand_instances_are_routed_through_the_activator_within_the_plans_budget() -> None:
    plan = host(*TWO)
    switched = plan.model_copy(
        update={"on_demand": {"chat": OnDemand(footprint_gib=20.5, idle_stop_after_s=300)}, "on_demand_budget_gib": 60.0}
    )
    result = door(switched, limits={"on_demand_wait_s": 120})
    assert {r["served_name"]: r["on_demand"] for r in result["routes"]} == {"chat": True, "coder": False}  # type: ignore[union-attr]
    assert result["activator"] == {
        "budget_gib": 60.0,
        "wait_s": 120,
        "instances": {
            "chat": {
                "unit": "sparkfleet-vllm-chat.service",
                "url": "http+unix://%2Frun%2Fsparkfleet-vllm-chat%2Fapi.sock",
                "socket": "/run/sparkfleet-vllm-chat/api.sock",
                "footprint_gib": 20.5,
                "idle_stop_after_s": 300,
            }
        },
    }
    assert any("on demand: chat" in reason for reason in result["reasons"])  # type: ignore[union-attr]
    assert door(plan)["activator"] is None


def test_an_on_demand_instance_serves_on_its_socket_like_an_always_on_one() -> None:
    requests = [
        InstanceRequest(
            name=name,
            profile=get_profile(NANO),
            model_ref=NANO,
            intent=Intent(trust_remote_code=True, port=port, max_context=8192, concurrency=1, served_name=name),
            on_demand=on_demand,
        )
        for name, port, on_demand in (("coder", 8000, False), ("chat", 8001, True))
    ]
    plan = plan_host(spark(), requests, "vllm_serve_instances", True)
    assert {name: e.socket for name, e in plan.endpoints.items()} == {
        "coder": "/run/sparkfleet-vllm-coder/api.sock",
        "chat": "/run/sparkfleet-vllm-chat/api.sock",
    }
    assert "--uds" in plan.instances["chat"].argv and "--port" not in plan.instances["chat"].argv
    assert door(plan)["activator"]["instances"]["chat"]["socket"] == "/run/sparkfleet-vllm-chat/api.sock"  # type: ignore[index]


# nginx's MemoryMax, as docs/front-door.md specifies it: "each key's concurrent requests times the largest limit times
# 2.5, the measured cost with room, plus 256 MiB" (docs/performance.md, "The front door": 2.0-2.2 bodies a request
# measured after issue 47). Each key takes 32 requests at once (front_door_limits.concurrency's default); with a route
# that takes more than any text body, those hold text bodies and the host-wide lane's 2 requests the largest.


def test_the_sandbox_doors_memory_max_is_the_one_measured_under_the_worst_bodies_and_connections() -> None:
    # docs/performance.md, "The front door" (issue 47): on the sandbox spark01, "nginx's MemoryMax there is 736 MiB" for
    # bodies: three keys (the sandbox client, the chat UI's and the metrics key) and a text model's 2 MiB body,
    # (3 x 32 x 2 MiB) x 2.5 + 256 = 736 MiB. And "The door's connections" (issue 61): a connection left silent
    # mid-handshake held 46.4-47.2 KiB, so 52 KiB with room, for the 2,048 each of its two ports admits: 208 MiB.
    result = door(
        host(("coder", 8000, {"served_name": "coder"})),
        clients=[{"name": "sandbox", "key": KEY_A}, {"name": "webui", "key": "w" * 40}],
        metrics_key=KEY_B,
        webui={},
    )
    assert result["max_body_mib"] == 2 and result["large_body_bytes"] is None
    assert result["memory_max_mib"] == 736 + 208


def test_each_model_takes_bodies_sized_to_its_context_and_nginx_memory_follows() -> None:
    # Nano at 8192 tokens: 8192 x 24 B is under 1 MiB, + 1 MiB of envelope; the UI keeps its own 32 MiB.
    plan = host(("coder", 8000, {"served_name": "coder"}), ("big", 8001, {"served_name": "big", "max_request_mib": 9}))
    assert plan.instances["coder"].max_request_mib == 2
    assert any(r.item == "request body up to 2 MiB" for r in plan.instances["coder"].reasons)
    result = door(plan, clients=[{"name": "alice", "key": KEY_A}], metrics_key=KEY_B)
    assert {r["instance"]: r["max_body_mib"] for r in result["routes"]} == {"big": 9, "coder": 2}  # type: ignore[union-attr]
    assert result["max_body_mib"] == 9
    # A body over every model's text (2 MiB) takes the host-wide large-body lane (2 requests): two keys (alice and the
    # metrics key) x 32 requests x 2 MiB + 2 x 9 MiB = 146 MiB, x 2.5 = 365 MiB, + 256 MiB for nginx = 621 MiB, and the
    # 2,048 connections its one port admits at 52 KiB: 104 MiB.
    assert result["large_body_bytes"] == 2 * 1024 * 1024
    assert result["memory_max_mib"] == 621 + 104
    assert "MemoryMax" in result["memory_max_reason"] and "large_body_concurrency" in result["memory_max_reason"]  # type: ignore[operator]
    capped = door(plan, clients=[{"name": "alice", "key": KEY_A}], limits={"max_body_mib": 4})
    assert {r["instance"]: r["max_body_mib"] for r in capped["routes"]} == {"big": 4, "coder": 2}  # type: ignore[union-attr]
    # Text only (no model takes more than its text): no lane, each key's requests at the body limit:
    # 1 key x 32 requests x 2 MiB = 64 MiB, x 2.5 = 160 MiB, + 256 MiB = 416 MiB, + 104 MiB of connections.
    text = door(host(("coder", 8000, {"served_name": "coder"})), clients=[{"name": "alice", "key": KEY_A}])
    assert text["large_body_bytes"] is None and text["memory_max_mib"] == 416 + 104


def test_the_omni_model_takes_an_hour_of_audio_and_two_minutes_of_video_in_one_request() -> None:
    """Issue 49: the door's limit for a model follows the media its card says one request may carry (seed 002
    §7.3.2); the memory nginx may hold stays bounded by the lane, not by every key's requests at that size."""
    omni = get_profile("nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4")
    mib, why = max_request_mib(65536, omni.multimodal, media=omni.media)
    assert mib == 2 + 1 + 316 and "3600 s of 16 kHz mono WAV 146.5 MiB" in why and "120 s of 8 Mbit/s video" in why
    request = InstanceRequest(name="omni", profile=omni, model_ref=omni.id, intent=Intent(trust_remote_code=True))
    plan = plan_host(spark(), [request], "vllm_serve_instances", True)
    assert plan.instances["omni"].max_request_mib == mib and plan.instances["omni"].max_num_batched_tokens == 32768
    result = door(plan, clients=[{"name": "alice", "key": KEY_A}])
    assert result["max_body_mib"] == mib and result["large_body_bytes"] == 3 * 1024 * 1024
    # 1 key x 32 requests x 3 MiB of text + 2 lane requests x 319 MiB = 734 MiB, x 2.5 = 1,835 MiB, + 256 MiB:
    # 2,091 MiB (+ 104 MiB of connections), where every request at 319 MiB would be 24 GiB.
    assert result["memory_max_mib"] == 2091 + 104


def test_a_multimodal_model_takes_room_for_its_images() -> None:
    mib, why = max_request_mib(262144, multimodal=True)
    assert mib == 6 + 1 + 32 and "base64 images" in why
    assert max_request_mib(262144, multimodal=False) == (7, "262144 tokens x 24 B + 1 MiB of envelope (text only)")
    assert max_request_mib(4096, multimodal=True, override=3) == (3, "intent.max_request_mib")


@pytest.mark.parametrize(
    ("seqs", "limits", "admitted"),
    [
        # A key holds one sequence fewer than the instance runs; the instance one more batch in vLLM's queue.
        (4, {}, (8, 3)),
        (8, {}, (16, 7)),
        # One sequence: a key may hold it (nothing is left to reserve), and one more waits.
        (1, {}, (2, 1)),
        # One tenant: a key may take every sequence; no queue beyond them.
        (4, {"reserved_sequences": 0, "instance_queue": 0}, (4, 4)),
    ],
)
def test_each_instance_admits_its_sequences_and_a_bounded_queue_and_a_key_a_share(
    seqs: int, limits: dict[str, int], admitted: tuple[int, int]
) -> None:
    plan = door(host(("chat", 8000, {"served_name": "chat", "concurrency": seqs})), limits=limits)
    route = plan["routes"][0]  # type: ignore[index]
    assert route["max_num_seqs"] == seqs
    assert (route["in_flight"], route["key_in_flight"]) == admitted
    assert f"chat {admitted[0]} in flight ({seqs} running" in " ".join(plan["reasons"])  # type: ignore[arg-type]
