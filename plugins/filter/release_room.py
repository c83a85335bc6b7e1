# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: release_room
short_description: Whether the releases still to build fit on the filesystems they are written to
version_added: 0.15.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Sums what the releases to build take (their footprints, P(sparkfleet.vllm.release_footprint#lookup)) and
    returns one problem per filesystem whose free space cannot take it plus the margin kept after it, naming
    each release, its largest packages and what it could not measure.
  - uv unpacks each wheel into its cache and links the release's files to it, so a filesystem holding both the
    release root and uv's cache takes the files once; each of two filesystems takes them whole.
positional: df_lines, margin_gib
options:
  _input:
    description: The releases to build, by name (C(main) or the side release's), each its footprint.
    type: dict
    required: true
  df_lines:
    description: The lines C(room LABEL DEVICE FREE_KIB MOUNT) the preflight reads with df, one per directory.
    type: list
    elements: str
    required: true
  margin_gib:
    description: GiB to leave free after the build (C(vllm_install_free_margin_gib)).
    type: float
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Refuse a build that does not fit
  ansible.builtin.assert:
    that: __room.problems | length == 0
    fail_msg: "{{ __room.problems | join('; ') }}"
  vars:
    __room: "{{ {'main': __footprint} | sparkfleet.vllm.release_room(['room sparkfleet_root /dev/nvme0n1p2 900000000 /'], 4) }}"
"""

RETURN = r"""
_value:
  description:
    - C(problems), one message per filesystem that is too small, naming the releases, the GiB they need and the GiB
      free; C(releases), what each release takes (its id, GiB, largest packages and what could not be measured).
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

release_room = library_filter("release_room")


class FilterModule:
    def filters(self):
        return {"release_room": release_room}
