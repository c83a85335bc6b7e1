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


def stamp(directory: str) -> str:
    if not os.path.isdir(directory):
        raise AnsibleLookupError(f"source_stamp: {directory} is not a directory on the controller")
    digest = hashlib.sha256()
    for root, dirs, names in os.walk(directory, followlinks=True):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
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
