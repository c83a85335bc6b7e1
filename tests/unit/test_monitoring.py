from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import spark
from hypothesis import given
from hypothesis import strategies as st

from sparkfleet.boundary.adapters import fleet_targets, monitoring_artifact
from sparkfleet.catalog import get_profile
from sparkfleet.cli import main
from sparkfleet.errors import PlanError
from sparkfleet.hostconfig.door import METRICS_PREFIX
from sparkfleet.hostconfig.monitoring import ALERTS, PANELS, RECORDINGS, Thresholds, dashboard, plan_metrics, rules_document
from sparkfleet.models import GIB, Intent
from sparkfleet.planning.hostplan import InstanceRequest, endpoint, plan_host

NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
COMMITTED_DASHBOARD = Path(__file__).parents[2] / "docs" / "monitoring" / "sparkfleet-vllm-dashboard.json"
METRIC = re.compile(r"(?<![\w:])(vllm:[a-z_]+|sparkfleet:[a-z0-9_:]+|sparkfleet_plan_[a-z_]+|node_[A-Za-z_]+)(?![\w:(])")


def test_thresholds_land_in_the_alert_expressions() -> None:
    doc = rules_document(Thresholds(kv_cache_usage=0.8, ttft_p95_seconds=3.5, spec_acceptance=0.25, down_for="30s"))
    alerts = {r["alert"]: r for r in doc["groups"][1]["rules"]}
    assert alerts["SparkfleetKvCacheNearlyFull"]["expr"] == "sparkfleet:vllm_kv_cache_usage:ratio > 0.8"
    assert alerts["SparkfleetTtftHigh"]["expr"].endswith("> 3.5")
    assert alerts["SparkfleetSpecDecodeAcceptanceLow"]["expr"].endswith("< 0.25")
    assert alerts["SparkfleetVllmDown"]["for"] == "30s"
    assert alerts["SparkfleetMemoryHeadroomLow"]["expr"] == (
        "node_memory_MemAvailable_bytes < on (instance, job) sparkfleet_plan_memavailable_floor_bytes"
    )


def test_every_alert_and_panel_reads_a_recorded_or_scraped_metric() -> None:
    recorded = {r.record for r in RECORDINGS}
    plan_metric_names = set(re.findall(r"^(sparkfleet_plan_\w+) ", plan_metrics(_host_plan(), Thresholds()), re.M))
    exprs = [a.signal for a in ALERTS] + [expr for p in PANELS for expr, _ in p.targets]
    for expr in exprs:
        for name in METRIC.findall(expr):
            assert name in recorded | plan_metric_names or name.startswith(("vllm:", "node_")), (name, expr)


@pytest.mark.parametrize(
    ("alerts", "variable", "text"),
    [
        ({"kv_cache": 0.8}, "monitoring_alerts.kv_cache", "one of the keys kv_cache_usage"),
        ({"kv_cache_usage": 1.5}, "monitoring_alerts.kv_cache_usage", "less than or equal to 1"),
        ({"down_for": "2 minutes"}, "monitoring_alerts.down_for", "not a Prometheus duration"),
        ({"memory_floor_fraction": 0}, "monitoring_alerts.memory_floor_fraction", "greater than 0"),
    ],
)
def test_bad_thresholds_name_the_key(alerts: dict[str, object], variable: str, text: str) -> None:
    with pytest.raises(PlanError) as err:
        monitoring_artifact("rules", alerts)
    assert err.value.variable == variable
    assert text in str(err.value)


@given(
    kv=st.floats(min_value=0.01, max_value=1.0),
    ttft=st.floats(min_value=0.01, max_value=600),
    fraction=st.floats(min_value=0.01, max_value=1.0),
)
def test_any_valid_thresholds_render_every_alert(kv: float, ttft: float, fraction: float) -> None:
    doc = monitoring_artifact("rules", {"kv_cache_usage": kv, "ttft_p95_seconds": ttft, "memory_floor_fraction": fraction})
    assert [r["alert"] for r in doc["groups"][1]["rules"]] == [a.name for a in ALERTS]
    assert len(doc["groups"][0]["rules"]) == len(RECORDINGS)


