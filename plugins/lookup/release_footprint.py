# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: release_footprint
short_description: What each locked release takes on disk once built, read from its wheels before any download
version_added: 0.15.0
author: sparkfleet contributors (@sparkfleet)
description:
  - For each release recipe, finds the wheel of every package its lock pins for the lock's target, by the hashes the
    lock names (on PyPI, the recipe's other indexes and the lock's kernels index, or in the controller's find-links
    directories), and sums the files its zip's central directory lists, in whole 4 KiB blocks, read with HTTP range
    requests.
  - A package without a wheel for the target (a source build, a fork's vLLM) or that no index answered for is
    named in C(unmeasured) rather than guessed.
  - Kept in I(cache_dir) beside the locks once every package was measured (a lock's files never change).
options:
  _terms:
    description: The release recipes (P(sparkfleet.vllm.install_recipe#filter)'s, P(sparkfleet.vllm.side_recipes#lookup)'s).
    type: list
    elements: dict
    required: true
  cache_dir:
    description: Controller directory for the footprints (the locks' cache); empty measures every time.
    type: str
    default: ""
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: What the release takes
  ansible.builtin.debug:
    msg: "{{ query('sparkfleet.vllm.release_footprint', vllm_install_recipe) }}"
"""

RETURN = r"""
_raw:
  description: One footprint a lock, C(release_id), C(bytes), C(packages) (measured), C(largest) and C(unmeasured).
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
        footprint = load("sparkfleet.release.footprint")
        recipe_model = load("sparkfleet.recipes").Recipe
        self.set_options(var_options=variables, direct=kwargs)
        cache = self.get_option("cache_dir")
        found = []
        for term in terms:
            try:
                # A side release's recipe carries its name beside the recipe's own fields.
                recipe = recipe_model.model_validate({k: v for k, v in plain(term).items() if k != "name"})
            except ValueError as exc:
                raise AnsibleLookupError(f"release_footprint: not a release recipe: {exc}") from exc
            measured = footprint.cached_footprint(
                recipe.lock,
                Path(cache).expanduser() if cache else None,
                [footprint.PYPI_SIMPLE, *recipe.index_urls],
                recipe.lock_find_links,
            )
            found.append(measured.model_dump(mode="json"))
        return found
