"""The polkit rule that lets the supervisors' account (not root) start, stop and restart this host's instances.

The role's template is rendered with Ansible's templating; node runs the rule as polkitd's JavaScript engine
would, with a stand-in `polkit` object, and the rule is tried as an attacker would: another account, another
unit (a watchdog's, sshd's, a unit whose name only starts like an instance's), another verb, another action.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from rendering import TemplateRenderer

ROLE = Path(__file__).resolve().parents[2] / "roles" / "vllm_serve"
RUNNER = """
const fs = require('fs');
const rule = fs.readFileSync(process.argv[1], 'utf8');
let added = null;
const polkit = {Result: {YES: 'yes', NOT_HANDLED: 'not handled'}, addRule: (f) => { added = f; }};
new Function('polkit', rule)(polkit);
const asks = JSON.parse(fs.readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(asks.map(([id, user, details]) =>
    added({id: id, lookup: (key) => details[key]}, {user: user}))));
"""
MANAGE = "org.freedesktop.systemd1.manage-units"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None, reason="node runs the polkit rule's JavaScript here (scripts/lib.sh: ensure_node)"
)


def test_only_the_supervisors_may_start_stop_or_restart_only_this_hosts_instances(tmp_path: Path) -> None:
    plan = {"instances": {"chat": {}, "coder": {}}, "ranks": {"big": {}}}
    # The role's own expression for the units (its vars), rendered from the plan as the role does.
    units = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__vllm_serve_supervised_units"]
    renderer = TemplateRenderer(ROLE / "templates" / "supervisor.rules.j2", templates=["__vllm_serve_supervised_units"])
    rule = renderer.render(
        {
            "vllm_serve_plan": plan,
            "sparkfleet_supervisor_user": "sparkfleet-supervisor",
            "ansible_managed": "Ansible managed",
            "__vllm_serve_supervised_units": units,
        }
    )
    renderer.close()
    path = tmp_path / "rule.js"
    path.write_text(rule)
    supervisor = "sparkfleet-supervisor"
    asks = [
        (MANAGE, supervisor, {"unit": "sparkfleet-vllm-chat.service", "verb": "restart"}),
        (MANAGE, supervisor, {"unit": "sparkfleet-vllm-coder.service", "verb": "stop"}),
        (MANAGE, supervisor, {"unit": "sparkfleet-vllm-big.service", "verb": "start"}),
        (MANAGE, supervisor, {"unit": "sparkfleet-vllm-chat.service", "verb": "reset-failed"}),
        # Everything else is not this rule's to grant.
        (MANAGE, "sparkfleet", {"unit": "sparkfleet-vllm-chat.service", "verb": "restart"}),
        (MANAGE, "nobody", {"unit": "sparkfleet-vllm-chat.service", "verb": "stop"}),
        (MANAGE, supervisor, {"unit": "sparkfleet-vllm-chat-watchdog.service", "verb": "stop"}),
        (MANAGE, supervisor, {"unit": "sparkfleet-memory-guard.service", "verb": "stop"}),
        (MANAGE, supervisor, {"unit": "ssh.service", "verb": "stop"}),
        (MANAGE, supervisor, {"unit": "sparkfleet-vllm-chat.service.d", "verb": "restart"}),
        (MANAGE, supervisor, {"unit": "sparkfleet-vllm-chat.service", "verb": "reload-or-restart"}),
        (MANAGE, supervisor, {"unit": "sparkfleet-vllm-chat.service", "verb": "isolate"}),
        (MANAGE, supervisor, {}),
        ("org.freedesktop.systemd1.manage-unit-files", supervisor, {"unit": "sparkfleet-vllm-chat.service"}),
        ("org.freedesktop.systemd1.set-environment", supervisor, {}),
        ("org.freedesktop.login1.reboot", supervisor, {}),
    ]
    answered = subprocess.run(
        ["node", "-e", RUNNER, str(path)], input=json.dumps(asks), capture_output=True, text=True, check=True
    )
    assert json.loads(answered.stdout) == ["yes"] * 4 + ["not handled"] * (len(asks) - 4)
