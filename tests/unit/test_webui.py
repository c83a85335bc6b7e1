"""Open WebUI behind the door (issue 18, part 4): its lock, its settings and its ports."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_door import TWO, door, host

from sparkfleet.errors import PlanError
from sparkfleet.hostconfig.webui import EXCLUDES, PACKAGE, check_lock, compile_argv, webui_lock, webui_plan_from
from sparkfleet.release import Target

DOOR = {
    "address": "0.0.0.0",
    "port": 443,
    "server_name": "spark01",
    "webui_port": 8443,
    "certificate": "/etc/sparkfleet/webui-door.crt",
}
SETTINGS = {"version": "0.12.4", "admin_email": "admin@example.com"}
SPARK = Target(arch="aarch64", glibc="2.39", python="3.12")


def plan(settings: dict[str, object] | None = None, door_settings: dict[str, object] | None = None) -> dict[str, object]:
    hosts = host(*TWO).model_dump(mode="json")
    result = webui_plan_from(SETTINGS | (settings or {}), hosts, DOOR | (door_settings or {}), "/opt/sparkfleet-webui")
    return result.model_dump(mode="json")


def test_the_ui_listens_on_loopback_and_reaches_the_models_through_the_door_only() -> None:
    result = plan()
    env = {s["name"]: s["value"] for s in result["environment"]}  # type: ignore[union-attr]
    assert result["upstream"] == "127.0.0.1:8080"
    assert result["argv"] == [
        "/opt/sparkfleet-webui/current/bin/open-webui",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "8080",
    ]
    assert env["OPENAI_API_BASE_URL"] == "https://127.0.0.1:443/v1"
    assert env["SSL_CERT_FILE"] == env["REQUESTS_CA_BUNDLE"] == "/etc/sparkfleet/webui-door.crt"
    assert env["WEBUI_URL"] == env["CORS_ALLOW_ORIGIN"] == "https://spark01:8443"
    # Nothing leaves the host at run time, nobody signs up, and the first model starts a chat.
    assert env["OFFLINE_MODE"] == "true" and env["HF_HUB_OFFLINE"] == "1" and env["ENABLE_OLLAMA_API"] == "false"
    assert env["ENABLE_SIGNUP"] == "false" and env["RAG_EMBEDDING_ENGINE"] == "openai"
    assert env["ENV"] == "prod"  # no public /docs or /openapi.json
    assert env["DEFAULT_MODELS"] == "chat"
    # Both models parse tool calls (the catalog's Nemotron rules): the UI may offer its tools natively.
    assert "DEFAULT_MODEL_PARAMS" not in env
    assert all(s["reason"] for s in result["environment"])  # type: ignore[union-attr]
    # No secret is a setting of the unit: they live in its 0600 env file.
    assert not {"WEBUI_SECRET_KEY", "OPENAI_API_KEY", "WEBUI_ADMIN_PASSWORD"} & set(env)


def test_the_ui_is_held_to_its_memory_and_the_oom_killer_takes_it_before_vllm() -> None:
    limits = {s["name"]: s["value"] for s in plan()["limits"]}  # type: ignore[union-attr]
    assert limits == {"MemoryMax": "3072M", "OOMScoreAdjust": "500"}
    roomy = webui_plan_from(SETTINGS | {"memory_max_mib": 8192}, host(*TWO).model_dump(mode="json"), DOOR, "/opt/w")
    assert roomy.limits[0].value == "8192M" and roomy.database == "/var/lib/sparkfleet-webui/webui.db"
    with pytest.raises(PlanError, match="memory_max_mib"):
        webui_plan_from(SETTINGS | {"memory_max_mib": 100}, host(*TWO).model_dump(mode="json"), DOOR, "/opt/w")


def test_models_without_a_tool_call_parser_get_no_tool_definitions() -> None:
    hosts = host(*TWO).model_dump(mode="json")
    for served in hosts["instances"].values():
        served["flags"] = [flag for flag in served["flags"] if flag["name"] != "--enable-auto-tool-choice"]
    result = webui_plan_from(SETTINGS, hosts, DOOR, "/opt/sparkfleet-webui")
    env = {s.name: s.value for s in result.environment}
    assert env["DEFAULT_MODEL_PARAMS"] == '{"function_calling": "legacy"}'


def test_the_names_the_certificate_carries_are_the_origins_pages_may_come_from() -> None:
    sans = ["DNS:spark01.lab.example", "IP:10.0.0.5", "IP:fd00::5", "DNS:*.lab.example"]
    env = {s["name"]: s["value"] for s in plan(door_settings={"subject_alt_names": sans})["environment"]}  # type: ignore[union-attr]
    assert env["CORS_ALLOW_ORIGIN"].split(";") == [
        "https://spark01:8443", "https://spark01.lab.example:8443", "https://10.0.0.5:8443", "https://[fd00::5]:8443",
    ]  # fmt: skip
    assert env["AIOHTTP_CLIENT_SSL_CERT_FILE"] == "/etc/sparkfleet/webui-door.crt"


def test_a_door_on_one_address_is_reached_there() -> None:
    env = {s["name"]: s["value"] for s in plan(door_settings={"address": "10.0.0.5"})["environment"]}  # type: ignore[union-attr]
    assert env["OPENAI_API_BASE_URL"] == "https://10.0.0.5:443/v1"


@pytest.mark.parametrize(
    ("settings", "variable", "said"),
    [
        ({"version": "latest"}, "webui_version", "not an Open WebUI release"),
        ({"version": "0.12.4\n"}, "webui_version", "not an Open WebUI release"),
        ({"admin_email": "admin"}, "webui_admin_email", "not an e-mail address"),
        ({"admin_email": "a@example.com\nX: y"}, "webui_admin_email", "not an e-mail address"),
        ({"admin_name": "A\nB"}, "webui_admin_name", "printable"),
        ({"port": 80}, "webui_port", "greater than or equal to 1024"),
        ({"default_model": "nope"}, "webui_default_model", "served: chat, coder"),
    ],
)
def test_bad_settings_are_refused_naming_the_variable(settings: dict[str, object], variable: str, said: str) -> None:
    with pytest.raises(PlanError) as err:
        plan(settings)
    assert err.value.variable == variable
    assert said in err.value.problem


@pytest.mark.parametrize(
    ("webui", "variable", "said"),
    [
        ({"port": 443}, "webui_door_port", "door's API port"),
        ({"port": 8001}, "webui_door_port", "instance chat"),
        ({"upstream_port": 8000}, "webui_port", "instance coder"),
        ({"upstream_port": 9100}, "webui_port", "node_exporter"),
        ({"port": 8080, "upstream_port": 8080}, "webui_port", "also webui_door_port"),
    ],
)
def test_the_door_refuses_ui_ports_that_clash(webui: dict[str, int], variable: str, said: str) -> None:
    with pytest.raises(PlanError) as err:
        door(host(*TWO), webui=webui)
    assert err.value.variable == variable
    assert said in err.value.problem


def test_the_door_serves_the_ui_on_its_own_port() -> None:
    result = door(host(*TWO), webui={"port": 8443, "upstream_port": 8080})
    assert result["webui"] == {"port": 8443, "upstream_port": 8080, "max_body_mib": 32, "sign_in_body_kib": 64}
    assert any("chat UI" in r for r in result["reasons"])  # type: ignore[union-attr]
    assert door(host(*TWO))["webui"] is None


LOCK = f"""{PACKAGE}==0.12.4 \\
    --hash=sha256:{"a" * 64}
