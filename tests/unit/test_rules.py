"""Version- and platform-aware flag rules, and the refusals."""

from __future__ import annotations

import json

import pytest
from conftest import cpu_host, spark

from sparkfleet.catalog import get_profile, load_catalog, recipe_intent
from sparkfleet.errors import PlanError
from sparkfleet.models import HostFacts, Intent, ServePlan
from sparkfleet.planning.planner import plan
from sparkfleet.versions import VllmVersion

QWEN = "nvidia/Qwen3.6-35B-A3B-NVFP4"
NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
GEMMA_31B = "nvidia/Gemma-4-31B-IT-NVFP4"
MISTRAL = "mistralai/Mistral-Small-4-119B-2603-NVFP4"


def argv_of(model: str, version: str = "0.32.0", **intent: object) -> list[str]:
    return plan(spark(version), get_profile(model), Intent.model_validate({"trust_remote_code": True, **intent})).argv


def test_fp4_moe_uses_marlin_on_sm121_and_atomic_add_only_where_a_marlin_kernel_reads_it() -> None:
    """Issue 49: vLLM 0.32 / 0.33's MoE Marlin passes use_atomic_add=False (marlin_moe.py); the dense Marlin GEMMs
    read VLLM_MARLIN_USE_ATOMIC_ADD (marlin_utils_fp4.py via should_use_atomic_add_reduce), which seed 004 needs."""
    moe_only = plan(spark(), get_profile(NANO), Intent(trust_remote_code=True))
    assert moe_only.argv[moe_only.argv.index("--moe-backend") + 1] == "marlin"
    assert "--linear-backend" not in moe_only.argv and "VLLM_MARLIN_USE_ATOMIC_ADD" not in moe_only.env
    for model in (GEMMA_31B, NANO):
        dense = plan(spark("0.33.0"), get_profile(model), Intent(trust_remote_code=True, profile="memory-saver"))
        assert dense.argv[dense.argv.index("--linear-backend") + 1] == "marlin"
        assert dense.env["VLLM_MARLIN_USE_ATOMIC_ADD"] == "1", model
        reason = next(e.reason for e in dense.environment if e.name == "VLLM_MARLIN_USE_ATOMIC_ADD")
        assert reason.startswith("the dense GEMMs on Marlin read it")
    # Before 0.32 the MoE path was not read from vLLM's source: seed 004's advice stands there.
    older = plan(spark("0.21.0"), get_profile(NANO), Intent(trust_remote_code=True))
    assert older.env["VLLM_MARLIN_USE_ATOMIC_ADD"] == "1" and "--linear-backend" not in older.argv


def test_seed_003s_fp8_marlin_switch_comes_with_the_dense_marlin_pin_where_vllm_reads_it() -> None:
    """Seed 003 (vLLM 0.18.1): VLLM_NVFP4_GEMM_BACKEND=marlin with VLLM_TEST_FORCE_FP8_MARLIN=1; removed in 0.29."""
    seed = plan(spark("0.18.1"), get_profile(NANO), Intent(trust_remote_code=True))
    assert seed.env["VLLM_NVFP4_GEMM_BACKEND"] == "marlin" and seed.env["VLLM_TEST_FORCE_FP8_MARLIN"] == "1"
    assert seed.env["VLLM_MARLIN_USE_ATOMIC_ADD"] == "1"
    later = plan(spark("0.33.0"), get_profile(NANO), Intent(trust_remote_code=True, profile="memory-saver"))
    assert "VLLM_TEST_FORCE_FP8_MARLIN" not in later.env


@pytest.mark.parametrize(("version", "expected"), [("0.19.0", True), ("0.22.0", False), ("0.24.0", False)])
def test_flashinfer_moe_env_only_where_vllm_still_honours_it(version: str, expected: bool) -> None:
    result = plan(spark(version), get_profile(NANO), Intent(trust_remote_code=True))
    assert ("VLLM_USE_FLASHINFER_MOE_FP4" in result.env) is expected


