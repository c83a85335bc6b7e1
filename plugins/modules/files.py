#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: files
short_description: Write many small files with their owner, group and mode in one call
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Writes each file whose content differs, atomically (a temporary file in the same directory,
    validated, then renamed over the old one), and sets its owner, group and mode when they differ,
    like M(ansible.builtin.copy) with O(files[].content), for a whole list at once.
  - Templates are rendered on the controller (O(templates)) and written with the files; a converged host costs one
    module call instead of two per file.
  - The action plugin of the same name runs the module with target syslog off, so file contents
    never reach the host's journal, and builds the diff on the controller.
  - A file the validate command refuses is left as it was, and so is every file after it in the list.
  - Directories in O(directories) are made (with their parents) and given their owner, group and mode before
    any file is written, in the same call.
  - Paths in O(absent) are removed in the same call (files and links only, never a directory), after every
    file is written.
options:
  directories:
    description:
      - Directories, each with its wanted owner, group and mode, like M(ansible.builtin.file) with
        C(state=directory). A missing one is made with its parents; nothing is ever removed.
      - A path that exists and is not a directory fails the task before any change.
    type: list
    elements: dict
    default: []
    version_added: 0.12.0
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
        description: Octal mode as a string (C("0750"), C("2750")); unchanged when unset.
        type: str
      seed:
        description:
          - A directory whose contents are copied into this one when this call makes it (never later), owned by
            O(directories[].owner) and O(directories[].group), so that a new account's caches start from the ones
            it replaces. When the seed is missing, nothing is copied.
          - The copy never follows a link in the seed (each directory is walked through its descriptor, each file
            opened without following links), so links are copied as links; sockets, pipes and devices are left out
            and set-ID bits are dropped. A copy that fails is removed again and the task fails.
        type: path
        version_added: 0.13.0
      tree:
        description:
          - Everything under the directory is given its O(directories[].owner) and O(directories[].group) too, and
            loses group and other write, so that no other account can change what is in it (a store an earlier
            release left to another account is taken back). Reported as a change when anything under it differed.
          - The tree is walked through directory descriptors and each entry changed through its own descriptor, never
            by following a link (a link itself is given the owner and group), so an account that owned the tree
            cannot turn the change onto a file outside it.
        type: bool
        default: false
        version_added: 0.14.0
  files:
    description: The files, each with its wanted content and attributes.
    type: list
    elements: dict
    default: []
    suboptions:
      dest:
        description: Absolute path of the file.
        type: path
        required: true
      content:
        description: The whole text of the file.
        type: str
        required: true
      owner:
        description: Owner name or uid; unchanged when unset.
        type: str
      group:
        description: Group name or gid; unchanged when unset.
        type: str
      mode:
        description: Octal mode as a string (C("0644")); unchanged when unset.
        type: str
      validate:
        description:
          - Command that checks the new content before it replaces the file; C(%s) is the path of the
            temporary file. Not run in check mode.
          - When its program is not on the host the task fails with RV(validator_missing) set; that file and
            every file after it are left as they were, as when the command refuses the content.
        type: str
      parent_mode:
        description:
          - When set, the parent directory is created if missing and given this mode, with the
            file's owner and group. When unset, a missing parent directory fails the task.
        type: str
      diff:
        description: Whether diff mode shows this file's content; set V(false) for files holding secrets.
        type: bool
        default: true
      keep_content:
        description:
          - The content is only the new file's first; a file that exists keeps what it holds and gets only its owner,
            group and mode, and is not read (a log of any size). For a file another program writes in place (a metrics
            file made here for an account that may not create files in its directory, nginx's logs).
        type: bool
        default: false
        version_added: 0.14.0
  templates:
    description:
      - Files rendered from the role's templates on the controller (as the P(ansible.builtin.template#lookup) lookup
        renders them, with the task's variables and the entry's own O(templates[].vars)) and then written as
        O(files) are, after them and in the same call.
    type: list
    elements: dict
    default: []
    version_added: 0.13.0
    suboptions:
      src:
        description: The template, found like the template lookup finds it (the role's C(templates) directory first).
        type: str
        required: true
      dest:
        description: Absolute path of the file.
        type: path
        required: true
      vars:
        description: Variables the template sees beside the task's (the template lookup's C(template_vars)).
        type: dict
        default: {}
      owner:
        description: Owner name or uid; unchanged when unset.
        type: str
      group:
        description: Group name or gid; unchanged when unset.
        type: str
      mode:
        description: Octal mode as a string (C("0644")); unchanged when unset.
        type: str
      validate:
        description: As O(files[].validate).
        type: str
      parent_mode:
        description: As O(files[].parent_mode).
        type: str
      diff:
        description: Whether diff mode shows this file's content; set V(false) for files holding secrets.
        type: bool
        default: true
  absent:
    description:
      - Absolute paths of files or links that must not exist (what an earlier plan wrote and this one does not).
      - A directory among them fails the task before any change.
    type: list
    elements: path
    default: []
    version_added: 0.9.0
