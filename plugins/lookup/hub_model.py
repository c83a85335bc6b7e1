# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: hub_model
short_description: Describe a Hugging Face model for the planner from its config.json and safetensors headers
version_added: 0.2.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Runs on the controller, before anything is downloaded to a host, so a fleet has a plan for a model
    before model_stage fetches its weights. Reads the model's C(config.json) and each safetensors
    shard's header (one range request of the first 100 kB per shard) through huggingface_hub; the
    tensors' dtypes and byte spans give the exact weight size. No weights are downloaded.
  - HF_ENDPOINT, HF_TOKEN, HF_HOME and HF_HUB_OFFLINE of the controller apply as they do for
    C(hf download); what the headers gave is cached under HF_HOME/sparkfleet, so a later offline run
    plans from the cache.
  - A catalog id is not read at all; it is returned with its C(id) and C(catalog) set to C(true), and
    planned with its curated profile.
  - An unknown, gated (without a token with access), unreachable or safetensors-less repository fails
    with a message naming the fix.
options:
  _terms:
    description:
      - Model ids, C(ORG/NAME) or C(ORG/NAME@REVISION) (a branch, tag or commit), or
        C(model_stage_models) entries (C(id) with optional C(revision)).
    type: list
    elements: raw
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Describe a hub model for the planner before staging it
  ansible.builtin.set_fact:
    __described: "{{ query('sparkfleet.vllm.hub_model', 'Qwen/Qwen3-Next-80B-A3B-Instruct@main') }}"
"""

RETURN = r"""
_raw:
  description:
    - One dict per term, in the shape M(sparkfleet.vllm.model_facts) describes a staged model, for the
      host_plan filter; C(id), C(path) (the id), C(present), C(config), C(weight_bytes), C(commit) (the
      commit that was read) and C(source); or C(id) and C(catalog) for a catalog id.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.library import load


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        describe = load("sparkfleet.hub").describe
        self.set_options(var_options=variables, direct=kwargs)
        results = []
        # A list given as one term (query('...', model_stage_models)) counts as its items.
        flat = [item for term in terms for item in (term if isinstance(term, list) else [term])]
        for term in flat:
            ref = term
            if isinstance(term, dict) and isinstance(term.get("id"), str):
                ref = term["id"] + (f"@{term['revision']}" if term.get("revision") else "")
            if not isinstance(ref, str):
                raise AnsibleLookupError(f"hub_model: each term is a model id such as ORG/NAME[@REVISION], got {term!r}")
            try:
                results.append(describe(ref))
            except ValueError as exc:
                raise AnsibleLookupError(f"hub_model: model_stage_models: {exc}") from exc
        return results
