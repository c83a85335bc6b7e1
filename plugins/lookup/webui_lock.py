# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: webui_lock
short_description: Open WebUI's hash-locked requirements for a host's target, resolved on the controller
version_added: 0.2.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Resolves C(open-webui==VERSION) for the target a release lock records (architecture, glibc, Python) with uv's
    resolver (index metadata only), every package with its sha256 for C(uv pip sync --require-hashes), because root
    installs it; torch and the local embedding and speech model packages are left out (the UI uses the door's
    models).
  - Kept in I(cache_dir) next to the release locks, so every host and every later run installs exactly those files;
    I(relock) resolves again. Refuses, naming C(webui_version), a release that does not resolve for the target.
options:
  _terms:
    description: The Open WebUI version, for example C(0.12.4).
    type: str
    required: true
  target:
    description: C(arch), C(glibc) and C(python) of the host (the C(target) of its release lock).
    type: dict
    required: true
  cache_dir:
    description: Controller directory for resolved locks; empty resolves every time.
    type: str
    default: ""
  relock:
    description: Resolve again even when a kept lock exists.
    type: bool
    default: false
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Lock Open WebUI
  ansible.builtin.set_fact:
    __webui_lock: >-
      {{ lookup('sparkfleet.vllm.webui_lock', '0.12.4', target={'arch': 'aarch64', 'glibc': '2.39', 'python': '3.12'}) }}
"""

RETURN = r"""
_raw:
  description: One item, C(version), C(target), C(requirements) (the lock text), C(sha256) and C(packages) (name to
    version).
  type: list
  elements: dict
"""

from pathlib import Path

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.library import load


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1:
            raise AnsibleLookupError("webui_lock: one term, the Open WebUI version")
        cache = self.get_option("cache_dir")
        target = load("sparkfleet.boundary.adapters").plain(self.get_option("target"))
        try:
            lock = load("sparkfleet.hostconfig.webui").webui_lock_from(
                str(terms[0]), target, Path(cache).expanduser() if cache else None, self.get_option("relock")
            )
        except ValueError as exc:
            raise AnsibleLookupError(f"webui_lock: {exc}") from exc
        return [lock.model_dump(mode="json")]
