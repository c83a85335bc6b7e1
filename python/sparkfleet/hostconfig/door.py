"""The front door of a host: one authenticated TLS endpoint in front of its loopback-only instances.

vLLM's own --api-key guards only its /v1 routes (/invocations, /tokenize, /metrics answer without it),
so no instance listens beyond loopback and clients reach every model through one proxy (nginx from the
OS packages; the front_door role renders this plan). This module decides what the door serves: which
paths, which model name goes to which instance, who may ask and how much. Client keys arrive here only
as SHA-256 digests: the controller hashes them and the proxy compares digests.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from typing import Annotated, Literal

from pydantic import Field, field_validator

from ..errors import PlanError, from_validation
from ..models import ServePlan, Strict
from ..planning.hostplan import RESERVED_PORTS, HostPlan
from ..planning.requestsize import text_mib
from .doorgate import DoorConnections, door_connections
from .doorlimits import DoorLimits, admission
from .doormemory import NGINX_BASE_MIB, door_memory

# What a client may call, by what the instance serves. Everything else answers 404 (with a key) or 401.
GENERATE_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/responses")
POOLING_PATHS = ("/v1/embeddings",)
# Answered by the door itself from the plan: every model of the host, wherever it runs.
MODELS_PATH = "/v1/models"
# vLLM's /metrics of each instance, for this host's Prometheus only: the door's own client, whose key the
# door makes and keeps, reaches these paths and nothing else (instances on sockets have no other way).
METRICS_PREFIX = "/_sparkfleet/metrics/"
METRICS_CLIENT = "sparkfleet-metrics"

_CLIENT_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
# A client key is a bearer token: long enough to be unguessable, with nothing a header or log could split.
_CLIENT_KEY = re.compile(r"[A-Za-z0-9._~+/=-]{32,512}")
_SERVER_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def key_digest(key: str) -> str:
    """What the door stores for a client key: its SHA-256 (the keys are random tokens, not passwords)."""
    return hashlib.sha256(key.encode()).hexdigest()


class DoorClient(Strict):
    name: str
    key_sha256: str

    @field_validator("name")
    @classmethod
    def _name_shape(cls, value: str) -> str:
        if not _CLIENT_NAME.fullmatch(value):
            raise ValueError(f"{value!r}: lower-case letters, digits and . _ - only, at most 64 characters")
        return value

    @field_validator("key_sha256")
    @classmethod
    def _digest_shape(cls, value: str) -> str:
        if not _SHA256.fullmatch(value):
            raise ValueError("not a SHA-256 hex digest")
        return value


class DoorWebui(Strict):
    """The chat front end behind the door: browsers reach `port` (TLS), the door forwards to `upstream_port`
    on loopback. The UI signs people in itself, so this port takes no client key."""

    port: Annotated[int, Field(ge=1, le=65535)] = 8443
    upstream_port: Annotated[int, Field(ge=1024, le=65535)] = 8080
    # Documents and images people upload to the UI.
    max_body_mib: Annotated[int, Field(ge=1, le=1024)] = 32
    # Signing in (Open WebUI's /api/v1/auths/) takes an address and a password: a body past this is refused
    # before the UI reads it (a 7.63 MiB sign-in body held its /health for 7.5 s).
    sign_in_body_kib: int = 64


class DoorSettings(Strict):
    address: str = "0.0.0.0"
    port: Annotated[int, Field(ge=1, le=65535)] = 443
    server_name: str = "localhost"
    tls: Literal["self_signed", "provided", "ca"] = "self_signed"
    http2: bool = True
    clients: list[DoorClient] = Field(default_factory=list)
    limits: DoorLimits = Field(default_factory=DoorLimits)
    webui: DoorWebui | None = None

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not an IP address (0.0.0.0 for every IPv4 address)") from exc
        return value

    @field_validator("server_name")
    @classmethod
    def _server_name(cls, value: str) -> str:
        if not _SERVER_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a host name (letters, digits, '.' and '-')")
        return value


class DoorRoute(Strict):
    """One model name clients ask for, and the loopback instance that serves it."""

    served_name: str
    instance: str
    upstream: str
    paths: list[str]
    max_model_len: int
    on_demand: bool = False
    # The largest body the door forwards to it: its plan's max_request_mib, under the door's cap.
    max_body_mib: int = 32
    # What a text request of its context takes (sparkfleet.planning.requestsize.text_mib), under max_body_mib: a
    # larger body carries media.
    text_body_mib: int = 32
    # A reasoning model's floor for a request's output cap (its plan's min_max_tokens): the door cautions a request
    # under it (its log, X-Sparkfleet-Caution) and lets it through; None for a model that answers at once.
    min_max_tokens: int | None = None
    # Admission: the sequences it runs at once (its plan's max_num_seqs), the requests it may hold in flight (those
    # and a bounded queue) and what one key may hold of them (fewer than it runs, so another key gets a sequence).
    max_num_seqs: int = 1
    in_flight: int = 1
    key_in_flight: int = 1


class Switched(Strict):
    """An on-demand instance as the activator sees it: what it holds and when it stops idle."""

    unit: str
    url: str
    # The Unix socket it serves on behind the door (then url is the probe's http+unix:// form of it).
    socket: str | None = None
    footprint_gib: float
    idle_stop_after_s: int


class Activator(Strict):
    """What the door's activator switches: on-demand instances only, within the plan's budget beside the
    always-on ones (never stopping one of those)."""

    budget_gib: float
    wait_s: int
    instances: dict[str, Switched]


# TLS 1.2 suites with forward secrecy and an AEAD cipher (Mozilla's "intermediate" list): no CBC and no
# SHA-1 MAC. TLS 1.3's suites are all AEAD and need no setting.
TLS12_CIPHERS = ":".join(
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "ECDHE-RSA-CHACHA20-POLY1305",
    )
)


class DoorPlan(Strict):
    address: str
    port: int
    server_name: str
    tls: str
    http2: bool
    routes: list[DoorRoute]
    paths: list[str]
    models: dict[str, object]
    clients: list[DoorClient]
    limits: DoorLimits
    reasons: list[str]
    activator: Activator | None = None
    webui: DoorWebui | None = None
    tls12_ciphers: str = TLS12_CIPHERS
    metrics_prefix: str = METRICS_PREFIX
    metrics_client: str = METRICS_CLIENT
    # What nginx buffers at most (the largest route's limit), and the memory it may hold (MemoryMax).
    max_body_mib: int = 32
    # A body larger than this (bytes; the largest text body of any route) is in the large-body lane; None: no lane
    # (no route takes more than its text).
    large_body_bytes: int | None = None
    memory_max_mib: int = NGINX_BASE_MIB
    memory_max_reason: str = ""
    connections: DoorConnections | None = None


def client_digests(clients: object, variable: str) -> list[dict[str, str]]:
    """`front_door_clients` ({name, key}) as {name, key_sha256}; a bad entry is refused without showing its key."""
    if not isinstance(clients, list):
        raise PlanError(variable, "must be a list of {name, key}")
    out: list[dict[str, str]] = []
    for index, entry in enumerate(clients):
        if not isinstance(entry, dict) or set(entry) != {"name", "key"}:
            keys = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise PlanError(f"{variable}[{index}]", f"each client is {{name, key}}; got {keys}")
        key = entry["key"]
        if not isinstance(key, str) or not _CLIENT_KEY.fullmatch(key):
            raise PlanError(
                f"{variable}[{index}].key",
                "must be 32 to 512 characters of letters, digits and . _ ~ + / = - (no newline, quote or space); "
                "the key is not shown",
                ("openssl rand -hex 32",),
            )
        out.append({"name": str(entry["name"]), "key_sha256": key_digest(key)})
    return out


def _check_clients(clients: list[DoorClient], variable: str) -> None:
    names: dict[str, int] = {}
    digests: dict[str, int] = {}
    for index, client in enumerate(clients):
        if client.name in names:
            raise PlanError(f"{variable}[{index}].name", f"{client.name!r} is already {variable}[{names[client.name]}]")
        if client.key_sha256 in digests:
            raise PlanError(
                f"{variable}[{index}].key",
                f"the same key as {variable}[{digests[client.key_sha256]}]: each client needs its own to be revocable",
            )
        names[client.name] = index
        digests[client.key_sha256] = index


def _check_webui_ports(webui: DoorWebui, door_port: int, taken: dict[int, str], variable: str) -> None:
    """The chat UI's two ports are its own: neither the door's API port, an instance's nor a reserved one."""
    for port, name in ((webui.port, "webui_door_port"), (webui.upstream_port, "webui_port")):
        if port == door_port:
            raise PlanError(name, f"{port} is the door's API port ({variable}_port)", ("8443", "8080"))
        if port in taken:
            raise PlanError(name, f"{port} is the port of instance {taken[port]}", ("8443", "8080"))
        if port in RESERVED_PORTS:
            raise PlanError(name, f"{port} is {RESERVED_PORTS[port]}", ("8443", "8080"))
    if webui.port == webui.upstream_port:
        raise PlanError("webui_port", f"{webui.port} is also webui_door_port: the door listens there", ("8080",))


