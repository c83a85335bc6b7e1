#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: units
short_description: Enable, disable, start, stop or restart many systemd units in one call
version_added: 0.9.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Brings each unit to its wanted enablement and state, in the order given, like
    M(ansible.builtin.systemd_service) for a whole list at once. A converged host costs one module
    call for a role's units instead of one per unit.
  - Reads each unit with C(systemctl show) and C(systemctl is-enabled), and acts only where they differ from
    what is wanted (a restart always acts).
  - A unit that is not loaded fails the task when it is to be enabled, started or restarted; one that is to be
    stopped or disabled is left alone (there is nothing to stop).
options:
  units:
    description:
      - The units, each entry with what is wanted of it (unset means left as it is), for one unit (O(units[].name))
        or for a group of units wanted alike (O(units[].names)).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description:
          - The full unit name, suffix included (C(nginx.service), C(example.timer)).
          - Exactly one of O(units[].name) and O(units[].names) is set.
        type: str
      names:
        description: Full unit names wanted alike, acted on in this order; may be empty.
        type: list
        elements: str
      enabled:
        description: Whether the unit starts at boot.
        type: bool
      state:
        description: V(restarted) restarts it whatever its state (a running unit that must pick up new files).
        type: str
        choices: [started, stopped, restarted]
  daemon_reload:
    description: Run C(systemctl daemon-reload) first (a unit file changed). Counted as a change.
    type: bool
    default: false
attributes:
  check_mode:
    description: Reports what would be enabled, started, stopped or restarted without doing it.
    support: full
  diff_mode:
    description: Not applicable.
    support: none
  platform:
    description: Hosts run by systemd.
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Run nginx and the metrics timer
  sparkfleet.vllm.units:
    daemon_reload: "{{ __written is changed }}"
    units:
      - {name: nginx.service, enabled: true, state: started}
      - {name: example-metrics.timer, enabled: true, state: "{{ 'restarted' if __written is changed else 'started' }}"}

- name: Enable and start every instance, and stop the retired ones
  sparkfleet.vllm.units:
    units:
      - names: "{{ instances | map('regex_replace', '^(.+)$', 'example-\\1.service') | list }}"
        enabled: true
        state: started
      - {names: "{{ retired }}", enabled: false, state: stopped}
"""

RETURN = r"""
units:
  description: One entry per unit, in the order given (a group's units in their order).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The unit.
      type: str
    changed:
      description: Whether it was (or in check mode would be) enabled, disabled, started, stopped or restarted.
      type: bool
    actions:
      description: The C(systemctl) verbs run (or that would run) for it, in order.
      type: list
      elements: str
    status:
      description:
        - C(LoadState), C(ActiveState) and C(UnitFileState) as C(systemctl show) read them before any action, and
          C(IsEnabled), what C(systemctl is-enabled) printed.
      type: dict
changed_units:
  description: The names of the units that changed, in order.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

RUNNING = ("active", "activating", "reloading")
PROPERTIES = ("LoadState", "ActiveState", "UnitFileState")
VERBS = {"started": ["start"], "restarted": ["restart"]}


def read_status(module, systemctl, name):
    """LoadState, ActiveState and UnitFileState of one unit, and whether is-enabled calls it enabled."""
    rc, out, err = module.run_command([systemctl, "show", "--property=" + ",".join(PROPERTIES), "--", name])
    if rc != 0:
        module.fail_json(msg=f"units: systemctl show {name} failed (rc {rc}): {err.strip()}")
    status = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    # is-enabled exits 0 for every state that starts the unit at boot (enabled, static, alias, indirect...).
    enabled_rc, enabled_out, _dummy = module.run_command([systemctl, "is-enabled", "--", name])
    status["IsEnabled"] = enabled_out.strip()
    return status, enabled_rc == 0


def actions_for(spec, status, is_enabled, check_mode):
    """The systemctl verbs that bring one unit from its status to what is wanted, or an error."""
    loaded = status.get("LoadState") == "loaded"
    wanted_enabled, wanted_state = spec["enabled"], spec["state"]
    if not loaded and (wanted_enabled is True or wanted_state in ("started", "restarted")):
        if not check_mode:
            return None, f"units: {spec['name']} is not loaded ({status.get('LoadState', 'unknown')}): no unit file to run"
        # In check mode the unit file may be one this run would have written: report what would be done.
        return (["enable"] if wanted_enabled is True else []) + VERBS.get(wanted_state, []), None
    actions = []
    if wanted_enabled is True and not is_enabled:
        actions.append("enable")
    if wanted_enabled is False and loaded and status.get("IsEnabled") in ("enabled", "enabled-runtime"):
        actions.append("disable")
    running = status.get("ActiveState") in RUNNING
    if wanted_state == "restarted" or (wanted_state == "started" and not running):
        actions.append("restart" if wanted_state == "restarted" else "start")
    if wanted_state == "stopped" and loaded and running:
        actions.append("stop")
    return actions, None


def main():
    module = AnsibleModule(
        argument_spec={
            "units": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "name": {"type": "str"},
                    "names": {"type": "list", "elements": "str"},
                    "enabled": {"type": "bool"},
                    "state": {"type": "str", "choices": ["started", "stopped", "restarted"]},
                },
            },
            "daemon_reload": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    systemctl = module.get_bin_path("systemctl", required=True)
    wanted = []
    for index, entry in enumerate(module.params["units"]):
        if (entry["name"] is None) == (entry["names"] is None):
            module.fail_json(msg=f"units[{index}]: set exactly one of name and names; nothing was changed")
        group = [entry["name"]] if entry["name"] is not None else entry["names"]
        wanted += [{"name": name, "enabled": entry["enabled"], "state": entry["state"]} for name in group]
    names = [spec["name"] for spec in wanted]
    for name in names:
        if "." not in name or name.startswith("-"):
            module.fail_json(
                msg=f"units: {name!r} is not a full unit name (nginx.service, example.timer); nothing was changed"
            )
    if len(set(names)) != len(names):
        module.fail_json(msg="units: a unit is listed twice; nothing was changed")
    reloaded = module.params["daemon_reload"]
    if reloaded and not module.check_mode:
        rc, _dummy, err = module.run_command([systemctl, "daemon-reload"])
        if rc != 0:
            module.fail_json(msg=f"units: systemctl daemon-reload failed (rc {rc}): {err.strip()}")
    entries = []
    for spec in wanted:
        status, is_enabled = read_status(module, systemctl, spec["name"])
        actions, error = actions_for(spec, status, is_enabled, module.check_mode)
        if error:
            module.fail_json(msg=error, units=entries)
        entries.append({"name": spec["name"], "changed": bool(actions), "actions": actions, "status": status})
        for verb in [] if module.check_mode else actions:
            rc, _dummy, err = module.run_command([systemctl, verb, "--", spec["name"]])
            if rc != 0:
                module.fail_json(
                    msg=f"units: systemctl {verb} {spec['name']} failed (rc {rc}): {err.strip()}", units=entries
                )
    changed_units = [entry["name"] for entry in entries if entry["changed"]]
    module.exit_json(changed=reloaded or bool(changed_units), units=entries, changed_units=changed_units)


if __name__ == "__main__":
    main()