fastapi==0.120.0 \\
    --hash=sha256:{"b" * 64}
    # via open-webui
"""


def test_a_lock_must_pin_the_release_hash_everything_and_leave_torch_out() -> None:
    assert set(check_lock(LOCK, "0.12.4")) == {PACKAGE, "fastapi"}
    with pytest.raises(PlanError, match="has open-webui 0.12.4, not 0.12.5"):
        check_lock(LOCK, "0.12.5")
    with pytest.raises(PlanError, match="without hashes: fastapi"):
        check_lock(LOCK.replace(f"    --hash=sha256:{'b' * 64}\n", "").replace("0.120.0 \\", "0.120.0"), "0.12.4")
    with pytest.raises(PlanError, match="left out on purpose: torch"):
        check_lock(LOCK + f"torch==2.9.1 \\\n    --hash=sha256:{'c' * 64}\n", "0.12.4")


def test_the_resolve_targets_the_host_and_excludes_torch() -> None:
    argv = compile_argv("uv", SPARK, "in", "ex", "out")
    assert argv[argv.index("--python-platform") + 1] == "aarch64-manylinux_2_39"
    assert argv[argv.index("--python-version") + 1] == "3.12"
    assert argv[argv.index("--excludes") + 1] == "ex" and "--generate-hashes" in argv
    assert "torch" in EXCLUDES and "sentence-transformers" in EXCLUDES


def test_a_release_that_does_not_exist_is_refused_by_the_index(tmp_path: Path) -> None:
    """uv asks the real index: a version PyPI does not have is refused naming webui_version."""
    with pytest.raises(PlanError) as err:
        webui_lock("0.0.1", SPARK, tmp_path)
    assert err.value.variable == "webui_version"
    assert "does not resolve for aarch64-manylinux_2_39" in err.value.problem
    assert not list(tmp_path.rglob("*.json"))


def test_open_webui_resolves_for_a_spark_without_torch_and_is_kept(tmp_path: Path) -> None:
    """The real index: Open WebUI for a DGX Spark (aarch64, Ubuntu 24.04's glibc and Python), with no CUDA torch."""
    lock = webui_lock("0.12.4", SPARK, tmp_path)
    assert lock.packages[PACKAGE] == "0.12.4"
    assert not [name for name in lock.packages if name.startswith(("torch", "nvidia-", "triton"))]
    # Kept: a second run resolves nothing (a uv that does not exist is never called).
    again = webui_lock("0.12.4", SPARK, tmp_path, uv="/nonexistent/uv")
    assert again == lock
    # Not among the release locks (*.json directly in the cache), which other readers parse as such.
    assert not list(tmp_path.glob("*.json")) and len(list((tmp_path / "webui").glob("*.json"))) == 1