def _paths_of(served: ServePlan) -> list[str]:
    return list(POOLING_PATHS if served.runner == "pooling" else GENERATE_PATHS)


def _check_door_port(host_plan: HostPlan, settings: DoorSettings, variable: str) -> None:
    """The door's port (and the chat UI's) must be free: no instance's, none reserved."""
    taken = {ep.port: name for name, ep in host_plan.endpoints.items()}
    if settings.port in taken:
        raise PlanError(
            f"{variable}_port",
            f"{settings.port} is the port of instance {taken[settings.port]} (on loopback, which the door's "
            f"{settings.address} includes)",
            ("443", "8443"),
        )
    if settings.port in RESERVED_PORTS:
        raise PlanError(f"{variable}_port", f"{settings.port} is {RESERVED_PORTS[settings.port]}", ("443", "8443"))
    if settings.webui:
        _check_webui_ports(settings.webui, settings.port, taken, variable)


def door_routes(host_plan: HostPlan, settings: DoorSettings) -> list[DoorRoute]:
    """One route per model name, to its instance's socket (or loopback port); a name served twice is refused."""
    routes: list[DoorRoute] = []
    owners: dict[str, str] = {}
    for name, served in sorted(host_plan.instances.items()):
        endpoint = host_plan.endpoints[name]
        if not ipaddress.ip_address(endpoint.local_host).is_loopback or endpoint.host != endpoint.local_host:
            raise PlanError(
                f"vllm_serve_instances ({name}).host",
                f"listens on {endpoint.host}: behind the door an instance binds loopback only",
                ("host 127.0.0.1",),
            )
        if served.served_name in owners:
            raise PlanError(
                f"vllm_serve_instances ({name}).served_name",
                f"{served.served_name!r} is already served by {owners[served.served_name]}: the door routes by "
                "the model name, so each must be unique on a host",
            )
        owners[served.served_name] = name
        routes.append(
            DoorRoute(
                served_name=served.served_name,
                instance=name,
                upstream=f"unix:{endpoint.socket}" if endpoint.socket else f"{endpoint.local_host}:{endpoint.port}",
                paths=_paths_of(served),
                max_model_len=served.max_model_len,
                on_demand=name in host_plan.on_demand,
                max_body_mib=min(served.max_request_mib, settings.limits.max_body_mib or served.max_request_mib),
                text_body_mib=min(
                    text_mib(served.max_model_len), served.max_request_mib, settings.limits.max_body_mib or 1024
                ),
                min_max_tokens=served.min_max_tokens,
                **admission(served.max_num_seqs, settings.limits),
            )
        )
    return routes


