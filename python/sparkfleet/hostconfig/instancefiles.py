"""What the vllm_serve role writes for a host's instances, as its files module takes it. Pure.

In: the host plan (as the role holds it, JSON), the instances the role serves (their settings without the key; a rank
of a multi-node instance carries `rank`) and the role's paths, accounts and switches (`FilesLayout`).
Out (`instance_files`): the directories to make (each account's caches, seeded from the caches the instances shared
before, and the socket directories behind the door), each instance's environment file (a template; secrets), and
each instance's plan (a file), unit and watchdog units (templates). After the write, `changed_instances` says which
instances' own files changed, so that only those restart.
"""

from __future__ import annotations

import json
from typing import Any

from ..models import Strict

UNIT_DIR = "/etc/systemd/system"
UNIT_PREFIX = "sparkfleet-vllm-"
# The caches that start empty for a new account (nothing in them outlives a run).
UNSEEDED_CACHES = {"tmp"}


class FilesLayout(Strict):
    """The role's paths, accounts and switches that decide where each file goes and who owns it."""

    config_dir: str
    # The caches the instances shared before each had an account of its own, and each instance's own under it.
    shared_cache_dir: str
    instance_cache_dir: str
    cache_names: tuple[str, ...]
    group: str
    service_user: str
    supervisor_group: str
    door_worker_group: str
    watchdog: bool
    # node_exporter's textfile directory: root's alone to write; each instance's start metrics file in it is made here,
    # owned by the supervisors' account, whose watchdog writes it in place (and makes no other file there).
    textfile_dir: str
    # Rendered only: no instance runs, no account it needs exists, nothing is made.
    render_only: bool = False


def unit_path(name: str, suffix: str = ".service") -> str:
    return f"{UNIT_DIR}/{UNIT_PREFIX}{name}{suffix}"


def plan_path(layout: FilesLayout, name: str) -> str:
    return f"{layout.config_dir}/{name}.plan.json"


def nice_json(value: Any) -> str:
    """A plan as Ansible's to_nice_json writes it (the file's bytes stay those earlier runs wrote), and a newline."""
    return json.dumps(value, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def instance_directories(plan: dict[str, Any], layout: FilesLayout) -> list[dict[str, Any]]:
    """Each account's caches: 0700 in a root-owned directory the account cannot rename, made once and then filled with a
    copy of the shared caches, so that its compiled kernels stay warm; the temporary directory starts empty."""
    accounts = plan.get("accounts") or {}
    if not accounts or layout.render_only:
        return []
    dirs: list[dict[str, Any]] = [
        {"path": layout.instance_cache_dir, "owner": "root", "group": layout.group, "mode": "0750"}
    ]
    for name, account in sorted(accounts.items()):
        base = f"{layout.instance_cache_dir}/{name}"
        dirs.append({"path": base, "owner": "root", "group": layout.group, "mode": "0750"})
        for cache in layout.cache_names:
            own = {"path": f"{base}/{cache}", "owner": account, "group": layout.group, "mode": "0700"}
            dirs.append(own if cache in UNSEEDED_CACHES else own | {"seed": f"{layout.shared_cache_dir}/{cache}"})
    return dirs


def socket_directories(plan: dict[str, Any], layout: FilesLayout) -> list[dict[str, Any]]:
    """The directory of each instance's socket behind the door: its account's, the door's workers' group (2750)."""
    if layout.render_only:
        return []
    accounts = plan.get("accounts") or {}
    return [
        {
            "path": f"/run/{endpoint['runtime_directory']}",
            "mode": "2750",
            "owner": accounts.get(name, layout.service_user),
            "group": layout.door_worker_group,
        }
        for name, endpoint in sorted((plan.get("endpoints") or {}).items())
        if endpoint.get("socket")
    ]


def _this(plan: dict[str, Any], instance: dict[str, Any]) -> dict[str, Any]:
    """An instance's own plan: its rank's for a rank of a multi-node instance this host runs."""
    name = instance["name"]
    try:
        return dict(plan["ranks"][name] if "rank" in instance else plan["instances"][name])
    except KeyError as exc:
        raise ValueError(f"vllm_serve_instances ({name}): the host plan has no plan for it") from exc


def env_templates(instances: list[dict[str, Any]], layout: FilesLayout) -> list[dict[str, Any]]:
    """Each instance's environment file (its secrets): 0640, root and the supervisors' group, never in a diff."""
    return [
        {
            "src": "instance.env.j2",
            "dest": f"{layout.config_dir}/{instance['name']}.env",
            "vars": {"__vllm_serve_instance": instance},
            "owner": "root",
            "group": layout.supervisor_group,
            "mode": "0640",
            "diff": False,
        }
        for instance in instances
    ]


def unit_templates(plan: dict[str, Any], instances: list[dict[str, Any]], layout: FilesLayout) -> list[dict[str, Any]]:
    """Each instance's unit and, with the watchdog on, its watchdog service and timer; the templates see the instance
    (__vllm_serve_instance) and its plan or rank plan (__vllm_serve_this)."""
    wanted = [("vllm.service.j2", ".service")]
    if layout.watchdog:
        wanted += [("watchdog.service.j2", "-watchdog.service"), ("watchdog.timer.j2", "-watchdog.timer")]
    root = {"owner": "root", "group": "root", "mode": "0644"}
    return [
        {
            "src": src,
            "dest": unit_path(instance["name"], suffix),
            "vars": {"__vllm_serve_instance": instance, "__vllm_serve_this": _this(plan, instance)},
        }
        | root
        for instance in instances
        for src, suffix in wanted
    ]


def instance_files(plan: dict[str, Any], instances: list[dict[str, Any]], layout: FilesLayout) -> dict[str, Any]:
    """Everything vllm_serve writes per instance, in the files module's own terms."""
    return {
        "directories": instance_directories(plan, layout) + socket_directories(plan, layout),
        "env_templates": env_templates(instances, layout),
        "plans": [
            {
                "dest": plan_path(layout, instance["name"]),
                "content": nice_json(_this(plan, instance)),
                "owner": "root",
                "group": "root",
                "mode": "0644",
            }
            for instance in instances
        ],
        "unit_templates": unit_templates(plan, instances, layout),
        "metric_files": metric_files(plan, instances, layout),
    }


def start_metrics_path(textfile_dir: str, name: str) -> str:
    """Where an instance's start metrics go (sparkfleet_start.py writes there)."""
    return f"{textfile_dir}/sparkfleet_start_{name.replace('-', '_')}.prom"


def metric_files(plan: dict[str, Any], instances: list[dict[str, Any]], layout: FilesLayout) -> list[dict[str, Any]]:
    """Each watched instance's start metrics file, made empty once and then the watchdog's to write in place."""
    if layout.render_only or not layout.watchdog:
        return []
    return [
        {
            "dest": start_metrics_path(layout.textfile_dir, instance["name"]),
            "content": "",
            "keep_content": True,
            "owner": layout.supervisor_group,
            "group": "root",
            "mode": "0644",
        }
        for instance in instances
        if not _this(plan, instance).get("headless")
    ]


def changed_instances(names: list[str], changed_files: list[str], templates_changed: list[str]) -> dict[str, bool]:
    """Which instances changed: their environment, plan or unit written anew, or their own chat template."""
    written = {path.rsplit("/", 1)[-1] for path in changed_files}
    return {
        name: bool({f"{name}.env", f"{name}.plan.json", f"{UNIT_PREFIX}{name}.service"} & written)
        or name in templates_changed
        for name in names
    }
