"""What a host is given, for plan_dump.py: host plans, the front door's plan, the chat UI's plan and every unit's sandbox.

The plans of single instances do not reach sparkfleet.hostconfig; these cases do, so that a refactor of the host wing
is proved byte-identical too. Each case is a name and a function that returns what it dumps (a refusal is dumped as
its message by the caller).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from sparkfleet.catalog import get_profile
from sparkfleet.hostconfig import hardening
from sparkfleet.hostconfig.door import DoorSettings, door_plan
from sparkfleet.hostconfig.webui import WebuiSettings, webui_plan
from sparkfleet.models import GIB, HostFacts, Intent, NodePlacement, Platform
from sparkfleet.planning.hostplan import HostPlan, InstanceRequest, plan_host

NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
GEMMA = "nvidia/Gemma-4-31B-IT-NVFP4"
SPARK = HostFacts(
    platform=Platform.GB10,
    gpu_name="NVIDIA GB10",
    compute_capability="12.1",
    driver_version="580.142",
    cuda_version="13.0",
    mem_total_bytes=int(121.69 * GIB),
    vllm_version="0.33.0",
)
CPU = HostFacts(platform=Platform.CPU, arch="x86_64", mem_total_bytes=64 * GIB, unified_memory=False, vllm_version="0.32.0")
KEY = "0" * 64


def request(name: str, model: str, **intent: Any) -> InstanceRequest:
    placement = intent.pop("placement", None)
    on_demand = intent.pop("on_demand", False)
    return InstanceRequest(
        name=name,
        profile=get_profile(model),
        model_ref=model,
        intent=Intent(max_context=8192, concurrency=2, **intent),
        placement=placement,
        on_demand=on_demand,
    )


HOSTS: dict[str, Callable[[], HostPlan]] = {
    "two-behind-door": lambda: plan_host(
        SPARK,
        [request("coder", NANO, port=8000, served_name="coder"), request("chat", GEMMA, port=8001, served_name="chat")],
        "vllm_serve_instances",
        True,
    ),
    "one-on-tcp": lambda: plan_host(SPARK, [request("chat", NANO, api_key=True)], "vllm_serve_instances", False),
    "on-demand": lambda: plan_host(
        SPARK,
        [request("always", NANO, port=8000), request("sometimes", GEMMA, port=8001, on_demand=True)],
        "vllm_serve_instances",
        True,
    ),
    "native-rank-1": lambda: plan_host(
        SPARK,
        [
            request(
                "big",
                NANO,
                nodes=2,
                tensor_parallel_size=2,
                placement=NodePlacement(rank=1, master_addr="10.0.0.1", host_ip="10.0.0.2"),
            )
        ],
        "vllm_serve_instances",
        True,
    ),
}
DOORS = {
    "defaults": DoorSettings(),
    "clients-webui": DoorSettings.model_validate(
        {"clients": [{"name": "alice", "key_sha256": KEY}], "webui": {"port": 8443}, "port": 443}
    ),
}


def _sandboxes() -> Iterator[tuple[str, Callable[[], Any]]]:
    variants: dict[str, dict[str, Any]] = {
        "plain": {},
        "writable": {"writable": ["/var/lib/sparkfleet", "/var/cache/sparkfleet"]},
        "lan": {"bind_host": "0.0.0.0", "allowed_clients": ["10.0.0.0/24"]},
        "link": {"link_subnet": "10.0.0.1 10.0.0.2", "rdma_devices": ["/dev/infiniband/uverbs0"]},
        "socket": {"socket": "/run/sparkfleet-vllm-chat/api.sock", "socket_group": "sparkfleet-door"},
    }
    for kind in hardening.UnitKind:
        for platform in Platform:
            for variant, given in variants.items():
                yield (
                    f"sandbox/{kind.value}-{platform.value}-{variant}.json",
                    lambda kind=kind, platform=platform, given=given: hardening.sandbox(kind, platform, **given),
                )


def cases() -> Iterator[tuple[str, Callable[[], Any]]]:
    for name, make in HOSTS.items():
        yield f"hostplan/{name}.json", make
        for door, settings in DOORS.items():
            yield f"door/{name}-{door}.json", lambda make=make, settings=settings: door_plan(make(), settings)
    webui = WebuiSettings(version="0.12.4", admin_email="admin@example.com", default_model="chat")
    yield (
        "webui/two-behind-door.json",
        lambda: webui_plan(
            webui,
            door_url="https://127.0.0.1:443",
            browser_url="https://spark01:8443",
            door_certificate="/etc/nginx/sparkfleet/tls/door.crt",
            models=sorted(HOSTS["two-behind-door"]().instances),
            root="/opt/sparkfleet/webui",
        ),
    )
    yield from _sandboxes()
