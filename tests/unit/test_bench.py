"""Benchmark summaries that can be compared (issue 20, part 6): median and spread of repeated runs,
what they ran under, and `sparkfleet bench compare A B`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkfleet.bench import (
    START_KEYS,
    compare,
    digest,
    predicted_aggregate,
    prometheus_text,
    record,
    spread,
    summary,
    thinking_args,
)
from sparkfleet.bench_offline import SERVE_ONLY_FLAGS, offline_argv, offline_result, offline_unit_words
from sparkfleet.cli import main
from sparkfleet.errors import PlanError

JOURNAL = (
    "INFO 11-24 09:12:01 [cuda.py:507] Using TRITON_ATTN attention backend out of potential backends: ['TRITON_ATTN'].\n"
    "INFO 11-24 09:12:02 [fused_moe.py:88] Using 'MARLIN' NvFp4 MoE backend out of potential backends: ['MARLIN'].\n"
)
PLAN = {
    "served_name": "qwen", "platform": "gb10", "vllm_version": "0.32.0", "max_model_len": 65536, "max_num_seqs": 4,
    "kv_cache_dtype": "fp8", "argv": ["vllm", "serve", "/m/q", "--max-model-len", "65536"], "env": {"VLLM_X": "1"},
}  # fmt: skip
RELEASE = {
    "id": "gb10-0.32.0-abc",
    "vllm_version": "0.32.0",
    "lock_packages": {"vllm": "0.32.0", "torch": "2.13.0", "six": "1"},
}


def run(throughput: float, ttft: float, completed: int = 4) -> dict[str, Any]:
    return {"output_throughput": throughput, "total_token_throughput": throughput * 9, "mean_ttft_ms": ttft,
            "p99_ttft_ms": ttft * 2, "mean_tpot_ms": 20.0, "completed": completed, "failed": 0}  # fmt: skip


def made(throughputs: list[float], release: dict[str, Any] = RELEASE, journal: str = JOURNAL) -> dict[str, Any]:
    runs = {1: [run(t, 100.0) for t in throughputs], 4: [run(t * 3, 300.0) for t in throughputs]}
    return summary(PLAN, release, journal, runs, input_len=1024, output_len=128)


def test_each_point_reports_the_median_and_spread_of_its_runs() -> None:
    result = made([50.0, 40.0, 45.0])
    one = result["levels"][0]
    assert one["concurrency"] == 1 and one["runs"] == 3 and one["failed"] == 0 and one["completed"] == [4, 4, 4]
    assert one["metrics"]["output_throughput"] == {
        "median": 45.0,
        "min": 40.0,
        "max": 50.0,
        "spread_pct": pytest.approx(22.22, 0.01),
        "runs": 3,
    }
    assert [level["concurrency"] for level in result["levels"]] == [1, 4]


def test_the_record_says_what_the_numbers_ran_under() -> None:
    setup = record(PLAN, RELEASE, JOURNAL)
    assert setup["release_id"] == "gb10-0.32.0-abc" and setup["packages"] == {"vllm": "0.32.0", "torch": "2.13.0"}
    assert setup["backends"] == {"attention backend": "TRITON_ATTN", "MoE backend": "MARLIN"}
    assert setup["argv_sha256"] == digest(PLAN["argv"]) and len(setup["env_sha256"]) == 16
    assert setup["graph_sizes"] == "vLLM default" and setup["enforce_eager"] is False


def test_the_record_reads_the_graph_sizes_and_eager_mode_the_plan_asked_for() -> None:
    flags = [
        {"name": "--cudagraph-capture-sizes", "values": ["1", "2", "4"], "reason": "r", "source": "s"},
        {"name": "--enforce-eager", "values": [], "reason": "r", "source": "s"},
    ]
    setup = record({**PLAN, "flags": flags}, RELEASE, JOURNAL)
    assert setup["graph_sizes"] == "1 2 4" and setup["enforce_eager"] is True


@given(st.lists(st.floats(min_value=0.01, max_value=1e6, allow_nan=False), min_size=1, max_size=9))
def test_the_median_lies_within_the_runs_and_the_spread_is_never_negative(values: list[float]) -> None:
    point = spread(values)
    assert point["min"] <= point["median"] <= point["max"] and point["spread_pct"] >= 0 and point["runs"] == len(values)


def test_compare_names_what_differs_and_marks_only_changes_beyond_the_noise() -> None:
    newer = {**RELEASE, "id": "gb10-0.32.0-def", "lock_packages": {"vllm": "0.32.0", "torch": "2.14.0"}}
    text = compare(made([50.0, 49.0, 51.0]), made([70.0, 69.0, 71.0], newer, JOURNAL.replace("MARLIN", "CUTLASS")))
    assert "release_id: gb10-0.32.0-abc -> gb10-0.32.0-def" in text
    assert "package torch: 2.13.0 -> 2.14.0" in text and "backend MoE backend: MARLIN -> CUTLASS" in text
    assert any(line.split()[:2] == ["1", "output_throughput"] and line.endswith("better") for line in text.splitlines())
    noisy = compare(made([50.0, 30.0, 70.0]), made([55.0, 35.0, 75.0]))
    assert "setup: the same release" in noisy and " better" not in noisy and " worse" not in noisy


def test_the_cli_compares_two_summaries_and_refuses_what_is_not_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "summary.json").write_text(json.dumps(made([50.0, 49.0, 51.0])))
    (tmp_path / "b.json").write_text(json.dumps(made([40.0, 39.0, 41.0])))
    assert main(["bench", "compare", str(tmp_path / "a"), str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert "worse" in out and "output_throughput" in out
    (tmp_path / "c.json").write_text(json.dumps({"levels": []}))
    assert main(["bench", "compare", str(tmp_path / "a"), str(tmp_path / "c.json")]) == 2
    assert "B: is not a sparkfleet benchmark summary" in capsys.readouterr().err


def test_the_filter_reads_the_loop_that_read_each_run() -> None:
    from bench_summary import bench_summary

    read = [{"item": [c, r], "stdout": json.dumps(run(10.0 * r, 100.0))} for c in (1, 2) for r in (1, 2, 3)]
    result = bench_summary(read, PLAN, RELEASE, JOURNAL, "1024", 32)
    assert [level["runs"] for level in result["levels"]] == [3, 3] and result["output_len"] == 32
    assert result["levels"][1]["metrics"]["output_throughput"]["median"] == 20.0


def test_the_summary_keeps_the_instances_last_start() -> None:
    """Issue 45: "no compile at first start" is kept with the numbers it was measured beside."""
    start = {"since": 12.0, "started_at": 1.0, "budget_s": 180, "socket_s": 1.8, "health_s": 23.3, "answer_s": 25.0,
             "kernels_compiled": {"flashinfer_jit": 0, "cute_dsl": 0, "torch_compile": 0}, "unit": "u"}  # fmt: skip
    made = summary({"argv": ["vllm", "serve", "m"]}, {}, "", {}, input_len=8, output_len=8, start=start)
    assert made["start"] == {k: start[k] for k in START_KEYS}
    assert summary({"argv": []}, {}, "", {}, input_len=8, output_len=8)["start"] is None


SPEED = {
    "aggregate": {"value": 100.0, "low": 80.0, "high": 125.0},
    "curve": [
        {"concurrency": 1, "aggregate_tps": 50.0, "per_user_tps": 50.0},
        {"concurrency": 2, "aggregate_tps": 80.0, "per_user_tps": 40.0},
        {"concurrency": 4, "aggregate_tps": 100.0, "per_user_tps": 25.0},
    ],
}


def test_a_run_is_held_against_the_plans_prediction() -> None:
    """Measured decode (the streams' own time per token) next to the prediction, per concurrency."""
    assert predicted_aggregate(SPEED, 3) == pytest.approx(90.0)
    assert predicted_aggregate(SPEED, 1) == 50.0 and predicted_aggregate(SPEED, 8) is None
    result = summary({**PLAN, "speed": SPEED}, RELEASE, JOURNAL, {1: [run(40.0, 100.0)]}, input_len=1024, output_len=128)
    held = result["against_prediction"]
    # 20 ms per token is 50 tok/s for one stream: as predicted.
    assert held["predicted"] and held["levels"] == [
        {"concurrency": 1, "measured_tps": 50.0, "predicted_tps": 50.0, "ratio": 1.0, "far_below": False}
    ]
    assert held["far_below"] is False and held["likely_causes"] == []


def test_a_run_far_below_its_prediction_names_what_slowed_it() -> None:
    slow = {**run(10.0, 100.0), "mean_tpot_ms": 100.0}
    eager_plan = {**PLAN, "speed": SPEED, "argv": [*PLAN["argv"], "--enforce-eager"], "flags": []}
    journal = JOURNAL + "INFO [nvfp4.py:12] Using 'MARLIN' NvFp4 linear backend out of potential backends: ['MARLIN'].\n"
    start = {key: None for key in START_KEYS} | {"kernels_compiled": 12}
    held = summary(eager_plan, RELEASE, journal, {1: [slow]}, input_len=1024, output_len=128, start=start)[
        "against_prediction"
    ]
    assert held["levels"][0]["ratio"] == 0.2 and held["far_below"]
    causes = " ".join(held["likely_causes"])
    assert "compiled 12 kernels" in causes


def test_a_cpu_run_is_never_held_against_a_spark_prediction() -> None:
    held = made([50.0])["against_prediction"]
    assert held["predicted"] is False and "platform gb10" in held["why"]
    cpu = summary({**PLAN, "platform": "cpu"}, RELEASE, "", {1: [run(5.0, 10.0)]}, input_len=1, output_len=1)
    assert "platform cpu" in cpu["against_prediction"]["why"]


def test_prometheus_gets_the_ratio_and_the_flag_only_where_a_speed_was_predicted() -> None:
    slow = {**run(10.0, 100.0), "mean_tpot_ms": 100.0}
    result = summary({**PLAN, "speed": SPEED}, RELEASE, JOURNAL, {1: [slow], 3: [slow]}, input_len=1, output_len=1)
    text = prometheus_text('co"der', result)
    assert 'sparkfleet_benchmark_decode_ratio{instance="co\\"der",concurrency="1"} 0.2' in text
    assert 'sparkfleet_benchmark_decode_ratio{instance="co\\"der",concurrency="3"} 0.333' in text
    assert 'sparkfleet_benchmark_far_below_prediction{instance="co\\"der"} 1' in text
    assert text.count("# TYPE") == 2 and text.endswith("\n")
    assert prometheus_text("coder", made([50.0])) == ""


def test_the_thinking_switch_goes_to_every_request_where_the_template_has_one() -> None:
    """Issue 49: a reasoning model measured thinking and not, the record saying which."""
    qwen = {**PLAN, "flags": [{"name": "--reasoning-parser", "values": ["qwen3"]}]}
    assert thinking_args(qwen, "default") == []
    words = thinking_args(qwen, "off")
    assert words[0] == "--extra-body" and json.loads(words[1]) == {"chat_template_kwargs": {"enable_thinking": False}}
    assert json.loads(thinking_args(qwen, "on")[1])["chat_template_kwargs"]["enable_thinking"] is True
    # The instance's own template defaults name the switch: a model with no parser still takes it.
    kwargs = {**PLAN, "flags": [{"name": "--default-chat-template-kwargs", "values": ['{"enable_thinking": false}']}]}
    assert thinking_args(kwargs, "on")
    with pytest.raises(PlanError, match=r"vllm_serve_benchmark_thinking: off: qwen's chat template .*no reasoning"):
        thinking_args(PLAN, "off")
    gptoss = {**PLAN, "flags": [{"name": "--reasoning-parser", "values": ["openai_gptoss"]}]}
    with pytest.raises(PlanError, match=r"\(reasoning parser openai_gptoss\); try default"):
        thinking_args(gptoss, "on")
    with pytest.raises(PlanError, match="'maybe' is not one of default, on, off"):
        thinking_args(qwen, "maybe")
    off = summary(qwen, RELEASE, JOURNAL, {1: [run(50.0, 100.0)]}, input_len=1024, output_len=128, thinking="off")
    assert off["record"]["thinking"] == "off" and made([50.0])["record"]["thinking"] == "default"
    assert "thinking: default -> off" in compare(made([50.0]), off)


SERVE_PLAN = {
    **PLAN,
    "model": "/m/q",
    "nodes": 1,
    "flags": [
        {"name": "--served-model-name", "values": ["qwen"]},
        {"name": "--host", "values": ["127.0.0.1"]},
        {"name": "--port", "values": ["8000"]},
        {"name": "--max-model-len", "values": ["65536"]},
        {"name": "--enable-prefix-caching", "values": []},
        {"name": "--reasoning-parser", "values": ["qwen3"]},
        {"name": "--enable-auto-tool-choice", "values": []},
        {"name": "--tool-call-parser", "values": ["qwen3_coder"]},
        {"name": "--default-chat-template-kwargs", "values": ['{"enable_thinking":true}']},
        {"name": "--cudagraph-capture-sizes", "values": ["1", "2", "4"]},
    ],
}


def test_the_offline_run_takes_the_plans_engine_arguments_and_leaves_the_front_end_out() -> None:
    """Issue 49: vllm bench throughput with the instance's engine, checked against vLLM's own parser in tests/vllm."""
    words = offline_argv(SERVE_PLAN, input_len=1024, output_len=128, num_prompts=16, output_json="/r/offline.json")
    assert words[:2] == ["bench", "throughput"]
    head = dict(zip(words[2:18:2], words[3:18:2], strict=True))
    assert head == {"--backend": "vllm", "--model": "/m/q", "--dataset-name": "random", "--random-input-len": "1024",
                    "--random-output-len": "128", "--num-prompts": "16", "--seed": "0", "--output-json": "/r/offline.json"}  # fmt: skip
    assert words[18:] == [
        "--served-model-name", "qwen", "--max-model-len", "65536", "--enable-prefix-caching",
        "--reasoning-parser", "qwen3", "--cudagraph-capture-sizes", "1", "2", "4",
    ]  # fmt: skip
    assert not SERVE_ONLY_FLAGS & set(words)


@pytest.mark.parametrize(
    ("update", "said"),
    [({"nodes": 2}, "served across 2 nodes"), ({"runner": "pooling"}, "is a pooling model")],
)
def test_an_offline_run_is_refused_where_one_nodes_engine_cannot_measure_it(update: dict[str, Any], said: str) -> None:
    with pytest.raises(PlanError, match=f"vllm_serve_benchmark_offline: .*{said}"):
        offline_argv({**SERVE_PLAN, **update}, input_len=8, output_len=8, num_prompts=1, output_json="/r/o.json")


def test_the_offline_run_gets_the_instance_units_environment_and_limits() -> None:
    show = (
        'Environment=HF_HOME=/var/lib/hf "VLLM_X=a b" VLLM_CACHE_ROOT=/var/cache/sparkfleet/i/tiny/vllm/rel-1\n'
        "MemoryMax=34359738368\nMemoryHigh=infinity\nLimitNOFILE=16384\n"
    )
    assert offline_unit_words(show) == [
        "--setenv", "HF_HOME=/var/lib/hf", "--setenv", "VLLM_X=a b",
        "--setenv", "VLLM_CACHE_ROOT=/var/cache/sparkfleet/i/tiny/vllm/rel-1",
        "--property", "MemoryMax=34359738368", "--property", "MemoryHigh=infinity", "--property", "LimitNOFILE=16384",
    ]  # fmt: skip
    assert offline_unit_words("Environment=\nMemoryMax=\n") == []


def test_the_summary_keeps_the_offline_run_and_the_record_says_which_ran() -> None:
    argv = offline_argv(SERVE_PLAN, input_len=1024, output_len=128, num_prompts=16, output_json="/r/o.json")
    vllm_wrote = {"elapsed_time": 8.0, "num_requests": 16, "total_num_tokens": 18432, "requests_per_second": 2.0,
                  "tokens_per_second": 2304.0}  # fmt: skip
    offline = offline_result(argv, vllm_wrote, 128)
    assert offline["output_tokens_per_second"] == 256.0 and offline["argv_sha256"] == digest(argv)
    runs = {1: [run(50.0, 100.0)]}
    both = summary(SERVE_PLAN, RELEASE, JOURNAL, runs, input_len=1024, output_len=128, offline=offline)
    served = summary(SERVE_PLAN, RELEASE, JOURNAL, runs, input_len=1024, output_len=128)
    assert both["record"]["modes"] == ["serve", "offline"] and both["offline"]["tokens_per_second"] == 2304.0
    assert served["record"]["modes"] == ["serve"] and served["offline"] is None
    assert "measured: serve -> serve+offline" in compare(served, both)
    faster = {**both, "offline": offline_result(argv, {**vllm_wrote, "elapsed_time": 4.0, "tokens_per_second": 4608.0}, 128)}
    table = compare(both, faster)
    assert "offline (vllm bench throughput" in table and "output_tokens_per_second" in table and "+100.0%" in table
    with pytest.raises(PlanError, match="vllm_serve_benchmark_offline: vllm bench throughput wrote no readable"):
        offline_result(argv, {"elapsed_time": 1.0}, 128)


def test_the_filter_adds_the_offline_run_it_read() -> None:
    from bench_summary import bench_summary

    argv = offline_argv(SERVE_PLAN, input_len=1024, output_len=32, num_prompts=16, output_json="/r/o.json")
    wrote = {"elapsed_time": 2.0, "num_requests": 16, "total_num_tokens": 1000, "requests_per_second": 8.0,
             "tokens_per_second": 500.0}  # fmt: skip
    read = [{"item": [1, 1], "stdout": json.dumps(run(10.0, 100.0))}]
    result = bench_summary(
        read, SERVE_PLAN, RELEASE, JOURNAL, 1024, 32, None, "default", {"argv": argv, "stdout": json.dumps(wrote)}
    )
    assert result["offline"]["output_tokens_per_second"] == 256.0 and result["record"]["modes"] == ["serve", "offline"]
