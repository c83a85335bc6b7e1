"""What Prometheus scrapes: the plan as metrics, and the targets of every host."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

from pydantic import Field

from ...errors import PlanError
from ...models import GIB, WILDCARDS, ServePlan, Strict
from ...planning.hostplan import Endpoint, HostPlan, footprint_gib
from ..door import METRICS_PREFIX
from .thresholds import Thresholds


def _sample(name: str, value: float, labels: dict[str, str] | None = None) -> str:
    text = ",".join(f'{k}="{v}"' for k, v in (labels or {}).items())
    return f"{name}{{{text}}} {value:.0f}" if text else f"{name} {value:.0f}"


def plan_metrics(host_plan: HostPlan, th: Thresholds) -> str:
    """The applied plan as node_exporter textfile metrics: the alert floor and the dashboard's budget lines."""
    per_host = [
        ("sparkfleet_plan_memory_total_bytes", "MemTotal the plan was made for", host_plan.mem_total_gib * GIB),
        ("sparkfleet_plan_host_reserve_bytes", "memory the plan leaves to the OS", host_plan.host_reserve_gib * GIB),
        ("sparkfleet_plan_footprint_bytes", "all instances' planned footprint", host_plan.footprint_gib * GIB),
        (
            "sparkfleet_plan_memavailable_floor_bytes",
            f"alert when MemAvailable is below this ({th.memory_floor_fraction} of the host reserve)",
            th.memory_floor_fraction * host_plan.host_reserve_gib * GIB,
        ),
    ]
    lines: list[str] = []
    for name, help_text, value in per_host:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", _sample(name, value)]
    per_instance: list[tuple[str, str, Callable[[ServePlan], float]]] = [
        ("sparkfleet_plan_instance_footprint_bytes", "planned footprint", lambda p: footprint_gib(p) * GIB),
        ("sparkfleet_plan_instance_kv_cache_bytes", "planned KV cache", lambda p: p.kv_cache_memory_bytes),
        ("sparkfleet_plan_instance_kv_tokens", "planned KV capacity in tokens", lambda p: p.kv_tokens),
        ("sparkfleet_plan_instance_max_num_seqs", "planned concurrent sequences", lambda p: p.max_num_seqs),
    ]
    instances = sorted(host_plan.instances.items())
    for name, help_text, value_of in per_instance:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        lines += [_sample(name, value_of(p), {"sparkfleet_instance": n}) for n, p in instances]
    # Which release each instance runs from (vllm_install_releases): "main" is current's.
    info = "sparkfleet_plan_instance_release_info"
    lines += [f"# HELP {info} the vLLM release each instance runs from (1 for the one it runs)", f"# TYPE {info} gauge"]
    lines += [_sample(info, 1, _release_labels(n, p)) for n, p in instances]
    return "\n".join(lines) + "\n"


def _release_labels(name: str, served: ServePlan) -> dict[str, str]:
    release = served.release
    return {
        "sparkfleet_instance": name,
        "release": release.name if release is not None and release.name else "main",
        "release_id": (release.id or "") if release is not None else "",
        "vllm_version": served.vllm_version,
    }


class ScrapedHost(Strict):
    """One inventory host as the Prometheus that scrapes it sees it."""

    address: str
    server: str
    endpoints: dict[str, Endpoint] = Field(default_factory=dict)
    node_exporter: bool = True
    # The door's address and port, when its instances serve on sockets behind it: their /metrics is read there.
    door_address: str = "0.0.0.0"
    door_port: int | None = None
    # Instances the front door switches: down between uses by design, so no down alert for them.
    on_demand: set[str] = Field(default_factory=set)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _target(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def scrape_targets(server: str, hosts: dict[str, ScrapedHost], node_port: int) -> dict[str, list[dict[str, Any]]]:
    """file_sd target groups for the Prometheus on `server`: the instances and node_exporter of each host it scrapes.

    An instance on its Unix socket behind the door is read through its own host's door ("vllm_door": TLS and
    the door's metrics key, job label still VLLM_JOB); only that host's Prometheus has the key.
    """
    vllm: list[dict[str, Any]] = []
    through_door: list[dict[str, Any]] = []
    node: list[dict[str, Any]] = []
    for name, host in sorted(hosts.items()):
        if host.server != server:
            continue
        local = name == server
        if host.node_exporter:
            address = "127.0.0.1" if local else host.address
            node.append({"targets": [_target(address, node_port)], "labels": {"sparkfleet_host": name}})
        for instance, ep in sorted(host.endpoints.items()):
            labels = {"sparkfleet_host": name, "sparkfleet_instance": instance}
            if instance in host.on_demand:
                labels["sparkfleet_on_demand"] = "true"
            if ep.socket is not None:
                if not local or host.door_port is None:
                    raise PlanError(
                        f"vllm_serve_instances ({instance}) on {name}",
                        f"serves on a Unix socket behind the front door of {name}; only the Prometheus on {name} "
                        "holds that door's metrics key",
                        (f"monitoring_server: {name} on {name}",),
                    )
                labels["__metrics_path__"] = f"{METRICS_PREFIX}{instance}"
                door = "127.0.0.1" if host.door_address in WILDCARDS else host.door_address
                through_door.append({"targets": [_target(door, host.door_port)], "labels": labels})
                continue
            if local:
                address = ep.local_host
            elif ep.host in WILDCARDS:
                address = host.address
            elif _loopback(ep.host):
                raise PlanError(
                    f"vllm_serve_instances ({instance}) on {name}",
                    f"listens on {ep.host}, which the Prometheus on {server} cannot reach",
                    ("host: 0.0.0.0 with an api_key (/metrics needs none)", f"monitoring_server: {name} on {name}"),
                )
            else:
                address = ep.host
            vllm.append({"targets": [_target(address, ep.port)], "labels": labels})
    return {"vllm": vllm, "vllm_door": through_door, "node": node}
