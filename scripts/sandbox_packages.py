"""Print the Debian packages the roles install on a cpu-platform sandbox host, read from the roles themselves.

The fleet and cluster scenarios boot from an image that already holds them (`scripts/sandbox image packaged`), so
that the suite installs them once; the default scenario boots from the bare image and keeps the claim that a
converge installs what is missing. Two lines: the packages apt installs with their recommends (vllm_install's
platform list, installed as the role does, with apt's default), then those installed without (the door's and the
cluster link tool's, installed by their roles with install_recommends false). Monitoring's packages are not in
it: the scenarios that boot from this image run neither node_exporter nor Prometheus.

    uv run python scripts/sandbox_packages.py
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import yaml

ROLES = Path(__file__).resolve().parent.parent / "roles"


def _read(role: str, kind: str) -> dict[str, Any]:
    loaded = yaml.safe_load((ROLES / role / kind / "main.yml").read_text(encoding="utf-8"))
    if not isinstance(loaded, dict):
        raise SystemExit(f"roles/{role}/{kind}/main.yml holds no variables")
    return loaded


def _render(expression: str, **context: Any) -> str:
    return jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(expression).render(**context)


def link_package() -> str:
    """The cluster link tool's package on a sandbox link, which has no RDMA device (ray_cluster_hcas is empty)."""
    ray = _read("ray_cluster", "vars")
    tool = _render(ray["__ray_cluster_link_tool"], ray_cluster_hcas=[])
    return _render(ray["__ray_cluster_link_package"], __ray_cluster_link_tool=tool)


def main() -> None:
    with_recommends: list[str] = _read("vllm_install", "vars")["__vllm_install_os_packages"]["cpu"]
    without = [*_read("front_door", "defaults")["front_door_packages"], link_package()]
    print(" ".join(with_recommends))
    print(" ".join(package for package in without if package not in with_recommends))


if __name__ == "__main__":
    main()
