"""Turn the plain dictionaries Ansible passes (host facts, staged-model facts, instance lists) into planner input."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..catalog import get_profile, load_catalog
from ..doctor import Status, diagnose, render
from ..errors import PlanError, from_validation
from ..hostconfig.cluster import (
    NcclLibraries,
    NodeFacts,
    cluster_problems,
    interconnect,
    interconnect_env,
    nccl_choice,
    ray_auth_env,
)
from ..hostconfig.door import METRICS_CLIENT, DoorPlan, client_digests, door_plan_from
from ..hostconfig.link import link_facts, link_report, ring_findings
from ..hostconfig.monitoring import ScrapedHost, dashboard, plan_metrics, queries, rules_document, scrape_targets, thresholds
from ..hostconfig.ncclrules import (
    custom_nccl,
    graph_instances,
    multinode_instances,
    nccl_aarch64_problem,
    nccl_graphs_problem,
)
from ..hub import served_at, snapshot_dir
from ..models import GIB, HostFacts, Intent, ModelProfile, SideRelease
from ..planning.hostplan import HostPlan, InstanceRequest, endpoint, plan_host, socket_endpoint
from ..reading.config import profile_from_config


def plain(value: Any) -> Any:
    """Deep copy into plain dicts and lists.

    ansible-core 2.19 hands filters lazily templated containers whose items resolve only through
    Python-level access; pydantic reads list items at C level and would see the unresolved wrappers.
    """
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


_HOST_KEYS = (
    "platform",
    "arch",
    "gpu_name",
    "compute_capability",
    "driver_version",
    "cuda_version",
    "ptxas_path",
    "mem_total_bytes",
    "mem_available_bytes",
    "cuda_free_bytes",
    "cuda_total_bytes",
    "cuda_ceiling_bytes",
    "running_instances",
    "cpu_amx_tile",
    "unified_memory",
    "vllm_version",
    "vllm_capabilities",
    "flashinfer_kernels",
    "release_record",
)


def host_facts(facts: Any, label: str = "sparkfleet_facts") -> HostFacts:
    if not isinstance(facts, dict):
        raise PlanError(label, "must be the host facts (sparkfleet_facts: run the sparkfleet role first)")
    facts = plain(facts)
    try:
        return HostFacts.model_validate({key: facts[key] for key in _HOST_KEYS if facts.get(key) is not None})
    except ValidationError as exc:
        raise from_validation(exc, label, ".") from exc


def model_profile(model: Any, label: str = "model") -> tuple[ModelProfile, str]:
    """A catalog id, or a staged model's facts ({id, path, config, weight_bytes}); returns (profile, what vLLM loads).

    A staged model whose id is in the catalog keeps the catalog's curated profile but is loaded from
    its staged path, so the instance never reaches for the hub.
    """
    model = plain(model)
    try:
        if isinstance(model, str):
            return get_profile(model), model
        if not isinstance(model, dict) or "path" not in model:
            raise PlanError(label, "must be a catalog id or a staged model's facts (id, path, config, weight_bytes)")
        path = str(model["path"])
        model_id = str(model.get("id") or path)
        profile = _profile_of(model, model_id, path, label)
        # A hub model planned before it is staged is loaded by id: at the commit model_stage pinned and staged.
        if model.get("commit") and path == model_id:
            profile = served_at(profile, str(model["commit"]), f"hub {model_id}@{str(model['commit'])[:12]} (pinned)")
        return profile, path
    except PlanError as exc:
        if exc.variable.startswith(label):
            raise
        inner = "" if exc.variable == "model" else f".{exc.variable}"
        raise PlanError(f"{label}{inner}", exc.problem, exc.suggestions) from exc
    except (ValidationError, ValueError, TypeError, KeyError) as exc:
        raise PlanError(label, f"its config.json cannot be planned: {str(exc).splitlines()[0][:300]}") from exc


def model_dir(model: Any) -> str | None:
    """Where a model's files are on the host: its staged directory, or, for a hub model planned before it is
    staged (given the host's hf_home), the snapshot model_stage fills at the pinned commit."""
    model = plain(model)
    if not isinstance(model, dict):
        return None
    path = str(model.get("path") or "")
    if path.startswith("/"):
        return path
    if model.get("commit") and model.get("hf_home"):
        return snapshot_dir(str(model["hf_home"]), path, str(model["commit"]))
    return None


def _fs_type(model: Any) -> str | None:
    model = plain(model)
    return str(model["fs_type"]) if isinstance(model, dict) and model.get("fs_type") else None


def _profile_of(model: dict[str, Any], model_id: str, path: str, label: str) -> ModelProfile:
    largest = model.get("largest_weight_file_bytes")
    if isinstance(largest, int) and not isinstance(largest, bool) and largest > 0:
        # What eager loading holds at once is a shard: read from the staged files, not assumed.
        return _from_facts(model, model_id, path, label).model_copy(update={"largest_shard_gib": largest / GIB})
    return _from_facts(model, model_id, path, label)


def _from_facts(model: dict[str, Any], model_id: str, path: str, label: str) -> ModelProfile:
    if model_id in load_catalog():
        return get_profile(model_id)
    if not model.get("present", True) or not isinstance(model.get("config"), dict):
        raise PlanError(label, f"{model_id}: no config.json at {path}; stage it first")
    weight_bytes = model.get("weight_bytes", 0)
    if isinstance(weight_bytes, bool) or not isinstance(weight_bytes, int) or weight_bytes < 0:
        raise PlanError(f"{label}.weight_bytes", f"{weight_bytes!r} is not a byte count")
    profile = profile_from_config(model_id, model["config"], weight_bytes, path)
    if model.get("tokenizer_auto_map") is True:
        profile = profile.model_copy(update={"tokenizer_auto_map": True})
    return profile


def instance_request(item: Any, label: str = "instance") -> InstanceRequest:
    if not isinstance(item, dict) or "name" not in item or "model" not in item:
        raise PlanError(label, "each instance needs a name and a model")
    profile, ref = model_profile(item["model"], f"{label}.model")
    raw_intent = item.get("intent") or {}
    if not isinstance(raw_intent, dict):
        raise PlanError(f"{label}.intent", "must be a mapping such as {max_context: 65536, concurrency: 4}")
    try:
        intent = Intent.model_validate(raw_intent)
    except ValidationError as exc:
        raise from_validation(exc, f"{label}.intent", ".") from exc
    drafter = None
    # A drafter the role described (staged, or read from the hub) is planned from what was read and
    # loaded from where it is staged; a bare id stays as the intent says (sized by drafter_weights_gib).
    if isinstance(item.get("drafter"), dict):
        drafter, drafter_ref = model_profile(item["drafter"], f"{label}.intent.drafter")
        intent = intent.model_copy(update={"drafter": drafter_ref})
    switching: dict[str, Any] = {}
    if "on_demand" in item:
        if not isinstance(item["on_demand"], bool):
            raise PlanError(f"{label}.on_demand", f"{item['on_demand']!r} is not true or false")
        switching["on_demand"] = item["on_demand"]
    if "idle_stop_after" in item:
        if not item.get("on_demand"):
            raise PlanError(f"{label}.idle_stop_after", "applies to an on_demand instance only", ("on_demand: true",))
        switching["idle_stop_after_s"] = item["idle_stop_after"]
    if item.get("placement") is not None:
        switching["placement"] = item["placement"]
    if item.get("release") not in (None, ""):
        switching["release"] = item["release"]
    try:
        return InstanceRequest(
            name=item["name"],
            profile=profile,
            model_ref=ref,
            model_dir=model_dir(item["model"]),
            model_fs=_fs_type(item["model"]),
            intent=intent,
            drafter=drafter,
            **switching,
        )
    except ValidationError as exc:
        error = from_validation(exc, label, ".")
        # The role's variable is idle_stop_after (seconds); the model spells out its unit.
        raise PlanError(error.variable.replace(".idle_stop_after_s", ".idle_stop_after"), error.problem) from exc


def cluster_ranks(head_instances: Any, head: str, members: Any, me: str) -> list[dict[str, Any]]:
    """The headless ranks `me` runs for the head's native multi-node instances: rank k on the k-th member
    after the head (inventory order). Each is the head's entry without its key, with its rank."""
    others = [str(m) for m in plain(members) if str(m) != head]
    out: list[dict[str, Any]] = []
    for index, item in enumerate(plain(head_instances) or []):
        intent = item.get("intent") or {} if isinstance(item, dict) else {}
        nodes = intent.get("nodes", 1)
        if not isinstance(nodes, int) or nodes < 2 or intent.get("cluster_backend", "auto") == "ray":
            continue
        if nodes > len(others) + 1:
            raise PlanError(
                f"vllm_serve_instances[{index}].intent.nodes",
                f"{item.get('name')} spans {nodes} nodes but the cluster of {head} has {len(others) + 1} members",
                (f"nodes {len(others) + 1}", "more members with ray_cluster_head set to " + head),
            )
        if me in others and others.index(me) + 1 < nodes:
            out.append({k: v for k, v in item.items() if k != "api_key"} | {"rank": others.index(me) + 1})
    return out


def side_releases(raw: Any, label: str = "vllm_install_releases") -> dict[str, SideRelease]:
    """The releases installed beside the main one, by name, as vllm_install publishes them."""
    raw = plain(raw) or []
    if not isinstance(raw, list):
        raise PlanError(label, "must be a list of releases, each with a name and a vllm_version")
    releases: dict[str, SideRelease] = {}
    for index, item in enumerate(raw):
        try:
            release = SideRelease.model_validate(item)
        except ValidationError as exc:
            raise from_validation(exc, f"{label}[{index}]", ".") from exc
        if release.name in releases:
            raise PlanError(f"{label}[{index}].name", f"{release.name!r} names two releases")
        releases[release.name] = release
    return releases


def host_plan(
    facts: Any, instances: Any, label: str = "instances", behind_door: Any = False, releases: Any = None
) -> HostPlan:
    instances = plain(instances)
    if not isinstance(instances, list):
        raise PlanError(label, "must be a list of instances")
    if not isinstance(behind_door, bool):
        raise PlanError("front_door_enabled", f"must be true or false, not {behind_door!r}")
    requests = [instance_request(item, f"{label}[{index}]") for index, item in enumerate(instances)]
    return plan_host(host_facts(facts), requests, label, behind_door, side_releases(releases))


def scraped_host(raw: Any, name: str) -> ScrapedHost:
    """An inventory host's monitoring view: its vllm_serve_instances' addresses with the planner's defaults."""
    raw = plain(raw)
    default_host = Intent.model_fields["host"].default
    default_port = Intent.model_fields["port"].default
    endpoints = {}
    on_demand = set()
    for index, item in enumerate(raw.get("instances") or []):
        if not isinstance(item, dict) or "name" not in item:
            raise ValueError(f"vllm_serve_instances[{index}] on {name}: each instance needs a name")
        host, port = str(item.get("host", default_host)), int(item.get("port", default_port))
        # On its socket behind the door (the host plan says so; the preflight passes it for this host).
        on_socket = item.get("socket") is True
        endpoints[str(item["name"])] = socket_endpoint(str(item["name"]), host, port) if on_socket else endpoint(host, port)
        if item.get("on_demand") is True:
            on_demand.add(str(item["name"]))
    return ScrapedHost(
        address=str(raw.get("address") or name),
        server=str(raw.get("server") or name),
        endpoints=endpoints,
        node_exporter=bool(raw.get("node_exporter", True)),
        on_demand=on_demand,
        door_port=int(raw["door_port"]) if raw.get("door_port") else None,
        door_address=str(raw.get("door_address") or "0.0.0.0"),
    )


# What the monitoring view reads of each inventory host's variables; of its instances, only where they listen (an
# instance's key never enters the monitoring facts).
FLEET_VARIABLES = (
    "monitoring_server",
    "monitoring_scrape_address",
    "monitoring_node_exporter",
    "ansible_host",
    "vllm_serve_instances",
)
SCRAPED_INSTANCE_KEYS = ("name", "host", "port", "on_demand")


def monitoring_fleet(  # noqa: PLR0917 - the filter's positional arguments
    hosts: Any, me: str, local: Any, others: Any, sockets: Any, door_port: Any, door_address: Any
) -> dict[str, dict[str, Any]]:
    """Each inventory host as the Prometheus that scrapes it sees it: this host (`me`) from its own variables
    (`local`), every other from its hostvars (`others`: per variable of FLEET_VARIABLES, one value per host of
    `hosts`, None where unset). This host's instances on sockets behind its door (`sockets`) are scraped through
    the door at `door_address`:`door_port`."""
    hosts, local, others = [str(h) for h in plain(hosts)], plain(local) or {}, plain(others) or {}
    on_socket = {str(name) for name in plain(sockets) or []}
    fleet: dict[str, dict[str, Any]] = {}
    for index, host in enumerate(hosts):
        mine = host == me
        given = local if mine else {name: (others.get(name) or [None] * len(hosts))[index] for name in FLEET_VARIABLES}
        instances = []
        for item in given.get("vllm_serve_instances") or []:
            kept = {key: item[key] for key in SCRAPED_INSTANCE_KEYS if isinstance(item, dict) and key in item}
            instances.append(kept | {"socket": mine and kept.get("name") in on_socket})
        address = given.get("monitoring_scrape_address")
        fleet[host] = {
            "server": host if given.get("monitoring_server") is None else given["monitoring_server"],
            "address": address if address is not None else (given.get("ansible_host") or host),
            "node_exporter": True if given.get("monitoring_node_exporter") is None else given["monitoring_node_exporter"],
            "instances": instances,
            "door_port": int(door_port) if mine and on_socket else None,
            "door_address": door_address if mine else None,
        }
    return fleet


def fleet_targets(fleet: Any, server: str, node_port: int) -> dict[str, list[dict[str, Any]]]:
    fleet = plain(fleet)
    if not isinstance(fleet, dict):
        raise ValueError("the fleet must map inventory host names to {address, server, instances, node_exporter}")
    return scrape_targets(str(server), {str(h): scraped_host(v, str(h)) for h, v in fleet.items()}, int(node_port))


def monitoring_artifact(what: str, alerts: Any, host_plan_json: Any = None) -> Any:
    """The rule file, the dashboard, the queries the tests run, or the plan's textfile metrics."""
    th = thresholds(plain(alerts))
    if what == "rules":
        return rules_document(th)
    if what == "queries":
        return queries(th)
    if what == "dashboard":
        return dashboard()
    if what == "plan_metrics":
        return plan_metrics(HostPlan.model_validate(plain(host_plan_json)), th)
    raise ValueError(f"unknown monitoring artifact {what!r}; one of rules, queries, dashboard, plan_metrics")


def doctor_report(observations: Any, host: str) -> dict[str, Any]:
    findings = diagnose(plain(observations), str(host))
    return {
        "findings": [f.model_dump(mode="json") for f in findings],
        "red": [f.model_dump(mode="json") for f in findings if f.status is Status.RED],
        "table": render(str(host), findings),
    }


def cluster_environment(
    link: Any, nccl_found: Any, nccl_wanted: str, host: str, auth_token_path: str | None = None
) -> dict[str, Any]:
    """Every Ray and vLLM process's environment on one node: the interconnect, one NCCL library, Ray's token."""
    env = interconnect_env(interconnect(plain(link)))
    if auth_token_path is not None:
        env += ray_auth_env(str(auth_token_path))
    report = "no NCCL (cpu platform)"
    if nccl_wanted != "none":
        if nccl_wanted not in ("pip", "system", "custom"):
            raise PlanError("ray_cluster_nccl", f"{nccl_wanted!r} is not one of pip, system, custom, none")
        found = dict(plain(nccl_found) or {})
        declared = custom_nccl(found.pop("custom", None)) if nccl_wanted == "custom" else None
        report, nccl_env = nccl_choice(NcclLibraries.model_validate(found), nccl_wanted, host, declared)  # type: ignore[arg-type]
        env += nccl_env
    return {"env": [e.model_dump() for e in env], "nccl": report}


def cluster_check(nodes: Any, head: str, interface: str) -> list[str]:
    parsed = {str(name): NodeFacts.model_validate(facts) for name, facts in plain(nodes).items()}
    if head not in parsed:
        raise PlanError("ray_cluster_head", f"{head!r} is not one of the cluster's hosts {sorted(parsed)}")
    return cluster_problems(head, parsed, interface)


def link_check(members: Any, settings: Any) -> dict[str, list[str]]:
    """The link preflight of a cluster: every member's link (RDMA ports, MTU, TCP only) and the NCCL the
    processes will load against the head's multi-node instances. Problems refuse; warnings were accepted."""
    members, settings = plain(members), plain(settings) or {}
    if not isinstance(members, dict) or not isinstance(settings, dict):
        raise PlanError("ray_cluster", "link_check takes the members' link facts and the link settings as mappings")
    link = interconnect({k: settings[k] for k in ("interface", "hcas", "gid_index") if k in settings})
    accept = settings.get("accept_sockets", False)
    if not isinstance(accept, bool):
        raise PlanError("ray_cluster_accept_sockets", f"{accept!r} is not true or false")
    gb10 = settings.get("platform") == "gb10"
    problems: list[str] = []
    warnings: list[str] = []
    rdma = False
    for name, raw in sorted(members.items()):
        report = link_report(str(name), link_facts(raw, f"{name}: sparkfleet_link"), link, accept, gb10)
        problems += report.problems
        warnings += report.warnings
        rdma = rdma or report.transport == "rdma"
    instances = settings.get("instances") or []
    spanning = graph_instances(instances if isinstance(instances, list) else [], gb10)
    nccl = settings.get("nccl") or {}
    if nccl.get("custom") is not None:  # a patched build: the version it declares is held to the same rules
        declared = custom_nccl(nccl["custom"])
        nccl = {"version": declared.version, "where": f"the patched build ray_cluster_nccl_custom at {declared.path}"}
    ring_problems, ring_warnings = ring_findings(len(members), rdma, nccl.get("version"))
    problems += ring_problems
    warnings += ring_warnings
    where = str(nccl.get("where", "NCCL"))
    over_nodes = multinode_instances(instances if isinstance(instances, list) else []) if gb10 else []
    for problem in (nccl_aarch64_problem(nccl.get("version"), where, over_nodes),
                    nccl_graphs_problem(nccl.get("version"), where, spanning)):  # fmt: skip
        if problem:
            problems.append(problem)
    return {"problems": problems, "warnings": warnings}


def front_door_plan(host_plan_data: Any, settings: Any, variable: str = "front_door") -> DoorPlan:
    """The door plan from the role's variables: clients arrive as {name, key} and leave as digests."""
    settings = plain(settings)
    if not isinstance(settings, dict):
        raise PlanError(variable, "the door settings must be a mapping")
    digests = client_digests(settings.get("clients", []), f"{variable}_clients")
    metrics_key = settings.pop("metrics_key", None)
    for index, client in enumerate(digests):
        if client["name"] == METRICS_CLIENT:
            raise PlanError(f"{variable}_clients[{index}].name", f"{METRICS_CLIENT!r} is the door's own client (Prometheus)")
    if metrics_key is not None:
        digests += client_digests([{"name": METRICS_CLIENT, "key": metrics_key}], f"{variable} metrics key")
    return door_plan_from(plain(host_plan_data), {**settings, "clients": digests}, variable)
