"""The GPU metrics collector (roles/monitoring/files/sparkfleet_gpu_metrics.py) on recorded nvidia-smi output."""

from __future__ import annotations

import re
import stat
from pathlib import Path

from conftest import load_file
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "tests/fixtures/nvidia-h100-driver580"
GB10 = ROOT / "tests/fixtures/gb10-built"


gpu = load_file("roles/monitoring/files/sparkfleet_gpu_metrics.py")
SAMPLE = re.compile(r"^(?P<name>[a-z_]+)(\{(?P<labels>[^}]*)\})? (?P<value>-?[0-9.e+]+)$")


def samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, f"not a Prometheus sample: {line!r}"
        reason = re.search(r'reason="([^"]*)"', match.group("labels") or "")
        out[match.group("name") + (f"/{reason.group(1)}" if reason else "")] = float(match.group("value"))
    return out


def test_the_fields_are_the_ones_recorded_from_a_real_driver_580() -> None:
    header = (H100 / "query-metrics-header.csv").read_text().splitlines()[0]
    names = [cell.strip().split(" [")[0] for cell in header.split(",")]
    assert names == [{"clocks.sm": "clocks.current.sm"}.get(f, f) for f in gpu.FIELDS]


def test_an_h100_under_load_is_power_capped_at_full_clock() -> None:
    found = samples(gpu.render(gpu.parse((H100 / "query-metrics-load.csv").read_text())))
    assert found["sparkfleet_gpu_present"] == 1
    assert found["sparkfleet_gpu_power_watts"] == 697.56 and found["sparkfleet_gpu_power_limit_watts"] == 700
    assert found["sparkfleet_gpu_utilization_ratio"] == 1 and found["sparkfleet_gpu_sm_clock_mhz"] == 1410
    assert found["sparkfleet_gpu_clock_event_active/sw_power_cap"] == 1
    assert found["sparkfleet_gpu_clock_event_active/gpu_idle"] == 0


def test_the_collector_on_the_real_gpu_wrote_the_series_it_writes_from_the_recording() -> None:
    # Two readings seconds apart under the same load: the same series and the same capped, busy state.
    on_device = samples((H100 / "collector-load.prom").read_text())
    recorded = samples(gpu.render(gpu.parse((H100 / "query-metrics-load.csv").read_text())))
    assert set(on_device) == set(recorded)
    for series in ("sparkfleet_gpu_present", "sparkfleet_gpu_utilization_ratio", "sparkfleet_gpu_sm_clock_max_mhz"):
        assert on_device[series] == recorded[series]
    assert (
        on_device["sparkfleet_gpu_clock_event_active/sw_power_cap"]
        == recorded["sparkfleet_gpu_clock_event_active/sw_power_cap"]
        == 1
    )


def test_an_idle_h100_says_why_its_clock_is_low() -> None:
    found = samples(gpu.render(gpu.parse((H100 / "query-metrics-idle.csv").read_text())))
    assert found["sparkfleet_gpu_clock_event_active/gpu_idle"] == 1 and found["sparkfleet_gpu_utilization_ratio"] == 0


def test_a_field_the_gpu_does_not_report_is_left_out_not_zero() -> None:
    text = gpu.render(gpu.parse((GB10 / "query-metrics-wedged.csv").read_text()))
    found = samples(text)
    assert "sparkfleet_gpu_power_limit_watts" not in found and "power_limit" not in text
    assert found["sparkfleet_gpu_power_watts"] == 20.31 and found["sparkfleet_gpu_sm_clock_mhz"] == 702
    assert found["sparkfleet_gpu_utilization_ratio"] == 0.96


def test_a_host_without_a_gpu_still_gets_a_file(tmp_path: Path) -> None:
    out = tmp_path / "gpu.prom"
    assert gpu.main(["x", str(out), str(tmp_path / "no-nvidia-smi")]) == 0
    assert samples(out.read_text()) == {"sparkfleet_gpu_present/no nvidia-smi on this host": 0}
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_a_failing_nvidia_smi_is_reported_with_its_words(tmp_path: Path) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\nexit 9\n"
    )
    smi.chmod(0o755)
    out = tmp_path / "gpu.prom"
    gpu.main(["x", str(out), str(smi)])
    assert 'reason="nvidia-smi failed: NVIDIA-SMI has failed because it could not communicate' in out.read_text()


def test_a_replayed_nvidia_smi_is_read_like_the_real_one(tmp_path: Path) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat {H100 / 'query-metrics-load.csv'}\n")
    smi.chmod(0o755)
    out = tmp_path / "gpu.prom"
    gpu.main(["x", str(out), str(smi)])
    assert samples(out.read_text())["sparkfleet_gpu_power_watts"] == 697.56


# One sample of the Prometheus text format: label values quoted, with backslash escapes only.
VALID = re.compile(r'[a-z_]+(\{[a-z_]+="(?:[^"\\\n]|\\.)*"(?:,[a-z_]+="(?:[^"\\\n]|\\.)*")*\})? -?[0-9.e+]+')


@given(name=st.text(max_size=40), reason=st.text(max_size=60))
def test_any_gpu_name_or_reason_stays_one_valid_sample(name: str, reason: str) -> None:
    row = dict.fromkeys(gpu.FIELDS, "Active") | {"index": "0", "name": name}
    text = gpu.render([row]) + gpu.render([], reason)
    for line in text.split("\n")[:-1]:
        assert line.startswith("# ") or VALID.fullmatch(line), repr(line)
