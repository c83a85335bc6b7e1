# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: uv_requirement
short_description: The hash-pinned requirement that installs one uv release, resolved on the controller
version_added: 0.2.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Returns C(uv==VERSION) with the sha256 of every file the package index has for that release, for
    C(pip install --require-hashes), because root installs uv on every host and then builds releases with it, so
    a file swapped on the index, a mirror or the way is refused instead of run.
  - Resolved once with uv's resolver (index metadata only) and kept in I(cache_dir) next to the release
    locks, so every host and every later run installs exactly those files.
  - Refuses, naming C(vllm_install_uv_version), a version that is not a uv release or that the index
    does not have.
options:
  _terms:
    description: The uv version, for example C(0.13.9).
    type: str
    required: true
  cache_dir:
    description: Controller directory for resolved requirements; empty resolves every time.
    type: str
    default: ""
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Pin uv by hash
  ansible.builtin.set_fact:
    __uv_requirement: "{{ lookup('sparkfleet.vllm.uv_requirement', '0.13.9', cache_dir='~/.cache/sparkfleet/locks') }}"
"""

RETURN = r"""
_raw:
  description: The requirement text, one item (C(uv==0.13.9) and one C(--hash=sha256:...) line per file).
  type: list
  elements: str
"""

from pathlib import Path

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.library import load


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1:
            raise AnsibleLookupError("uv_requirement: one term, the uv version")
        cache = self.get_option("cache_dir")
        try:
            text = load("sparkfleet.resolver").uv_requirement(str(terms[0]), Path(cache).expanduser() if cache else None)
        except ValueError as exc:
            raise AnsibleLookupError(f"uv_requirement: {exc}") from exc
        return [text]
