"""Cluster probes for the ray_cluster role.

reach: connect to the head's Ray port from this node's interconnect address (the link works).
status: connect to the cluster with Ray's own client and wait until it reports N live nodes;
        prints the nodes with their addresses and CPU / GPU counts as JSON. With --env-file, the
        cluster's environment (Ray's token authentication among it) is read from that file first,
        as the units read it, so no setting or secret travels on this command line.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time


def load_env_file(path: str) -> None:
    """KEY=VALUE lines of a systemd EnvironmentFile (comments and blank lines skipped) into os.environ."""
    with open(path, encoding="utf-8") as lines:
        for raw in lines:
            line = raw.strip()
            if line and not line.startswith("#") and "=" in line:
                name, value = line.split("=", 1)
                os.environ[name.strip()] = value.strip()


def reach(args: argparse.Namespace) -> int:
    host, port = args.target.rsplit(":", 1)
    deadline = time.monotonic() + args.timeout
    error = "no attempt"
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=5, source_address=(args.source, 0)):
                print(json.dumps({"reached": args.target, "from": args.source}))
                return 0
        except OSError as exc:
            error = str(exc)
        time.sleep(2)
    print(json.dumps({"reached": None, "from": args.source, "error": error}))
    print(f"{args.target} does not answer from {args.source}: {error}", file=sys.stderr)
    return 1


def status(args: argparse.Namespace) -> int:
    if args.env_file:
        load_env_file(args.env_file)
    import ray  # the release's Ray: the same version as the cluster's

    ray.init(address=args.address, logging_level="ERROR", log_to_driver=False)
    deadline = time.monotonic() + args.timeout
    try:
        while True:
            nodes = [n for n in ray.nodes() if n.get("Alive")]
            gpus = sum(n["Resources"].get("GPU", 0) for n in nodes)
            if (len(nodes) >= args.expect and gpus >= args.gpus) or time.monotonic() > deadline:
                break
            time.sleep(2)
        report = {
            "nodes": sorted(
                (
                    {
                        # A restarted node joins under a new id at the same address: the id tells a rejoin.
                        "node_id": n["NodeID"],
                        "address": n["NodeManagerAddress"],
                        "cpus": n["Resources"].get("CPU", 0),
                        "gpus": n["Resources"].get("GPU", 0),
                    }
                    for n in nodes
                ),
                key=lambda n: n["address"],
            ),
            "expected": args.expect,
        }
        report["cpus"] = sum(n["cpus"] for n in report["nodes"])
        report["gpus"] = sum(n["gpus"] for n in report["nodes"])
        print(json.dumps(report))
        if len(nodes) < args.expect or report["gpus"] < args.gpus:
            print(
                f"Ray reports {len(nodes)} of {args.expect} nodes and {report['gpus']:.0f} of {args.gpus} GPUs"
                f" after {args.timeout:.0f} s",
                file=sys.stderr,
            )
            return 1
        return 0
    finally:
        ray.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["reach", "status"])
    parser.add_argument("--source")
    parser.add_argument("--target")
    parser.add_argument("--address")
    parser.add_argument("--expect", type=int, default=1, help="live nodes to wait for")
    parser.add_argument("--gpus", type=int, default=0, help="GPUs to wait for (one per Spark)")
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--env-file", help="the cluster's EnvironmentFile (ray-cluster.env)")
    args = parser.parse_args()
    return reach(args) if args.mode == "reach" else status(args)


if __name__ == "__main__":
    sys.exit(main())
