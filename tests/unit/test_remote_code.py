"""A repository's own code (config.json auto_map) runs only when the user asks, and the refusal names it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import spark

from sparkfleet.errors import PlanError
from sparkfleet.modelconfig import profile_from_config, remote_code_files
from sparkfleet.models import Intent
from sparkfleet.planner import plan

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
NANO_BF16 = json.loads((CONFIGS / "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json").read_text())


def test_the_files_auto_map_names_are_listed() -> None:
    assert remote_code_files(NANO_BF16) == ("configuration_nemotron_h.py",)
    other_repo = {"auto_map": {"AutoModel": "org/code--modeling_x.X", "AutoTokenizer": ["tokenization_x.T", None]}}
    assert remote_code_files(other_repo) == ("modeling_x.py", "tokenization_x.py")
    assert remote_code_files({"model_type": "llama"}) == ()


def test_a_model_with_code_is_refused_without_consent_naming_the_files() -> None:
    profile = profile_from_config("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", NANO_BF16, 63 * 2**30, "fixture")
    with pytest.raises(PlanError) as err:
        plan(spark(), profile, Intent(max_context=8192, concurrency=1))
    assert err.value.variable == "intent.trust_remote_code"
    assert "configuration_nemotron_h.py" in err.value.problem
    consented = plan(spark(), profile, Intent(max_context=8192, concurrency=1, trust_remote_code=True))
    assert "--trust-remote-code" in consented.argv


def test_consent_adds_nothing_to_a_model_without_code() -> None:
    llama = profile_from_config(
        "org/llama",
        {
            "model_type": "llama",
            "num_hidden_layers": 2,
            "hidden_size": 256,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 4096,
            "vocab_size": 2048,
        },
        2**28,
        "test",
    )
    assert "--trust-remote-code" not in plan(spark(), llama, Intent(max_context=2048, trust_remote_code=True)).argv
