"""The GPU alerts (and the instance-down alert) run by promtool (Debian's, scripts/lib.sh ensure_promtool) over recorded nvidia-smi readings.

Series come from the collector itself (roles/monitoring/files/sparkfleet_gpu_metrics.py) rendering the
real H100 captures and the built GB10 one, labelled as node_exporter's scrape labels them. The rules are
the exact alert expressions sparkfleet.hostconfig.monitoring writes, without their annotations (promtool compares
annotations too, and those only template the numbers).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_gpu_metrics import GB10, H100, gpu

from sparkfleet.boundary import adapters
from sparkfleet.hostconfig.monitoring import VLLM_JOB, rules_document, scrape_targets, thresholds

ROOT = Path(__file__).resolve().parents[2]
PROMTOOL = ROOT / ".cache/promtool/usr/bin/promtool"
GPU_ALERTS = ("SparkfleetGpuClockStuckLow", "SparkfleetGpuBusyAtLowPower", "SparkfleetGpuThermalSlowdown")
SCRAPE = {"instance": "spark01:9100", "job": "sparkfleet-node", "sparkfleet_host": "spark01"}
SAMPLE = re.compile(r"^(?P<series>[a-z_]+\{[^}]*\}) (?P<value>\S+)$")


def promtool() -> str:
    found = str(PROMTOOL) if PROMTOOL.exists() else shutil.which("promtool")
    if not found:
        # Under CI=true the suite's skip hook turns this into a failure naming ensure_promtool (tests/suite/ci_skips.py).
        pytest.skip("no promtool here: run scripts/test, or source scripts/lib.sh and ensure_promtool")
    return found


def series_of(csv_text: str, minutes: int = 10) -> list[dict[str, str]]:
    """The collector's samples of one reading, held for `minutes` at a 15 s scrape."""
    scrape = ",".join(f'{k}="{v}"' for k, v in SCRAPE.items())
    out = []
    for line in gpu.render(gpu.parse(csv_text)).splitlines():
        match = SAMPLE.match(line)
        if match:
            series = match.group("series").replace("{", "{" + scrape + ",", 1)
            out.append({"series": series, "values": f"{match.group('value')}x{minutes * 4}"})
    return out


def thermal(csv_text: str) -> str:
    """The H100 load reading with its hardware thermal slowdown active (built from the real one)."""
    cells = [cell.strip() for cell in csv_text.strip().split(",")]
    cells[gpu.FIELDS.index("clocks_event_reasons.hw_thermal_slowdown")] = "Active"
    return ", ".join(cells) + "\n"


def expected(alert: str, name: str) -> dict[str, Any]:
    severity = {"SparkfleetGpuThermalSlowdown": "warning"}.get(alert, "critical")
    labels = {**SCRAPE, "gpu": "0", "severity": severity}
    if alert != "SparkfleetGpuThermalSlowdown":  # max by () keeps only the grouping labels
        labels |= {"job": "sparkfleet-node", "name": name}
    else:
        labels.pop("job")
    return {"exp_labels": labels}


CASES = {
    # case: (reading, GPU name, alerts firing after 10 minutes)
    "a wedged GB10: 96 % busy at 20 W, the clock at 702 MHz": (
        (GB10 / "query-metrics-wedged.csv").read_text(),
        "NVIDIA GB10",
        {"SparkfleetGpuClockStuckLow", "SparkfleetGpuBusyAtLowPower"},
    ),
    "an H100 at full load, power-capped": ((H100 / "query-metrics-load.csv").read_text(), "NVIDIA H100 80GB HBM3", set()),
    "an idle H100": ((H100 / "query-metrics-idle.csv").read_text(), "NVIDIA H100 80GB HBM3", set()),
    "an H100 at load in a thermal slowdown": (
        thermal((H100 / "query-metrics-load.csv").read_text()),
        "NVIDIA H100 80GB HBM3",
        {"SparkfleetGpuThermalSlowdown"},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_gpu_alerts_fire_exactly_when_the_reading_says_so(case: str, tmp_path: Path) -> None:
    reading, name, firing = CASES[case]
    rules = [r for r in rules_document(thresholds({}))["groups"][1]["rules"] if r["alert"] in GPU_ALERTS]
    assert {r["alert"] for r in rules} == set(GPU_ALERTS)
    for rule in rules:
        rule.pop("annotations")
    (tmp_path / "rules.yml").write_text(json.dumps({"groups": [{"name": "gpu", "rules": rules}]}))
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "15s",
        "tests": [
            {
                "interval": "15s",
                "input_series": series_of(reading),
                "alert_rule_test": [
                    # Nothing before the sustained_for window (5m) has passed, then exactly the expected alerts.
                    *({"eval_time": "4m", "alertname": alert, "exp_alerts": []} for alert in GPU_ALERTS),
                    *(
                        {
                            "eval_time": "10m",
                            "alertname": alert,
                            "exp_alerts": [expected(alert, name)] if alert in firing else [],
                        }
                        for alert in GPU_ALERTS
                    ),
                ],
            }
        ],
    }
    (tmp_path / "tests.yml").write_text(json.dumps(tests))
    done = subprocess.run(
        [promtool(), "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_down_instance_alerts_unless_the_front_door_switches_it(tmp_path: Path) -> None:
    """The targets as scrape_targets labels them: an on-demand instance is down between uses by design."""
    hosts = {
        "spark01": adapters.scraped_host(
            {"instances": [{"name": "chat", "port": 8000}, {"name": "coder", "port": 8001, "on_demand": True}]},
            "spark01",
        )
    }
    groups = scrape_targets("spark01", hosts, 9100)["vllm"]
    rules = [r for r in rules_document(thresholds({}))["groups"][1]["rules"] if r["alert"] == "SparkfleetVllmDown"]
    assert len(rules) == 1
    rules[0].pop("annotations")
    (tmp_path / "rules.yml").write_text(json.dumps({"groups": [{"name": "vllm", "rules": rules}]}))
    series = []
    for group in groups:
        labels = {**group["labels"], "job": VLLM_JOB, "instance": group["targets"][0]}
        series.append({"series": "up{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "values": "0x40"})
    chat = next(g["labels"] for g in groups if g["labels"]["sparkfleet_instance"] == "chat")
    assert next(g for g in groups if g["labels"]["sparkfleet_instance"] == "coder")["labels"]["sparkfleet_on_demand"]
    fired = {**chat, "job": VLLM_JOB, "instance": "127.0.0.1:8000", "severity": "critical"}
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "15s",
        "tests": [
            {
                "interval": "15s",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": "5m", "alertname": "SparkfleetVllmDown", "exp_alerts": [{"exp_labels": fired}]}
                ],
            }
        ],
    }
    (tmp_path / "tests.yml").write_text(json.dumps(tests))
    done = subprocess.run(
        [promtool(), "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
