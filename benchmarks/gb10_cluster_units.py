"""systemd's verdict on the gb10 Ray units of a cluster member, rendered offline: verify, and the exposure score.

    uv run python benchmarks/gb10_cluster_units.py

Renders roles/ray_cluster/templates/ray.service.j2 with Ansible's templar and this collection's filters for a
DGX Spark head and worker whose ConnectX-7 exposes four verbs nodes and rdma_cm, and, for comparison, for a
member without RDMA nodes. Each unit is checked with `systemd-analyze verify` (its complaints about the unit,
none expected) and rated with `systemd-analyze security --offline=true` (0 = locked down, 10 = unsafe). The
scores are this machine's systemd reading the files, not a Spark's running units.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS = ROOT / ".cache" / "pytest-collections"
TEMPLATE = ROOT / "roles" / "ray_cluster" / "templates" / "ray.service.j2"
RDMA = [f"/dev/infiniband/uverbs{i}" for i in range(4)] + ["/dev/infiniband/rdma_cm"]
RENDER = r"""
import json, sys
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template
init_plugin_loader([sys.argv[1]])
request = json.load(sys.stdin)
variables = {k: trust_as_template(v) if k in request["templates"] else v for k, v in request["vars"].items()}
print(Templar(loader=DataLoader(), variables=variables).template(trust_as_template(open(sys.argv[2]).read()),
                                                                 escape_backslashes=False))
"""


def defaults() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for role in ("sparkfleet", "ray_cluster"):
        out.update(yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {})
    return out


def render(role: str, rdma: list[str], release: Path) -> str:
    values = defaults()
    values |= {
        "ansible_managed": "Ansible managed",
        "__ray_cluster_role": role,
        "ray_cluster_head": "spark01",
        "__ray_cluster_members": ["spark01", "spark02"],
        "__ray_cluster_release": {"id": "gb10-0.32.0-abc", "path": str(release)},
        "__ray_cluster_address": "192.168.100.1" if role == "head" else "192.168.100.2",
        "__ray_cluster_head_address": "192.168.100.1",
        "sparkfleet_cluster_link_peers": ["192.168.100.1", "192.168.100.2"],
        "sparkfleet_service_cache_paths": ["/var/cache/sparkfleet"],
        "sparkfleet_facts": {"platform": "gb10", "rdma_devices": rdma},
    }
    templates = [key for key, value in values.items() if isinstance(value, str) and "{{" in value]
    done = subprocess.run(
        [sys.executable, "-c", RENDER, str(COLLECTIONS), str(TEMPLATE)],
        input=json.dumps({"vars": values, "templates": templates}),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def main() -> None:
    if not (COLLECTIONS / "ansible_collections" / "sparkfleet" / "vllm").exists():
        raise SystemExit("run the unit tests once first: they lay the collection out under .cache/pytest-collections")
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        raise SystemExit("systemd-analyze is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        release = Path(tmp) / "release"
        (release / "bin").mkdir(parents=True)
        (release / "bin" / "ray").write_text("#!/bin/sh\n")
        (release / "bin" / "ray").chmod(0o755)
        print(f"{'unit':<40} {'verify':<10} {'exposure':<12} memlock  RDMA nodes allowed")
        for role in ("head", "worker"):
            for rdma in (RDMA, []):
                unit = Path(tmp) / f"sparkfleet-ray-{role}{'-rdma' if rdma else ''}.service"
                text = render(role, rdma, release)
                unit.write_text(text)
                verify = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, check=False)
                complaints = [line for line in verify.stderr.splitlines() if unit.name in line]
                security = subprocess.run(
                    [analyze, "security", "--offline=true", "--no-pager", str(unit)],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                score = re.search(r"exposure level for \S+: ([0-9.]+) (\S+)", security.stdout)
                allowed = len(re.findall(r"^DeviceAllow=/dev/infiniband/", text, re.M))
                memlock = re.search(r"^LimitMEMLOCK=(\S+)", text, re.M)
                print(
                    f"{unit.name:<40} {'clean' if not complaints else f'{len(complaints)} issues':<10} "
                    f"{score.group(1) + ' ' + score.group(2) if score else '?':<12} "
                    f"{memlock.group(1) if memlock else 'default':<8} {allowed}"
                )
                for line in complaints:
                    print(f"    {line}")


if __name__ == "__main__":
    main()
