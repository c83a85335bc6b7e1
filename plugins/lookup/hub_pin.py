# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: hub_pin
short_description: Pin hub models' revisions to commits on the controller
version_added: 0.2.0
author: sparkfleet contributors (@sparkfleet)
description:
  - For each model entry (C(id) with an optional C(revision), a branch, tag or commit; default C(main)), the
    commit to stage and serve. A commit is its own pin. A branch or tag is resolved once (one HEAD request to
    the hub) and its commit kept in I(pin_dir), so every host and every later run stages and serves that same
    commit, whatever lands on the branch meanwhile; the result says when the branch has moved on (C(moved),
    C(current)), and I(repin) takes its head again.
  - A hub that cannot be reached leaves an existing pin in force; a model without a pin is then refused.
  - With each pin comes the manifest of what staging fetches at that commit (sparkfleet.manifest, kept in
    I(pin_dir) beside the pins as C(ORG--NAME@COMMIT.manifest.json)) - the configs, tokenizer and templates, the
    weight index and exactly the shards its weight_map names, a bundled drafter's own files, and what the
    entry's C(extra_files) patterns ask for, each with its size and checksum (the hub's sha256 for LFS files,
    the git blob id otherwise). It is listed once per commit (and again when C(extra_files) changes), so every
    host of a fleet stages the same bytes, and an unreachable hub leaves a recorded manifest in force.
options:
  _terms:
    description:
      - Model entries ({id, revision, extra_files}) or ids (C(ORG/NAME[@REVISION])), as a list or one by one.
      - C(extra_files), fnmatch patterns of more files to fetch (C(original/*)), is added to the manifest.
    type: raw
    required: true
  pin_dir:
    description: Controller directory where pins are kept (model_stage passes C(model_stage_pin_dir), the one default).
    type: str
    required: true
  repin:
    description: Resolve every branch or tag again and keep the new commit.
    type: bool
    default: false
  endpoint:
    description: The hub's address (C(HF_ENDPOINT)); empty for huggingface.co or the controller's HF_ENDPOINT.
    type: str
    default: ""
  token:
    description: A token for gated or private repositories; empty for none (or the controller's own login).
    type: str
    default: ""
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Pin the hub models
  ansible.builtin.set_fact:
    __pins: "{{ query('sparkfleet.vllm.hub_pin', [{'id': 'nvidia/Qwen3.6-35B-A3B-NVFP4'}], pin_dir='~/.cache/sparkfleet/hub-pins') }}"
"""

RETURN = r"""
_raw:
  description:
    - One item per entry, C(id), C(revision), C(commit) (what to stage and serve), C(pinned_at), C(current) (the
      revision's head now, none when the hub was not reached) and C(moved).
    - C(manifest) (the manifest's path on the controller), C(manifest_digest) (sha256 of the canonical manifest,
      what the ranks of a cluster compare), C(manifest_files), C(manifest_bytes) (what staging fetches) and
      C(repo_bytes) (the whole repository at the commit).
  type: list
  elements: dict
"""

from datetime import datetime, timezone
from pathlib import Path

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.library import load


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        hub = load("sparkfleet.hub")
        pins = load("sparkfleet.hubpins")
        self.set_options(var_options=variables, direct=kwargs)
        pin_dir = Path(self.get_option("pin_dir")).expanduser()
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        results = []
        # A list given as one term (query('...', model_stage_models)) counts as its items.
        entries = [item for given in terms for item in (given if isinstance(given, list) else [given])]
        for entry in entries:
            extra_files = ()
            if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                repo_id, revision = entry["id"], entry.get("revision")
                extra_files = entry.get("extra_files") or ()
                if isinstance(extra_files, str) or not all(isinstance(p, str) and p for p in extra_files):
                    raise AnsibleLookupError(
                        f"hub_pin: {repo_id}: extra_files is a list of file patterns, got {extra_files!r}"
                    )
            elif isinstance(entry, str) and hub.MODEL_REF.fullmatch(entry):
                repo_id, revision = hub.parse_model_ref(entry)
            else:
                raise AnsibleLookupError(f"hub_pin: each term is a model entry {{id, revision}} or an id, got {entry!r}")
            hub_access = {"endpoint": self.get_option("endpoint") or None, "token": self.get_option("token") or None}
            try:
                pinned = pins.pin_revision(
                    repo_id,
                    str(revision) if revision else None,
                    pin_dir,
                    now,
                    repin=self.get_option("repin"),
                    **hub_access,
                )
                manifest, path = pins.stage_manifest(repo_id, pinned.commit, pin_dir, tuple(extra_files), **hub_access)
            except ValueError as exc:
                raise AnsibleLookupError(f"hub_pin: model_stage_models: {exc}") from exc
            results.append(
                pinned.as_dict()
                | {
                    "manifest": str(path),
                    "manifest_digest": manifest.digest,
                    "manifest_files": len(manifest.files),
                    "manifest_bytes": manifest.bytes,
                    "repo_bytes": manifest.repo_bytes,
                }
            )
        return results