attributes:
  action:
    description: The action plugin builds the diff and turns off target syslog for the call.
    support: full
  check_mode:
    description: Reports what would be written or changed without touching the host.
    support: full
  diff_mode:
    description:
      - One before/after entry per file whose content changes (unless O(files[].diff=false)), and one per directory
        made or changed.
    support: full
  platform:
    description: POSIX hosts.
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Make the service's directories and write its unit and drop-in
  sparkfleet.vllm.files:
    directories:
      - {path: /var/lib/example, owner: example, group: example, mode: "0750"}
    files:
      - dest: /etc/systemd/system/example.service
        content: "{{ lookup('ansible.builtin.template', 'example.service.j2') }}"
        owner: root
        group: root
        mode: "0644"
      - dest: /etc/systemd/system/example.service.d/90-limits.conf
        content: "[Service]\nMemoryMax=8G\n"
        mode: "0644"
        parent_mode: "0755"
        validate: /usr/bin/systemd-analyze verify %s
  notify: Restart example
"""

RETURN = r"""
files:
  description: One entry per file, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    dest:
      description: The path.
      type: str
    changed:
      description: Whether the file was (or in check mode would be) written or had its attributes changed.
      type: bool
    content_changed:
      description: Whether the content was (or would be) replaced.
      type: bool
removed:
  description: The paths of O(absent) that existed and were (or in check mode would be) removed.
  returned: always
  type: list
  elements: str
validator_missing:
  description: The program of a O(files[].validate) command that is not on the host (the task failed).
  returned: failure
  type: str
  version_added: 0.12.0
changed_directories:
  description: The directories of O(directories) that were (or in check mode would be) made or changed.
  returned: always
  type: list
  elements: str
  version_added: 0.12.0
changed_files:
  description: The paths that changed, in order, removed ones last (directories are in RV(changed_directories)).
  returned: always
  type: list
  elements: str
"""

import grp
import os
import pwd
import shlex
import shutil
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule

# Diffs of bigger or binary files are not useful on a terminal.
DIFF_LIMIT = 256 * 1024


def read_current(dest):
    """The file's bytes, or None when there is no file."""
    if not os.path.lexists(dest):
        return None
    with open(dest, "rb") as handle:
        return handle.read()


def text_for_diff(data):
    if data is None:
        return ""
    if len(data) > DIFF_LIMIT or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def ensure_parent(module, spec, planned):
    """Make the file's directory when parent_mode asks; in check mode one of O(directories) counts as made."""
    parent = os.path.dirname(spec["dest"])
    changed = False
    if not os.path.isdir(parent):
        if module.check_mode and parent in planned:
            return True
        if spec["parent_mode"] is None:
            module.fail_json(msg=f"files: the directory of {spec['dest']} does not exist; set parent_mode to create it")
        changed = True
        if module.check_mode:
            return changed
        os.makedirs(parent)
    if spec["parent_mode"] is not None:
        args = module.load_file_common_arguments(
            {"path": parent, "owner": spec["owner"], "group": spec["group"], "mode": spec["parent_mode"]}
        )
        changed = module.set_fs_attributes_if_different(args, changed)
    return changed


