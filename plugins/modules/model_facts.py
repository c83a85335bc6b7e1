#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: model_facts
short_description: Describe the models staged on a host, as the fact sparkfleet_models
version_added: 0.9.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Resolves each model of O(model_refs) in O(model_store), then in the O(hf_home) hub cache, and reports its
    path, config.json, weight bytes, largest safetensors file, filesystem type and whether it is complete.
  - A hub model that model_stage verified against its manifest (the record beside its snapshots,
    C(hub/models--ORG--NAME/sparkfleet/COMMIT.json)) is complete only while every file of the manifest is
    present at its size and unchanged (size, time, inode) since its checksum passed, which costs a stat per
    file; it reports the manifest's C(manifest_digest), which the ranks of a cluster compare, and the
    C(failing) files, each with why.
  - Describes the directories of O(model_dirs) the same way, and the free space where models are written.
  - Reads only; safe in check mode.
options:
  hf_home:
    description: The shared Hugging Face home that holds hub downloads (C(hub/models--org--name)).
    type: path
  model_store:
    description: Directory that holds models staged from a local or controller-side path (C(<model_store>/<id>)).
    type: path
  model_refs:
    description: Models to resolve, each a dict with C(id) and an optional C(revision).
    type: list
    elements: dict
    default: []
  model_dirs:
    description: Model directories to describe (config.json and weight bytes).
    type: list
    elements: path
    default: []
attributes:
  facts:
    description: Sets the fact C(sparkfleet_models).
    support: full
extends_documentation_fragment:
  - sparkfleet.vllm.read_only
"""

EXAMPLES = r"""
- name: Describe the staged models
  sparkfleet.vllm.model_facts:
    hf_home: /var/lib/sparkfleet/hf
    model_store: /var/lib/sparkfleet/models
    model_refs: [{id: nvidia/Qwen3.6-35B-A3B-NVFP4}]

- name: Show whether it is complete
  ansible.builtin.debug:
    msg: "{{ sparkfleet_models.staged['nvidia/Qwen3.6-35B-A3B-NVFP4'].complete }}"
"""

RETURN = r"""
ansible_facts:
  description: The facts set.
  returned: always
  type: dict
  contains:
    sparkfleet_models:
      description:
        - C(staged), per model id of O(model_refs), its resolved path, source (local or hub), config, weight bytes,
          largest safetensors file, filesystem type and completeness (a model staged from a directory also has the
          C(source_stamp) its manifest recorded).
        - A resolved model also has C(manifest_digest) (sha256 of the hub manifest it was verified against, none
          when it was not, or for a model from a directory) and C(failing) (C({path, why}) per file of that
          manifest that is missing, of another size, or changed or unverified since its checksum passed); a hub
          model verified against a manifest has C(manifest_files) and C(manifest_bytes) too.
        - C(models), per directory of O(model_dirs), the same description.
        - C(storage), for O(hf_home) and O(model_store), C(free_bytes), C(fs_type), C(device) and C(measured_at).
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.vllm.plugins.module_utils.model_state import (
    describe_model,
    describe_storage,
    resolve_model,
)


def gather(params):
    staged = (resolve_model(ref, params["hf_home"], params["model_store"]) for ref in params["model_refs"])
    return {
        "staged": {found["id"]: found for found in staged if found},
        "models": {path: describe_model(path) for path in params["model_dirs"]},
        "storage": {name: describe_storage(params[name]) for name in ("hf_home", "model_store") if params[name]},
    }


def main():
    module = AnsibleModule(
        argument_spec={
            "hf_home": {"type": "path"},
            "model_store": {"type": "path"},
            "model_refs": {"type": "list", "elements": "dict", "default": []},
            "model_dirs": {"type": "list", "elements": "path", "default": []},
        },
        supports_check_mode=True,
    )
    module.exit_json(changed=False, ansible_facts={"sparkfleet_models": gather(module.params)})


if __name__ == "__main__":
    main()
