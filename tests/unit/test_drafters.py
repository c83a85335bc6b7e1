"""Speculative decoding with a separate drafter: its weights and KV in the budget, its argv as vLLM expects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CLI_WITHOUT_RETRY_WAITS, spark

from sparkfleet.boundary.adapters import instance_request
from sparkfleet.catalog import get_profile
from sparkfleet.errors import PlanError
from sparkfleet.models import Intent, ModelProfile, SpeculativeSupport
from sparkfleet.planning.hostplan import plan_host
from sparkfleet.planning.planner import plan
from sparkfleet.reading.config import profile_from_config

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
GIB = 1024**3


def from_fixture(name: str, weights: int) -> ModelProfile:
    return profile_from_config(name.replace("--", "/"), json.loads((CONFIGS / f"{name}.json").read_text()), weights, name)


LLAMA = from_fixture("meta-llama--Llama-3.1-8B-Instruct", 16_060_522_496)
EAGLE3 = from_fixture("yuhuili--EAGLE3-LLaMA3.1-Instruct-8B", int(0.8 * GIB))
SMALL = from_fixture("meta-llama--Llama-3.2-1B-Instruct", int(2.3 * GIB))


def speculative_config(argv: list[str]) -> dict[str, object]:
    return dict(json.loads(argv[argv.index("--speculative-config") + 1]))


def test_eagle3_drafter_weights_and_its_layer_are_in_the_budget() -> None:
    base = plan(spark(), LLAMA, Intent(trust_remote_code=True, max_context=32768, concurrency=2))
    intent = Intent(
        max_context=32768, concurrency=2, speculative="eagle3", drafter="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B@abc"
    )
    drafted = plan(spark(), LLAMA, intent, drafter=EAGLE3)
    assert speculative_config(drafted.argv) == {
        "method": "eagle3",
        "num_speculative_tokens": 3,
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "revision": "abc",
    }
    assert drafted.memory.drafter == 0.8
    # One more layer of the target's shape: 33 layers of KV where there were 32.
    assert drafted.kv_cache_memory_bytes == pytest.approx(base.kv_cache_memory_bytes * 33 / 32, rel=0.01)
    # Capture sizes follow the draft length (uniform decode query of 1 + 3 tokens).
    assert max(drafted.cudagraph_capture_sizes) > max(base.cudagraph_capture_sizes)


def test_draft_model_with_a_smaller_page_is_counted_in_target_shaped_layers() -> None:
    base = plan(spark(), LLAMA, Intent(trust_remote_code=True, max_context=32768, concurrency=2))
    intent = Intent(
        trust_remote_code=True,
        max_context=32768,
        concurrency=2,
        speculative="draft_model",
        drafter="/srv/models/llama-3.2-1b",
    )
    drafted = plan(spark(), LLAMA, intent, drafter=SMALL)
    assert speculative_config(drafted.argv)["model"] == "/srv/models/llama-3.2-1b"
    # 16 layers of 8 x 64 hold the KV of 8 layers of the target's 8 x 128.
    assert drafted.kv_cache_memory_bytes == pytest.approx(base.kv_cache_memory_bytes * 40 / 32, rel=0.01)
    assert drafted.memory.drafter == 2.3


def test_dflash_drafter_given_overrides_the_profiles() -> None:
    profile = get_profile("nvidia/Qwen3.6-35B-A3B-NVFP4")
    intent = Intent(
        trust_remote_code=True, speculative="dflash", drafter="someone/Qwen3.6-35B-A3B-DFlash-v2", drafter_weights_gib=1.2
    )
    result = plan(spark(), profile, intent)
    assert speculative_config(result.argv)["model"] == "someone/Qwen3.6-35B-A3B-DFlash-v2"
    assert result.env["VLLM_USE_DEEP_GEMM"] == "0"
    assert result.memory.drafter == 1.2
    assert any("known only by its size" in w for w in result.warnings)


def test_mtp_assistant_checkpoint_serves_a_model_without_heads() -> None:
    with pytest.raises(PlanError, match="drafter"):
        plan(spark(), LLAMA, Intent(trust_remote_code=True, speculative="mtp"))
    result = plan(
        spark(), LLAMA, Intent(trust_remote_code=True, speculative="mtp", drafter="/srv/models/assistant"), drafter=SMALL
    )
    assert speculative_config(result.argv) == {
        "method": "mtp",
        "num_speculative_tokens": 3,
        "model": "/srv/models/assistant",
    }


@pytest.mark.parametrize(
    ("intent", "variable", "words"),
    [
        (Intent(trust_remote_code=True, speculative="eagle3"), "intent.drafter", "none was given"),
        (Intent(trust_remote_code=True, speculative="draft_model"), "intent.drafter", "none was given"),
        (Intent(trust_remote_code=True, speculative="ngram", drafter="x/y"), "intent.drafter", "not ngram"),
        (Intent(trust_remote_code=True, speculative="eagle3", drafter="x/y"), "intent.drafter", "drafter_weights_gib"),
    ],
)
def test_drafter_refusals_name_the_variable(intent: Intent, variable: str, words: str) -> None:
    with pytest.raises(PlanError) as refused:
        plan(spark(), LLAMA, intent)
    assert refused.value.variable == variable and words in str(refused.value)


def test_cli_reads_a_drafter_directory(tmp_path: Path) -> None:
    drafter = tmp_path / "eagle3"
    drafter.mkdir()
    (drafter / "config.json").write_text((CONFIGS / "yuhuili--EAGLE3-LLaMA3.1-Instruct-8B.json").read_text())
    (drafter / "model.safetensors").write_bytes(b"\0" * 4096)
    command = [sys.executable, "-m", "sparkfleet.cli", "plan", "openai/gpt-oss-120b", "--speculative", "eagle3"]
    done = subprocess.run(
        [*command, "--drafter", str(drafter), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert speculative_config(result["argv"]) == {"method": "eagle3", "num_speculative_tokens": 3, "model": str(drafter)}


def test_default_chunk_holds_one_decode_step_of_every_sequence() -> None:
    # 520 sequences x (1 + 3 EAGLE-3 tokens) = 2080 tokens per decode step, above memory-saver's 2048.
    intent = Intent(
        trust_remote_code=True, profile="memory-saver", speculative="eagle3", drafter="/d", concurrency=520, max_context=1024
    )
    assert plan(spark(), LLAMA, intent, drafter=EAGLE3).max_num_batched_tokens == 2080
    pinned = plan(spark(), LLAMA, intent.model_copy(update={"max_num_batched_tokens": 2048}), drafter=EAGLE3)
    assert pinned.max_num_batched_tokens == 2048
    assert any("below one decode step" in w and "max_num_batched_tokens 2080" in w for w in pinned.warnings)


def test_activation_peak_is_the_larger_of_target_and_drafter() -> None:
    target = from_fixture("meta-llama--Llama-3.2-1B-Instruct", int(2.3 * GIB))
    wider = from_fixture("openai--gpt-oss-120b", 60 * GIB)
    base = plan(spark(), target, Intent(trust_remote_code=True, max_context=8192))
    drafted = plan(
        spark(),
        target,
        Intent(trust_remote_code=True, max_context=8192, speculative="draft_model", drafter="/d"),
        drafter=wider,
    )
    narrow = plan(
        spark(),
        target,
        Intent(trust_remote_code=True, max_context=8192, speculative="draft_model", drafter="/d"),
        drafter=SMALL,
    )
    assert drafted.memory.activation > base.memory.activation  # a drafter wider than its target sets the peak
    assert narrow.memory.activation == base.memory.activation  # one no wider than the target leaves it


@pytest.mark.parametrize("environment", [{"HF_HUB_OFFLINE": "1"}, {"HF_ENDPOINT": "http://127.0.0.1:9"}])
def test_a_drafter_known_by_its_size_plans_without_the_hub(tmp_path: Path, environment: dict[str, str]) -> None:
    """Offline, or with the hub unreachable, a drafter given with its size is planned from that size (issue 21)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")} | {"HF_HOME": str(tmp_path), **environment}
    command = [*CLI_WITHOUT_RETRY_WAITS, "plan", "openai/gpt-oss-120b", "--speculative", "eagle3"]
    command += ["--drafter", "nvidia/gpt-oss-120b-Eagle3-long-context"]
    sized = subprocess.run(
        [*command, "--drafter-weights-gib", "2", "--json"], env=env, capture_output=True, text=True, check=False
    )
    assert sized.returncode == 0, sized.stderr
    result = json.loads(sized.stdout)
    assert speculative_config(result["argv"])["model"] == "nvidia/gpt-oss-120b-Eagle3-long-context"
    assert any("known only by its size" in warning for warning in result["warnings"])
    # Without its size the drafter must be read, and cannot be.
    unsized = subprocess.run([*command, "--json"], env=env, capture_output=True, text=True, check=False)
    assert unsized.returncode == 2 and "drafter" in unsized.stderr