def validate(module, spec, path):
    command = spec["validate"]
    if "%s" not in command:
        module.fail_json(msg=f"files: validate of {spec['dest']} must contain %s (the file to check): {command!r}")
    argv = [part.replace("%s", path) for part in shlex.split(command)]
    if not (os.path.isabs(argv[0]) and os.access(argv[0], os.X_OK)) and not module.get_bin_path(argv[0]):
        module.fail_json(
            msg=f"files: {spec['dest']} was left as it was: {argv[0]}, which checks it, is not on this host",
            validator_missing=argv[0],
        )
    rc, out, err = module.run_command(argv)
    if rc != 0:
        module.fail_json(
            msg=f"files: {spec['dest']} was left as it was: {command} refused the new content (rc {rc})",
            stdout=out,
            stderr=err,
        )


def keep_current_attributes(temporary, dest, spec):
    """An attribute the caller leaves unset stays what it was (or the umask default for a new file).

    Only the unset ones: each attribute is set once, to its final value, so the temporary file (mkstemp's
    root-owned 0600) is never wider than the file it becomes, not even between two calls.
    """
    if os.path.exists(dest):
        current = os.stat(dest)
        uid = current.st_uid if spec["owner"] is None else -1
        gid = current.st_gid if spec["group"] is None else -1
        if (uid, gid) != (-1, -1):
            os.chown(temporary, uid, gid)
        if spec["mode"] is None:
            os.chmod(temporary, stat.S_IMODE(current.st_mode))
    elif spec["mode"] is None:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)


def write(module, spec, data):
    """Write next to the destination with the wanted attributes, check it, then rename it into place."""
    directory = os.path.dirname(spec["dest"])
    # Hidden and without the file's suffix: systemd, Prometheus and friends ignore it meanwhile.
    handle, temporary = tempfile.mkstemp(prefix=".sparkfleet-", suffix=".tmp", dir=directory)
    try:
        # Owner and mode first, while the file is empty, each straight to its final value: a secret is never
        # readable, even for an instant, by anyone its final mode does not admit, and a descriptor opened
        # before a byte was written is one its final mode allows.
        keep_current_attributes(temporary, spec["dest"], spec)
        args = module.load_file_common_arguments(
            {"path": temporary, "owner": spec["owner"], "group": spec["group"], "mode": spec["mode"]}
        )
        module.set_fs_attributes_if_different(args, False)
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        if spec["validate"]:
            validate(module, spec, temporary)
        os.replace(temporary, spec["dest"])
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)


def copy_tree(source, dest, uid, gid):
    """Copy what is in source into dest (both directories), owned by uid:gid, never reading through a link."""
    for top, dirs, names, top_fd in os.fwalk(source, follow_symlinks=False):
        target = os.path.normpath(os.path.join(dest, os.path.relpath(top, source)))
        for name in dirs + names:
            found = os.stat(name, dir_fd=top_fd, follow_symlinks=False)
            copy = os.path.join(target, name)
            if stat.S_ISLNK(found.st_mode):
                os.symlink(os.readlink(name, dir_fd=top_fd), copy)
            elif stat.S_ISDIR(found.st_mode):
                os.mkdir(copy, 0o700)
            elif stat.S_ISREG(found.st_mode):
                source_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=top_fd)
                with os.fdopen(source_fd, "rb") as read, open(copy, "xb") as written:
                    shutil.copyfileobj(read, written, 1 << 20)
            else:
                continue
            os.lchown(copy, uid, gid)
            if not stat.S_ISLNK(found.st_mode):
                os.chmod(copy, stat.S_IMODE(found.st_mode) & 0o777)


