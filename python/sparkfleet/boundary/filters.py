"""The collection's Jinja filters: plain values in (as Ansible passes them), plain JSON values out.

One function per filter, named as the filter. The plugin layer (plugins/plugin_utils/filters.py) only
copies the arguments into plain containers, calls the function and turns a refusal (ValueError) into
an AnsibleFilterError named after the filter; every decision lives here, where it is tested without Ansible.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from .. import bench, bench_offline, modelsource, recipes, storage, versions
from ..doctor import journal_pattern, longreply
from ..errors import from_validation
from ..hostconfig import accounts, hardening, instancefiles, unitfile, webui
from ..models import Intent, Platform
from ..planning import loading
from ..planning.planner import plan
from ..recipes import PLATFORM_PACKAGES, side
from ..recipes.inputs import patch_entries
from ..release import Lock, room
from . import adapters


def account_refusal(users: Any, names: Any, host: Any) -> str:
    """The refusal of the host's accounts, or '' when there is none."""
    return accounts.account_refusal(users or {}, {str(k): str(v) for k, v in (names or {}).items()}, str(host)) or ""


def bench_summary(  # noqa: PLR0917 - a filter's arguments are positional in Jinja
    read: Any,
    plan_json: Any,
    release: Any,
    journal: Any,
    input_len: Any,
    output_len: Any,
    start: Any = None,
    thinking: Any = "default",
    offline: Any = None,
    long_reply: Any = None,
) -> dict[str, Any]:
    """The benchmark record of one instance from its runs (registered `command` results, one per concurrency) and,
    where it ran, the offline run ({'argv': the vllm words, 'stdout': vLLM's --output-json}) and the long-reply check
    ({'name': the instance, 'stdout': the probe's long-reply line})."""
    runs: dict[int | str, list[Any]] = {}
    try:
        for entry in read:
            runs.setdefault(int(entry["item"][0]), []).append(json.loads(entry["stdout"]))
        return bench.summary(
            plan_json,
            release or {},
            str(journal or ""),
            runs,
            input_len=int(input_len),
            output_len=int(output_len),
            start=start or None,
            thinking=str(thinking),
            offline=bench_offline.offline_result(offline["argv"], json.loads(offline["stdout"]), int(output_len))
            if offline
            else None,
            long_reply=longreply.from_probe(json.loads(long_reply["stdout"]), str(long_reply["name"]), plan_json)
            if long_reply
            else None,
        )
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"unreadable benchmark run: {exc!r}") from exc


def bench_offline_argv(plan_json: Any, input_len: Any, output_len: Any, num_prompts: Any, output_json: Any) -> list[str]:
    """The `vllm bench throughput` words of an offline run of the instance's engine (the plan's engine arguments)."""
    return bench_offline.offline_argv(
        plan_json,
        input_len=int(input_len),
        output_len=int(output_len),
        num_prompts=int(num_prompts),
        output_json=str(output_json),
    )


def bench_offline_unit(show: Any) -> list[str]:
    """The systemd-run words that give the offline run the instance unit's environment and limits."""
    return bench_offline.offline_unit_words(str(show or ""))


def bench_thinking_args(plan_json: Any, thinking: Any) -> list[str]:
    """The `vllm bench serve` words of a benchmark's thinking switch (none for the instance's default)."""
    return bench.thinking_args(plan_json, str(thinking))


def bench_metrics(result: Any, instance: Any) -> str:
    """The Prometheus textfile of one instance's benchmark summary ('' where the plan predicted no speed)."""
    return bench.prometheus_text(str(instance), result or {})


def changed_instances(names: Any, changed_files: Any, templates_changed: Any = None) -> dict[str, bool]:
    return instancefiles.changed_instances(
        [str(n) for n in names or []], [str(f) for f in changed_files or []], [str(t) for t in templates_changed or []]
    )


def cluster_check(nodes: Any, head: Any, interface: Any) -> list[str]:
    return adapters.cluster_check(nodes, str(head), str(interface))


def cluster_env(link: Any, nccl_found: Any, nccl_wanted: Any, host: Any, auth_token_path: Any = None) -> dict[str, Any]:
    return adapters.cluster_environment(link, nccl_found, nccl_wanted, host, auth_token_path)


def cluster_ranks(head_instances: Any, head: Any, members: Any, me: Any) -> list[dict[str, Any]]:
    return adapters.cluster_ranks(head_instances, str(head), members, str(me))