def _activator(host_plan: HostPlan, settings: DoorSettings) -> Activator | None:
    """What starts the on-demand instances on their first request and stops them idle, when there are any."""
    if not host_plan.on_demand:
        return None
    return Activator(
        budget_gib=host_plan.on_demand_budget_gib,
        wait_s=settings.limits.on_demand_wait_s,
        instances={
            name: Switched(
                unit=f"sparkfleet-vllm-{name}.service",
                url=host_plan.endpoints[name].local_url,
                socket=host_plan.endpoints[name].socket,
                footprint_gib=switched.footprint_gib,
                idle_stop_after_s=switched.idle_stop_after_s,
            )
            for name, switched in sorted(host_plan.on_demand.items())
        },
    )


def _door_reasons(
    routes: list[DoorRoute], paths: list[str], memory_why: str, activator: Activator | None, settings: DoorSettings
) -> list[str]:
    on_sockets = [r.instance for r in routes if r.upstream.startswith("unix:")]
    reasons = [
        "vLLM's --api-key guards only /v1, so the door checks a key on every path; "
        + (
            f"{', '.join(on_sockets)} serve on Unix sockets only the door's workers may open, each in a network "
            "namespace of its own, so no local account reaches vLLM or its internal sockets around the door"
            if on_sockets
            else "every instance binds loopback"
        ),
        f"allow-listed paths: {', '.join([MODELS_PATH, *paths])}; any other path is 404 with a key, 401 without",
        "keys are kept as SHA-256 digests; adding or revoking one reloads the proxy, in-flight requests finish",
        f"{METRICS_PREFIX}<instance> serves vLLM's /metrics to this host's Prometheus, whose key ({METRICS_CLIENT}, "
        "made and kept by the door) reaches nothing else; no other key reaches it",
        "request bodies: "
        + ", ".join(f"{r.served_name} up to {r.max_body_mib} MiB" for r in routes)
        + " (each instance's plan sizes it to its context; 413 above)",
        "admission per instance: "
        + ", ".join(
            f"{r.served_name} {r.in_flight} in flight ({r.max_num_seqs} running, the rest in vLLM's queue), "
            f"{r.key_in_flight} of them a key's"
            for r in routes
        )
        + "; past either 429 with Retry-After, so a heavy key slows itself and another key's request is scheduled "
        "at once (a key's share leaves front_door_limits.reserved_sequences of the running ones to others)",
        memory_why,
    ]
    if activator:
        reasons.append(
            f"on demand: {', '.join(activator.instances)} start on their first request (waiting up to "
            f"{activator.wait_s} s) and stop idle; together they may hold {activator.budget_gib:.1f} GiB beside "
            "the always-on instances, so an idle one is stopped to make room, a busy or always-on one never"
        )
    if settings.webui:
        reasons.append(
            f"the chat UI: TLS on port {settings.webui.port}, forwarded to Open WebUI on loopback port "
            f"{settings.webui.upstream_port}; it signs people in itself (an address with "
            f"{settings.limits.sign_in_lockout_failures} failed sign-ins in {settings.limits.sign_in_lockout_s} s is "
            "shut out until the oldest is that old) and reaches the models through this door with its own client key"
        )
    return reasons