def seed_directory(module, spec):
    """Fill a directory this call made from spec's seed; a failed copy is removed and fails the task."""
    path, seed = spec["path"], spec["seed"]
    if not seed or not os.path.isdir(seed) or os.path.islink(seed):
        return
    made = os.stat(path)
    try:
        copy_tree(seed, path, made.st_uid, made.st_gid)
    except OSError as exc:
        for name in os.listdir(path):
            inner = os.path.join(path, name)
            if os.path.isdir(inner) and not os.path.islink(inner):
                shutil.rmtree(inner)
            else:
                os.unlink(inner)
        module.fail_json(msg=f"files: copying {seed} into {path} failed ({exc}); the copy was removed, {seed} is as it was")


def own_tree(module, path, owner, group):
    """Give everything under path to owner and group, without group or other write; returns whether any differed."""
    stats = os.stat(path)
    uid = stats.st_uid if owner is None else _uid(owner)
    gid = stats.st_gid if group is None else _gid(group)
    changed = False
    for walked in os.fwalk(path, follow_symlinks=False):
        dirs, names, dir_fd = walked[1], walked[2], walked[3]
        for name in (*dirs, *names):
            info = os.lstat(name, dir_fd=dir_fd)
            link = stat.S_ISLNK(info.st_mode)
            if (info.st_uid, info.st_gid) == (uid, gid) and (link or not info.st_mode & 0o022):
                continue
            changed = True
            if module.check_mode:
                continue
            if link:
                os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
                continue
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
            descriptor = os.open(name, flags, dir_fd=dir_fd)
            try:
                # The entry opened is the one looked at: not swapped for another between the two calls.
                if (os.fstat(descriptor).st_ino, os.fstat(descriptor).st_dev) == (info.st_ino, info.st_dev):
                    os.fchown(descriptor, uid, gid)
                    os.fchmod(descriptor, stat.S_IMODE(info.st_mode) & ~0o022)
            finally:
                os.close(descriptor)
    return changed


def _uid(owner):
    return int(owner) if owner.isdigit() else pwd.getpwnam(owner).pw_uid


def _gid(group):
    return int(group) if group.isdigit() else grp.getgrnam(group).gr_gid


def ensure_directory(module, spec):
    """Make one directory if missing (filled from its seed) and fix its attributes; returns (changed, diff)."""
    path = spec["path"]
    diff = {"before": {"path": path}, "after": {"path": path}}
    changed = made = False
    if not os.path.isdir(path):
        diff["before"]["state"] = "absent"
        diff["after"]["state"] = "directory"
        if spec.get("seed"):
            diff["after"]["seed"] = spec["seed"]
        changed = made = True
        if module.check_mode:
            return changed, diff
        os.makedirs(path)
    args = module.load_file_common_arguments(
        {"path": path, "owner": spec["owner"], "group": spec["group"], "mode": spec["mode"]}
    )
    changed = module.set_fs_attributes_if_different(args, changed, diff=diff)
    if made:
        seed_directory(module, spec)
    if spec["tree"] and os.path.isdir(path) and own_tree(module, path, spec["owner"], spec["group"]):
        changed = True
        diff["after"]["tree"] = f"everything under it {spec['owner']}:{spec['group']}, no group or other write"
    return changed, diff


def ensure(module, spec, planned):
    """Bring one file to its wanted content and attributes; returns its result entry."""
    dest = spec["dest"]
    wanted = spec["content"].encode("utf-8")
    parent_changed = ensure_parent(module, spec, planned)
    # A kept file is never read: it may be a log of any size another program writes.
    kept = spec["keep_content"] and os.path.isfile(dest)
    current = read_current(dest) if os.path.isdir(os.path.dirname(dest)) and not kept else None
    content_changed = not kept and current != wanted
    entry = {"dest": dest, "changed": parent_changed or content_changed, "content_changed": content_changed}
    if content_changed and spec["diff"] and module._diff:
        entry["before"] = text_for_diff(current)
    if content_changed and not module.check_mode:
        write(module, spec, wanted)
    if os.path.exists(dest):
        args = module.load_file_common_arguments(
            {"path": dest, "owner": spec["owner"], "group": spec["group"], "mode": spec["mode"]}
        )
        entry["changed"] = module.set_fs_attributes_if_different(args, entry["changed"])
    return entry