def _host_plan():  # type: ignore[no-untyped-def]
    profile = get_profile(NANO)
    return plan_host(
        spark(),
        [
            InstanceRequest(
                name="a", profile=profile, model_ref=NANO, intent=Intent(trust_remote_code=True, max_context=32768)
            ),
            InstanceRequest(
                name="b",
                profile=profile,
                model_ref=NANO,
                intent=Intent(trust_remote_code=True, port=8001, max_context=16384),
            ),
        ],
    )


def test_plan_metrics_carry_the_plans_budget_and_the_floor() -> None:
    hp = _host_plan()
    text = plan_metrics(hp, Thresholds(memory_floor_fraction=0.25))
    values = dict(re.findall(r"^(\S+) (\d+)$", text, re.M))
    assert int(values["sparkfleet_plan_memavailable_floor_bytes"]) == round(0.25 * hp.host_reserve_gib * GIB)
    assert int(values["sparkfleet_plan_footprint_bytes"]) == round(hp.footprint_gib * GIB)
    assert int(values['sparkfleet_plan_instance_kv_tokens{sparkfleet_instance="b"}']) == hp.instances["b"].kv_tokens
    assert "# TYPE sparkfleet_plan_host_reserve_bytes gauge" in text
    version = hp.instances["b"].vllm_version
    assert (
        f'sparkfleet_plan_instance_release_info{{sparkfleet_instance="b",release="main",release_id="",vllm_version="{version}"}} 1'
        in text
    )


def test_plan_metrics_read_the_applied_host_plan_json() -> None:
    applied = json.loads(_host_plan().model_dump_json())
    assert "sparkfleet_plan_instance_max_num_seqs" in monitoring_artifact("plan_metrics", {}, applied)


def test_a_server_scrapes_its_own_instances_over_their_local_address() -> None:
    fleet = {"spark01": {"instances": [{"name": "a"}, {"name": "b", "host": "0.0.0.0", "port": 8001, "api_key": "k"}]}}
    targets = fleet_targets(fleet, "spark01", 9100)
    assert [t["targets"] for t in targets["vllm"]] == [["127.0.0.1:8000"], ["127.0.0.1:8001"]]
    assert targets["node"] == [{"targets": ["127.0.0.1:9100"], "labels": {"sparkfleet_host": "spark01"}}]
    assert "api_key" not in json.dumps(targets)


def test_a_central_server_scrapes_other_hosts_at_their_address() -> None:
    fleet = {
        "spark01": {"address": "10.0.0.1", "server": "spark01", "instances": []},
        "spark02": {"address": "10.0.0.2", "server": "spark01", "instances": [{"name": "big", "host": "0.0.0.0"}]},
        "spark03": {"address": "10.0.0.3", "server": "spark03", "instances": [{"name": "x"}]},
        "spark04": {
            "address": "fd00::4",
            "server": "spark01",
            "node_exporter": False,
            "instances": [{"name": "v6", "host": "::", "port": 9000}],
        },
    }
    targets = fleet_targets(fleet, "spark01", 9100)
    assert [(t["labels"]["sparkfleet_host"], t["targets"][0]) for t in targets["vllm"]] == [
        ("spark02", "10.0.0.2:8000"),
        ("spark04", "[fd00::4]:9000"),
    ]
    assert [t["targets"][0] for t in targets["node"]] == ["127.0.0.1:9100", "10.0.0.2:9100"]


def test_a_loopback_instance_on_another_host_is_refused_with_what_works() -> None:
    fleet = {"spark01": {"instances": []}, "spark02": {"server": "spark01", "instances": [{"name": "coder"}]}}
    with pytest.raises(PlanError) as err:
        fleet_targets(fleet, "spark01", 9100)
    assert err.value.variable == "vllm_serve_instances (coder) on spark02"
    assert "host: 0.0.0.0" in str(err.value)


