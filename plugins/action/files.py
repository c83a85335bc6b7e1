# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action for the files module: contents stay out of the host's journal; diffs are built here."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

MODULE = "sparkfleet.vllm.files"


def checked_files(args: dict) -> list[dict]:
    """The files argument as the module needs it, or an error naming what is wrong."""
    files = args.get("files", [])
    absent = args.get("absent", [])
    directories = args.get("directories", [])
    if not all(isinstance(given, list) for given in (files, absent, directories)) or not (files or absent or directories):
        raise AnsibleActionFail(
            "files: a list of {dest, content, ...} (files), of {path, ...} (directories) or of paths (absent) is required"
        )
    for index, spec in enumerate(files):
        if not isinstance(spec, dict) or not isinstance(spec.get("dest"), str):
            raise AnsibleActionFail(f"files[{index}]: each entry needs dest (an absolute path) and content (text)")
        if not isinstance(spec.get("content"), str):
            raise AnsibleActionFail(
                f"files[{index}] ({spec['dest']}): content must be text, not {type(spec.get('content')).__name__}"
            )
    return files


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        files = checked_files(self._task.args)
        # Ansible logs module arguments to the target's syslog; these arguments are whole files.
        module_vars = dict(task_vars or {}, ansible_no_target_syslog=True)
        done = self._execute_module(module_name=MODULE, module_args=dict(self._task.args), task_vars=module_vars)
        result.update(done)
        if done.get("failed"):
            return result
        diffs = result.pop("directory_diffs", [])
        for spec, entry in zip(files, result.get("files", []), strict=True):
            if "before" not in entry:
                continue
            before = entry.pop("before")
            if before is None:
                diffs.append(
                    {"before_header": spec["dest"], "after_header": spec["dest"], "prepared": "(binary or large file)"}
                )
            else:
                diffs.append(
                    {"before_header": spec["dest"], "after_header": spec["dest"], "before": before, "after": spec["content"]}
                )
        diffs += [
            {"before_header": path, "after_header": path, "prepared": "(removed)"} for path in result.get("removed", [])
        ]
        if diffs:
            result["diff"] = diffs
        return result
