"""Run `nginx -t` inside the sandbox a drop-in describes, before the drop-in replaces the live one.

A sandbox that keeps nginx from reading its configuration, keys or logs would fail the next restart
and take the door down; this refuses it while the running nginx still serves.
Usage: python3 nginx_check_sandbox.py DROP_IN
"""

from __future__ import annotations

import subprocess
import sys

with open(sys.argv[1], encoding="utf-8") as handle:
    properties = [line.strip() for line in handle if line.strip() and not line.startswith(("#", "["))]
command = ["systemd-run", "--quiet", "--wait", "--pipe", "--collect", "--service-type=exec"]
command += [f"--property={p}" for p in properties]
sys.exit(subprocess.run([*command, "/usr/sbin/nginx", "-t", "-q"], check=False).returncode)