def test_no_removed_or_unknown_env_var_is_ever_emitted() -> None:
    for version in ("0.17.0", "0.19.0", "0.24.0", "0.29.0", "0.33.0"):
        for profile in load_catalog().values():
            if VllmVersion.parse(version) < profile.min_version:
                continue
            if profile.max_version is not None and VllmVersion.parse(version) > profile.max_version:
                continue
            asked = {"trust_remote_code": True, "max_context": 8192, "concurrency": 1}
            intent = Intent.model_validate(asked | recipe_intent(profile, asked))
            env = plan(spark(version), profile, intent).env
            assert "VLLM_ATTENTION_BACKEND" not in env
            assert "VLLM_MXFP4_BACKEND" not in env
            if VllmVersion.parse(version).at_least("0.29.0"):
                assert "VLLM_TEST_FORCE_FP8_MARLIN" not in env


def test_sm121_environment_and_autotune() -> None:
    result = plan(spark(), get_profile(NANO), Intent(trust_remote_code=True))
    assert result.env["TORCH_CUDA_ARCH_LIST"] == "12.1a"
    assert result.env["TRITON_PTXAS_PATH"] == "/usr/local/cuda/bin/ptxas"
    assert result.env["VLLM_SKIP_P2P_CHECK"] == "1"
    assert result.env["HF_HUB_OFFLINE"] == "1"
    assert "--no-enable-flashinfer-autotune" in result.argv
    assert "--enforce-eager" not in result.argv


def test_cpu_platform_has_no_gb10_rules() -> None:
    result = plan(cpu_host(), get_profile(NANO), Intent(trust_remote_code=True, max_context=4096, concurrency=1))
    assert "TORCH_CUDA_ARCH_LIST" not in result.env
    assert "--no-enable-flashinfer-autotune" not in result.argv
    assert "--moe-backend" not in result.argv
    assert "--gpu-memory-utilization" not in result.argv


@pytest.mark.parametrize("host", [cpu_host(), cpu_host("0.17.1")])
def test_cpu_platform_runs_eager_on_every_release(host: HostFacts) -> None:
    """A compile per instance and release was 41 of a first start's 90 s in the sandbox; no AOT setting is left to make."""
    result = plan(host, get_profile(NANO), Intent(trust_remote_code=True, max_context=4096, concurrency=1))
    assert "--enforce-eager" in result.argv and "VLLM_USE_AOT_COMPILE" not in result.env
    (flag,) = (f for f in result.flags if f.name == "--enforce-eager")
    assert "41.4 s" in flag.source and "memory-saver" not in flag.reason
    assert not any("55%" in w for w in result.warnings)


def test_mla_model_gets_triton_mla() -> None:
    argv = argv_of(MISTRAL)
    assert argv[argv.index("--attention-backend") + 1] == "TRITON_MLA"


def test_quantization_flag_only_for_modelopt() -> None:
    assert "modelopt" in argv_of(NANO)
    assert "--quantization" not in argv_of(MISTRAL)


def test_capture_sizes_follow_concurrency() -> None:
    result = plan(spark(), get_profile(NANO), Intent(trust_remote_code=True, concurrency=4))
    assert result.cudagraph_capture_sizes == [1, 2, 4, 8]
    argv = result.argv
    assert argv[argv.index("--max-cudagraph-capture-size") + 1] == "8"


def test_memory_saver_is_the_only_eager_profile_and_warns() -> None:
    result = plan(spark(), get_profile(NANO), Intent(trust_remote_code=True, profile="memory-saver"))
    assert "--enforce-eager" in result.argv
    assert any("55%" in w for w in result.warnings)


def test_parsers_and_auto_tool_choice_from_profile() -> None:
    argv = argv_of(QWEN)
    assert argv[argv.index("--tool-call-parser") + 1] == "qwen3_xml"
    assert "--enable-auto-tool-choice" in argv
    assert argv[argv.index("--reasoning-parser") + 1] == "qwen3"


def test_coder_next_runs_its_recipes_flashinfer_and_qwen36_stays_on_auto() -> None:
    """Issue 49: seed 002 §7.1.3 measured the default backend capping Coder-Next near ~60K at 0.85 and FlashInfer
    fitting ~170K; the FlashInfer crash at init_device was Qwen3.6's (§7.1.1), whose plan leaves the backend alone."""
    coder = plan(
        spark("0.33.0"),
        get_profile("Qwen/Qwen3-Coder-Next-FP8"),
        Intent(max_context=170000, concurrency=4, max_num_batched_tokens=32768, gpu_memory_utilization=0.85),
    )
    assert coder.argv[coder.argv.index("--attention-backend") + 1] == "FLASHINFER"
    reason = next(f.reason for f in coder.flags if f.name == "--attention-backend")
    assert "~60K" in reason and "~170K" in reason and "Qwen3.6" in reason
    assert "--attention-backend" not in argv_of(QWEN, "0.33.0")
    # On a CPU host the recipe's GPU backend is never asked for.
    assert (
        "--attention-backend" not in plan(cpu_host(total_gib=256), get_profile("Qwen/Qwen3-Coder-Next-FP8"), Intent()).argv
    )


