# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: side_recipes
short_description: Lock each vLLM release installed beside the main one, and return its install recipe
version_added: 0.15.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Each entry of C(vllm_install_releases) takes the main release's install inputs and replaces the keys it names
    (C(vllm_version), C(source), C(git_repo), C(git_ref), C(precompiled_wheel), C(torch_version),
    C(torchvision_version), C(flashinfer_version), C(extra_packages), C(excludes), C(capabilities), C(index_urls)),
    and carries its own C(patches), whose contents, read on the controller where the file lookup finds them, are part
    of its release id.
  - Each is locked like the main release (as P(sparkfleet.vllm.release_lock#lookup) does, resolved once and kept in I(cache_dir))
    and returned as its install recipe with its C(name); its release id and directory are its own.
  - A bad entry fails naming C(vllm_install_releases[N].key) and what it takes, before any host changes.
options:
  _terms:
    description: The main release's install inputs (as the role builds them).
    type: dict
    required: true
  releases:
    description: The side releases (C(vllm_install_releases)).
    type: list
    elements: dict
    default: []
  root:
    description: The install root (C(sparkfleet_root)).
    type: str
    required: true
  host_arch:
    description: The host's architecture (C(sparkfleet_facts.arch)).
    type: str
  host_glibc:
    description: The host's glibc version (C(sparkfleet_facts.glibc)).
    type: str
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
- name: Lock the side releases
  ansible.builtin.set_fact:
    __side: "{{ query('sparkfleet.vllm.side_recipes', __inputs, releases=[{'name': 'older', 'vllm_version': '0.30.0'}],
                      root='/opt/sparkfleet') }}"
"""

RETURN = r"""
_raw:
  description: One install recipe per side release (as P(sparkfleet.vllm.install_recipe#filter) returns it) with its C(name).
  type: list
  elements: dict
"""

import hashlib
from pathlib import Path

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.library import load


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        plain = load("sparkfleet.boundary.adapters").plain
        side = load("sparkfleet.recipes.side")
        resolver = load("sparkfleet.resolver")
        inputs_from = load("sparkfleet.recipes").inputs_from
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1 or not isinstance(terms[0], dict):
            raise AnsibleLookupError("side_recipes: one term, the dict of the main release's install inputs")
        cache = self.get_option("cache_dir")
        releases = plain(self.get_option("releases"))
        try:
            sides = side.side_release_inputs(plain(terms[0]), releases, self._patch_sha256s(variables, releases))
            out = []
            for entry in sides:
                lock = resolver.lock_for(
                    inputs_from(entry["inputs"]),
                    host_arch=self.get_option("host_arch") or None,
                    host_glibc=self.get_option("host_glibc") or None,
                    cache_dir=Path(cache).expanduser() if cache else None,
                    relock=self.get_option("relock"),
                )
                out.append(side.side_recipe(entry, self.get_option("root"), lock))
        except ValueError as exc:
            raise AnsibleLookupError(f"side_recipes: {exc}") from exc
        return out

    def _patch_sha256s(self, variables, releases):
        """Each side release's patches by content, read on the controller where the file lookup finds them."""
        found = {}
        for index, item in enumerate(releases or []):
            if not isinstance(item, dict) or not isinstance(item.get("patches"), list):
                continue
            hashes = []
            for number, patch in enumerate(item["patches"]):
                src = patch.get("src") if isinstance(patch, dict) else None
                path = (
                    self.find_file_in_search_path(variables, "files", src, ignore_missing=True)
                    if isinstance(src, str)
                    else None
                )
                if not path:
                    raise AnsibleLookupError(
                        f"side_recipes: vllm_install_releases[{index}].patches[{number}].src: {src!r} is not a file on the controller"
                    )
                with open(path, "rb") as handle:
                    hashes.append(hashlib.sha256(handle.read()).hexdigest())
            found[str(item.get("name"))] = hashes
        return found
