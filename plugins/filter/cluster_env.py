# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: cluster_env
short_description: The environment every Ray and vLLM process of a multi-Spark cluster needs on one node
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - The interconnect variables (C(NCCL_SOCKET_IFNAME), C(GLOO_SOCKET_IFNAME), C(UCX_NET_DEVICES),
    C(TP_SOCKET_IFNAME), C(NCCL_IB_HCA), C(NCCL_IB_DISABLE), C(NCCL_IB_GID_INDEX), C(NCCL_NET_PLUGIN),
    C(NCCL_IB_ROCE_VERSION_NUM), C(NCCL_IB_TIMEOUT), C(RAY_memory_monitor_refresh_ms)), each with its reason
    and source, and one NCCL library preloaded for every process (C(LD_PRELOAD), C(VLLM_NCCL_SO_PATH)).
  - With O(auth_token_path), Ray's token authentication (C(RAY_AUTH_MODE), C(RAY_AUTH_TOKEN_PATH)).
  - Refuses a bad interface or device name, or an NCCL build the node does not have, naming the variable.
positional: nccl_found, nccl_wanted, host, auth_token_path
options:
  _input:
    description: C(interface), C(hcas), C(gid_index), C(roce_version), C(ib_timeout).
    type: dict
    required: true
  nccl_found:
    description: C(pip), C(pip_version), C(system), C(system_version) as found on the node.
    type: dict
    required: true
  nccl_wanted:
    description: Which NCCL every process loads.
    type: str
    choices: [pip, system, none]
    required: true
  host:
    description: The node, for messages.
    type: str
    required: true
  auth_token_path:
    description:
      - Where every process of the cluster reads Ray's authentication token; adds C(RAY_AUTH_MODE=token) and
        C(RAY_AUTH_TOKEN_PATH). Omitted, the environment has no Ray settings (the link check of the preflight).
    type: str
    required: false
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

EXAMPLES = r"""
- name: Plan the node's environment
  ansible.builtin.set_fact:
    __env: "{{ {'interface': 'enp1s0f1np1', 'hcas': ['rocep1s0f1']} | sparkfleet.vllm.cluster_env({}, 'none', inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: C(env) (list of name, value, reason, source) and C(nccl) (which library, in words).
  type: dict
"""

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filters import library_filter

cluster_env = library_filter("cluster_env")


class FilterModule:
    def filters(self):
        return {"cluster_env": cluster_env}