def test_dflash_needs_021_bf16_kv_and_disables_deep_gemm() -> None:
    with pytest.raises(PlanError, match="DFlash needs vLLM >= 0.21.0"):
        argv_of("nvidia/Gemma-4-31B-IT-NVFP4", "0.20.0", speculative="dflash", max_context=8192)
    with pytest.raises(PlanError, match="BF16"):
        argv_of(QWEN, speculative="dflash", kv_cache_dtype="fp8")
    result = plan(spark(), get_profile(QWEN), Intent(trust_remote_code=True, speculative="dflash"))
    assert result.env["VLLM_USE_DEEP_GEMM"] == "0"
    assert result.argv[result.argv.index("--attention-backend") + 1] == "TRITON_ATTN"
    assert result.kv_cache_dtype == "auto"
    config = json.loads(result.argv[result.argv.index("--speculative-config") + 1])
    assert config == {
        "method": "dflash",
        "num_speculative_tokens": 15,
        "model": "z-lab/Qwen3.6-35B-A3B-DFlash",
    }


def test_mtp_only_where_the_model_has_it() -> None:
    with pytest.raises(PlanError, match="no MTP"):
        argv_of(NANO, speculative="mtp")
    argv = argv_of(QWEN, speculative="mtp")
    assert json.loads(argv[argv.index("--speculative-config") + 1])["method"] == "mtp"


def test_context_above_native_needs_yarn_opt_in() -> None:
    with pytest.raises(PlanError, match="intent.max_context"):
        argv_of(QWEN, max_context=1_000_000)
    result = plan(
        spark(), get_profile(QWEN), Intent(trust_remote_code=True, max_context=1_000_000, concurrency=1, allow_yarn=True)
    )
    assert result.env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] == "1"
    assert "--hf-overrides" in result.argv


def test_a_fork_that_declares_dflash_plans_it_below_021_and_says_so() -> None:
    aeon = get_profile("AEON-7/DFlash-Qwen3.5-27B-Uncensored-NVFP4")
    intent = Intent(trust_remote_code=True, speculative="dflash", max_context=32768, concurrency=1)
    with pytest.raises(PlanError, match=r"needs vLLM >= 0.21.0 \(for dflash\)") as upstream:
        plan(spark("0.19.0"), aeon, intent)
    assert "a fork release that declares dflash" in upstream.value.suggestions
    fork = spark("0.19.0").model_copy(update={"vllm_capabilities": ("dflash",)})
    result = plan(fork, aeon, intent)
    reason = next(r for r in result.reasons if r.item.startswith("--speculative-config"))
    assert "capability dflash: declared by the release (vLLM 0.19.0 fork)" in reason.source
    upstream_reason = next(
        r for r in plan(spark("0.21.0"), aeon, intent).reasons if r.item.startswith("--speculative-config")
    )
    assert "capability dflash: upstream vLLM since 0.21.0" in upstream_reason.source
    # A capability stands in for a version only where the rule asks for that capability.
    with pytest.raises(PlanError, match="DFlash needs vLLM >= 0.21.0 or a release that declares"):
        plan(spark("0.20.0"), get_profile("nvidia/Gemma-4-31B-IT-NVFP4"), intent)
    # z-lab's Gemma-4 drafter also needs its own build (seed 002 §14): a fork declares both.
    gemma_fork = fork.model_copy(update={"vllm_version": "0.20.0", "vllm_capabilities": ("dflash", "dflash-gemma4")})
    assert plan(gemma_fork, get_profile("nvidia/Gemma-4-31B-IT-NVFP4"), intent)
    with pytest.raises(ValueError, match="eagle9: not a capability"):
        HostFacts.model_validate({**fork.model_dump(), "vllm_capabilities": ["eagle9"]})


