"""Properties that hold for every catalog model and intent the planner accepts."""

from __future__ import annotations

import pytest
from conftest import spark
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkfleet.catalog import load_catalog, recipe_intent
from sparkfleet.errors import PlanError
from sparkfleet.models import GIB, Intent, ServePlan, command_line
from sparkfleet.planning.memory import GB10_MAX_UTILIZATION
from sparkfleet.planning.planner import plan
from sparkfleet.versions import VllmVersion

PROFILES = sorted(load_catalog())
contexts = st.sampled_from([2048, 4096, 8192, 16384, 32768, 65536, 131072])
concurrency = st.integers(min_value=1, max_value=32)
profiles = st.sampled_from(["interactive", "memory-saver", "throughput"])


def _plan(model: str, context: int, seqs: int, profile: str = "interactive", **extra: object):  # type: ignore[no-untyped-def]
    p = load_catalog()[model]
    intent = Intent(
        trust_remote_code=True,
        max_context=min(context, p.native_max_context),
        concurrency=seqs,
        profile=profile,
        **(recipe_intent(p, {"max_context": context}) | extra),
    )
    version = max(p.min_version, VllmVersion.parse("0.32.0"))
    return plan(spark(str(min(version, p.max_version) if p.max_version else version)), p, intent)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(PROFILES), contexts, concurrency)
def test_more_context_or_sequences_never_needs_less_memory(model: str, context: int, seqs: int) -> None:
    try:
        base = _plan(model, context, seqs)
        # At the same scheduler chunk: a plan that only fits with a smaller one (its windows reserved for fewer
        # tokens in flight) may need less, and says so in its reasons.
        chunk = base.max_num_batched_tokens
        more_ctx = _plan(model, context * 2, seqs, max_num_batched_tokens=chunk)
        more_seqs = _plan(model, context, seqs + 1, max_num_batched_tokens=chunk)
    except PlanError:
        return
    base_total = base.memory.kv + base.memory.activation + base.memory.cudagraph
    assert more_ctx.memory.kv + more_ctx.memory.activation + more_ctx.memory.cudagraph >= base_total - 1e-9
    assert more_seqs.memory.kv >= base.memory.kv - 1e-9
    assert more_seqs.gpu_memory_utilization >= base.gpu_memory_utilization


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(PROFILES), contexts, concurrency, profiles)
def test_no_plan_exceeds_the_caps(model: str, context: int, seqs: int, profile: str) -> None:
    try:
        result = _plan(model, context, seqs, profile)
    except PlanError:
        return
    m = result.memory
    assert result.gpu_memory_utilization <= GB10_MAX_UTILIZATION
    assert m.headroom >= -1e-6
    assert result.kv_cache_memory_bytes <= result.gpu_memory_utilization * m.total * GIB
    assert result.max_concurrency_at_context >= result.max_num_seqs - 1e-9


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(PROFILES), st.text(alphabet="abcdefXYZ0123456789", min_size=12, max_size=40))
def test_argv_never_holds_a_secret(model: str, secret: str) -> None:
    result = _plan(model, 8192, 1, api_key=True)
    joined = " ".join(result.argv) + " ".join(result.env.values())
    assert "--api-key" not in result.argv
    assert secret not in joined
    assert "VLLM_API_KEY" in result.secret_env


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(PROFILES), contexts, concurrency, profiles)
def test_argv_and_env_are_made_from_the_plans_reasoned_settings(model: str, context: int, seqs: int, profile: str) -> None:
    try:
        planned = _plan(model, context, seqs, profile)
    except PlanError:
        return
    assert planned.argv == command_line(planned.model, planned.flags)
    assert planned.env == {e.name: e.value for e in planned.environment}
    assert all(f.reason and f.source for f in planned.flags) and all(e.reason and e.source for e in planned.environment)
    assert planned.runner == ("pooling" if planned.flag("--runner") == ["pooling"] else "generate")


def test_a_plan_whose_argv_disagrees_with_its_flags_is_refused() -> None:
    planned = _plan(PROFILES[0], 8192, 1)
    data = planned.model_dump(mode="json")
    data["argv"] = [*data["argv"], "--enforce-eager"]
    with pytest.raises(ValueError, match="argv is made from the flags"):
        ServePlan.model_validate(data)
