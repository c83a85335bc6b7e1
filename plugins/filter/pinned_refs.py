# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: pinned_refs
short_description: Model references at their pinned commits, for model_facts' model_refs
version_added: 0.2.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Turns model entries (C(id) with an optional C(revision), C(src) for a directory) or model ids into
    C({id, revision}) references; a model the C(hub_pin) lookup pinned gets its pinned commit as revision, so
    the staged copy that is looked for, checked and served is exactly the pinned commit's snapshot.
positional: pins
options:
  _input:
    description: Model entries or ids.
    type: list
    elements: raw
    required: true
  pins:
    description: Model id to its pin, as the C(hub_pin) lookup returns them (C(commit) is used).
    type: dict
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Look for the models at their pinned commits
  sparkfleet.vllm.model_facts:
    hf_home: /var/lib/sparkfleet/hf
    model_refs: "{{ model_stage_models | sparkfleet.vllm.pinned_refs(__pins) }}"
    meminfo: /proc/meminfo
"""

RETURN = r"""
_value:
  description: One C({id}) or C({id, revision}) per entry, in order.
  type: list
  elements: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

pinned_refs = library_filter("pinned_refs")


class FilterModule:
    def filters(self):
        return {"pinned_refs": pinned_refs}
