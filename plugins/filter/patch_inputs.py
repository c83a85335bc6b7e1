# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: patch_inputs
short_description: vllm_install_patches as the install recipe takes them
version_added: 0.13.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Each patch with its defaults (C(name) the file's, C(kind) patch, C(target) C(.), C(strip) 1) and the sha256 of
    its content, which makes it part of the release id.
positional: sha256s
options:
  _input:
    description: C(vllm_install_patches).
    type: list
    elements: dict
    required: true
  sha256s:
    description: The sha256 of each patch's C(src), read on the controller, in the same order.
    type: list
    elements: str
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Collect the patches
  ansible.builtin.set_fact:
    patches: >-
      {{ vllm_install_patches | sparkfleet.vllm.patch_inputs(
           query('ansible.builtin.file', *(vllm_install_patches | map(attribute='src')), rstrip=False) | map('hash', 'sha256')) }}
"""

RETURN = r"""
_value:
  description: Each patch's C(name), C(kind), C(target), C(strip) and C(sha256).
  type: list
  elements: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

patch_inputs = library_filter("patch_inputs")


class FilterModule:
    def filters(self):
        return {"patch_inputs": patch_inputs}
