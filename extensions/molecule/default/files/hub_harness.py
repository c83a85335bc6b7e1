"""Serve a sandbox model as a gated hub repository for model_stage's hub path (verify_secrets.yml, issue 19).

The token comes from a 0600 file, never argv. STATE holds what the test steers and reads: `main` (the
commit the branch points at, re-read while serving, so a test can move the branch), `port` (written
once listening) and `requests` (every request so far, rewritten as they come).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# The hub stand-in the unit tests use; one implementation of the hub's answers.
sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests" / "unit"))

from hub_server import Hub, HubServer, Repo, VirtualSafetensors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--token-file", type=Path, required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--body-delay", type=float, default=0.0)
    parser.add_argument("--lifetime", type=float, default=1800.0, help="seconds before it stops by itself")
    args = parser.parse_args()

    main_file = args.state / "main"
    files: dict[str, bytes | VirtualSafetensors] = {
        path.name: path.read_bytes() for path in sorted(args.model_dir.iterdir()) if path.is_file()
    }
    repo = Repo(files, {"main": main_file.read_text().strip()}, gated_token=args.token_file.read_text().strip())
    hub = Hub({args.repo: repo}, body_delay_seconds=args.body_delay)
    with HubServer(hub, host=args.host) as server:
        (args.state / "port").write_text(f"{server.port}\n")
        stop = time.monotonic() + args.lifetime
        while time.monotonic() < stop:
            head = main_file.read_text().strip()
            if head != repo.revisions["main"]:
                # The old commit stays reachable by its sha, as on the hub.
                repo.revisions[f"was-{len(repo.revisions)}"] = repo.revisions["main"]
                repo.revisions["main"] = head
            (args.state / "requests").write_text("".join(f"{line}\n" for line in list(hub.requests)))
            time.sleep(0.2)


if __name__ == "__main__":
    main()
