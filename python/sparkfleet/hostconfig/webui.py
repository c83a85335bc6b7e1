"""Open WebUI, the optional chat front end: its hash-locked install and the settings it runs with.

It runs on loopback as a system user of its own behind the front door (its own TLS port there), signs
people in through its own accounts, and reaches the host's models only through the door with a client
key of its own, like any other client. Nothing it does at run time leaves the host: no model hub, no
update check, no telemetry. The webui role renders this plan; nothing here touches a host.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from ..errors import PlanError, from_validation
from ..models import Strict, planned_flag
from ..release import LockedPackage, Target, parse_lock
from ..release.cachefile import locked
from ..resolver import DEFAULT_CACHE, RESOLVE_TIMEOUT_S, _run, uv_binary
from .directives import WEBUI_CACHE_DIRECTORY as CACHE_DIRECTORY
from .directives import WEBUI_STATE_DIRECTORY as STATE_DIRECTORY

PACKAGE = "open-webui"
# Left out of the lock, so a Spark does not install a second torch (a multi-GB CUDA build on aarch64) for
# the UI: they serve local embedding and speech models, which this setup bypasses (retrieval and speech
# go to the door's models). Open WebUI imports them only when such a model is configured.
EXCLUDES = (
    "torch",
    "torchvision",
    "torchaudio",
    "sentence-transformers",
    "transformers",
    "accelerate",
    "faster-whisper",
    "ctranslate2",
)
_VERSION = re.compile(r"\d+\.\d+\.\d+(\.post\d+)?")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(\.[A-Za-z0-9-]{1,63})+")
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,199}")


class WebuiLock(Strict):
    """Every package Open WebUI installs, for one target, each with its sha256 (uv pip sync --require-hashes)."""

    version: str
    target: Target
    requirements: str
    sha256: str
    packages: dict[str, str]


def _check_version(version: str) -> None:
    if not _VERSION.fullmatch(version):
        raise PlanError("webui_version", f"{version!r} is not an Open WebUI release such as 0.12.4")


def check_lock(text: str, version: str) -> dict[str, LockedPackage]:
    """The packages of a resolved lock, refused unless it pins Open WebUI at `version`, hashes every
    package and holds none of the excluded ones."""
    packages = parse_lock(text)
    found = packages.get(PACKAGE)
    if found is None or found.version != version:
        got = found.version if found else "nothing"
        raise PlanError("webui_version", f"the resolved lock has {PACKAGE} {got}, not {version}")
    unhashed = sorted(name for name, pkg in packages.items() if not pkg.hashes)
    if unhashed:
        raise PlanError("webui_version", f"the lock has packages without hashes: {', '.join(unhashed[:5])}")
    excluded = sorted(set(packages) & set(EXCLUDES))
    if excluded:
        raise PlanError("webui_version", f"the lock holds packages left out on purpose: {', '.join(excluded)}")
    return packages


def compile_argv(uv: str, target: Target, infile: str, excludes: str, outfile: str) -> list[str]:
    """uv's resolve of Open WebUI for the target, from index metadata only (no wheel is downloaded)."""
    return [
        uv, "pip", "compile", infile,
        "--python-platform", target.python_platform, "--python-version", target.python,
        "--excludes", excludes, "--generate-hashes", "--no-header", "--quiet", "--output-file", outfile,
    ]  # fmt: skip


def webui_lock(
    version: str, target: Target, cache_dir: Path | None = DEFAULT_CACHE, relock: bool = False, uv: str | None = None
) -> WebuiLock:
    """Open WebUI `version` resolved for `target` once, on the controller, and kept with the release locks:
    every host and every later run installs exactly these files; `relock` resolves again."""
    _check_version(version)
    if cache_dir is None:
        return _resolve(version, target, uv)
    key = hashlib.sha256(json.dumps([version, target.model_dump(), EXCLUDES]).encode()).hexdigest()[:16]
    # Beside the release locks, in a directory of its own: the release lock cache holds release locks only.
    path = cache_dir / "webui" / f"{version}-{key}.json"
    # Concurrent forks (one per host) wait for the first resolve and then read it.
    with locked(path):
        if path.exists() and not relock:
            lock = WebuiLock.model_validate_json(path.read_text(encoding="utf-8"))
            check_lock(lock.requirements, version)
            return lock
        lock = _resolve(version, target, uv)
        tmp_path = path.with_suffix(".tmp")
        tmp_path.write_text(lock.model_dump_json(indent=2) + "\n", encoding="utf-8")
        tmp_path.replace(path)
        return lock