def test_publisher_supported_long_context_needs_no_rope_override() -> None:
    million = Intent(trust_remote_code=True, max_context=1_048_576, concurrency=1, allow_long_context=True)
    result = plan(spark(), get_profile(NANO), million)
    assert result.env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] == "1"
    assert "--hf-overrides" not in result.argv
    assert result.argv[result.argv.index("--max-model-len") + 1] == "1048576"
    reason = next(r for r in result.reasons if r.item.startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN"))
    assert "seed 002" in reason.source and "1048576" in reason.reason
    assert any("prefill" in warning for warning in result.warnings)
    # The opt-in does not stretch a model past what its publisher supports, and YaRN needs an override.
    with pytest.raises(PlanError, match="supports up to 1048576") as past:
        plan(spark(), get_profile(NANO), million.model_copy(update={"max_context": 2_097_152}))
    assert past.value.variable == "intent.max_context"
    with pytest.raises(PlanError, match="no YaRN override"):
        plan(spark(), get_profile(NANO), million.model_copy(update={"allow_long_context": False, "allow_yarn": True}))


def test_nemotron_super_serves_a_million_tokens_as_nvidia_publishes() -> None:
    """NVIDIA's Spark playbook serves Nemotron-3-Super at 1M tokens with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (issue 21)."""
    super_ = get_profile("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4")
    million = Intent(trust_remote_code=True, max_context=1_048_576, concurrency=1, allow_long_context=True)
    result = plan(spark(), super_, million)
    assert result.env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] == "1"
    assert result.argv[result.argv.index("--max-model-len") + 1] == "1048576"
    reason = next(r for r in result.reasons if r.item.startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN"))
    assert "model card" in reason.source
    # 8 attention layers x 2 KV heads x 128 x K and V x bf16: 8 KiB a token, so a million tokens hold 8 GiB of KV.
    assert result.kv_cache_memory_bytes >= 1_048_576 * 8192
    with pytest.raises(PlanError, match="needs allow_long_context|allow_long_context true"):
        plan(spark(), super_, million.model_copy(update={"allow_long_context": False}))


def test_the_context_refusal_names_every_way_the_profile_allows() -> None:
    with pytest.raises(PlanError) as nano:
        argv_of(NANO, max_context=1_048_576, concurrency=1)
    assert any("allow_long_context true" in hint for hint in nano.value.suggestions)
    assert not any("allow_yarn" in hint for hint in nano.value.suggestions)
    with pytest.raises(PlanError) as qwen:
        argv_of(QWEN, max_context=1_000_000, concurrency=1, allow_long_context=True)
    assert "states no support past it" in str(qwen.value)
    assert any("allow_yarn true" in hint for hint in qwen.value.suggestions)


def test_public_bind_is_refused_even_with_a_key_naming_the_door() -> None:
    # vLLM's --api-key guards only /v1: a key does not make a public bind safe.
    for keyed in (False, True):
        with pytest.raises(PlanError, match="intent.host") as err:
            argv_of(NANO, host="0.0.0.0", api_key=keyed)
        assert "/invocations" in err.value.problem
        assert any("front_door" in hint for hint in err.value.suggestions)


def test_a_key_never_reaches_argv() -> None:
    result = plan(spark(), get_profile(NANO), Intent(trust_remote_code=True, api_key=True))
    assert result.secret_env == ["VLLM_API_KEY"]
    assert "--api-key" not in result.argv
    assert "VLLM_API_KEY" not in result.env


def test_utilization_above_cap_refused_on_gb10() -> None:
    with pytest.raises(PlanError, match="0.9 cap"):
        argv_of(NANO, gpu_memory_utilization=0.95)


def test_unsupported_version_refused() -> None:
    with pytest.raises(PlanError, match="vllm_version"):
        argv_of(NANO, "0.12.0")


def test_infeasible_intent_names_what_would_fit() -> None:
    with pytest.raises(PlanError) as excinfo:
        plan(
            spark(),
            get_profile(QWEN),
            Intent(trust_remote_code=True, max_context=262144, concurrency=512, kv_cache_dtype="bf16"),
        )
    message = str(excinfo.value)
    assert "needs" in message and "GiB" in message
    assert "kv_cache_dtype fp8" in message
    assert "max_context" in message or "concurrency" in message


def test_every_catalog_profile_plans_on_gb10_at_its_minimum_version() -> None:
    for profile in load_catalog().values():
        # A model one Spark cannot hold plans on the Sparks its recipe serves it on, at that recipe's context.
        intent = Intent.model_validate(
            {"trust_remote_code": True, "max_context": 32768, "concurrency": 2} | recipe_intent(profile)
        )
        result = plan(spark(profile.min_vllm), profile, intent)
        assert result.argv[:3] == ["vllm", "serve", profile.id]
        assert len(result.reasons) >= len([a for a in result.argv if a.startswith("--")])
        assert all(r.source for r in result.reasons)


def test_prebuilt_flashinfer_kernels_take_the_first_start_compiles_out_of_the_plan() -> None:
    compiled = plan(spark("0.33.0"), get_profile(NANO), Intent(max_context=32768))
    kernels = "flashinfer-jit-cache 0.7.2.post1+cu130"
    host = spark("0.33.0").model_copy(update={"flashinfer_kernels": kernels})
    prebuilt = plan(host, get_profile(NANO), Intent(max_context=32768))
    assert compiled.memory.first_start_compile > 0 and prebuilt.memory.first_start_compile == 0
    assert prebuilt.env["MAX_JOBS"] == "1"
    assert any(kernels in r.reason for r in prebuilt.reasons if r.item == "MAX_JOBS=1")
    assert prebuilt.kv_cache_memory_bytes >= compiled.kv_cache_memory_bytes


def test_planned_utilization_stays_in_the_fields_safe_range_and_a_higher_given_one_is_cautioned() -> None:
    """Seed 004: 0.85-0.87 is safe under load, 0.82 stopped Xid 43 at 131K on two nodes, 0.90 is the hard limit."""
    qwen = get_profile("nvidia/Qwen3.6-35B-A3B-NVFP4")
    filled = plan(spark(), qwen, Intent(profile="throughput", max_context=65536, concurrency=4, trust_remote_code=True))
    assert filled.gpu_memory_utilization == pytest.approx(0.87)
    long_cluster = Intent(
        profile="throughput",
        max_context=131072,
        concurrency=2,
        nodes=2,
        tensor_parallel_size=2,
        cluster_backend="ray",
        trust_remote_code=True,
    )
    assert plan(spark(), qwen, long_cluster).gpu_memory_utilization <= 0.82
    given = plan(spark(), qwen, Intent(gpu_memory_utilization=0.89, max_context=65536, trust_remote_code=True))
    assert [w for w in given.warnings if "0.89 is above 0.87" in w and "Xid 43" in w]
    with pytest.raises(PlanError, match="above the 0.9 cap"):
        plan(spark(), qwen, Intent(gpu_memory_utilization=0.91, max_context=65536, trust_remote_code=True))


@pytest.mark.parametrize(
    "model",
    [
        "nvidia/Gemma-4-31B-IT-NVFP4",
        "bg-digitalservices/Gemma-4-26B-A4B-it-NVFP4",
        "sakamakismile/gemma-4-12B-coder-fable5-composer2.5-MTP-NVFP4",
    ],
)
def test_gemma_4_serves_with_thinking_on_as_its_recipes_do(model: str) -> None:
    """Seed 002 §7.2.2-7.2.3: thinking is off by default on Gemma 4, and the field turns it on server-wide."""
    profile = get_profile(model)
    host = spark(profile.max_vllm or "0.32.0")
    result = plan(host, profile, Intent(max_context=16384, trust_remote_code=True))
    kwargs = result.flags[[flag.name for flag in result.flags].index("--default-chat-template-kwargs")]
    assert json.loads(kwargs.values[0]) == {"enable_thinking": True}
    assert "seed 002 §7.2" in profile.sources["chat_template_kwargs"]
    # A client's own setting, and the intent's, still win.
    off = plan(
        host, profile, Intent(max_context=16384, trust_remote_code=True, chat_template_kwargs={"enable_thinking": False})
    )
    assert '{"enable_thinking":false}' in off.argv


def speculative_config(result: ServePlan) -> str:
    return next(flag.values[0] for flag in result.flags if flag.name == "--speculative-config")


def test_speculation_is_scheduled_off_under_load_where_vllm_can_and_cautioned_where_it_cannot() -> None:
    """Seed 002 §14.3/§14.7: speculation costs throughput under load; the field turns it off from 32 requests."""
    qwen = get_profile("nvidia/Qwen3.6-35B-A3B-NVFP4")
    busy = Intent(speculative="mtp", max_context=2048, concurrency=32, trust_remote_code=True)
    config = json.loads(speculative_config(plan(spark("0.33.0"), qwen, busy)))
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 31, config["num_speculative_tokens"]], [32, 32, 0]]
    quiet = plan(spark("0.33.0"), qwen, busy.model_copy(update={"concurrency": 4}))
    assert "num_speculative_tokens_per_batch_size" not in speculative_config(quiet)
    older = plan(spark("0.23.0"), qwen, busy)
    assert "num_speculative_tokens_per_batch_size" not in speculative_config(older)
    assert [w for w in older.warnings if "speculation runs at every batch size on vLLM 0.23.0" in w]