def doctor(observations: Any, host: Any) -> dict[str, Any]:
    return adapters.doctor_report(observations, str(host))


def front_door(host_plan: Any, settings: Any, variable: Any = "front_door") -> dict[str, Any]:
    return adapters.front_door_plan(host_plan, settings, str(variable)).model_dump(mode="json")


def host_plan(
    facts: Any, instances: Any, label: Any = "instances", behind_door: Any = False, releases: Any = None
) -> dict[str, Any]:
    return adapters.host_plan(facts, instances, str(label), behind_door, releases).model_dump(mode="json")


def instance_files(host_plan: Any, instances: Any, layout: Any) -> dict[str, Any]:
    try:
        files_layout = instancefiles.FilesLayout.model_validate(layout)
    except ValidationError as exc:
        raise from_validation(exc, "instance_files layout", ".") from exc
    return instancefiles.instance_files(host_plan or {}, list(instances or []), files_layout)


def install_recipe(inputs: Any, root: Any, lock: Any) -> dict[str, Any]:
    if not isinstance(inputs, dict):
        raise ValueError("input must be a dict of install inputs")
    return recipes.recipe(recipes.inputs_from(inputs), Lock.model_validate(lock), str(root)).model_dump(mode="json")


def side_releases(recipes: Any, records: Any) -> list[dict[str, Any]]:
    return side.side_releases(list(recipes or []), dict(records or {}))


def release_room(building: Any, df_lines: Any, margin_gib: Any) -> dict[str, Any]:
    """The releases to build (release name -> footprint) against the filesystems the preflight's df lines report
    ('room LABEL DEVICE FREE_KIB MOUNT'): what each takes, and one problem per filesystem that cannot take them."""
    # df runs once per directory: two lines of one filesystem may differ by what was written between them.
    labels: dict[tuple[str, str], list[str]] = {}
    free: dict[tuple[str, str], int] = {}
    for line in df_lines or []:
        fields = str(line).split()
        if len(fields) != 5 or fields[0] != "room" or not fields[3].isdigit():
            continue
        label, device, free_kib, mount = fields[1:]
        labels.setdefault((device, mount), []).append(label)
        free[(device, mount)] = min(free.get((device, mount), int(free_kib) * 1024), int(free_kib) * 1024)
    filesystems = [
        room.Filesystem(device=device, mount=mount, free_bytes=free[(device, mount)], holds=tuple(held))
        for (device, mount), held in labels.items()
    ]
    try:
        releases = [room.Building(name=str(name), footprint=fp) for name, fp in dict(building or {}).items()]
        margin = float(margin_gib)
    except (ValidationError, TypeError) as exc:
        raise ValueError(f"release_room: {exc}") from exc
    if margin < 0:
        raise ValueError(f"vllm_install_free_margin_gib: {margin:g} is negative; 0 or more GiB to leave free after a build")
    return {
        "problems": room.room_problems(releases, filesystems, margin),
        "releases": [room.describe(r) for r in releases],
    }


def release_groups(plans: Any, main: Any) -> list[dict[str, Any]]:
    """The plans by the release each runs from, the main release (`main`: its path and vllm_version) first: each
    group's argv is checked by its own release's parser."""
    main = dict(main or {})
    groups: dict[str, dict[str, Any]] = {}
    for name, served in dict(plans or {}).items():
        release = served.get("release") or {}
        path = release.get("path") or main.get("path")
        version = release.get("vllm_version") if release.get("path") else main.get("vllm_version")
        group = groups.setdefault(str(path), {"path": path, "vllm_version": version, "plans": {}})
        group["plans"][name] = served
    return sorted(groups.values(), key=lambda g: g["path"] != main.get("path"))


def journal_grep(_ignored: Any) -> str:
    """The grep pattern of the journal lines the doctor reads (its input is ignored)."""
    return journal_pattern()


def link_check(members: Any, settings: Any) -> dict[str, list[str]]:
    return adapters.link_check(members, settings)


