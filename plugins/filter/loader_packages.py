# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: loader_packages
short_description: The packages a release must add for the instances that will run on it
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - For each loader the instances ask for (C(intent.load) fastsafetensors or instanttensor), the requirement
    to add to the release lock when the target vLLM does not require that package itself (vLLM's PyPI wheels
    require fastsafetensors from 0.21.0 and instanttensor from 0.29.0).
  - For instances whose catalog model needs one of vLLM's extras (the profile's C(vllm_extras), such as C(audio) for
    Nemotron-3-Nano-Omni), the platform's vLLM package with those extras (C(vllm[audio])).
  - A package the user's extra packages already name is not added again.
positional: vllm_version, extra_packages
options:
  _input:
    description: The instances (C(vllm_serve_instances)); each may carry C(intent.load).
    type: list
    elements: dict
    required: true
  vllm_version:
    description: The vLLM version the release installs.
    type: str
    required: true
  extra_packages:
    description: The extra packages the user asked for (C(vllm_install_extra_packages)).
    type: list
    elements: str
    default: []
  platform:
    description: The host's platform; an empty I(vllm_version) then means its newest release (C(gb10) C(0.33.0)).
    type: str
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Add the loaders the instances ask for
  ansible.builtin.set_fact:
    __extra: "{{ vllm_serve_instances | sparkfleet.vllm.loader_packages('0.20.0', []) }}"
"""

RETURN = r"""
_value:
  description: Requirements such as C(fastsafetensors>=0.2.2), empty when the release needs none.
  type: list
  elements: str
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

loader_packages = library_filter("loader_packages")


class FilterModule:
    def filters(self):
        return {"loader_packages": loader_packages}
