"""The context limit is vLLM's own derivation (tests/vllm/check_context_limit.py proves it against vLLM)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import spark
from hypothesis import given
from hypothesis import strategies as st

from sparkfleet.errors import PlanError
from sparkfleet.models import Intent
from sparkfleet.planning.planner import plan
from sparkfleet.reading.config import profile_from_config
from sparkfleet.reading.context import LENGTH_KEYS, context_limit

LLAMA: dict[str, Any] = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "num_hidden_layers": 4,
    "hidden_size": 512,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 4096,
    "max_position_embeddings": 131072,
}


def test_the_smallest_length_key_wins_unless_model_max_length_is_set() -> None:
    assert context_limit(LLAMA | {"seq_length": 32768}).derived == 32768
    assert context_limit(LLAMA | {"seq_length": 32768, "model_max_length": 65536}).derived == 65536
    assert context_limit({}).derived == 2048


def test_a_linear_rope_factor_scales_the_limit_and_yarn_does_not() -> None:
    assert context_limit(LLAMA | {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}).derived == 262144
    assert context_limit(LLAMA | {"rope_scaling": {"type": "yarn", "factor": 4.0}}).derived == 131072


def test_a_longrope_config_serves_its_original_length_and_allows_the_long_one_without_an_env() -> None:
    config = LLAMA | {
        "original_max_position_embeddings": 4096,
        "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0]},
    }
    profile = profile_from_config("org/phi-like", config, 2**30, "test")
    assert (profile.native_max_context, profile.config_max_length) == (4096, 131072)
    planned = plan(spark(), profile, Intent(max_context=131072, concurrency=1))
    assert planned.max_model_len == 131072 and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in planned.env
    assert plan(spark(), profile, Intent(concurrency=1)).max_model_len == 4096  # the default never exceeds vLLM's
    with pytest.raises(PlanError) as err:
        plan(spark(), profile, Intent(max_context=131073, concurrency=1))
    assert err.value.variable == "intent.max_context"


@given(
    lengths=st.dictionaries(st.sampled_from(LENGTH_KEYS), st.integers(min_value=256, max_value=2**21), min_size=1),
    factor=st.sampled_from([None, 1.0, 2.0, 4.0]),
)
def test_the_default_never_exceeds_what_vllm_allows(lengths: dict[str, int], factor: float | None) -> None:
    config: dict[str, Any] = dict(lengths)
    if factor:
        config["rope_scaling"] = {"rope_type": "linear", "factor": factor}
    limit = context_limit(config)
    assert 0 < limit.derived <= limit.allowed