def test_the_qwen36_mtp_draft_runs_its_moe_on_triton_on_gb10_as_its_recipe_does() -> None:
    """Seed 002 §7.1.1: the MTP draft's MoE layers on triton beside the target's --moe-backend marlin."""
    qwen = get_profile("nvidia/Qwen3.6-35B-A3B-NVFP4")
    mtp = Intent(speculative="mtp", max_context=16384, concurrency=2, trust_remote_code=True)
    on_spark = plan(spark(), qwen, mtp)
    assert json.loads(speculative_config(on_spark))["moe_backend"] == "triton"
    assert on_spark.argv[on_spark.argv.index("--moe-backend") + 1] == "marlin"
    assert "seed 002 §7.1.1" in next(f.source for f in on_spark.flags if f.name == "--speculative-config")
    assert "moe_backend" not in speculative_config(plan(cpu_host(), qwen, mtp))


def test_the_dense_nvfp4_gemm_follows_the_seed_that_measured_that_release_and_profile() -> None:
    """Seed 003 (0.18.1rc1): Marlin faster and smaller, CUTLASS FP4 failing; seed 002 (0.19+): FLASHINFER_CUTLASS healthy."""
    nano = get_profile("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4")
    default = plan(spark("0.33.0"), nano, Intent(trust_remote_code=True))
    assert "--linear-backend" not in default.argv and "VLLM_NVFP4_GEMM_BACKEND" not in default.env
    assert [r for r in default.reasons if r.item.startswith("dense NVFP4 GEMM left to vLLM") and "seed 003" in r.source]
    saver = plan(
        spark("0.33.0"), nano, Intent(trust_remote_code=True, profile="memory-saver", max_context=8192, concurrency=1)
    )
    assert saver.argv[saver.argv.index("--linear-backend") + 1] == "marlin"
    old = plan(spark("0.18.1"), nano, Intent(trust_remote_code=True, max_context=8192, concurrency=1))
    assert old.env["VLLM_NVFP4_GEMM_BACKEND"] == "marlin" and "--linear-backend" not in old.argv
    gpt_oss = plan(spark("0.33.0"), get_profile("openai/gpt-oss-120b"), Intent(profile="memory-saver", max_context=8192))
    assert "--linear-backend" not in gpt_oss.argv  # MXFP4: not an NVFP4 GEMM


