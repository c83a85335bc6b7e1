"""The front door's metrics from its access log (roles/front_door/files/sparkfleet_door_metrics.py)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from conftest import load_file
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkfleet.hostconfig.monitoring import ALERTS, RECORDINGS, Thresholds

ROOT = Path(__file__).resolve().parents[2]


metrics = load_file("roles/front_door/files/sparkfleet_door_metrics.py")

# Lines as the door wrote them on the sandbox host (its log_format), with the models it serves.
HEALTH = (
    '{"time":"2026-11-23T18:34:17+00:00","remote":"127.0.0.1","client":"","model":"","instance":"","method":"GET",'
    '"path":"/health","status":200,"request_bytes":120,"response_bytes":138,"latency_s":0.001,"upstream_s":""}'
)
NO_KEY = (
    '{"time":"2026-11-23T18:34:27+00:00","remote":"127.0.0.1","client":"","model":"","instance":"","method":"POST",'
    '"path":"/invocations","status":401,"request_bytes":68,"response_bytes":253,"latency_s":0.000,"upstream_s":""}'
)
CHAT = (
    '{"time":"2026-11-23T18:34:28+00:00","remote":"127.0.0.1","client":"sandbox","model":"sandbox/tiny-llama",'
    '"instance":"tiny","method":"POST","path":"/v1/completions","status":200,"request_bytes":191,"response_bytes":238,'
    '"latency_s":0.731,"upstream_s":"0.730"}'
)
MADE_UP = (
    '{"time":"2026-11-23T18:34:28+00:00","remote":"127.0.0.1","client":"sandbox","model":"x\\"} 1e9","instance":"",'
    '"method":"POST","path":"/v1/chat/completions","status":404,"request_bytes":151,"response_bytes":237,'
    '"latency_s":0.000,"upstream_s":""}'
)
RESTARTING = CHAT.replace('"status":200', '"status":503').replace('"latency_s":0.731', '"latency_s":0.002')


def run(tmp_path: Path, *chunks: str) -> str:
    config = tmp_path / "metrics.json"
    config.write_text(json.dumps({"models": ["sandbox/tiny-llama"], "clients": ["sandbox"]}))
    log, state, out = tmp_path / "access.log", tmp_path / "state.json", tmp_path / "door.prom"
    for chunk in chunks:
        with log.open("a") as handle:
            handle.write(chunk)
        metrics.main(str(config), str(log), str(state), str(out))
    return out.read_text()


def sample(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = "^" + re.escape(f"{name}{{{wanted}}}" if labels else name) + r" (\S+)$"
    match = re.search(pattern, text, re.MULTILINE)
    assert match, f"{name}{labels} not in output"
    return float(match.group(1))


def test_counts_by_model_client_and_class_across_runs(tmp_path: Path) -> None:
    text = run(tmp_path, HEALTH + "\n" + NO_KEY + "\n", CHAT + "\n" + MADE_UP + "\n" + RESTARTING + "\n")
    assert sample(text, "sparkfleet_door_requests_total", model="sandbox/tiny-llama", client="sandbox", code="2xx") == 1
    assert sample(text, "sparkfleet_door_requests_total", model="sandbox/tiny-llama", client="sandbox", code="5xx") == 1
    assert sample(text, "sparkfleet_door_requests_total", model="(none)", client="(none)", code="4xx") == 1
    assert sample(text, "sparkfleet_door_requests_total", model="(none)", client="sandbox", code="4xx") == 1
    assert sample(text, "sparkfleet_door_auth_failures_total") == 1
    labels = {"model": "sandbox/tiny-llama", "client": "sandbox"}
    assert sample(text, "sparkfleet_door_request_duration_seconds_bucket", **labels, le="0.5") == 1
    assert sample(text, "sparkfleet_door_request_duration_seconds_bucket", **labels, le="1.0") == 2
    assert sample(text, "sparkfleet_door_request_duration_seconds_count", **labels) == 2
    assert sample(text, "sparkfleet_door_response_bytes_total", **labels) == 476


def test_a_model_name_a_client_made_up_never_becomes_a_label(tmp_path: Path) -> None:
    text = run(tmp_path, MADE_UP + "\n")
    assert "1e9" not in text
    assert {m.group(1) for m in re.finditer(r'model="([^"]*)"', text)} == {"sandbox/tiny-llama", "(none)"}


def test_every_series_exists_before_any_traffic_in_a_file_node_exporter_reads(tmp_path: Path) -> None:
    old = os.umask(0o077)  # the unit's UMask
    try:
        text = run(tmp_path, "")
    finally:
        os.umask(old)
    assert (tmp_path / "door.prom").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "state.json").stat().st_mode & 0o777 == 0o600
    assert sample(text, "sparkfleet_door_requests_total", model="sandbox/tiny-llama", client="sandbox", code="5xx") == 0
    assert sample(text, "sparkfleet_door_auth_failures_total") == 0


def test_a_half_written_line_waits_and_a_rotation_is_followed(tmp_path: Path) -> None:
    text = run(tmp_path, CHAT + "\n" + CHAT[:40])
    assert sample(text, "sparkfleet_door_request_duration_seconds_count", model="sandbox/tiny-llama", client="sandbox") == 1
    log = tmp_path / "access.log"
    with log.open("a") as handle:
        handle.write(CHAT[40:] + "\n" + CHAT + "\n")
    os.rename(log, tmp_path / "access.log.1")  # logrotate: the rest of this file is read first
    text = run(tmp_path, CHAT + "\n")
    assert sample(text, "sparkfleet_door_request_duration_seconds_count", model="sandbox/tiny-llama", client="sandbox") == 4


def test_what_the_alerts_watch_is_what_the_door_writes(tmp_path: Path) -> None:
    text = run(tmp_path, CHAT + "\n")
    written = set(re.findall(r"^# TYPE (\S+)", text, re.MULTILINE))
    watched = {
        name
        for expr in [r.expr for r in RECORDINGS] + [a.expr(Thresholds()) for a in ALERTS]
        for name in re.findall(r"\b(sparkfleet_door_[a-z_]+)", expr)
    }
    assert watched and watched <= written | {n + "_bucket" for n in written}


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_any_line_is_counted_or_skipped_never_fatal(line: str) -> None:
    state = metrics.empty_state()
    metrics.account(state, line, {"m"}, {"c"})
    text = metrics.render(state, ["m"], ["c"])
    assert text.endswith(f"sparkfleet_door_auth_failures_total {state['auth_failures']}\n")
