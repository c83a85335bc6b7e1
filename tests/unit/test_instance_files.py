"""What vllm_serve writes per instance (sparkfleet.hostconfig.instancefiles): the Jinja program start.yml was, as a
tested function."""

from __future__ import annotations

import pytest
from ansible.plugins.filter.core import to_nice_json

from sparkfleet.hostconfig.instancefiles import FilesLayout, changed_instances, instance_files, nice_json

LAYOUT = FilesLayout(
    config_dir="/etc/sparkfleet",
    shared_cache_dir="/var/cache/sparkfleet",
    instance_cache_dir="/var/cache/sparkfleet/instances",
    cache_names=("vllm", "triton", "tmp"),
    group="sparkfleet",
    service_user="sparkfleet",
    supervisor_group="sparkfleet-supervisor",
    door_worker_group="sparkfleet-door",
    watchdog=True,
    textfile_dir="/var/lib/prometheus/node-exporter",
)
PLAN = {
    "accounts": {"chat": "sparkfleet-vllm-chat"},
    "endpoints": {
        "chat": {"socket": "/run/sparkfleet-vllm-chat/api.sock", "runtime_directory": "sparkfleet-vllm-chat"},
        "big": {"socket": None, "runtime_directory": "sparkfleet-vllm-big"},
    },
    "instances": {"chat": {"model": "org/chat", "argv": ["vllm", "serve", "org/chat"], "ratio": 0.5, "note": "é"}},
    "ranks": {"big": {"model": "org/big", "node_rank": 1}},
}
INSTANCES = [{"name": "chat", "model": "org/chat"}, {"name": "big", "model": "org/big", "rank": 1}]


def test_each_account_gets_its_caches_seeded_from_the_shared_ones_but_its_tmp() -> None:
    dirs = instance_files(PLAN, INSTANCES, LAYOUT)["directories"]
    base = "/var/cache/sparkfleet/instances"
    assert dirs[:2] == [
        {"path": base, "owner": "root", "group": "sparkfleet", "mode": "0750"},
        {"path": f"{base}/chat", "owner": "root", "group": "sparkfleet", "mode": "0750"},
    ]
    own = {d["path"].rsplit("/", 1)[-1]: d for d in dirs[2:5]}
    assert own["vllm"] == {
        "path": f"{base}/chat/vllm",
        "owner": "sparkfleet-vllm-chat",
        "group": "sparkfleet",
        "mode": "0700",
        "seed": "/var/cache/sparkfleet/vllm",
    }
    assert "seed" not in own["tmp"] and own["tmp"]["owner"] == "sparkfleet-vllm-chat"
    # The socket directory behind the door: the instance's account, the door's workers' group; none without a socket.
    assert dirs[5:] == [
        {"path": "/run/sparkfleet-vllm-chat", "mode": "2750", "owner": "sparkfleet-vllm-chat", "group": "sparkfleet-door"}
    ]


def test_rendered_only_instances_make_no_directory_and_no_account_means_no_caches() -> None:
    assert instance_files(PLAN, INSTANCES, LAYOUT.model_copy(update={"render_only": True}))["directories"] == []
    shared = instance_files({**PLAN, "accounts": {}}, INSTANCES, LAYOUT)["directories"]
    assert [d["path"] for d in shared] == ["/run/sparkfleet-vllm-chat"] and shared[0]["owner"] == "sparkfleet"


def test_each_instance_gets_its_plan_unit_and_watchdog_and_a_rank_its_rank_plan() -> None:
    files = instance_files(PLAN, INSTANCES, LAYOUT)
    assert [f["dest"] for f in files["plans"]] == ["/etc/sparkfleet/chat.plan.json", "/etc/sparkfleet/big.plan.json"]
    # The file's bytes are those Ansible's to_nice_json wrote before (a converged host sees no change).
    assert files["plans"][0]["content"] == to_nice_json(PLAN["instances"]["chat"]) + "\n"
    assert files["plans"][1]["content"] == nice_json(PLAN["ranks"]["big"])
    units = files["unit_templates"]
    assert [(u["src"], u["dest"]) for u in units[:3]] == [
        ("vllm.service.j2", "/etc/systemd/system/sparkfleet-vllm-chat.service"),
        ("watchdog.service.j2", "/etc/systemd/system/sparkfleet-vllm-chat-watchdog.service"),
        ("watchdog.timer.j2", "/etc/systemd/system/sparkfleet-vllm-chat-watchdog.timer"),
    ]
    assert units[3]["vars"] == {"__vllm_serve_instance": INSTANCES[1], "__vllm_serve_this": PLAN["ranks"]["big"]}
    assert {(u["owner"], u["group"], u["mode"]) for u in units} == {("root", "root", "0644")}
    no_watchdog = instance_files(PLAN, INSTANCES, LAYOUT.model_copy(update={"watchdog": False}))["unit_templates"]
    assert [u["src"] for u in no_watchdog] == ["vllm.service.j2", "vllm.service.j2"]


def test_environment_files_hold_secrets_and_never_show_in_a_diff() -> None:
    env = instance_files(PLAN, INSTANCES, LAYOUT)["env_templates"]
    assert env[0] == {
        "src": "instance.env.j2",
        "dest": "/etc/sparkfleet/chat.env",
        "vars": {"__vllm_serve_instance": INSTANCES[0]},
        "owner": "root",
        "group": "sparkfleet-supervisor",
        "mode": "0640",
        "diff": False,
    }


def test_an_instance_the_plan_does_not_hold_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"vllm_serve_instances \(ghost\): the host plan has no plan for it"):
        instance_files(PLAN, [{"name": "ghost", "model": "org/x"}], LAYOUT)


def test_only_instances_whose_own_files_changed_restart() -> None:
    written = ["/etc/sparkfleet/chat.env", "/etc/systemd/system/sparkfleet-vllm-big-watchdog.timer"]
    assert changed_instances(["chat", "big", "chat2"], written, []) == {"chat": True, "big": False, "chat2": False}
    assert changed_instances(["big"], ["/etc/sparkfleet/big.plan.json"], []) == {"big": True}
    assert changed_instances(["big"], [], ["big"]) == {"big": True}


def test_each_watched_instance_gets_its_start_metrics_file_made_for_the_watchdogs_account() -> None:
    """Issue 61: node_exporter's directory is root's alone; the watchdog writes only the file made for it, in place."""
    plan = PLAN | {"ranks": {"big": {"model": "org/big", "node_rank": 1, "headless": True}}}
    assert instance_files(plan, INSTANCES, LAYOUT)["metric_files"] == [
        {
            "dest": "/var/lib/prometheus/node-exporter/sparkfleet_start_chat.prom",
            "content": "",
            "keep_content": True,
            "owner": "sparkfleet-supervisor",
            "group": "root",
            "mode": "0644",
        }
    ]
    assert instance_files(plan, INSTANCES, LAYOUT.model_copy(update={"watchdog": False}))["metric_files"] == []
