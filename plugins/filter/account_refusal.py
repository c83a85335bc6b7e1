# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: account_refusal
short_description: Why the host's existing accounts may not be given to sparkfleet's services, if they may not
version_added: 0.13.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Returns the refusal (one message naming the variable and what to do) when the service user, the front door's,
    the supervisors' or an instance's account exists and can log in (a shell that is not nologin or false, or uid 0),
    or when the door's or the supervisors' account is the service user or root; an empty string otherwise.
positional: names, host
options:
  _input:
    description: The accounts M(sparkfleet.vllm.host_facts) read (C(sparkfleet_facts.accounts.users)).
    type: dict
    required: true
  names:
    description: C(service), C(door), C(supervisor) (account names) and C(instance_prefix).
    type: dict
    required: true
  host:
    description: The host's name, for the message.
    type: str
    required: true
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Refuse an existing account that can log in
  ansible.builtin.assert:
    that: __refused | length == 0
    fail_msg: "{{ __refused }}"
  vars:
    __refused: >-
      {{ sparkfleet_facts.accounts.users | sparkfleet.vllm.account_refusal(
           {'service': 'sparkfleet', 'door': 'sparkfleet-door', 'supervisor': 'sparkfleet-supervisor',
            'instance_prefix': 'sparkfleet-vllm-'}, inventory_hostname) }}
"""

RETURN = r"""
_value:
  description: The refusal, or an empty string.
  type: str
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

account_refusal = library_filter("account_refusal")


class FilterModule:
    def filters(self):
        return {"account_refusal": account_refusal}