def loader_packages(instances: Any, vllm_version: Any, extra_packages: Any = None, platform: Any = None) -> list[str]:
    """What a release must add for its instances: the loaders they ask for, and the vLLM extras their models need."""
    if not vllm_version and platform:
        vllm_version = versions.NEWEST_RELEASE.get(str(platform), "")
    if not isinstance(instances, list):
        raise ValueError("vllm_serve_instances must be a list of instances")
    wanted = [item for item in instances if isinstance(item, dict)]
    loads = [str(((item or {}).get("intent") or {}).get("load") or "auto") for item in wanted]
    listed = [str(p) for p in extra_packages or []]
    try:
        version = versions.VllmVersion.parse(str(vllm_version))
    except ValueError:
        # Not a version: the install inputs' own check refuses it, naming vllm_install_vllm_version.
        return []
    models = [item.get("model") for item in wanted]
    model_ids = [str(m.get("id") if isinstance(m, dict) else m) for m in models if m]
    vllm_package = PLATFORM_PACKAGES[Platform(str(platform or "gb10"))].vllm_package
    return loading.packages_for(loads, version, listed) + loading.extras_for(model_ids, vllm_package, listed)


def monitoring(alerts: Any, what: Any, host_plan: Any = None) -> Any:
    return adapters.monitoring_artifact(str(what), alerts, host_plan)


def pinned_refs(entries: Any, pins: Any) -> list[dict[str, str]]:
    """Each staged model's id with the revision its pin (or its entry) names."""
    refs = []
    for entry in entries or []:
        model_id = entry.get("id") if isinstance(entry, dict) else entry
        if not isinstance(model_id, str):
            raise ValueError(f"each entry is a model id or a dict with an id, got {entry!r}")
        pin = (pins or {}).get(model_id)
        revision = (
            pin.get("commit") if isinstance(pin, dict) else (entry.get("revision") if isinstance(entry, dict) else None)
        )
        refs.append({"id": model_id, "revision": str(revision)} if revision else {"id": model_id})
    return refs


def planner_instances(instances: Any, facts: Any, host: Any, keyed: Any, link: Any) -> list[dict[str, Any]]:
    return modelsource.planner_instances(
        instances,
        modelsource.SourceFacts.model_validate(facts),
        host=str(host),
        keyed={str(name) for name in keyed},
        link={str(k): str(v) for k, v in link.items()},
    )


def scrape_targets(fleet: Any, server: Any, node_port: Any = 9100) -> dict[str, list[dict[str, Any]]]:
    return adapters.fleet_targets(fleet, str(server), int(node_port))


def serve_plan(facts: Any, model: Any, intent: Any = None) -> dict[str, Any]:
    profile, ref = adapters.model_profile(model)
    wanted = Intent.model_validate(intent or {})
    return plan(adapters.host_facts(facts), profile, wanted, model_ref=ref).model_dump(mode="json")


def storage_check(needs: Any, space: Any, margin_gib: Any) -> list[str]:
    parsed = [storage.Need.model_validate(item) for item in needs]
    spaces = {name: storage.Space.model_validate(value) for name, value in (space or {}).items()}
    missing = sorted({n.into for n in parsed} - spaces.keys())
    if missing:
        raise ValueError(f"no free-space facts for {', '.join(missing)} (run model_facts with hf_home and model_store)")
    return storage.problems(parsed, spaces, float(margin_gib))


def unit_sandbox(  # noqa: PLR0917 - a filter's arguments are positional in Jinja
    kind: Any,
    platform: Any,
    writable: Any = None,
    bind_host: Any = "127.0.0.1",
    allowed_clients: Any = None,
    link_subnet: Any = None,
    rdma_devices: Any = None,
    socket: Any = None,
    socket_group: Any = None,
) -> list[dict[str, Any]]:
    clients = hardening.check_clients(allowed_clients or [], "vllm_serve_allowed_clients")
    directives = hardening.sandbox(
        hardening.UnitKind(str(kind)),
        Platform(str(platform)),
        writable=[str(path) for path in writable or []],
        bind_host=str(bind_host),
        allowed_clients=clients,
        link_subnet=str(link_subnet) if link_subnet else None,
        rdma_devices=[str(d) for d in rdma_devices or []],
        socket=str(socket) if socket else None,
        socket_group=str(socket_group) if socket_group else None,
    )
    return [d.model_dump() for d in directives]


def unit_value(value: Any, place: Any, variable: Any = "unit file") -> str:
    return unitfile.unit_value(value, str(place), str(variable))