def test_an_moe_across_sparks_spreads_its_experts_and_one_gpu_has_nothing_to_spread() -> None:
    """Seed 002 §8: --enable-expert-parallel for MoE; it acts only where there is more than one GPU."""
    qwen = get_profile("nvidia/Qwen3.6-35B-A3B-NVFP4")
    two = Intent(nodes=2, tensor_parallel_size=2, cluster_backend="ray", max_context=16384, trust_remote_code=True)
    assert "--enable-expert-parallel" in plan(spark(), qwen, two).argv
    assert "--enable-expert-parallel" not in plan(spark(), qwen, Intent(max_context=16384, trust_remote_code=True)).argv
    dense = get_profile("nvidia/Gemma-4-31B-IT-NVFP4")
    assert not dense.moe
    stages = Intent(nodes=2, pipeline_parallel_size=2, cluster_backend="ray", max_context=16384, trust_remote_code=True)
    assert "--enable-expert-parallel" not in plan(spark(), qwen, stages).argv


def test_a_models_broken_chat_template_is_cautioned_until_a_fixed_one_is_given() -> None:
    """Seed 002 §7.1.4: Qwen3.5's chat template needs the fix shipped in eugr/spark-vllm-docker (--chat-template)."""
    qwen35 = get_profile("RedHatAI/Qwen3.5-122B-A10B-NVFP4")
    stock = plan(spark(), qwen35, Intent(max_context=16384))
    assert [w for w in stock.warnings if "chat template" in w and "seed 002 §7.1.4" in w]
    assert "--chat-template" not in stock.argv
    fixed = plan(spark(), qwen35, Intent(max_context=16384, chat_template="/etc/sparkfleet/qwen35.chat-template.jinja"))
    assert fixed.argv[fixed.argv.index("--chat-template") + 1] == "/etc/sparkfleet/qwen35.chat-template.jinja"
    assert not [w for w in fixed.warnings if "chat template" in w]
    with pytest.raises(ValueError, match="chat_template: an absolute file path"):
        Intent(chat_template="../etc/passwd")