def test_instances_on_sockets_are_read_through_their_own_hosts_door() -> None:
    fleet = {
        "spark01": {
            "door_port": 443,
            "instances": [{"name": "chat", "socket": True, "on_demand": True}, {"name": "tcp", "port": 8001}],
        }
    }
    targets = fleet_targets(fleet, "spark01", 9100)
    assert targets["vllm_door"] == [
        {
            "targets": ["127.0.0.1:443"],
            "labels": {
                "sparkfleet_host": "spark01",
                "sparkfleet_instance": "chat",
                "sparkfleet_on_demand": "true",
                "__metrics_path__": f"{METRICS_PREFIX}chat",
            },
        }
    ]
    assert [t["targets"] for t in targets["vllm"]] == [["127.0.0.1:8001"]]
    bound = fleet_targets(
        {"spark01": {"door_port": 8443, "door_address": "10.0.0.1", "instances": [{"name": "c", "socket": True}]}},
        "spark01",
        9100,
    )
    assert bound["vllm_door"][0]["targets"] == ["10.0.0.1:8443"]


def test_a_socket_instance_of_another_host_is_refused_naming_its_own_prometheus() -> None:
    fleet = {
        "spark01": {"instances": []},
        "spark02": {"server": "spark01", "door_port": 443, "instances": [{"name": "c", "socket": True}]},
    }
    with pytest.raises(PlanError) as err:
        fleet_targets(fleet, "spark01", 9100)
    assert err.value.variable == "vllm_serve_instances (c) on spark02"
    assert "monitoring_server: spark02 on spark02" in str(err.value)


def test_the_endpoint_rule_reaches_a_wildcard_bind_over_loopback() -> None:
    assert endpoint("0.0.0.0", 8000).local_url == "http://127.0.0.1:8000"
    assert endpoint("10.1.2.3", 8001).local_url == "http://10.1.2.3:8001"
    assert endpoint("::1", 8002).local_url == "http://[::1]:8002"


def test_the_committed_dashboard_is_the_generated_one() -> None:
    assert json.loads(COMMITTED_DASHBOARD.read_text()) == dashboard(), (
        "regenerate: uv run sparkfleet monitoring dashboard > docs/monitoring/sparkfleet-vllm-dashboard.json"
    )


def test_the_dashboard_uses_its_datasource_variable_everywhere() -> None:
    board = dashboard()
    assert {t["datasource"]["uid"] for p in board["panels"] for t in p["targets"]} == {"${datasource}"}
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])


def test_cli_prints_rules_and_refuses_bad_thresholds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["monitoring", "rules", "--alerts", '{"ttft_p95_seconds": 4}']) == 0
    assert "sparkfleet:vllm_ttft_seconds:p95_5m > 4.0" in capsys.readouterr().out
    assert main(["monitoring", "rules", "--alerts", '{"nope": 1}']) == 2
    assert "monitoring_alerts.nope" in capsys.readouterr().err


def test_each_instance_says_which_release_it_runs_from() -> None:
    from sparkfleet.models import ReleaseChoice

    hp = _host_plan()
    side = ReleaseChoice(name="older", id="cpu-0.30.0-07b9622f018e", path="/opt/x", vllm_version="0.30.0", why="named")
    hp = hp.model_copy(
        update={
            "instances": {
                **hp.instances,
                "b": hp.instances["b"].model_copy(update={"release": side, "vllm_version": "0.30.0"}),
            }
        }
    )
    text = plan_metrics(hp, Thresholds())
    assert (
        'sparkfleet_plan_instance_release_info{sparkfleet_instance="b",release="older",release_id="cpu-0.30.0-07b9622f018e",vllm_version="0.30.0"} 1'
        in text
    )
