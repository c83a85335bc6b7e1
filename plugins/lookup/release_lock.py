# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: release_lock
short_description: Resolve a vLLM release into a hash-pinned lock on the controller
version_added: 0.2.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Resolves the release's requirements with uv's resolver for the TARGET (a Spark is aarch64 with
    DGX OS's glibc and Python, whatever the controller is), from the package index's metadata only
    (no wheel is downloaded), into a lock with hashes. torch, torchvision and FlashInfer default to
    what the vLLM release itself requires; a pin that conflicts fails with the resolver's reason and
    the variable named.
  - On gb10 the lock must carry a CUDA 13 torch and no C(+cpu) wheel; otherwise it fails naming the
    package that brought which CUDA.
  - A git source is pinned to the commit its ref names, and the fork's own requirement files are read
    at that commit.
  - The lock is kept in I(cache_dir) under a hash of the request, so every host of a play and every
    later play installs the same packages until I(relock) is set. I(lock_file) (written by
    C(sparkfleet release lock --output)) takes precedence and is checked against the host.
options:
  _terms:
    description: The vllm_install inputs (platform, vllm_version, pins, indexes, ...), as the role builds them.
    type: dict
    required: true
  host_arch:
    description: The host's architecture (C(sparkfleet_facts.arch)).
    type: str
  host_glibc:
    description: The host's glibc version (C(sparkfleet_facts.glibc)).
    type: str
  lock_file:
    description: A committed lock (controller path); empty resolves on the controller.
    type: str
    default: ""
  cache_dir:
    description: Controller directory for resolved locks; empty resolves every time.
    type: str
    default: ""
  relock:
    description: Resolve again even if a lock for the same request is cached.
    type: bool
    default: false
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Lock the release on the controller
  ansible.builtin.set_fact:
    __lock: "{{ lookup('sparkfleet.vllm.release_lock', {'platform': 'gb10', 'vllm_version': '0.32.0', 'uv_version': '0.13.9'}) }}"
"""

RETURN = r"""
_raw:
  description:
    - The lock, one item; C(release_id), C(platform), C(target), C(python), C(cuda), C(packages)
      (name to version), C(requirements) (the lock text uv pip sync installs) and C(git_sha).
  type: list
  elements: dict
"""

from pathlib import Path

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.library import load


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        plain = load("sparkfleet.boundary.adapters").plain
        inputs_from = load("sparkfleet.recipes").inputs_from
        lock_for = load("sparkfleet.resolver").lock_for
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1 or not isinstance(terms[0], dict):
            raise AnsibleLookupError("release_lock: one term, the dict of install inputs")
        cache = self.get_option("cache_dir")
        try:
            lock = lock_for(
                inputs_from(plain(terms[0])),
                host_arch=self.get_option("host_arch") or None,
                host_glibc=self.get_option("host_glibc") or None,
                lock_file=self.get_option("lock_file") or None,
                cache_dir=Path(cache).expanduser() if cache else None,
                relock=self.get_option("relock"),
            )
        except ValueError as exc:
            raise AnsibleLookupError(f"release_lock: {exc}") from exc
        return [lock.model_dump(mode="json")]
