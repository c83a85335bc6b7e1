#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: release_switch
short_description: Point a sparkfleet root's current link at a release, keep the outgoing one as previous, prune old ones
version_added: 0.2.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Replaces C(<root>/current) through a rename (readers see the old or the new release, never none).
    When it pointed at another release, C(<root>/previous) is pointed there first, so a rollback has
    a target.
  - With O(keep), removes the releases under C(<root>/releases) beyond the newest O(keep) (by
    modification time) and their build inputs under C(<root>/build); never the current or the
    previous release.
  - One module call for what took four (stat, link, find, stat) on a converged host.
options:
  root:
    description: The install root (C(sparkfleet_root)).
    type: path
    required: true
  release:
    description:
      - The release directory current must point at; it must exist under O(root)C(/releases) (in check
        mode it may be one the run would build).
    type: path
    required: true
  keep:
    description: The newest O(keep) releases stay and older ones go, except current and previous, which always stay; unset prunes nothing.
    type: int
  cache_dir:
    description:
      - The service's cache root (C(sparkfleet_cache_dir)). A pruned release's compile caches go with it, those of every
        kind in O(cache_kinds) named by its id, the shared ones (C(<cache_dir>/<kind>/<id>)) and each instance's
        (C(<cache_dir>/instances/<name>/<kind>/<id>)).
      - The service accounts write there, so a path that leads through a link is left alone (and reported), never
        followed.
    type: path
    version_added: 0.14.0
  cache_kinds:
    description: The compile caches kept per release (C(sparkfleet_release_cache_names)).
    type: list
    elements: str
    default: []
    version_added: 0.14.0
  pinned:
    description:
      - Releases installed beside current for the instances that name them (C(vllm_install_releases)), never pruned
        and not counted against O(keep).
    type: list
    elements: path
    default: []
    version_added: 0.15.0
  units_dir:
    description:
      - Where the host's systemd units are. A release that a unit of sparkfleet's (C(sparkfleet*.service)) still runs
        from is never pruned, whatever O(keep) says, and is reported in RV(in_use); an instance no longer listed but
        still installed keeps its release until its unit is gone.
    type: path
    default: /etc/systemd/system
    version_added: 0.15.0
attributes:
  check_mode:
    description: Reports the links it would change and the releases it would remove.
    support: full
  diff_mode:
    description: Before and after of the current and previous links.
    support: full
  platform:
    description: POSIX hosts.
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Switch current to the release and prune old ones
  sparkfleet.vllm.release_switch:
    root: /opt/sparkfleet
    release: /opt/sparkfleet/releases/0.32.0-cpu-1a2b3c4d
    keep: 3
    cache_dir: /var/cache/sparkfleet
    cache_kinds: [vllm, torch-compile, triton, flashinfer]
"""

RETURN = r"""
caches_left:
  description: Compile caches of a pruned release left in place because a link leads to them (never followed).
  returned: always
  type: list
  elements: str
current:
  description: The release current points at afterwards.
  returned: always
  type: str
previous:
  description: The release previous points at afterwards (empty when there is none).
  returned: always
  type: str
in_use:
  description: Releases beyond O(keep) left in place because a unit still runs from them.
  returned: always
  type: list
  elements: str
  version_added: 0.15.0
pruned:
  description: The release and build directories removed, and their compile caches (or, in check mode, those that would be).
  returned: always
  type: list
  elements: str
record:
  description:
    - What the release's own build implements, as its smoke step wrote it (C(.sparkfleet-record.json)); the planner
      holds the release's instances to it. None for a release built without one.
  returned: always
  type: dict
"""

import glob
import json
import os
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.vllm.plugins.module_utils.host_state import RELEASE_RECORD


def link_target(path):
    """The resolved directory a link points at, or empty when it is not a link."""
    return os.path.realpath(path) if os.path.islink(path) else ""


def point(link, target):
    """Replace a link through a rename, so it never goes missing."""
    temporary = f"{link}.sparkfleet-new"
    if os.path.lexists(temporary):
        os.unlink(temporary)
    os.symlink(target, temporary)
    os.replace(temporary, link)


def units_running_from(units_dir, releases):
    """Of the releases, those a sparkfleet unit's text names (its ExecStart, PATH or caches lie in the release)."""
    texts = []
    for path in sorted(glob.glob(os.path.join(units_dir or "", "sparkfleet*.service"))):
        try:
            with open(path, encoding="utf-8") as handle:
                texts.append(handle.read())
        except OSError:
            continue
    return sorted(release for release in releases if any(release.rstrip("/") + "/" in text for text in texts))


