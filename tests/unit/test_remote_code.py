"""A repository's own code runs only where the target vLLM needs it, and then only with consent.

What vLLM needs is read from its released wheels (sparkfleet/vllm_registry.json); the same decision is
checked against vLLM's own get_config(trust_remote_code=False) in tests/vllm/check_remote_code.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import spark

from sparkfleet.catalog import load_catalog, recipe_intent
from sparkfleet.errors import PlanError
from sparkfleet.hub import served_at
from sparkfleet.models import HostFacts, Intent, ModelProfile
from sparkfleet.planning.choices import DEFAULT_VLLM
from sparkfleet.planning.planner import plan
from sparkfleet.planning.remotecode import verdict
from sparkfleet.reading.config import profile_from_config, remote_code_files
from sparkfleet.versions import SUPPORTED_MAX, VllmVersion
from sparkfleet.vllmregistry import architecture_support, reads_config_natively, registry, rules_release

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
GIB = 2**30


def fixture(name: str, weights_gib: float = 8) -> ModelProfile:
    config = json.loads((CONFIGS / f"{name}.json").read_text())
    return profile_from_config(name.replace("--", "/"), config, int(weights_gib * GIB), "fixture")


NANO_BF16 = fixture("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 63)
NAS_49B = fixture("nvidia--Llama-3_3-Nemotron-Super-49B-v1", 93)
SMALL = Intent(max_context=8192, concurrency=1)


def test_the_files_auto_map_names_are_listed() -> None:
    config = json.loads((CONFIGS / "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json").read_text())
    assert remote_code_files(config) == ("configuration_nemotron_h.py",)
    other_repo = {"auto_map": {"AutoModel": "org/code--modeling_x.X", "AutoTokenizer": ["tokenization_x.T", None]}}
    assert remote_code_files(other_repo) == ("modeling_x.py", "tokenization_x.py")
    assert remote_code_files({"model_type": "llama"}) == ()


def test_a_config_with_an_auto_map_that_vllm_reads_natively_plans_without_consent() -> None:
    # Nemotron-3-Nano ships configuration_nemotron_h.py, but transformers 5 (vLLM 0.20+) has NemotronHConfig.
    assert NANO_BF16.config_auto_map and NANO_BF16.model_type == "nemotron_h"
    result = plan(spark("0.33.0"), NANO_BF16, SMALL)
    assert "--trust-remote-code" not in result.argv


def test_consent_that_vllm_does_not_need_leaves_the_flag_out_and_says_why() -> None:
    result = plan(spark("0.33.0"), NANO_BF16, SMALL.model_copy(update={"trust_remote_code": True}))
    assert "--trust-remote-code" not in result.argv
    reason = next(r for r in result.reasons if r.item == "no --trust-remote-code")
    assert "reads model_type nemotron_h natively" in reason.reason and "transformers 5.20.2" in reason.reason


def test_the_same_model_on_a_release_whose_transformers_lacks_its_class_needs_the_code() -> None:
    # vLLM 0.18's lock resolves transformers 4.57.6, which has no nemotron_h config class.
    with pytest.raises(PlanError) as err:
        plan(spark("0.18.1"), NANO_BF16, SMALL)
    assert err.value.variable == "intent.trust_remote_code"
    assert "configuration_nemotron_h.py" in err.value.problem and "transformers 4.57.6" in err.value.problem
    consented = plan(spark("0.18.1"), NANO_BF16, SMALL.model_copy(update={"trust_remote_code": True}))
    assert "--trust-remote-code" in consented.argv
    assert any(r.item == "--trust-remote-code" and "no config class" in r.reason for r in consented.reasons)


def test_a_config_only_its_repository_defines_is_refused_without_consent_on_every_release() -> None:
    # Nemotron-NAS (DeciLM): vLLM implements the model, but neither vLLM nor transformers has its config class.
    for version in ("0.17.0", "0.32.0", "0.33.0"):
        with pytest.raises(PlanError) as err:
            plan(spark(version), NAS_49B, SMALL)
        assert err.value.variable == "intent.trust_remote_code" and "nemotron-nas" in err.value.problem


def test_consent_is_tied_to_the_commit_the_model_is_pinned_at() -> None:
    pinned = served_at(NAS_49B, "a" * 40, "hub (pinned)")
    read = SMALL.model_copy(update={"trust_remote_code": "a" * 40})
    assert "--trust-remote-code" in plan(spark(), pinned, read).argv
    with pytest.raises(PlanError) as err:
        plan(spark(), pinned, SMALL.model_copy(update={"trust_remote_code": "b" * 40}))
    assert err.value.variable == "intent.trust_remote_code" and "bbbbbbbbbbbb" in err.value.problem
    with pytest.raises(ValueError, match="trust_remote_code"):
        Intent.model_validate({"trust_remote_code": "main"})
    # A commit is no consent for a model that is not pinned to one: vLLM could load other code.
    with pytest.raises(PlanError, match="not pinned to a commit"):
        plan(spark(), NAS_49B, read)


def test_a_tokenizer_with_its_own_classes_needs_the_code() -> None:
    profile = NANO_BF16.model_copy(update={"tokenizer_auto_map": True})
    assert verdict(profile, VllmVersion.parse("0.33.0")).needed
    with pytest.raises(PlanError, match="tokenizer_config.json"):
        plan(spark("0.33.0"), profile, SMALL)


def test_every_catalog_model_plans_with_the_default_intent_on_the_default_release() -> None:
    host = HostFacts.model_validate(spark().model_dump() | {"vllm_version": DEFAULT_VLLM[spark().platform]})
    consent_needed, too_new = [], []
    for model_id, profile in load_catalog().items():
        try:
            # A model one Spark cannot hold is asked on the Sparks its recipe serves it on.
            plan(host, profile, Intent.model_validate(recipe_intent(profile)))
        except PlanError as exc:
            assert exc.variable in ("intent.trust_remote_code", "vllm_version"), f"{model_id}: {exc}"
            (consent_needed if exc.variable == "intent.trust_remote_code" else too_new).append(model_id)
    # Only the Omni model's config class lives in its repository (no vLLM or transformers class for it).
    assert consent_needed == ["nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4"]
    # The community Gemma-4-26B NVFP4 names its experts as only vLLM 0.21 to 0.30 read them (its max_vllm).
    assert too_new == ["bg-digitalservices/Gemma-4-26B-A4B-it-NVFP4"]


def test_an_architecture_vllm_dropped_is_refused_naming_the_last_release_that_served_it() -> None:
    mpt = NANO_BF16.model_copy(update={"architecture": "MPTForCausalLM", "model_type": "mpt", "config_auto_map": False})
    assert architecture_support(VllmVersion.parse("0.33.0"), "MPTForCausalLM").last_release == "0.28.0"
    with pytest.raises(PlanError) as err:
        plan(spark("0.33.0"), mpt, SMALL)
    assert err.value.variable == "vllm_version" and "0.28.0" in err.value.problem


def test_an_architecture_no_release_implements_is_refused_before_any_memory_is_planned() -> None:
    made_up = NANO_BF16.model_copy(update={"architecture": "NoSuchModelForCausalLM"})
    with pytest.raises(PlanError) as err:
        plan(spark("0.33.0"), made_up, SMALL)
    assert err.value.variable == "model" and "NoSuchModelForCausalLM" in err.value.problem


def test_an_architecture_newer_than_the_target_names_its_first_release() -> None:
    laguna = load_catalog()["poolside/Laguna-XS.2"]
    support = architecture_support(VllmVersion.parse("0.20.0"), laguna.architecture)
    assert not support.implemented and support.first_release == "0.21.0"


def test_a_release_newer_than_the_table_may_implement_what_the_table_never_saw() -> None:
    newer = NANO_BF16.model_copy(
        update={"architecture": "NemotronH4ForCausalLM", "model_type": "nemotron_h4", "config_auto_map": False}
    )
    assert "--trust-remote-code" not in plan(spark("0.34.0"), newer, SMALL).argv
    # With code of its own on offer, an unknown type still asks: the table cannot say vLLM reads it natively.
    with pytest.raises(PlanError, match="intent.trust_remote_code"):
        plan(spark("0.34.0"), newer.model_copy(update={"config_auto_map": True}), SMALL)
    # ...but not revive one vLLM dropped.
    mpt = NANO_BF16.model_copy(update={"architecture": "MPTForCausalLM", "model_type": "mpt", "config_auto_map": False})
    with pytest.raises(PlanError, match="0.28.0"):
        plan(spark("0.34.0"), mpt, SMALL)


def test_a_release_newer_than_the_table_plans_with_the_newest_rules_and_a_warning() -> None:
    result = plan(spark("0.34.1"), NANO_BF16, SMALL)
    assert result.vllm_version == "0.34.1"
    assert any(SUPPORTED_MAX in w and "newer than sparkfleet's rules" in w for w in result.warnings)
    assert rules_release(VllmVersion.parse("0.34.1")) == VllmVersion.parse(SUPPORTED_MAX)


def test_the_registry_covers_every_supported_minor_release() -> None:
    sampled = {str(v) for v in registry().sampled}
    assert {f"0.{minor}.0" for minor in range(17, 34)} <= sampled
    # A patch release takes its minor release's registry.
    assert rules_release(VllmVersion.parse("0.32.3")) == VllmVersion.parse("0.32.0")
    assert reads_config_natively(VllmVersion.parse("0.33.0"), "qwen3_5_moe")
    assert not reads_config_natively(VllmVersion.parse("0.33.0"), "nemotron-nas")
