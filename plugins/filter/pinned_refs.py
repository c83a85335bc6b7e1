# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: pinned_refs
short_description: Model references at their pinned commits, for spark_facts' model_refs
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
requirements:
  - the Python packages of the collection's requirements.txt on the controller (pydantic, PyYAML, uv); the sparkfleet library itself ships in the collection
"""

EXAMPLES = r"""
- name: Look for the models at their pinned commits
  sparkfleet.vllm.spark_facts:
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

from ansible.errors import AnsibleFilterError


def pinned_refs(entries, pins):
    refs = []
    for entry in entries or []:
        model_id = entry.get("id") if isinstance(entry, dict) else entry
        if not isinstance(model_id, str):
            raise AnsibleFilterError(f"pinned_refs: each entry is a model id or a dict with an id, got {entry!r}")
        pin = (pins or {}).get(model_id)
        revision = (
            pin.get("commit") if isinstance(pin, dict) else (entry.get("revision") if isinstance(entry, dict) else None)
        )
        refs.append({"id": model_id, "revision": str(revision)} if revision else {"id": model_id})
    return refs


class FilterModule:
    def filters(self):
        return {"pinned_refs": pinned_refs}
