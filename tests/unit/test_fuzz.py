"""Bad input never crashes: random host facts, instance lists, install inputs and thresholds end in a
plan or a PlanError naming the field, never another exception (issue 13)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkfleet.boundary.adapters import host_plan
from sparkfleet.errors import PlanError
from sparkfleet.hostconfig.hardening import check_clients
from sparkfleet.hostconfig.monitoring import thresholds
from sparkfleet.recipes import inputs_from

INTENT_KEYS = [
    "max_context", "concurrency", "profile", "kv_cache_dtype", "speculative", "num_speculative_tokens", "served_name",
    "host", "port", "api_key", "tensor_parallel_size", "nodes", "gpu_memory_utilization", "max_num_batched_tokens",
    "host_reserve_gib", "allow_yarn", "allow_long_context", "bogus",
]  # fmt: skip
FACT_KEYS = ["platform", "mem_total_bytes", "mem_available_bytes", "vllm_version", "unified_memory", "arch", "gpu_name"]
INSTALL_KEYS = [
    "platform", "vllm_version", "uv_version", "vllm_source", "vllm_git_repo", "vllm_git_ref", "torch_version",
    "index_urls", "extra_packages", "patches", "python_version", "wheelhouse", "find_links",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["gb10", "cpu", "0.32.0", "127.0.0.1", "0.0.0.0", "sandbox/tiny", "mtp", "fp8", "../x", "a b"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=6)  # fmt: skip


def some(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(keys), values, max_size=len(keys))


CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 512,
    "max_position_embeddings": 2048, "torch_dtype": "bfloat16",
}  # fmt: skip
models = st.one_of(
    values,
    st.sampled_from(["nvidia/Qwen3.6-35B-A3B-NVFP4", "not/in-catalog"]),
    st.fixed_dictionaries({"id": st.just("org/tiny"), "path": st.just("/m/tiny"), "config": st.just(CONFIG)}, optional={"weight_bytes": values}),
)  # fmt: skip
instances = st.lists(
    st.fixed_dictionaries({}, optional={"name": values, "model": models, "intent": st.one_of(values, some(INTENT_KEYS)), "port": values}),
    max_size=3,
)  # fmt: skip


def ends_well(call: Any, *args: Any) -> None:
    try:
        call(*args)
    except PlanError as exc:
        assert exc.variable and isinstance(exc.variable, str)
        assert str(exc).startswith(exc.variable)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(values, some(FACT_KEYS)), st.one_of(values, instances))
def test_host_plans_end_in_a_plan_or_a_named_refusal(facts: Any, items: Any) -> None:
    ends_well(host_plan, facts, items, "vllm_serve_instances")


@settings(max_examples=300, deadline=None)
@given(st.one_of(values, some(INSTALL_KEYS)))
def test_install_inputs_end_in_inputs_or_a_named_refusal(raw: Any) -> None:
    ends_well(inputs_from, raw)


@settings(max_examples=200, deadline=None)
@given(values)
def test_thresholds_and_client_networks_end_in_a_value_or_a_named_refusal(raw: Any) -> None:
    ends_well(thresholds, raw)
    ends_well(check_clients, raw if isinstance(raw, list) else [raw], "vllm_serve_allowed_clients")


# Mostly values a user would type, sometimes the edge a careless one does.
edge_ints = st.one_of(
    st.sampled_from([1, 2, 4, 8, 512, 4096, 32768, 65536]), st.sampled_from([0, -1, 7, 262144, 2**31, 10**12])
)
edge_floats = st.one_of(st.sampled_from([0.5, 0.8, 0.9]), st.sampled_from([0.0, -0.5, 0.01, 0.95, 1.0, 1.5, float("inf")]))
near_facts = st.fixed_dictionaries(
    {"platform": st.sampled_from(["gb10", "gb10", "cpu", "tpu"]),
     "mem_total_bytes": st.one_of(st.sampled_from([24 * 2**30, 128 * 2**30]), st.sampled_from([0, 1, 2**30, -5]))},
    optional={"mem_available_bytes": edge_ints, "vllm_version": st.sampled_from(["0.32.0", "0.17.0", "0.9.0", "latest"])},
)  # fmt: skip
near_intent = st.fixed_dictionaries(
    {},
    optional={
        "max_context": edge_ints, "concurrency": edge_ints, "nodes": edge_ints, "tensor_parallel_size": edge_ints,
        "gpu_memory_utilization": edge_floats, "max_num_batched_tokens": edge_ints, "host_reserve_gib": edge_floats,
        "port": edge_ints, "host": st.sampled_from(["127.0.0.1", "0.0.0.0", "10.0.0.5", "not a host", ""]),
        "speculative": st.sampled_from(["none", "mtp", "dflash", "ngram", "eagle9"]), "api_key": st.booleans(),
        "profile": st.sampled_from(["interactive", "throughput", "memory-saver", "fast"]),
        "kv_cache_dtype": st.sampled_from(["auto", "fp8", "bf16", "int4"]), "allow_yarn": st.booleans(),
        "allow_long_context": st.booleans(),
    },
)  # fmt: skip
near_instances = st.lists(
    st.fixed_dictionaries(
        {"name": st.one_of(st.sampled_from(["tiny", "qwen"]), st.sampled_from(["a/b", "..", "two words", "x;rm", "A", ""])),
         "model": st.sampled_from(["nvidia/Qwen3.6-35B-A3B-NVFP4", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"])
         | st.just({"id": "org/tiny", "path": "/m/tiny", "config": CONFIG, "weight_bytes": 2**20}),
         "intent": near_intent},
    ),
    min_size=1,
    max_size=3,
)  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_facts, near_instances)
def test_near_valid_plans_end_in_a_plan_or_a_named_refusal(facts: dict[str, Any], items: list[dict[str, Any]]) -> None:
    ends_well(host_plan, facts, items, "vllm_serve_instances")
