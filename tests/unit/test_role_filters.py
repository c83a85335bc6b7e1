"""The filters that hold what were Jinja programs in role tasks (issue 48: declarative roles): each decides here,
tested without Ansible, and the role's task is one expression."""

from __future__ import annotations

import json

import pytest
from argv_refusals import argv_refusals
from monitoring_fleet import monitoring_fleet
from patch_inputs import patch_inputs
from settings_as_text import settings_as_text
from unit_dropins import unit_dropins

from sparkfleet.boundary.adapters import fleet_targets


def test_settings_given_as_text_are_named_with_their_typed_spelling() -> None:
    options = [
        {"name": "vllm_serve_watchdog", "type": "bool"},
        {"name": "vllm_serve_start_timeout", "type": "int"},
        {"name": "model_stage_free_margin_gib", "type": "float"},
        {"name": "front_door_enabled", "type": "bool"},
        {"name": "host_prep_sysctl_apply", "type": "bool"},
    ]
    found = settings_as_text(options, ["false", " 900 ", "lots", "__undefined__", True])
    assert found == [
        'vllm_serve_watchdog: "false" is text where a boolean is expected; pass it typed: '
        "-e '{\"vllm_serve_watchdog\": false}'",
        'vllm_serve_start_timeout: " 900 " is text where an integer is expected; pass it typed: '
        "-e '{\"vllm_serve_start_timeout\": 900}'",
        'model_stage_free_margin_gib: "lots" is text where a number is expected; pass it typed: '
        "-e '{\"model_stage_free_margin_gib\": NUMBER}'",
    ]
    assert settings_as_text(options[:1], ["Yes"])[0].endswith("-e '{\"vllm_serve_watchdog\": true}'")


def test_drop_ins_are_a_directory_and_a_template_per_unit_and_refuse_what_is_no_unit() -> None:
    reservations = [{"unit": "nginx.service", "settings": {"MemoryLow": "64M"}}, {"unit": "system.slice"}]
    made = unit_dropins(reservations, "memory-reservation.conf.j2", "90-sparkfleet-memory.conf", "__reservation")
    assert [d["path"] for d in made["directories"]] == [
        "/etc/systemd/system/nginx.service.d",
        "/etc/systemd/system/system.slice.d",
    ]
    first = made["templates"][0]
    assert first["dest"] == "/etc/systemd/system/nginx.service.d/90-sparkfleet-memory.conf"
    assert first["vars"] == {"__reservation": reservations[0]} and first["mode"] == "0644" and first["owner"] == "root"
    assert unit_dropins([], "t.j2", "90-x.conf", "v") == {"directories": [], "templates": []}
    with pytest.raises(Exception, match="is not a systemd unit name"):
        unit_dropins([{"unit": "../../etc/passwd"}], "t.j2", "90-x.conf", "v")
    with pytest.raises(Exception, match="is not a drop-in file name"):
        unit_dropins(reservations, "t.j2", "../x.conf", "v")


def test_patches_get_their_defaults_and_their_contents_hash() -> None:
    patches = [{"src": "files/fix.patch"}, {"src": "/abs/loader.py", "kind": "overlay", "target": "vllm/x.py", "name": "l"}]
    assert patch_inputs(patches, ["a" * 64, "b" * 64]) == [
        {"name": "fix.patch", "kind": "patch", "target": ".", "strip": 1, "sha256": "a" * 64},
        {"name": "l", "kind": "overlay", "target": "vllm/x.py", "strip": 1, "sha256": "b" * 64},
    ]
    with pytest.raises(Exception, match=r"vllm_install_patches\[0\]: each patch needs src"):
        patch_inputs([{"name": "x"}], ["c" * 64])


def test_argv_refusals_name_each_refused_instance_and_nothing_else() -> None:
    lines = [
        "a log line",
        json.dumps({"name": "coder", "ok": True, "release": "/opt/r1"}),
        json.dumps({"name": "chat", "ok": False, "release": "/opt/r1", "error": "unrecognized arguments: --x"}),
    ]
    assert argv_refusals(lines, "0.33.0") == (
        "vllm_serve_instances (chat): the release at /opt/r1 (vLLM 0.33.0) refuses the planned argv: "
        "unrecognized arguments: --x."
    )
    assert argv_refusals(lines[:2], "0.33.0") == ""


def test_the_fleet_reads_this_host_from_its_own_variables_and_the_others_from_hostvars_without_their_keys() -> None:
    hosts = ["spark01", "spark02", "spark03"]
    local = {
        "monitoring_server": "spark01",
        "monitoring_scrape_address": "10.0.0.1",
        "monitoring_node_exporter": True,
        "vllm_serve_instances": [{"name": "coder", "port": 8000, "api_key": "secret-key-0123456789"}, {"name": "tcp"}],
    }
    others = {
        "monitoring_server": [None, "spark01", None],
        "monitoring_scrape_address": [None, None, "10.0.0.3"],
        "monitoring_node_exporter": [None, False, None],
        "ansible_host": [None, "10.0.0.2", "ignored"],
        "vllm_serve_instances": [None, [{"name": "chat", "host": "0.0.0.0", "on_demand": True, "api_key": "k" * 20}], None],
    }
    fleet = monitoring_fleet(hosts, "spark01", local, others, ["coder"], "443", "0.0.0.0")
    assert fleet["spark01"] == {
        "server": "spark01",
        "address": "10.0.0.1",
        "node_exporter": True,
        "instances": [{"name": "coder", "port": 8000, "socket": True}, {"name": "tcp", "socket": False}],
        "door_port": 443,
        "door_address": "0.0.0.0",
    }
    assert fleet["spark02"] == {
        "server": "spark01",
        "address": "10.0.0.2",
        "node_exporter": False,
        "instances": [{"name": "chat", "host": "0.0.0.0", "on_demand": True, "socket": False}],
        "door_port": None,
        "door_address": None,
    }
    assert fleet["spark03"]["server"] == "spark03" and fleet["spark03"]["address"] == "10.0.0.3"
    assert "key" not in json.dumps(fleet)
    # What the targets are made from: spark01 scrapes itself and spark02; spark03 scrapes itself.
    assert set(fleet_targets(fleet, "spark01", 9100)) and set(fleet_targets(fleet, "spark03", 9100))
