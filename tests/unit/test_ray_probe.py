"""The cluster probe that runs on the hosts (roles/ray_cluster/files/sparkfleet_ray.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).resolve().parents[2] / "roles/ray_cluster/files/sparkfleet_ray.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True, timeout=30, check=False)


def test_reach_succeeds_from_the_given_source_address() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        result = run("reach", "--source", "127.0.0.1", "--target", f"127.0.0.1:{port}", "--timeout", "5")
    assert result.returncode == 0
    assert json.loads(result.stdout) == {"reached": f"127.0.0.1:{port}", "from": "127.0.0.1"}


def test_reach_fails_naming_the_target_and_the_source() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: refused
    result = run("reach", "--source", "127.0.0.1", "--target", f"127.0.0.1:{port}", "--timeout", "1")
    assert result.returncode == 1
    assert f"127.0.0.1:{port} does not answer from 127.0.0.1" in result.stderr
    assert json.loads(result.stdout)["reached"] is None
