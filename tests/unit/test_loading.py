"""Load strategies: what auto picks and why, what each holds while loading, and what is refused."""

from __future__ import annotations

import pytest
from conftest import spark

from sparkfleet.boundary.adapters import instance_request
from sparkfleet.catalog import get_profile
from sparkfleet.errors import PlanError
from sparkfleet.models import GIB, HostFacts, Intent, ModelProfile
from sparkfleet.planning.hostplan import plan_host
from sparkfleet.planning.loading import packages_for
from sparkfleet.planning.planner import plan
from sparkfleet.versions import VllmVersion

NANO = get_profile("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4")
CPU = HostFacts(platform="cpu", arch="x86_64", mem_total_bytes=64 * GIB, unified_memory=False, vllm_version="0.32.0")


def intent(**values: object) -> Intent:
    return Intent.model_validate({"trust_remote_code": True, "max_context": 32768, "concurrency": 2, **values})


def load_flags(argv: list[str]) -> list[str]:
    return [
        f"{flag} {argv[i + 1]}" for i, flag in enumerate(argv) if flag in ("--load-format", "--safetensors-load-strategy")
    ]


def sharded(profile: ModelProfile, shard_gib: float) -> ModelProfile:
    return profile.model_copy(update={"largest_shard_gib": shard_gib})


def test_auto_on_a_spark_reads_eagerly_and_counts_two_shards_beside_the_weights() -> None:
    result = plan(spark(), sharded(NANO, 4.0), intent())
    assert result.load_strategy.value == "eager"
    assert load_flags(result.argv) == ["--safetensors-load-strategy eager"]
    assert result.memory.load_transient == 8.0
    reason = next(r for r in result.reasons if r.item.startswith("--safetensors-load-strategy"))
    assert "349886" in reason.source and "2 x 4.00 GiB" in reason.reason


def test_auto_prefetches_from_a_network_filesystem_when_the_checkpoint_fits_beside_the_weights() -> None:
    result = plan(spark(), NANO, intent(), model_fs="nfs")
    assert load_flags(result.argv) == ["--safetensors-load-strategy prefetch"]
    assert result.memory.load_transient == 0.0  # page cache: reclaimable, checked against the room only


def test_auto_falls_back_to_mmap_when_eager_would_not_fit_and_says_why() -> None:
    # 93 GiB of weights whose shard sizes are unknown: one shard is bounded by the whole checkpoint.
    big = NANO.model_copy(update={"weights_gib": 93.0, "largest_shard_gib": None})
    result = plan(spark(), big, intent(max_context=4096, concurrency=1))
    assert result.load_strategy.value == "mmap" and load_flags(result.argv) == []
    reason = next(r for r in result.reasons if r.item == "load mmap")
    assert "eager would hold 186.0 GiB" in reason.reason and result.memory.load_transient == 0.0
    # With its shards read from the staged files, the same model loads eagerly.
    assert plan(spark(), sharded(big, 4.6), intent(max_context=4096, concurrency=1)).load_strategy.value == "eager"


def test_auto_on_cpu_keeps_vllms_default_and_adds_no_flag() -> None:
    tiny = sharded(NANO.model_copy(update={"weights_gib": 0.5}), 0.5)
    result = plan(CPU, tiny, Intent(trust_remote_code=True, max_context=2048, concurrency=1))
    assert result.load_strategy.value == "mmap" and load_flags(result.argv) == []


def test_eager_raises_memorymax_and_the_start_check_to_cover_the_load_peak() -> None:
    lazy = plan(spark(), sharded(NANO, 10.0), intent(load="mmap"))
    eager = plan(spark(), sharded(NANO, 10.0), intent(load="eager"))
    assert load_flags(lazy.argv) == ["--safetensors-load-strategy lazy"]
    at_load = eager.memory.weights + eager.memory.runtime + eager.memory.load_transient + eager.memory.process_baseline
    assert int(eager.systemd.memory_max.removesuffix("G")) >= at_load
    assert eager.required_available_bytes >= at_load * GIB
    assert eager.required_available_bytes >= lazy.required_available_bytes


@pytest.mark.parametrize("loader", ["fastsafetensors", "instanttensor"])
def test_cuda_loaders_are_refused_on_the_cpu_platform(loader: str) -> None:
    with pytest.raises(PlanError) as refused:
        plan(CPU, NANO, intent(load=loader, max_context=2048))
    assert refused.value.variable == "intent.load" and "CUDA" in refused.value.problem


def test_fastsafetensors_is_refused_above_the_utilization_that_froze_a_spark() -> None:
    with pytest.raises(PlanError) as refused:
        plan(spark(), NANO, intent(load="fastsafetensors", max_context=262144, concurrency=4, profile="throughput"))
    # seed 003: "fastsafetensors caveat: Don't use with gpu_memory_utilization > 0.76 on unified memory".
    assert refused.value.variable == "intent.load" and "0.76" in refused.value.problem
    assert "seed 003" in refused.value.problem
    small = plan(spark(), sharded(NANO, 4.0), intent(load="fastsafetensors"))
    assert small.gpu_memory_utilization <= 0.76
    assert load_flags(small.argv) == ["--load-format fastsafetensors"]


@pytest.mark.parametrize(
    ("load", "version", "words"),
    [
        ("instanttensor", "0.17.0", "first shipped in vLLM 0.18.0"),
        ("prefetch", "0.17.0", "prefetch from 0.18.0"),
    ],
)
def test_a_strategy_the_release_does_not_have_is_refused(load: str, version: str, words: str) -> None:
    with pytest.raises(PlanError) as refused:
        plan(spark(version), NANO, intent(load=load))
    assert refused.value.variable == "intent.load" and words in refused.value.problem