def _resolve(version: str, target: Target, uv: str | None) -> WebuiLock:
    with tempfile.TemporaryDirectory(prefix="sparkfleet-webui-") as tmp:
        infile, excludes, outfile = Path(tmp, "webui.in"), Path(tmp, "excludes.txt"), Path(tmp, "webui.lock")
        infile.write_text(f"{PACKAGE}=={version}\n", encoding="utf-8")
        excludes.write_text("\n".join(EXCLUDES) + "\n", encoding="utf-8")
        try:
            done = _run(compile_argv(uv or uv_binary(), target, str(infile), str(excludes), str(outfile)))
        except subprocess.TimeoutExpired as exc:
            raise PlanError("webui_version", f"resolving took over {RESOLVE_TIMEOUT_S} s") from exc
        if done.returncode != 0:
            said = [line.strip() for line in done.stderr.strip().splitlines() if line.strip()][-3:]
            raise PlanError("webui_version", f"Open WebUI {version} does not resolve for {target.python_platform} "
                            f"with Python {target.python}: {' '.join(said) or 'no output'}")  # fmt: skip
        text = outfile.read_text(encoding="utf-8")
    packages = check_lock(text, version)
    return WebuiLock(
        version=version,
        target=target,
        requirements=text,
        sha256=hashlib.sha256(text.encode()).hexdigest(),
        packages={name: pkg.version for name, pkg in sorted(packages.items())},
    )


