"""The hub_model lookup through ansible itself: a hub model planned on the controller before it is staged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from adhoc import COLLECTIONS, run_module

sys.path.insert(0, str(Path(__file__).parents[1]))
from hub_server import Hub, HubServer
from test_hub import TOKEN, llama_repo

SPARK = "{'platform': 'gb10', 'compute_capability': '12.1', 'mem_total_bytes': 130662924288, 'vllm_version': '0.32.0'}"


@pytest.fixture
def hub() -> Iterator[HubServer]:
    repos = {"sparkfleet-test/llama-open": llama_repo(gated=False), "sparkfleet-test/llama-gated": llama_repo(gated=True)}
    with HubServer(Hub(repos)) as server:
        yield server


def hub_env(server: HubServer, home: Path) -> dict[str, str]:
    return {"HF_ENDPOINT": server.endpoint, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1"}


def test_lookup_describes_hub_models_and_leaves_catalog_ids_to_the_catalog(hub: HubServer, tmp_path: Path) -> None:
    entries = "[{'id': 'sparkfleet-test/llama-open', 'revision': 'main'}, 'openai/gpt-oss-120b']"
    result = run_module(
        "ansible.builtin.debug",
        {"msg": f"{{{{ query('sparkfleet.vllm.hub_model', {entries}) }}}}"},
        env=hub_env(hub, tmp_path),
    )
    described, catalog = result["msg"]  # type: ignore[misc]
    assert described["weight_bytes"] == 16_060_522_496 and described["config"]["num_key_value_heads"] == 8
    assert described["commit"] == "0e9e39f249a16976918f6564b8830bc894c89659"
    assert catalog == {"id": "openai/gpt-oss-120b", "catalog": True}
    assert hub.hub.data_bytes_served <= 4 * 100_001


def test_host_plan_takes_what_the_lookup_described(hub: HubServer, tmp_path: Path) -> None:
    model = "query('sparkfleet.vllm.hub_model', 'sparkfleet-test/llama-open')[0]"
    instances = f"[{{'name': 'llama', 'model': {model}, 'intent': {{'max_context': 32768}}}}]"
    result = run_module(
        "ansible.builtin.debug",
        {"msg": f"{{{{ {SPARK} | sparkfleet.vllm.host_plan({instances}, 'vllm_serve_instances') }}}}"},
        env=hub_env(hub, tmp_path),
    )
    plan = result["msg"]["instances"]["llama"]  # type: ignore[index]
    assert plan["memory"]["weights"] == 14.96 and plan["max_model_len"] == 32768


def test_gated_model_without_a_token_fails_naming_the_fix(hub: HubServer, tmp_path: Path) -> None:
    result = run_module(
        "ansible.builtin.debug",
        {"msg": "{{ query('sparkfleet.vllm.hub_model', 'sparkfleet-test/llama-gated') }}"},
        env=hub_env(hub, tmp_path),
    )
    assert result.get("failed") and "gated" in str(result["msg"]) and "HF_TOKEN" in str(result["msg"])
    with_token = run_module(
        "ansible.builtin.debug",
        {"msg": "{{ query('sparkfleet.vllm.hub_model', 'sparkfleet-test/llama-gated') }}"},
        env=hub_env(hub, tmp_path) | {"HF_TOKEN": TOKEN},
    )
    assert not with_token.get("failed"), with_token


PLAY = """
- name: Plan a hub model that is neither staged nor in the catalog, before model_stage runs
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    sparkfleet_platform: cpu
    sparkfleet_state_dir: {state}
    sparkfleet_root: {state}/root
    vllm_install_vllm_version: 0.32.0
    model_stage_models: [{{id: sparkfleet-test/llama-open, revision: main}}, {{id: openai/gpt-oss-120b}}]
    vllm_serve_instances:
      - {{name: llama, model: sparkfleet-test/llama-open, intent: {{max_context: 8192, concurrency: 1}}}}
  tasks:
    - name: Check and plan the instances as the site playbook's pre_tasks do
      ansible.builtin.include_role:
        name: sparkfleet.vllm.vllm_serve
        tasks_from: validate
    - name: Report the plan
      ansible.builtin.debug:
        msg: "{{{{ __vllm_serve_plan.instances.llama }}}}"
"""


def test_site_pre_tasks_plan_a_hub_model_before_it_is_staged(hub: HubServer, tmp_path: Path) -> None:
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY.format(state=tmp_path / "state"))
    env = hub_env(hub, tmp_path / "hf") | {
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
    }
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            str(playbook),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "errantly sent data directly to stderr" not in done.stderr
    document, _ = json.JSONDecoder().raw_decode(done.stdout[done.stdout.find("{\n") :])
    plan = document["plays"][0]["tasks"][-1]["hosts"]["localhost"]["msg"]
    assert plan["memory"]["weights"] == 14.96 and plan["max_model_len"] == 8192
    assert hub.hub.data_bytes_served <= 4 * 100_001