def door_plan(host_plan: HostPlan, settings: DoorSettings, variable: str = "front_door") -> DoorPlan:
    """Routes, allow-list and limits of the door in front of every instance of `host_plan`."""
    _check_clients(settings.clients, f"{variable}_clients")
    _check_door_port(host_plan, settings, variable)
    routes = door_routes(host_plan, settings)
    paths = sorted({p for r in routes for p in r.paths})
    max_body = max((r.max_body_mib for r in routes), default=1)
    text_body = max((r.text_body_mib for r in routes), default=1)
    connections = door_connections([settings.port, *([settings.webui.port] if settings.webui else [])], settings.limits)
    memory_max, memory_why = door_memory(
        len(settings.clients),
        settings.limits.concurrency,
        max_body,
        text_body,
        settings.limits.large_body_concurrency,
        connections_mib=connections.memory_mib,
    )
    models: dict[str, object] = {
        "object": "list",
        "data": [
            {"id": r.served_name, "object": "model", "owned_by": "sparkfleet", "max_model_len": r.max_model_len}
            for r in routes
        ],
    }
    activator = _activator(host_plan, settings)
    return DoorPlan(
        address=settings.address,
        port=settings.port,
        server_name=settings.server_name,
        tls=settings.tls,
        http2=settings.http2,
        routes=routes,
        paths=paths,
        models=models,
        clients=settings.clients,
        limits=settings.limits,
        reasons=[*_door_reasons(routes, paths, memory_why, activator, settings), connections.reason],
        activator=activator,
        webui=settings.webui,
        max_body_mib=max_body,
        large_body_bytes=text_body * 1024 * 1024 if max_body > text_body else None,
        memory_max_mib=memory_max,
        memory_max_reason=memory_why,
        connections=connections,
    )


def door_plan_from(host_plan: object, settings: object, variable: str = "front_door") -> DoorPlan:
    """The door plan from plain data (the filter's inputs): a bad setting names its variable."""
    try:
        parsed_plan = HostPlan.model_validate(host_plan)
    except ValueError as exc:
        raise from_validation(exc, "vllm_serve_plan", ".") from exc
    if not isinstance(settings, dict):
        raise PlanError(variable, "the door settings must be a mapping")
    try:
        parsed = DoorSettings.model_validate(settings)
    except ValueError as exc:
        raise from_validation(exc, variable) from exc
    return door_plan(parsed_plan, parsed, variable)