def test_prefix_caching_stays_on_with_mtp_and_says_which_recipe_it_follows() -> None:
    """Seed 002 §14.3: vLLM's recipe drops prefix caching for the lowest latency; §7.1.1's Qwen3.6 recipe keeps both."""
    qwen = get_profile("nvidia/Qwen3.6-35B-A3B-NVFP4")
    result = plan(spark(), qwen, Intent(speculative="mtp", max_context=16384, concurrency=2, trust_remote_code=True))
    flag = next(f for f in result.flags if f.name == "--enable-prefix-caching")
    assert "kept with MTP" in flag.reason and "§14.3" in flag.source


def test_gemma_4_26b_nvfp4_is_planned_only_on_a_release_whose_stock_loader_reads_its_expert_names() -> None:
    """Seed 002 §7.2.2 overlays the checkpoint's gemma4_patched.py on a 0.19 image (vLLM #38912). From 0.21.0 the stock
    loader maps the per-expert scales and keeps the checkpoint's .moe.experts names (PR #41206): no overlay, and an
    older target is refused naming the release that loads it."""
    profile = get_profile("bg-digitalservices/Gemma-4-26B-A4B-it-NVFP4")
    intent = Intent(max_context=16384, trust_remote_code=True)
    with pytest.raises(PlanError, match=r"needs vLLM >= 0\.21\.0, target is 0\.20\.0") as refused:
        plan(spark("0.20.0"), profile, intent)
    assert "vllm_version 0.21.0 or newer" in refused.value.suggestions
    planned = plan(spark("0.21.0"), profile, intent)
    assert not [w for w in planned.warnings if "overlay" in w or "patch" in w]
    assert "PR #41206" in profile.sources["min_vllm"] and "#38912" in profile.sources["min_vllm"]
    # 0.31.0 moved the experts out of a moe module and dropped the remap: 0.32 and 0.33 stop at load (issue 49).
    assert plan(spark("0.30.0"), profile, intent).vllm_version == "0.30.0"
    for newer in ("0.32.0", "0.33.0"):
        with pytest.raises(PlanError, match=rf"0\.21\.0 to 0\.30\.0 only, target is {newer}") as refused:
            plan(spark(newer), profile, intent)
        assert refused.value.variable == "vllm_version" and "layers.0.moe" in str(refused.value)
        assert refused.value.suggestions[0].startswith("vllm_version 0.30.0")


def test_memory_saver_keeps_fp8_kv_off_a_model_whose_recipe_avoids_it() -> None:
    """Issue 49: seed 002 §8, fp8 KV is model-specific and Qwen3.5's recipe does not use it; memory-saver put it on."""
    qwen35 = get_profile("RedHatAI/Qwen3.5-122B-A10B-NVFP4")
    saver = plan(spark("0.33.0"), qwen35, Intent(profile="memory-saver"))
    assert saver.kv_cache_dtype == "auto" and "--kv-cache-dtype" not in saver.argv
    # Asked for, it is given, with the recipe's reason as a caution.
    asked = plan(spark("0.33.0"), qwen35, Intent(kv_cache_dtype="fp8"))
    assert asked.kv_cache_dtype == "fp8"
    assert any("keeps the KV cache unquantized" in w and "seed 002 §8" in w for w in asked.warnings)
    # A model whose recipe has no word against it still gets fp8 under memory-saver.
    assert plan(spark("0.33.0"), get_profile(GEMMA_31B), Intent(profile="memory-saver")).kv_cache_dtype == "fp8"