def prune_candidates(root, keep, protected, pinned=frozenset()):
    releases_dir = os.path.join(root, "releases")
    # A pinned release (one installed beside current for the instances that name it) neither goes nor counts.
    releases = [
        os.path.join(releases_dir, name)
        for name in os.listdir(releases_dir)
        if os.path.isdir(os.path.join(releases_dir, name))
        and not os.path.islink(os.path.join(releases_dir, name))
        and os.path.realpath(os.path.join(releases_dir, name)) not in pinned
    ]
    releases.sort(key=lambda path: os.stat(path).st_mtime, reverse=True)
    doomed = [path for path in releases[keep:] if os.path.realpath(path) not in protected]
    builds = [os.path.join(root, "build", os.path.basename(path)) for path in doomed]
    return doomed + [path for path in builds if os.path.isdir(path)]


def release_caches(cache_dir, kinds, release_ids):
    """The compile caches of the given releases: (those to remove, those left because a link leads to them)."""
    if not cache_dir or not os.path.isdir(cache_dir):
        return [], []
    parents = [cache_dir]
    instances = os.path.join(cache_dir, "instances")
    if os.path.isdir(instances) and not os.path.islink(instances):
        parents += [os.path.join(instances, name) for name in sorted(os.listdir(instances))]
    found, linked = [], []
    for parent in parents:
        for kind in kinds:
            for release_id in release_ids:
                path = os.path.join(parent, kind, release_id)
                if not os.path.lexists(path):
                    continue
                # Written by the service accounts: anything but a real directory at its own path is not followed.
                if os.path.realpath(path) != os.path.abspath(path) or not os.path.isdir(path):
                    linked.append(path)
                else:
                    found.append(path)
    return found, linked


def read_record(release):
    """The release's own record, or None (a release built before records were kept, or one not built yet)."""
    try:
        with open(os.path.join(release, RELEASE_RECORD), encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def main():
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "required": True},
            "release": {"type": "path", "required": True},
            "keep": {"type": "int"},
            "cache_dir": {"type": "path"},
            "cache_kinds": {"type": "list", "elements": "str", "default": []},
            "pinned": {"type": "list", "elements": "path", "default": []},
            "units_dir": {"type": "path", "default": "/etc/systemd/system"},
        },
        supports_check_mode=True,
    )
    root, release, keep = module.params["root"], module.params["release"], module.params["keep"]
    # Links are compared resolved and written as given (the path the role names).
    resolved = os.path.realpath(release)
    # In check mode the release may be one the run would have built.
    exists = os.path.isdir(resolved) or module.check_mode
    if os.path.dirname(resolved) != os.path.realpath(os.path.join(root, "releases")) or not exists:
        module.fail_json(msg=f"release: {release} is not a release directory under {root}/releases; nothing was changed")
    if keep is not None and keep < 0:
        module.fail_json(msg=f"keep: {keep} is negative; use 0 or more (current and previous are always kept)")
    current_link, previous_link = os.path.join(root, "current"), os.path.join(root, "previous")
    before = {"current": link_target(current_link), "previous": link_target(previous_link)}
    after = dict(before, current=resolved)
    if before["current"] and before["current"] != resolved:
        after["previous"] = before["current"]
    pinned = frozenset(os.path.realpath(path) for path in module.params["pinned"])
    pruned = prune_candidates(root, keep, {after["current"], after["previous"]}, pinned) if keep is not None else []
    # A release a unit still runs from stays (with its build inputs), or the unit's next start finds nothing.
    in_use = units_running_from(module.params["units_dir"], [p for p in pruned if os.path.dirname(p).endswith("releases")])
    pruned = [p for p in pruned if p not in in_use and os.path.join(root, "releases", os.path.basename(p)) not in in_use]
    gone = sorted({os.path.basename(path) for path in pruned})
    caches, linked = release_caches(module.params["cache_dir"], module.params["cache_kinds"], gone)
    pruned += caches
    changed = after != before or bool(pruned)
    if changed and not module.check_mode:
        if after["previous"] != before["previous"]:
            point(previous_link, after["previous"])
        if after["current"] != before["current"]:
            point(current_link, release)
        for path in pruned:
            shutil.rmtree(path)
    module.exit_json(
        changed=changed,
        current=after["current"],
        previous=after["previous"],
        pruned=pruned,
        caches_left=linked,
        in_use=in_use,
        record=read_record(resolved),
        diff={"before": before, "after": after},
    )


if __name__ == "__main__":
    main()