def main():
    module = AnsibleModule(
        argument_spec={
            "files": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "dest": {"type": "path", "required": True},
                    "content": {"type": "str", "required": True},
                    "owner": {"type": "str"},
                    "group": {"type": "str"},
                    "mode": {"type": "str"},
                    "validate": {"type": "str"},
                    "parent_mode": {"type": "str"},
                    "diff": {"type": "bool", "default": True},
                    "keep_content": {"type": "bool", "default": False},
                },
            },
            "directories": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "path": {"type": "path", "required": True},
                    "owner": {"type": "str"},
                    "group": {"type": "str"},
                    "mode": {"type": "str"},
                    "seed": {"type": "path"},
                    "tree": {"type": "bool", "default": False},
                },
            },
            # Rendered into files by the action plugin before the module runs; never here.
            "templates": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "src": {"type": "str", "required": True},
                    "dest": {"type": "path", "required": True},
                    "vars": {"type": "dict", "default": {}},
                    "owner": {"type": "str"},
                    "group": {"type": "str"},
                    "mode": {"type": "str"},
                    "validate": {"type": "str"},
                    "parent_mode": {"type": "str"},
                    "diff": {"type": "bool", "default": True},
                },
            },
            "absent": {"type": "list", "elements": "path", "default": []},
        },
        supports_check_mode=True,
    )
    if module.params["templates"]:
        module.fail_json(
            msg="files: templates are rendered by the action plugin of the same name; run the module through it"
        )
    files = module.params["files"]
    directories = module.params["directories"]
    absent = module.params["absent"]
    for spec in directories:
        if not os.path.isabs(spec["path"]):
            module.fail_json(msg=f"files: directory {spec['path']!r} is not an absolute path; nothing was changed")
        if os.path.lexists(spec["path"]) and not os.path.isdir(spec["path"]):
            module.fail_json(msg=f"files: directory {spec['path']} exists and is not a directory; nothing was changed")
    for path in absent:
        if not os.path.isabs(path):
            module.fail_json(msg=f"files: absent {path!r} is not an absolute path; nothing was changed")
        if os.path.isdir(path) and not os.path.islink(path):
            module.fail_json(msg=f"files: absent {path} is a directory; nothing was changed")
    for spec in files:
        if not os.path.isabs(spec["dest"]):
            module.fail_json(msg=f"files: {spec['dest']!r} is not an absolute path; nothing was changed")
        if os.path.isdir(spec["dest"]):
            module.fail_json(msg=f"files: {spec['dest']} is a directory; nothing was changed")
    seen = set()
    for spec in files:
        if spec["dest"] in seen:
            module.fail_json(msg=f"files: {spec['dest']} is listed twice; nothing was changed")
        seen.add(spec["dest"])
    changed_directories, directory_diffs = [], []
    for spec in directories:
        changed, diff = ensure_directory(module, spec)
        if changed:
            changed_directories.append(spec["path"])
            directory_diffs.append(diff)
    planned = {spec["path"] for spec in directories}
    entries = [ensure(module, spec, planned) for spec in files]
    removed = [path for path in absent if os.path.lexists(path)]
    if not module.check_mode:
        for path in removed:
            os.unlink(path)
    # The contents are the caller's; the invocation shown at high verbosity names only the paths.
    invocation = {
        "module_args": {"files": [{"dest": spec["dest"]} for spec in files], "directories": directories, "absent": absent}
    }
    module.exit_json(
        changed=any(entry["changed"] for entry in entries) or bool(removed) or bool(changed_directories),
        files=entries,
        removed=removed,
        changed_directories=changed_directories,
        directory_diffs=directory_diffs,
        changed_files=[entry["dest"] for entry in entries if entry["changed"]] + removed,
        invocation=invocation,
    )


if __name__ == "__main__":
    main()
