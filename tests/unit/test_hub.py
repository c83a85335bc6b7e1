"""`sparkfleet plan ORG/NAME[@REV]` against a local hub (HF_ENDPOINT): config and headers only, never weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CLI_WITHOUT_RETRY_WAITS
from hub_server import Hub, HubServer, Repo, VirtualSafetensors

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
TOKEN = "hf_sparkfleet_test"
COMMIT = "0e9e39f249a16976918f6564b8830bc894c89659"


def llama_shards() -> dict[str, VirtualSafetensors]:
    """Llama-3.1-8B's tensors with their real shapes (hidden 4096, 8 KV heads x 128, MLP 14336, vocab
    128256), in four shards as the repository ships them."""
    hidden, kv, mlp, vocab = 4096, 1024, 14336, 128256
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {"model.embed_tokens.weight": ("BF16", (vocab, hidden))}
    for i in range(32):
        p = f"model.layers.{i}."
        tensors |= {
            p + "self_attn.q_proj.weight": ("BF16", (hidden, hidden)),
            p + "self_attn.k_proj.weight": ("BF16", (kv, hidden)),
            p + "self_attn.v_proj.weight": ("BF16", (kv, hidden)),
            p + "self_attn.o_proj.weight": ("BF16", (hidden, hidden)),
            p + "mlp.gate_proj.weight": ("BF16", (mlp, hidden)),
            p + "mlp.up_proj.weight": ("BF16", (mlp, hidden)),
            p + "mlp.down_proj.weight": ("BF16", (hidden, mlp)),
            p + "input_layernorm.weight": ("BF16", (hidden,)),
            p + "post_attention_layernorm.weight": ("BF16", (hidden,)),
        }
    tensors |= {"model.norm.weight": ("BF16", (hidden,)), "lm_head.weight": ("BF16", (vocab, hidden))}
    names = list(tensors)
    quarter = -(-len(names) // 4)
    return {
        f"model-0000{n + 1}-of-00004.safetensors": VirtualSafetensors(
            {k: tensors[k] for k in names[n * quarter : (n + 1) * quarter]}
        )
        for n in range(4)
    }


def llama_repo(gated: bool) -> Repo:
    shards = llama_shards()
    index = {
        "metadata": {"total_size": sum(s.data_length for s in shards.values())},
        "weight_map": {name: file for file, shard in shards.items() for name in shard.tensors},
    }
    files: dict[str, bytes | VirtualSafetensors] = {
        "config.json": (CONFIGS / "meta-llama--Llama-3.1-8B-Instruct.json").read_bytes(),
        "model.safetensors.index.json": json.dumps(index).encode(),
        **shards,
    }
    return Repo(files=files, revisions={"main": COMMIT}, gated_token=TOKEN if gated else None)


@pytest.fixture
def hub() -> Iterator[HubServer]:
    gpt_oss = (CONFIGS / "openai--gpt-oss-120b.json").read_bytes()
    repos = {
        LLAMA: llama_repo(gated=True),
        "sparkfleet-test/llama-open": llama_repo(gated=False),
        "sparkfleet-test/bin-only": Repo(files={"config.json": gpt_oss, "pytorch_model.bin": b"\0" * 16}),
    }
    with HubServer(Hub(repos)) as server:
        yield server


def sparkfleet(server: HubServer, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and k not in ("HUGGING_FACE_HUB_TOKEN",)}
    environment |= {"HF_ENDPOINT": server.endpoint, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1", **env}
    return subprocess.run(
        [sys.executable, "-m", "sparkfleet.cli", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def plan_json(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_gated_hub_model_is_planned_from_headers_with_a_token(hub: HubServer, tmp_path: Path) -> None:
    result = sparkfleet(hub, tmp_path, "plan", LLAMA, "--context", "32768", "--json", HF_TOKEN=TOKEN)
    plan = plan_json(result)
    # 8,030,261,248 bf16 parameters: the exact weight bytes come from the shapes in the four headers.
    assert plan["memory"]["weights"] == round(16_060_522_496 / 1024**3, 2)
    assert plan["argv"][:3] == ["vllm", "serve", LLAMA]
    assert plan["argv"][plan["argv"].index("--revision") + 1] == COMMIT
    # 128 KiB per token: 4 x 32768 tokens of KV, plus the prefix-cache slack.
    assert plan["kv_cache_memory_bytes"] >= 4 * 32768 * 128 * 1024
    # huggingface_hub reads each header with one range request of the first 100,000 bytes: that is all the
    # tensor data it may see (0.002% of the 15 GiB of weights), never a whole shard.
    assert 0 < hub.hub.data_bytes_served <= 4 * 100_001, "planning downloaded tensor data"


def test_a_hub_model_on_gb10_gets_a_speed_from_its_headers(hub: HubServer, tmp_path: Path) -> None:
    """Issue 62: no catalog parameters, yet a prediction; the headers count Meta's 8.03B (the model card's figure)."""
    result = sparkfleet(hub, tmp_path, "plan", "sparkfleet-test/llama-open", "--platform", "gb10", "--json")
    speed = plan_json(result)["speed"]
    assert speed is not None and speed["decode"]["value"] > 0
    assert "of 8.03026B parameters" in speed["basis"][0]
    # One step reads every BF16 weight but the input embedding, whose one row per token is a gather.
    assert speed["bytes_per_step_gb"] == pytest.approx((16_060_522_496 - 2 * 128256 * 4096 + 1024 * 131072) / 1e9, abs=0.006)


def test_gated_model_without_a_token_is_refused_naming_the_fix(hub: HubServer, tmp_path: Path) -> None:
    result = sparkfleet(hub, tmp_path, "plan", LLAMA)
    assert result.returncode == 2
    assert "gated" in result.stderr and "HF_TOKEN" in result.stderr


def test_unknown_repo_and_revision_are_refused(hub: HubServer, tmp_path: Path) -> None:
    missing = sparkfleet(hub, tmp_path, "plan", "sparkfleet-test/no-such-model")
    assert missing.returncode == 2 and "no such model" in missing.stderr
    revision = sparkfleet(hub, tmp_path, "plan", "sparkfleet-test/llama-open@v9")
    assert revision.returncode == 2 and "no revision 'v9'" in revision.stderr


def test_offline_plan_comes_from_the_cache(hub: HubServer, tmp_path: Path) -> None:
    online = plan_json(sparkfleet(hub, tmp_path, "plan", "sparkfleet-test/llama-open", "--json"))
    served = len(hub.hub.requests)
    offline = plan_json(sparkfleet(hub, tmp_path, "plan", "sparkfleet-test/llama-open", "--json", HF_HUB_OFFLINE="1"))
    assert offline == online
    assert len(hub.hub.requests) == served, "an offline plan reached the hub"


def test_offline_without_a_cache_says_how_to_fill_it(hub: HubServer, tmp_path: Path) -> None:
    result = sparkfleet(hub, tmp_path, "plan", "sparkfleet-test/llama-open", HF_HUB_OFFLINE="1")
    assert result.returncode == 2 and "HF_HUB_OFFLINE" in result.stderr and "once with the hub reachable" in result.stderr


def test_repo_without_safetensors_needs_its_size(hub: HubServer, tmp_path: Path) -> None:
    refused = sparkfleet(hub, tmp_path, "plan", "sparkfleet-test/bin-only")
    assert refused.returncode == 2 and "--weights-gib" in refused.stderr
    planned = plan_json(sparkfleet(hub, tmp_path, "plan", "sparkfleet-test/bin-only", "--weights-gib", "60.8", "--json"))
    assert planned["memory"]["weights"] == 60.8


def test_unreachable_hub_is_a_clear_error(tmp_path: Path) -> None:
    with HubServer(Hub({})) as server:
        endpoint = server.endpoint
    result = subprocess.run(
        [*CLI_WITHOUT_RETRY_WAITS, "plan", "sparkfleet-test/anything"],
        env={**os.environ, "HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path), "HF_HUB_ETAG_TIMEOUT": "2"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2 and "could not be reached" in result.stderr
