# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action for the files module: contents stay out of the host's journal; diffs are built here."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import lookup_loader

MODULE = "sparkfleet.vllm.files"
# What a templates entry may carry besides src and vars: the files entry it becomes.
TEMPLATE_KEYS = {"src", "dest", "vars", "owner", "group", "mode", "validate", "parent_mode", "diff"}


def checked_templates(args: dict) -> list[dict]:
    """The templates argument, each entry {src, dest, vars, ...}, or an error naming what is wrong."""
    templates = args.get("templates", [])
    if not isinstance(templates, list):
        raise AnsibleActionFail("templates: a list of {src, dest, vars, owner, group, mode, ...}")
    for index, spec in enumerate(templates):
        if not isinstance(spec, dict) or not isinstance(spec.get("src"), str) or not isinstance(spec.get("dest"), str):
            raise AnsibleActionFail(f"templates[{index}]: each entry needs src (a template of the role) and dest")
        unknown = sorted(set(spec) - TEMPLATE_KEYS)
        if unknown or not isinstance(spec.get("vars", {}), dict):
            raise AnsibleActionFail(
                f"templates[{index}] ({spec['dest']}): vars must be a mapping; unknown keys {unknown} "
                f"(known: {sorted(TEMPLATE_KEYS)})"
            )
    return templates


def checked_files(args: dict) -> list[dict]:
    """The files argument as the module needs it, or an error naming what is wrong."""
    files = args.get("files", [])
    absent = args.get("absent", [])
    directories = args.get("directories", [])
    if not all(isinstance(given, list) for given in (files, absent, directories)) or not (files or absent or directories):
        raise AnsibleActionFail(
            "files: a list of {dest, content, ...} (files), {src, dest, vars, ...} (templates), of {path, ...} "
            "(directories) or of paths (absent) is required"
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

    def rendered(self, spec: dict, task_vars: dict) -> dict:
        """A templates entry as the files entry it becomes: the role's template rendered here, on the controller, with
        the task's variables and the entry's own vars (as the template lookup with template_vars renders it)."""
        path = self._find_needle("templates", spec["src"])
        lookup = lookup_loader.get("ansible.builtin.template", loader=self._loader, templar=self._templar)
        variables = dict(task_vars, ansible_search_path=task_vars.get("ansible_search_path") or self._task.get_search_path())
        content = lookup.run([path], variables=variables, template_vars=spec.get("vars") or {})[0]
        return {key: value for key, value in spec.items() if key not in {"src", "vars"}} | {"content": content}

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        templates = checked_templates(args)
        args["files"] = list(args.get("files") or []) + [self.rendered(spec, task_vars or {}) for spec in templates]
        args.pop("templates", None)
        files = checked_files(args)
        # Ansible logs module arguments to the target's syslog; these arguments are whole files.
        module_vars = dict(task_vars or {}, ansible_no_target_syslog=True)
        done = self._execute_module(module_name=MODULE, module_args=args, task_vars=module_vars)
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