def test_a_refusal_suggests_only_what_the_next_plan_takes() -> None:
    """Issue 49: the Gemma-4 DFlash refusal suggested MTP, which the next plan refused (no MTP heads)."""
    gemma = get_profile(GEMMA_31B)
    with pytest.raises(PlanError) as refused:
        plan(spark("0.33.0"), gemma, Intent(speculative="dflash"))
    assert "speculative mtp" not in refused.value.suggestions and "speculative ngram" in refused.value.suggestions
    for suggestion in refused.value.suggestions:
        if suggestion.startswith("speculative "):
            plan(spark("0.33.0"), gemma, Intent(speculative=suggestion.split()[1]))


def test_dflash_on_a_hybrid_model_names_both_recipes_and_warns_against_neither() -> None:
    """Issue 49: the Qwen3.6-35B DFlash plan pinned TRITON_ATTN and warned that pinning a backend crashes the model."""
    dflash = plan(spark("0.33.0"), get_profile("nvidia/Qwen3.6-35B-A3B-NVFP4"), Intent(speculative="dflash"))
    attention = next(f for f in dflash.flags if f.name == "--attention-backend")
    assert attention.values == ["TRITON_ATTN"] and "the DFlash recipe is followed" in attention.reason
    assert "§7.1.1" in attention.source and "§14.7" in attention.source
    assert not [w for w in dflash.warnings if "crashes this hybrid model" in w]


def test_mtp_on_a_model_whose_recipe_saw_it_loop_is_cautioned_naming_dflash() -> None:
    qwen = get_profile("nvidia/Qwen3.6-35B-A3B-NVFP4")
    mtp = plan(spark("0.33.0"), qwen, Intent(speculative="mtp"))
    loops = [w for w in mtp.warnings if "output loops" in w]
    assert len(loops) == 1 and "z-lab/Qwen3.6-35B-A3B-DFlash" in loops[0] and "seed 002 §7.1.1" in loops[0]
    assert not [w for w in plan(spark("0.33.0"), qwen, Intent()).warnings if "output loops" in w]


def test_the_moe_backend_lever_replaces_the_plans_pin_checked_against_the_release() -> None:
    """Issue 49.6: seed 002 §7.1.4's author found flashinfer_cutlass faster than Marlin on Qwen3.5-122B; an A/B lever,
    refused where it cannot apply, checked against vLLM 0.32 / 0.33's own MoEBackend choices, cautioned on sm_121."""
    qwen35 = get_profile("RedHatAI/Qwen3.5-122B-A10B-NVFP4")
    asked = plan(spark("0.33.0"), qwen35, Intent(moe_backend="flashinfer-cutlass"))
    assert asked.flag("--moe-backend") == ["flashinfer_cutlass"] and "intent.moe_backend" in next(
        f.reason for f in asked.flags if f.name == "--moe-backend"
    )
    assert "VLLM_MARLIN_USE_ATOMIC_ADD" not in asked.env
    assert any("NaN scales" in w and "§7.1.4" in w for w in asked.warnings)
    assert not [w for w in plan(spark("0.33.0"), qwen35, Intent()).warnings if "moe_backend" in w]
    with pytest.raises(PlanError, match="not a MoE backend of vLLM 0.33.0") as unknown:
        plan(spark("0.33.0"), qwen35, Intent(moe_backend="cutlas"))
    assert unknown.value.variable == "intent.moe_backend" and "moe_backend marlin" in unknown.value.suggestions
    # 0.33 has one the 0.32 list lacks; a release whose list was not read passes it to its own parser on the host.
    with pytest.raises(PlanError, match="0.32.0"):
        plan(spark("0.32.0"), qwen35, Intent(moe_backend="aiter_triton_mxfp4_mxfp4"))
    assert plan(spark("0.29.0"), qwen35, Intent(moe_backend="some_new_one")).flag("--moe-backend") == ["some_new_one"]
    with pytest.raises(PlanError, match="has no MoE layers"):
        plan(spark("0.33.0"), get_profile(GEMMA_31B), Intent(moe_backend="marlin"))
