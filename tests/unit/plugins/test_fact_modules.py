"""host_facts, model_facts and link_facts run by ansible itself on this machine: each sets its fact."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

from adhoc import run_module


def facts(result: dict[str, object], name: str) -> dict[str, object]:
    assert result.get("failed") is not True, result
    found = result["ansible_facts"]
    assert isinstance(found, dict) and set(found) == {name}, found
    value = found[name]
    assert isinstance(value, dict)
    return value


def test_host_facts_reads_the_host_and_the_accounts_packages_and_paths_asked_for(tmp_path: Path) -> None:
    tool, link = tmp_path / "uv", tmp_path / "current"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    link.symlink_to(tmp_path / "releases" / "r1")
    me = pwd.getpwuid(os.getuid()).pw_name
    host = facts(
        run_module(
            "host_facts",
            {
                "users": [me, "sparkfleet-nobody-here"],
                "groups": ["sparkfleet-no-group-here"],
                "packages": ["dpkg", "sparkfleet-not-a-package"],
                "paths": [str(tool), str(link), str(tmp_path / "absent")],
                "release_dir": str(tmp_path / "none"),
            },
            "--check",
        ),
        "sparkfleet_facts",
    )
    assert host["platform"] in {"cpu", "gb10", "unsupported-gpu"} and int(str(host["mem_total_bytes"])) > 0
    assert host["accounts"] == {
        "users": {me: host["accounts"]["users"][me], "sparkfleet-nobody-here": None},  # type: ignore[index]
        "groups": {"sparkfleet-no-group-here": None},
    }
    assert host["accounts"]["users"][me]["uid"] == os.getuid()  # type: ignore[index]
    packages = host["packages"]
    assert isinstance(packages, dict) and packages["sparkfleet-not-a-package"] in (False, None)
    assert packages["dpkg"] in (True, None)  # None: a machine without dpkg-query
    assert host["paths"] == {
        str(tool): {"exists": True, "link": False, "dir": False, "executable": True},
        str(link): {"exists": False, "link": True, "dir": False, "target": str(tmp_path / "releases" / "r1")},
        str(tmp_path / "absent"): {"exists": False},
    }
    assert "release" not in host and "vllm_version" not in host


def test_model_facts_describes_staged_models_and_storage(tmp_path: Path) -> None:
    model = tmp_path / "store" / "org" / "tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (model / "model.safetensors").write_bytes(b"\0" * 10)
    sizes = {path.name: path.stat().st_size for path in model.iterdir()}
    (model / ".sparkfleet-staged.json").write_text(json.dumps({"files": sizes}))
    found = facts(
        run_module(
            "model_facts",
            {"model_store": str(tmp_path / "store"), "model_refs": [{"id": "org/tiny"}, {"id": "org/absent"}]},
        ),
        "sparkfleet_models",
    )
    staged = found["staged"]
    assert isinstance(staged, dict) and staged["org/tiny"]["complete"] and staged["org/tiny"]["source"] == "local"
    assert staged["org/absent"] == {"id": "org/absent", "path": None, "present": False, "complete": False}
    assert found["storage"]["model_store"]["free_bytes"] > 0  # type: ignore[index]


def test_link_facts_reads_rdma_ports_and_interfaces_from_sysfs(tmp_path: Path) -> None:
    port = tmp_path / "class" / "infiniband" / "rocep1s0f0" / "ports" / "1"
    port.mkdir(parents=True)
    for name, value in {
        "state": "4: ACTIVE",
        "phys_state": "5: LinkUp",
        "rate": "200 Gb/sec (4X HDR)",
        "link_layer": "Ethernet",
    }.items():
        (port / name).write_text(value + "\n")
    (tmp_path / "class" / "infiniband" / "rocep1s0f0" / "device" / "net" / "enp1s0f0np0").mkdir(parents=True)
    net = tmp_path / "class" / "net" / "enp1s0f0np0"
    net.mkdir(parents=True)
    for name, value in {"mtu": "9000", "operstate": "up", "speed": "200000"}.items():
        (net / name).write_text(value + "\n")
    (tmp_path / "meminfo").write_text(
        "MemTotal:       127535604 kB\nCmaTotal:          131072 kB\nCmaFree:          131000 kB\n"
    )
    (port / "gids").mkdir()
    (port / "gid_attrs" / "types").mkdir(parents=True)
    (port / "gids" / "0").write_text("0000:0000:0000:0000:0000:0000:0000:0000\n")
    (port / "gids" / "3").write_text("0000:0000:0000:0000:0000:ffff:0a00:0001\n")
    (port / "gid_attrs" / "types" / "3").write_text("RoCE v2\n")
    args = {"sysfs": str(tmp_path), "interfaces": ["missing0"], "meminfo": str(tmp_path / "meminfo")}
    link = facts(run_module("link_facts", {**args, "nccl_conf": str(tmp_path / "nccl.conf")}), "sparkfleet_link")
    assert link["rdma_ports"] == [
        {
            "device": "rocep1s0f0",
            "port": 1,
            "state": "4: ACTIVE",
            "phys_state": "5: LinkUp",
            "rate": "200 Gb/sec (4X HDR)",
            "link_layer": "Ethernet",
            "netdevs": ["enp1s0f0np0"],
            "gids": [{"index": 3, "type": "RoCE v2", "gid": "0000:0000:0000:0000:0000:ffff:0a00:0001"}],
        }
    ]
    assert link["netdevs"] == {"enp1s0f0np0": {"mtu": 9000, "operstate": "up", "speed_mbps": 200000}}
    assert link["cma"] == {"total_kb": 131072, "free_kb": 131000} and link["nccl_conf"] is None
