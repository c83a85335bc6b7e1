#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: directories
short_description: Ensure many directories with their owner, group and mode in one call
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Creates each directory that is missing (with its parents) and sets its owner, group and mode
    when they differ, like M(ansible.builtin.file) with C(state=directory), for a whole list at once.
  - A converged host costs one module call instead of one per directory.
  - Never removes anything; a path that exists and is not a directory fails the task before any change.
options:
  paths:
    description: The directories, each with its wanted owner, group and mode.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Absolute path of the directory.
        type: path
        required: true
      owner:
        description: Owner name or uid; unchanged when unset.
        type: str
      group:
        description: Group name or gid; unchanged when unset.
        type: str
      mode:
        description: Octal mode as a string (C("0750")); unchanged when unset.
        type: str
attributes:
  check_mode:
    description: Reports what would be created or changed without touching the host.
    support: full
  diff_mode:
    description: One before/after entry per directory that changes (state, owner, group, mode).
    support: full
  platform:
    description: POSIX hosts.
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Create the service's directories
  sparkfleet.vllm.directories:
    paths:
      - {path: /opt/sparkfleet, owner: root, group: root, mode: "0755"}
      - {path: /var/lib/sparkfleet, owner: sparkfleet, group: sparkfleet, mode: "0750"}
"""

RETURN = r"""
changed_paths:
  description: The directories that were (or in check mode would be) created or changed.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule


def ensure(module, spec):
    """Create one directory if missing and fix its attributes; returns (changed, diff)."""
    path = spec["path"]
    diff = {"before": {"path": path}, "after": {"path": path}}
    changed = False
    if not os.path.isdir(path):
        diff["before"]["state"] = "absent"
        diff["after"]["state"] = "directory"
        changed = True
        if module.check_mode:
            return changed, diff
        os.makedirs(path)
    args = module.load_file_common_arguments(
        {"path": path, "owner": spec["owner"], "group": spec["group"], "mode": spec["mode"]}
    )
    changed = module.set_fs_attributes_if_different(args, changed, diff=diff)
    return changed, diff


def main():
    module = AnsibleModule(
        argument_spec={
            "paths": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "path": {"type": "path", "required": True},
                    "owner": {"type": "str"},
                    "group": {"type": "str"},
                    "mode": {"type": "str"},
                },
            },
        },
        supports_check_mode=True,
    )
    for spec in module.params["paths"]:
        if not os.path.isabs(spec["path"]):
            module.fail_json(msg=f"paths: {spec['path']!r} is not an absolute path; nothing was changed")
        if os.path.lexists(spec["path"]) and not os.path.isdir(spec["path"]):
            module.fail_json(msg=f"paths: {spec['path']} exists and is not a directory; nothing was changed")
    changed_paths, diffs = [], []
    for spec in module.params["paths"]:
        changed, diff = ensure(module, spec)
        if changed:
            changed_paths.append(spec["path"])
            diffs.append(diff)
    module.exit_json(changed=bool(changed_paths), changed_paths=changed_paths, diff=diffs)


if __name__ == "__main__":
    main()