class WebuiSettings(Strict):
    """What the user chose (webui_* variables)."""

    version: str
    port: Annotated[int, Field(ge=1024, le=65535)] = 8080
    admin_email: str
    admin_name: str = "Admin"
    default_model: str = ""
    # Open WebUI held 380-540 MiB at rest on the sandbox and rose to 1,519 MiB under eight 32 MiB bodies sent
    # to its sign-in without an account (before the door capped sign-in bodies): 3 GiB is its room to work,
    # and past it systemd restarts the UI instead of letting it eat the memory the GPU shares.
    memory_max_mib: Annotated[int, Field(ge=1024, le=65536)] = 3072

    @field_validator("version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not _VERSION.fullmatch(value):
            raise ValueError(f"{value!r} is not an Open WebUI release such as 0.12.4")
        return value

    @field_validator("admin_email")
    @classmethod
    def _email(cls, value: str) -> str:
        if not _EMAIL.fullmatch(value):
            raise ValueError(f"{value!r} is not an e-mail address such as admin@example.com")
        return value

    @field_validator("admin_name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not value or len(value) > 64 or any(not ch.isprintable() for ch in value):
            raise ValueError("must be 1 to 64 printable characters")
        return value


class Setting(Strict):
    name: str
    value: str
    reason: str


class WebuiPlan(Strict):
    upstream: str
    url: str
    argv: list[str]
    environment: list[Setting]
    reasons: list[str]
    # Its unit's limits: what it may hold, and the OOM killer's preference for it over vLLM.
    limits: list[Setting]
    # Its accounts (SQLite in DATA_DIR): the role asks it, read-only, whether the admin account exists.
    database: str


@dataclass(frozen=True)
class WebuiReach:
    """How the UI reaches the door, and what the door's models take."""

    door_url: str
    door_certificate: str
    tool_calls: bool
    extra_origins: tuple[str, ...]


def _environment(browser_url: str, default: str, reach: WebuiReach) -> list[Setting]:
    """Open WebUI's settings, each with its reason: its state, the door as its only way to the models, no telemetry,
    no sign-up, no extra generations."""
    state = f"/var/lib/{STATE_DIRECTORY}"
    cache = f"/var/cache/{CACHE_DIRECTORY}"
    origins = [browser_url, *(o for o in reach.extra_origins if o != browser_url)]
    env = [
        Setting(name="DATA_DIR", value=state, reason="its accounts and chats, in systemd's StateDirectory"),
        Setting(name="HOME", value=state, reason="its user has no home; libraries that write to ~ write here"),
        Setting(name="XDG_CACHE_HOME", value=cache, reason="caches in systemd's CacheDirectory"),
        Setting(name="STATIC_DIR", value=f"{cache}/static",
                reason="it copies its static files at every start; its release is read-only"),
        Setting(name="OPENAI_API_BASE_URL", value=f"{reach.door_url}/v1",
                reason="every model of the host through the front door, as a client with its own key"),
        Setting(name="SSL_CERT_FILE", value=reach.door_certificate,
                reason="the door's certificate is the only one it trusts"),
        Setting(name="REQUESTS_CA_BUNDLE", value=reach.door_certificate, reason="the same for the requests library"),
        Setting(name="AIOHTTP_CLIENT_SSL_CERT_FILE", value=reach.door_certificate,
                reason="the same for its model calls (aiohttp), which otherwise trust certifi's bundle only"),
        Setting(name="ENABLE_OLLAMA_API", value="false", reason="no Ollama on a Spark; vLLM serves every model"),
        Setting(name="OFFLINE_MODE", value="true", reason="no update checks or downloads at run time"),
        Setting(name="HF_HUB_OFFLINE", value="1", reason="it never fetches a model from the hub"),
        Setting(name="RAG_EMBEDDING_ENGINE", value="openai",
                reason="no local embedding model: its packages are left out of the lock"),
        Setting(name="BYPASS_EMBEDDING_AND_RETRIEVAL", value="true",
                reason="documents go to the model whole; no local vector search"),
        Setting(name="ENABLE_SIGNUP", value="false", reason="accounts are made by the admin, nobody signs up"),
        Setting(name="ENV", value="prod", reason="production mode: no public /docs or /openapi.json (open_webui/main.py)"),
        Setting(name="WEBUI_URL", value=browser_url, reason="the address browsers use, through the door"),
        Setting(name="CORS_ALLOW_ORIGIN", value=";".join(origins),
                reason="only its own pages, at the names the door's certificate carries, may call it"),
        Setting(name="WEBUI_SESSION_COOKIE_SECURE", value="true", reason="its session cookie travels over TLS only"),
        Setting(name="WEBUI_AUTH_COOKIE_SECURE", value="true", reason="the same for its sign-in cookie"),
        Setting(name="ENABLE_COMMUNITY_SHARING", value="false", reason="chats are never shared off the host"),
        Setting(name="ENABLE_FOLLOW_UP_GENERATION", value="false",
                reason="no extra generation per answer for suggested follow-ups: the Spark serves the users' requests"),
        Setting(name="ENABLE_TAGS_GENERATION", value="false", reason="no extra generation per chat for tags"),
        Setting(name="ANONYMIZED_TELEMETRY", value="false", reason="no telemetry"),
        Setting(name="DO_NOT_TRACK", value="true", reason="no telemetry"),
        Setting(name="SCARF_NO_ANALYTICS", value="true", reason="no telemetry"),
    ]  # fmt: skip
    if default:
        env.append(Setting(name="DEFAULT_MODELS", value=default, reason="the model a new chat starts with"))
    if not reach.tool_calls:
        env.append(
            Setting(
                name="DEFAULT_MODEL_PARAMS",
                value='{"function_calling": "legacy"}',
                reason="the host's models are served without a tool-call parser: no tool definitions in every prompt",
            )
        )
    return env


def webui_plan(
    settings: WebuiSettings,
    *,
    door_url: str,
    browser_url: str,
    door_certificate: str,
    models: list[str],
    root: str,
    tool_calls: bool = False,
    extra_origins: tuple[str, ...] = (),
) -> WebuiPlan:
    """How Open WebUI runs: where it listens, how it reaches the door and what it may not do."""
    if settings.default_model and settings.default_model not in models:
        raise PlanError(
            "webui_default_model",
            f"{settings.default_model!r} is not a model of this host (served: {', '.join(models) or 'none'})",
        )
    if settings.default_model and not _MODEL_NAME.fullmatch(settings.default_model):
        raise PlanError("webui_default_model", "must be a served model name")
    default = settings.default_model or (models[0] if models else "")
    reach = WebuiReach(door_url, door_certificate, tool_calls, extra_origins)
    state = f"/var/lib/{STATE_DIRECTORY}"
    env = _environment(browser_url, default, reach)
    upstream = f"127.0.0.1:{settings.port}"
    return WebuiPlan(
        upstream=upstream,
        url=browser_url,
        argv=[f"{root}/current/bin/open-webui", "serve", "--host", "127.0.0.1", "--port", str(settings.port)],
        environment=env,
        database=f"{state}/webui.db",
        limits=[
            Setting(
                name="MemoryMax",
                value=f"{settings.memory_max_mib}M",
                reason="webui_memory_max_mib: past it the UI is stopped and restarted, never the memory the GPU shares",
            ),
            Setting(
                name="OOMScoreAdjust",
                value="500",
                reason="when the shared memory runs out, the kernel takes the UI (systemd restarts it) before vLLM",
            ),
        ],
        reasons=[
            f"Open WebUI {settings.version} on {upstream} only; browsers reach it through the door at {browser_url}",
            f"it reaches the models through the door ({door_url}) with its own client key, 'webui'",
            "it runs as a system user of its own: it cannot read the instances' env files, keys or models",
        ],
    )


def webui_plan_from(settings: object, host_plan: object, door: object, root: str) -> WebuiPlan:
    """The plan from the role's plain data: `settings` (webui_* without the password), the host plan (its
    served model names) and the door ({address, port, server_name, webui_port, subject_alt_names, and
    certificate: where the UI reads the door's certificate})."""
    if not isinstance(settings, dict) or not isinstance(door, dict) or not isinstance(host_plan, dict):
        raise PlanError("webui", "settings, host plan and door must be mappings")
    try:
        parsed = WebuiSettings.model_validate(settings)
    except ValueError as exc:
        raise from_validation(exc, "webui") from exc
    by_name = host_plan.get("instances", {})
    instances = [by_name[name] for name in sorted(by_name) if isinstance(by_name[name], dict)]
    models = [str(served.get("served_name")) for served in instances]
    tool_calls = bool(instances) and all(
        planned_flag(served, "--enable-auto-tool-choice") is not None for served in instances
    )
    address = str(door["address"])
    host = _url_host("127.0.0.1" if address in ("0.0.0.0", "::") else address)
    extra = tuple(
        f"https://{_url_host(name.split(':', 1)[1])}:{door['webui_port']}"
        for name in door.get("subject_alt_names", [])
        if isinstance(name, str) and name.startswith(("DNS:", "IP:")) and "*" not in name
    )
    return webui_plan(
        parsed,
        door_url=f"https://{host}:{door['port']}",
        browser_url=f"https://{door['server_name']}:{door['webui_port']}",
        door_certificate=str(door["certificate"]),
        models=models,
        root=root,
        tool_calls=tool_calls,
        extra_origins=extra,
    )


def _url_host(name: str) -> str:
    return f"[{name}]" if ":" in name else name


def webui_lock_from(version: str, target: object, cache_dir: Path | None, relock: bool) -> WebuiLock:
    """The lock for the target a release lock records ({arch, glibc, python})."""
    try:
        parsed = Target.model_validate(target)
    except ValueError as exc:
        raise from_validation(exc, "webui target", ".") from exc
    return webui_lock(version, parsed, cache_dir, relock)
