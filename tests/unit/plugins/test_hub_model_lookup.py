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
from hub_server import Hub, HubServer, Repo, VirtualSafetensors
from test_hub import CONFIGS, TOKEN, llama_repo

SPARK = "{'platform': 'gb10', 'compute_capability': '12.1', 'mem_total_bytes': 130662924288, 'vllm_version': '0.32.0'}"


def eagle3_repo() -> Repo:
    """A one-layer EAGLE-3 head with Llama-3.1-8B's attention shape, in one safetensors file."""
    hidden, kv, mlp = 4096, 1024, 14336
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {
        "fc.weight": ("BF16", (hidden, 3 * hidden)),
        "midlayer.self_attn.q_proj.weight": ("BF16", (hidden, 2 * hidden)),
        "midlayer.self_attn.k_proj.weight": ("BF16", (kv, 2 * hidden)),
        "midlayer.self_attn.v_proj.weight": ("BF16", (kv, 2 * hidden)),
        "midlayer.self_attn.o_proj.weight": ("BF16", (hidden, hidden)),
        "midlayer.mlp.gate_proj.weight": ("BF16", (mlp, hidden)),
        "midlayer.mlp.up_proj.weight": ("BF16", (mlp, hidden)),
        "midlayer.mlp.down_proj.weight": ("BF16", (hidden, mlp)),
        "lm_head.weight": ("BF16", (32000, hidden)),
    }
    config = (CONFIGS / "yuhuili--EAGLE3-LLaMA3.1-Instruct-8B.json").read_bytes()
    return Repo(files={"config.json": config, "model.safetensors": VirtualSafetensors(tensors)})


@pytest.fixture
def hub() -> Iterator[HubServer]:
    repos = {
        "sparkfleet-test/llama-open": llama_repo(gated=False),
        "sparkfleet-test/llama-gated": llama_repo(gated=True),
        "sparkfleet-test/eagle3-head": eagle3_repo(),
    }
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
    # A Spark's memory (the recorded GB10 meminfo), so two 15 GiB instances fit side by side.
    sparkfleet_meminfo: {meminfo}
    sparkfleet_state_dir: {state}
    sparkfleet_root: {state}/root
    vllm_install_vllm_version: 0.32.0
    model_stage_models:
      - {{id: sparkfleet-test/llama-open, revision: main}}
      - {{id: openai/gpt-oss-120b}}
      - {{id: sparkfleet-test/eagle3-head}}
    vllm_serve_instances:
      - {{name: llama, model: sparkfleet-test/llama-open, intent: {{max_context: 8192, concurrency: 1}}}}
      - name: drafted
        model: sparkfleet-test/llama-open
        port: 8001
        intent: {{max_context: 8192, concurrency: 1, speculative: eagle3, drafter: sparkfleet-test/eagle3-head}}
  tasks:
    - name: Check and plan the instances as the site playbook's pre_tasks do
      ansible.builtin.include_role:
        name: sparkfleet.vllm.vllm_serve
        tasks_from: validate
    - name: Report the plan
      ansible.builtin.debug:
        msg: "{{{{ vllm_serve_plan.instances }}}}"
"""


def test_site_pre_tasks_plan_a_hub_model_before_it_is_staged(hub: HubServer, tmp_path: Path) -> None:
    playbook = tmp_path / "play.yml"
    meminfo = Path(__file__).resolve().parents[2] / "fixtures" / "gb10-built" / "meminfo.txt"
    playbook.write_text(PLAY.format(state=tmp_path / "state", meminfo=meminfo))
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
    plans = document["plays"][0]["tasks"][-1]["hosts"]["localhost"]["msg"]
    plan, drafted = plans["llama"], plans["drafted"]
    assert plan["memory"]["weights"] == 14.96 and plan["max_model_len"] == 8192
    # The drafter was read from its header (0.79 GiB) and its one layer joins the KV pool: 33 layers, not 32.
    spec = json.loads(drafted["argv"][drafted["argv"].index("--speculative-config") + 1])
    assert spec == {"method": "eagle3", "num_speculative_tokens": 3, "model": "sparkfleet-test/eagle3-head"}
    assert drafted["memory"]["drafter"] == 0.79
    assert drafted["kv_cache_memory_bytes"] > plan["kv_cache_memory_bytes"]
    assert hub.hub.data_bytes_served <= 5 * 100_001
