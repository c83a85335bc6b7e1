# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: source_stamp
short_description: A stamp of a controller directory's files (paths, sizes, modification times)
version_added: 0.2.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Walks a directory on the controller (following symlinks, as M(ansible.builtin.copy) does) and
    returns a SHA-256 over each regular file's relative path, size and modification time. No file is
    read, so a 70 GB model directory is stamped in milliseconds.
  - Refuses a directory with a link that leaves it (staging would copy what it points at, such as a
    key, to every host); a snapshot of a Hugging Face cache may link into its own repository's blobs.
  - model_stage records the stamp in the staged model's manifest; while the stamp and the staged
    files' sizes and times are unchanged, a re-run copies nothing (the quick check rsync makes).
options:
  _terms:
    description: The directory.
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Stamp the model directory
  ansible.builtin.set_fact:
    __stamp: "{{ lookup('sparkfleet.vllm.source_stamp', '/srv/models/llama') }}"
"""

RETURN = r"""
_raw:
  description: C(sha256:) followed by the hex digest, one per term.
  type: list
  elements: str
"""

import hashlib
import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase


def link_boundary(directory: str) -> str:
    """Where links in a model directory may point: the directory itself, or for a snapshot of a Hugging Face
    cache (models--ORG--NAME/snapshots/REVISION, whose files link to ../../blobs) the cached repository."""
    real = os.path.realpath(directory)
    parent, revision = os.path.split(real)
    repo, snapshots = os.path.split(parent)
    if snapshots == "snapshots" and os.path.basename(repo).startswith("models--") and revision:
        return repo
    return real


def check_link(path: str, directory: str, boundary: str) -> None:
    """Refuse a link whose target leaves the boundary: staging copies what a link points at, as root."""
    target = os.path.realpath(path)
    if os.path.commonpath([target, boundary]) != boundary:
        raise AnsibleLookupError(
            f"source_stamp: {os.path.relpath(path, directory)} in {directory} links to {target}, outside the model "
            "directory; a model directory may not link out of itself (model_stage_models[*].src)"
        )


def stamp(directory: str) -> str:
    if not os.path.isdir(directory):
        raise AnsibleLookupError(f"source_stamp: {directory} is not a directory on the controller")
    boundary = link_boundary(directory)
    digest = hashlib.sha256()
    for root, dirs, names in os.walk(directory, followlinks=True):
        dirs.sort()
        for name in dirs:
            if os.path.islink(os.path.join(root, name)):
                check_link(os.path.join(root, name), directory, boundary)
        for name in sorted(names):
            path = os.path.join(root, name)
            if os.path.islink(path):
                check_link(path, directory, boundary)
            if not os.path.isfile(path):
                continue
            found = os.stat(path)
            relative = os.path.relpath(path, directory)
            digest.update(f"{relative}\0{found.st_size}\0{found.st_mtime_ns}\n".encode())
    return "sha256:" + digest.hexdigest()


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        return [stamp(str(term)) for term in terms]
