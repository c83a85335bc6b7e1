# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: install_recipe
short_description: The commands that install a locked vLLM release, and its id
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Validates the install inputs (versions, git ref, indexes, requirements, patches) and returns the
    release id (a hash of the lock, the patches and a fork's commit) with the exact commands that
    install the lock (C(uv pip sync), hash-checked) and smoke-test it.
  - Errors name the role variable (C(vllm_install_<input>)) and the rule it broke.
positional: root, lock
options:
  _input:
    description: Install inputs (platform, vllm_source, vllm_version, torch_version, index_urls, patches, ...).
    type: dict
    required: true
  root:
    description: Install root; releases live under C(<root>/releases/<id>).
    type: path
    required: true
  lock:
    description: The lock from the C(sparkfleet.vllm.release_lock) lookup.
    type: dict
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Compute the release
  ansible.builtin.set_fact:
    __recipe: "{{ __inputs | sparkfleet.vllm.install_recipe('/opt/sparkfleet', __lock) }}"
"""

RETURN = r"""
_value:
  description:
    - C(release_id), C(release_dir), C(inputs_dir), C(vllm_version), C(lock), C(lock_summary), C(steps),
      C(smoke), C(expected_platform) and C(expected_cuda).
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

install_recipe = library_filter("install_recipe")


class FilterModule:
    def filters(self):
        return {"install_recipe": install_recipe}
