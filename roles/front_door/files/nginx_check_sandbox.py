"""Run `nginx -t` inside the sandbox a drop-in describes, before the drop-in replaces the live one.

A sandbox that keeps nginx from reading its configuration, keys or logs would fail the next restart
and take the door down; this refuses it while the running nginx still serves.
Usage: python3 nginx_check_sandbox.py DROP_IN RUNTIME_DIR

`nginx -t` opens its pid file (without writing it) to check it can: that file lives in RUNTIME_DIR, which
systemd makes when nginx starts (RuntimeDirectory=). The check makes it if nginx is not running and lets the
sandbox write there, as the unit's RuntimeDirectory does; it never removes it (the live nginx's pid is in it).
"""

from __future__ import annotations

import os
import subprocess
import sys

drop_in, runtime_dir = sys.argv[1], sys.argv[2]
with open(drop_in, encoding="utf-8") as handle:
    properties = [line.strip() for line in handle if line.strip() and not line.startswith(("#", "["))]
os.makedirs(runtime_dir, mode=0o755, exist_ok=True)
command = ["systemd-run", "--quiet", "--wait", "--pipe", "--collect", "--service-type=exec"]
command += [f"--property={p}" for p in properties]
command += [f"--property=ReadWritePaths={runtime_dir}"]
sys.exit(subprocess.run([*command, "/usr/sbin/nginx", "-t", "-q"], check=False).returncode)
