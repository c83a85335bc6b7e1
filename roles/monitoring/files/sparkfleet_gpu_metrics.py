"""GPU power, clocks, temperature, utilisation and clock-event reasons, for node_exporter's textfile collector.

A wedged GB10 can keep /health green at 96 % utilisation and 20 W, or sit at a low clock until it is
power-cycled; vLLM's own metrics show neither. Run by sparkfleet-gpu-metrics.timer: asks nvidia-smi
for FIELDS once and rewrites OUT atomically. A host without nvidia-smi (the cpu platform) or a failed
query still gets a file (sparkfleet_gpu_present 0, with the reason), so the series exist everywhere
and an alert can tell "no GPU" from "no data". A field the GPU does not report ([N/A] on GB10's
memory, say) is left out rather than written as 0. Standard library only: it runs on the host.

Usage: python3 sparkfleet_gpu_metrics.py OUT [NVIDIA_SMI]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

# Each query field (driver 580's names; `nvidia-smi --help-query-gpu`) and its metric, or None for a label.
GAUGES = (
    ("power.draw", "sparkfleet_gpu_power_watts", 1.0),
    ("power.limit", "sparkfleet_gpu_power_limit_watts", 1.0),
    ("clocks.sm", "sparkfleet_gpu_sm_clock_mhz", 1.0),
    ("clocks.max.sm", "sparkfleet_gpu_sm_clock_max_mhz", 1.0),
    ("temperature.gpu", "sparkfleet_gpu_temperature_celsius", 1.0),
    ("utilization.gpu", "sparkfleet_gpu_utilization_ratio", 0.01),
)
# Why the clock is below its maximum; each 1 while active (the clocks_throttle_reasons.* of older drivers).
REASONS = (
    "gpu_idle",
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
    "sw_power_cap",
)
# The active bitmask is asked for (it names reasons newer drivers add) but not published.
FIELDS = (
    "index",
    "name",
    *(gauge[0] for gauge in GAUGES),
    "clocks_event_reasons.active",
    *(f"clocks_event_reasons.{reason}" for reason in REASONS),
)
HELP = {
    "sparkfleet_gpu_present": "1 when nvidia-smi answered for this host's GPUs, 0 with the reason otherwise",
    "sparkfleet_gpu_power_watts": "board power draw",
    "sparkfleet_gpu_power_limit_watts": "the power limit the driver enforces",
    "sparkfleet_gpu_sm_clock_mhz": "current SM clock",
    "sparkfleet_gpu_sm_clock_max_mhz": "maximum SM clock",
    "sparkfleet_gpu_temperature_celsius": "GPU temperature",
    "sparkfleet_gpu_utilization_ratio": "share of the last sample period a kernel ran (0-1)",
    "sparkfleet_gpu_clock_event_active": "1 while a reason holds the SM clock below its maximum",
}
MISSING = ("[N/A]", "[Not Supported]", "N/A", "")


def _escape(value: str) -> str:
    """A label value on one line: unprintable characters (a newline, a record separator) become spaces."""
    printable = "".join(ch if ch.isprintable() else " " for ch in value)
    return printable.replace("\\", "\\\\").replace('"', '\\"')


def _number(text: str) -> float | None:
    text = text.strip()
    if text in MISSING:
        return None
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return None


def parse(csv_text: str) -> list[dict[str, str]]:
    """Rows of `--format=csv,noheader,nounits` output, keyed by FIELDS; a short row is skipped."""
    rows = []
    for line in csv_text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) == len(FIELDS):
            rows.append(dict(zip(FIELDS, cells, strict=True)))
    return rows


def render(rows: list[dict[str, str]], absent: str | None = None) -> str:
    """The textfile: sparkfleet_gpu_present, then one sample per reported field of each GPU."""
    samples: dict[str, list[str]] = {name: [] for name in HELP}
    if absent is not None or not rows:
        reason = absent or "nvidia-smi reported no GPU"
        samples["sparkfleet_gpu_present"].append(f'sparkfleet_gpu_present{{reason="{_escape(reason)}"}} 0')
    else:
        samples["sparkfleet_gpu_present"].append("sparkfleet_gpu_present 1")
    for row in rows:
        labels = f'gpu="{_escape(row["index"])}",name="{_escape(row["name"])}"'
        for field, metric, scale in GAUGES:
            value = _number(row[field])
            if value is not None:
                samples[metric].append(f"{metric}{{{labels}}} {value * scale:g}")
        for reason in REASONS:
            state = row[f"clocks_event_reasons.{reason}"]
            if state in ("Active", "Not Active"):
                active = 1 if state == "Active" else 0
                samples["sparkfleet_gpu_clock_event_active"].append(
                    f'sparkfleet_gpu_clock_event_active{{{labels},reason="{reason}"}} {active}'
                )
    lines = []
    for name, values in samples.items():
        if values:
            lines += [f"# HELP {name} {HELP[name]}", f"# TYPE {name} gauge", *values]
    return "\n".join(lines) + "\n"


def query(nvidia_smi: str) -> tuple[list[dict[str, str]], str | None]:
    """(rows, None), or ([], why there are none)."""
    if not shutil.which(nvidia_smi):
        return [], "no nvidia-smi on this host"
    try:
        done = subprocess.run(
            [nvidia_smi, f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"nvidia-smi failed: {type(exc).__name__}"
    if done.returncode != 0:
        first = (done.stdout.strip() or done.stderr.strip() or f"exit {done.returncode}").splitlines()[0]
        return [], f"nvidia-smi failed: {first[:120]}"
    return parse(done.stdout), None


def write_atomically(path: str, text: str) -> None:
    temporary = f"{path}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    os.fchmod(descriptor, 0o644)  # the unit's UMask would narrow it: node_exporter reads this file
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    rows, absent = query(argv[2] if len(argv) == 3 else "nvidia-smi")
    write_atomically(argv[1], render(rows, absent))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