CODER = get_profile("sakamakismile/gemma-4-12B-coder-fable5-composer2.5-MTP-NVFP4")
CODER_MTP = Intent(trust_remote_code=True, speculative="mtp", max_context=16384, concurrency=2)
PIN = "a" * 40


def test_a_bundled_mtp_draft_is_loaded_from_the_staged_directory_by_absolute_path(tmp_path: Path) -> None:
    staged = tmp_path / "models" / CODER.id
    request = instance_request(
        {"name": "coder", "model": {"id": CODER.id, "path": str(staged)}, "intent": CODER_MTP.model_dump()}
    )
    result = plan_host(spark(), [request]).instances["coder"]
    assert result.argv[2] == str(staged)
    assert speculative_config(result.argv)["model"] == f"{staged}/assistant"
    # The bundled draft's 0.85 GB is counted; the model's own 8.25 GB is the profile's weights.
    assert result.memory.drafter == pytest.approx(0.79)


def test_a_hub_model_planned_before_staging_names_the_snapshot_model_stage_fills() -> None:
    model = {"id": CODER.id, "path": CODER.id, "commit": PIN, "hf_home": "/var/lib/sparkfleet/huggingface"}
    request = instance_request({"name": "coder", "model": model, "intent": CODER_MTP.model_dump()})
    result = plan_host(spark(), [request]).instances["coder"]
    snapshot = f"/var/lib/sparkfleet/huggingface/hub/models--{CODER.id.replace('/', '--')}/snapshots/{PIN}"
    assert result.argv[2] == CODER.id and result.argv[result.argv.index("--revision") + 1] == PIN
    assert speculative_config(result.argv)["model"] == f"{snapshot}/assistant"


