from __future__ import annotations

from pathlib import Path

import pytest
import serve_plan as filter_plugin
from ansible.errors import AnsibleFilterError
from ansible_collections.sparkfleet.vllm.plugins.module_utils import host_state


def test_facts_parsers_on_real_h200_and_built_gb10(fixtures: Path) -> None:
    h200 = host_state.parse_gpu_query((fixtures / "nvidia-h200-driver580" / "query-gpu.csv").read_text())
    assert h200[0] == {
        "name": "NVIDIA H200",
        "compute_capability": "9.0",
        "driver_version": "580.159.04",
        "memory_total": "143771 MiB",
    }
    header = host_state.parse_gpu_query((fixtures / "nvidia-h200-driver580" / "query-gpu-header.csv").read_text())
    assert header[0]["compute_capability"] == "9.0"
    gb10 = host_state.parse_gpu_query((fixtures / "gb10-built" / "query-gpu.csv").read_text())
    assert gb10[0]["compute_capability"] == host_state.GB10_CAPABILITY
    assert host_state.platform_for(h200) == "unsupported-gpu"
    assert host_state.platform_for(gb10) == "gb10"
    assert host_state.platform_for([]) == "cpu"
    mem = host_state.parse_meminfo((fixtures / "nvidia-h200-driver580" / "meminfo.txt").read_text())
    assert mem == {"mem_total_bytes": 131981020 * 1024, "mem_available_bytes": 131493044 * 1024}
    assert host_state.parse_cuda_release((fixtures / "nvidia-h200-driver580" / "cuda.txt").read_text()) == "13.0"


def _gb10_facts(fixtures: Path) -> dict[str, object]:
    mem = host_state.parse_meminfo((fixtures / "gb10-built" / "meminfo.txt").read_text())
    return {"platform": "gb10", "compute_capability": "12.1", "vllm_version": "0.32.0", **mem}


def test_filter_returns_a_plan_dict(fixtures: Path) -> None:
    result = filter_plugin.serve_plan(
        _gb10_facts(fixtures), "nvidia/Qwen3.6-35B-A3B-NVFP4", {"concurrency": 2, "trust_remote_code": True}
    )
    assert result["argv"][:3] == ["vllm", "serve", "nvidia/Qwen3.6-35B-A3B-NVFP4"]
    assert result["env"]["TORCH_CUDA_ARCH_LIST"] == "12.1a"


def test_filter_turns_plan_errors_into_filter_errors(fixtures: Path) -> None:
    with pytest.raises(AnsibleFilterError, match="intent.host"):
        filter_plugin.serve_plan(_gb10_facts(fixtures), "nvidia/Qwen3.6-35B-A3B-NVFP4", {"host": "0.0.0.0"})
    with pytest.raises(AnsibleFilterError, match="concurrency"):
        filter_plugin.serve_plan(_gb10_facts(fixtures), "nvidia/Qwen3.6-35B-A3B-NVFP4", {"concurrency": 0})


def test_filter_refuses_hosts_the_planner_does_not_know(fixtures: Path) -> None:
    facts = {**_gb10_facts(fixtures), "platform": "unsupported-gpu"}
    with pytest.raises(AnsibleFilterError, match="platform"):
        filter_plugin.serve_plan(facts, "nvidia/Qwen3.6-35B-A3B-NVFP4", {})


def test_filter_plans_a_staged_model_from_facts(fixtures: Path) -> None:
    staged = {
        "path": "/srv/models/tiny",
        "weight_bytes": 10**8,
        "config": {
            "architectures": ["LlamaForCausalLM"],
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "hidden_size": 256,
            "vocab_size": 1000,
            "max_position_embeddings": 1024,
        },
    }
    result = filter_plugin.serve_plan(_gb10_facts(fixtures), staged, {"max_context": 512})
    assert result["argv"][2] == "/srv/models/tiny"