def test_a_loader_the_release_does_not_require_says_the_package_must_be_added() -> None:
    old = plan(spark("0.20.0"), sharded(NANO, 4.0), intent(load="fastsafetensors"))
    new = plan(spark("0.32.0"), sharded(NANO, 4.0), intent(load="fastsafetensors"))
    note = next(r.reason for r in old.reasons if r.item.startswith("--load-format"))
    assert "fastsafetensors>=0.2.2" in note
    assert "requires fastsafetensors itself" in next(r.reason for r in new.reasons if r.item.startswith("--load-format"))


def test_eager_that_cannot_fit_beside_the_weights_is_refused_with_the_numbers() -> None:
    big = NANO.model_copy(update={"weights_gib": 93.0, "largest_shard_gib": None})
    with pytest.raises(PlanError) as refused:
        plan(spark(), big, intent(load="eager", max_context=4096, concurrency=1))
    assert refused.value.variable == "intent.load" and "186.0 GiB" in refused.value.problem


def test_the_staged_files_give_the_shard_size_and_the_filesystem() -> None:
    model = {
        "id": "org/m",
        "path": "/srv/models/org/m",
        "config": {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 4096,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "max_position_embeddings": 131072,
        },
        "weight_bytes": 16 * GIB,
        "largest_weight_file_bytes": 5 * GIB,
        "fs_type": "nfs4",
    }
    request = instance_request({"name": "m", "model": model, "intent": {"max_context": 8192}})
    assert request.profile.largest_shard_gib == 5.0 and request.model_fs == "nfs4"
    assert plan_host(spark(), [request]).instances["m"].load_strategy.value == "prefetch"
    local = instance_request({"name": "m", "model": {**model, "fs_type": "ext4"}, "intent": {"max_context": 8192}})
    assert plan_host(spark(), [local]).instances["m"].memory.load_transient == 10.0


def test_a_loader_joins_the_release_only_where_vllm_does_not_require_it() -> None:
    loads = ["auto", "fastsafetensors", "instanttensor", "fastsafetensors"]
    assert packages_for(loads, VllmVersion.parse("0.17.0"), []) == ["fastsafetensors>=0.2.2", "instanttensor>=0.1.5"]
    assert packages_for(loads, VllmVersion.parse("0.22.0"), []) == ["instanttensor>=0.1.5"]
    assert packages_for(loads, VllmVersion.parse("0.32.0"), []) == []
    # Named by the user already (any spelling of the requirement): not added again.
    assert packages_for(loads, VllmVersion.parse("0.17.0"), ["FastSafeTensors==0.4.0", "instanttensor [x]"]) == []


# seed 003, cause 4: "FlashInfer JIT-compiles 6+ CUTLASS MoE GEMM kernels at runtime, with each cicc compiler
# process using 1.5-6 GB RAM". The plan holds each compile at the top figure, 6 GB, rounded up to 6 GiB (6 GB is
# 5.59 GiB), and runs at most 4 at once (README: MAX_JOBS is the compiles the headroom holds at 6 GiB each, 1 to 4).
JIT_COMPILE_GIB = 6.0


def test_a_sparks_first_start_compiles_as_many_kernels_as_the_headroom_holds_and_memorymax_holds_them() -> None:
    roomy = plan(spark(), sharded(NANO, 4.0), intent())
    assert roomy.memory.headroom >= 4 * JIT_COMPILE_GIB
    assert roomy.env["MAX_JOBS"] == "4"
    assert roomy.memory.first_start_compile == 24.0  # 4 compiles x 6 GiB
    steady = roomy.memory.weights + roomy.memory.runtime + roomy.memory.activation + roomy.memory.cudagraph
    steady += roomy.memory.extra + roomy.memory.drafter + roomy.memory.kv + roomy.memory.process_baseline
    assert int(roomy.systemd.memory_max.removesuffix("G")) >= steady + roomy.memory.first_start_compile
    reason = next(r for r in roomy.reasons if r.item.startswith("MAX_JOBS"))
    assert "seed 003" in reason.source and "cpp_ext.py" in reason.source


def test_a_tight_plan_compiles_one_kernel_at_a_time_and_warns() -> None:
    tight = plan(spark(), sharded(NANO, 1.0), intent(profile="throughput", max_context=262144, concurrency=8))
    assert tight.memory.headroom < JIT_COMPILE_GIB
    assert tight.env["MAX_JOBS"] == "1" and tight.memory.first_start_compile == 6.0  # one compile at seed 003's 6 GB
    assert any("compiles kernels one at a time" in w for w in tight.warnings)


def test_the_cpu_platform_plans_no_kernel_compiles() -> None:
    tiny = sharded(NANO.model_copy(update={"weights_gib": 0.5}), 0.5)
    result = plan(CPU, tiny, Intent(trust_remote_code=True, max_context=2048, concurrency=1))
    assert "MAX_JOBS" not in result.env and result.memory.first_start_compile == 0.0


def test_a_model_that_takes_audio_brings_vllms_audio_extra_unless_the_user_names_it() -> None:
    from sparkfleet.planning.loading import extras_for

    omni = "nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4"
    assert extras_for([omni, "nvidia/Qwen3.6-35B-A3B-NVFP4"], "vllm", []) == ["vllm[audio]"]
    assert extras_for([omni], "vllm", ["vllm[audio,video]"]) == []
    assert extras_for(["org/not-in-the-catalog"], "vllm", []) == []