def unstaged_refusal(  # noqa: PLR0917 - a filter's arguments are positional in Jinja
    instances: Any, drafters: Any, staged: Any, release: Any, where: Any, render_only: Any = False
) -> str:
    """Why vllm_serve cannot start its instances here (no release, models not staged), or ''. Rendered-only instances
    need no staged model."""
    complete = {str(name) for name, found in (staged or {}).items() if (found or {}).get("complete")}
    wanted = [] if render_only else list(instances or [])
    return modelsource.unstaged_refusal(
        wanted,
        [] if render_only else [str(d) for d in drafters or []],
        complete,
        release,
        {k: str(v) for k, v in where.items()},
    )


def webui_plan(settings: Any, host_plan: Any, door: Any, root: Any) -> dict[str, Any]:
    return webui.webui_plan_from(settings, host_plan, door, str(root)).model_dump(mode="json")


def monitoring_fleet(  # noqa: PLR0917 - a filter's arguments are positional in Jinja
    hosts: Any, me: Any, local: Any, others: Any, sockets: Any, door_port: Any, door_address: Any
) -> dict[str, dict[str, Any]]:
    """Each inventory host as the Prometheus that scrapes it sees it (sparkfleet.boundary.adapters.monitoring_fleet)."""
    return adapters.monitoring_fleet(hosts, str(me), local, others, sockets, door_port, door_address)


# How a number looks when given as text: its typed spelling is the same digits.
_NUMBER_TEXT = re.compile(r"^-?[0-9]+([.][0-9]+)?$")
_TYPE_WORDS = {"bool": "a boolean", "int": "an integer", "float": "a number"}
UNDEFINED = "__undefined__"


def settings_as_text(options: Any, values: Any) -> list[str]:
    """The role options of a typed kind (role_options' {name, type}) whose value (`values`, in the same order; the
    text __undefined__ where unset) is text, each with how to pass it typed. A role's argument spec accepts the text
    "false" for a boolean without converting it, and Jinja then reads it as true."""
    found = []
    for option, value in zip(options or [], values or [], strict=True):
        if not isinstance(value, str) or value == UNDEFINED:
            continue
        name, kind = str(option["name"]), str(option["type"])
        if kind == "bool":
            typed = json.dumps(value.lower() in ("true", "yes", "on", "y", "1"))
        else:
            typed = value.strip() if _NUMBER_TEXT.match(value.strip()) else "NUMBER"
        found.append(
            f"{name}: {json.dumps(value)} is text where {_TYPE_WORDS[kind]} is expected; pass it typed: "
            f"-e '{{\"{name}\": {typed}}}'"
        )
    return found


_UNIT_NAME = re.compile(r"^[A-Za-z0-9@._:-]+[.](service|slice|scope|socket|timer)$")


def unit_dropins(items: Any, template: Any, filename: Any, variable: Any) -> dict[str, list[dict[str, Any]]]:
    """A drop-in of each item's systemd unit (item["unit"]) for the files module: its directory, and a templates
    entry rendering `template` with the item as `variable` into <unit>.d/<filename>."""
    if not re.fullmatch(r"[0-9]{2}-[a-z0-9-]+[.]conf", str(filename)):
        raise ValueError(f"{filename!r} is not a drop-in file name such as 90-sparkfleet-memory.conf")
    directories, templates = [], []
    for item in items or []:
        unit = str(item.get("unit", "")) if isinstance(item, dict) else ""
        if not _UNIT_NAME.fullmatch(unit):
            raise ValueError(f"{unit!r} is not a systemd unit name")
        directory = f"/etc/systemd/system/{unit}.d"
        directories.append({"path": directory, "owner": "root", "group": "root", "mode": "0755"})
        templates.append(
            {"src": str(template), "dest": f"{directory}/{filename}", "vars": {str(variable): item}}
            | {"owner": "root", "group": "root", "mode": "0644"}
        )
    return {"directories": directories, "templates": templates}


def patch_inputs(patches: Any, sha256s: Any) -> list[dict[str, Any]]:
    """vllm_install_patches as the install recipe takes them: each with its defaults and its content's sha256 (read
    on the controller, in the same order), which makes the patch part of the release id."""
    return patch_entries(list(patches or []), [str(h) for h in sha256s or []])


def argv_refusals(lines: Any, version: Any) -> str:
    """What the release's own parser refused (sparkfleet_argv_check.py's JSON lines), one sentence per instance."""
    refused = [json.loads(line) for line in lines or [] if str(line).startswith("{")]
    return " ".join(
        f"vllm_serve_instances ({r['name']}): the release at {r['release']} (vLLM {version}) refuses the planned argv: "
        f"{r['error']}."
        for r in refused
        if not r.get("ok")
    )