def test_a_bundled_draft_with_no_known_directory_is_refused_not_rendered_relative() -> None:
    with pytest.raises(PlanError) as refused:
        plan(spark(), CODER, CODER_MTP)
    assert refused.value.variable == "intent.speculative"
    assert "assistant/" in str(refused.value) and "--model-dir" in str(refused.value)
    # Without MTP the model plans where it is not staged.
    plan(spark(), CODER, Intent(trust_remote_code=True, max_context=16384, concurrency=2))


@pytest.mark.parametrize("subdir", ["../elsewhere", "/abs/assistant", "a/../../b", ""])
def test_a_bundled_draft_must_lie_inside_the_model(subdir: str) -> None:
    with pytest.raises(ValueError, match="inside the model"):
        SpeculativeSupport(mtp=True, mtp_draft_subdir=subdir)


def test_cli_model_dir_loads_the_model_and_its_draft_from_there() -> None:
    command = [sys.executable, "-m", "sparkfleet.cli", "plan", CODER.id, "--speculative", "mtp", "--trust-remote-code"]
    done = subprocess.run([*command, "--model-dir", "/srv/coder/", "--json"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    argv = json.loads(done.stdout)["argv"]
    assert argv[2] == "/srv/coder" and speculative_config(argv)["model"] == "/srv/coder/assistant"
    relative = subprocess.run([*command, "--model-dir", "srv/coder"], capture_output=True, text=True, check=False)
    assert relative.returncode != 0 and "--model-dir" in relative.stderr


def test_fp8_kv_that_the_mtp_recipe_requires_is_not_cautioned_as_outside_it() -> None:
    """Seed 002 §7.2.3: the coder's MTP recipe requires fp8 KV; fp8 without MTP is still outside the recipe."""
    with_mtp = plan(spark(), CODER, CODER_MTP, model_dir=f"/var/lib/sparkfleet/models/{CODER.id}")
    assert with_mtp.kv_cache_dtype == "fp8"
    assert not [w for w in with_mtp.warnings if "not from its tested recipe" in w]
    fp8_alone = plan(spark(), CODER, Intent(kv_cache_dtype="fp8", max_context=16384, concurrency=2))
    assert [w for w in fp8_alone.warnings if "not from its tested recipe" in w]


def test_a_dflash_drafter_that_needs_a_build_beyond_upstream_is_planned_only_for_a_release_declaring_it() -> None:
    """Seed 002 §7.1.2/§14.5: z-lab/Qwen3.6-27B-DFlash needs the interleaved-SWA build (vLLM PR #40898)."""
    qwen27 = get_profile("unsloth/Qwen3.6-27B-NVFP4")
    dflash = Intent(speculative="dflash", max_context=16384, concurrency=1, trust_remote_code=True)
    with pytest.raises(PlanError, match="dflash-interleaved-swa"):
        plan(spark("0.33.0"), qwen27, dflash)
    declared = spark("0.33.0").model_copy(update={"vllm_capabilities": ("dflash-interleaved-swa",)})
    assert '"method":"dflash"' in " ".join(plan(declared, qwen27, dflash).argv)
    # A drafter of the user's own is the user's call.
    own = dflash.model_copy(update={"drafter": "org/my-dflash", "drafter_weights_gib": 1.0})
    assert '"model":"org/my-dflash"' in " ".join(plan(spark("0.33.0"), qwen27, own).argv)