def test_monitoring_filters_render_and_refuse_with_the_variable_named() -> None:
    import monitoring as monitoring_filter
    import scrape_targets as targets_filter

    rules = monitoring_filter.monitoring({"kv_cache_usage": 0.75}, "rules")
    assert any(r.get("expr") == "sparkfleet:vllm_kv_cache_usage:ratio > 0.75" for r in rules["groups"][1]["rules"])
    with pytest.raises(AnsibleFilterError, match=r"monitoring_alerts\.ttft"):
        monitoring_filter.monitoring({"ttft": 1}, "rules")
    with pytest.raises(AnsibleFilterError, match="unknown monitoring artifact"):
        monitoring_filter.monitoring({}, "alerts")
    fleet = {
        "spark01": {"instances": [{"name": "tiny", "port": 8000}]},
        "spark02": {"server": "spark01", "instances": [{"name": "x"}]},
    }
    with pytest.raises(AnsibleFilterError, match=r"vllm_serve_instances \(x\) on spark02"):
        targets_filter.scrape_targets(fleet, "spark01")
    assert targets_filter.scrape_targets({"spark01": fleet["spark01"]}, "spark01")["vllm"][0]["targets"] == [
        "127.0.0.1:8000"
    ]


def test_install_recipe_filter_matches_the_library_and_refuses_bad_inputs() -> None:
    import install_recipe as recipe_filter
    from test_recipes import GB10_LOCK_TEXT, lock_for_inputs

    from sparkfleet.recipes import inputs_from, recipe

    inputs = {"platform": "gb10", "vllm_version": "0.32.0", "uv_version": "0.13.9"}
    lock = lock_for_inputs(inputs, GB10_LOCK_TEXT)
    rendered = recipe_filter.install_recipe(inputs, "/opt/sparkfleet", lock.model_dump(mode="json"))
    assert rendered == recipe(inputs_from(inputs), lock, "/opt/sparkfleet").model_dump(mode="json")
    with pytest.raises(AnsibleFilterError, match="install_recipe: input must be a dict"):
        recipe_filter.install_recipe(["not", "a", "dict"], "/opt/sparkfleet", lock.model_dump(mode="json"))
    with pytest.raises(AnsibleFilterError, match="vllm_install_vllm_version"):
        recipe_filter.install_recipe({**inputs, "vllm_version": "latest"}, "/opt/sparkfleet", lock.model_dump(mode="json"))


def test_loader_packages_filter_reads_each_instances_intent_and_names_bad_input() -> None:
    import loader_packages

    instances = [{"name": "a", "model": "m", "intent": {"load": "fastsafetensors"}}, {"name": "b", "model": "m"}]
    assert loader_packages.loader_packages(instances, "0.20.0", None) == ["fastsafetensors>=0.2.2"]
    assert loader_packages.loader_packages(instances, "0.32.0", []) == []
    with pytest.raises(AnsibleFilterError, match="must be a list"):
        loader_packages.loader_packages({"a": 1}, "0.32.0", [])
    # A version that is not one is left to the install inputs' check, which names the variable.
    assert loader_packages.loader_packages(instances, "latest", []) == []


def test_every_filter_is_one_library_function_behind_the_one_wrapper() -> None:
    import inspect

    from sparkfleet.boundary import filters

    plugins = {path.stem: path.read_text() for path in (Path(__file__).parents[3] / "plugins" / "filter").glob("*.py")}
    functions = {
        name for name, value in vars(filters).items() if inspect.isfunction(value) and value.__module__ == filters.__name__
    }
    assert set(plugins) == functions
    for name, text in plugins.items():
        assert f'{name} = library_filter("{name}")' in text, name
        assert "sparkfleet.vllm.library" in text, f"{name}: its requirements come from the library doc fragment"


def test_the_wrapper_names_the_filter_in_a_refusal() -> None:
    import unit_value

    with pytest.raises(AnsibleFilterError, match=r"^unit_value: .*control character"):
        unit_value.unit_value("a\nb", "exec", "vllm_serve_env")
