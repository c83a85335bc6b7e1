#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: host_facts
short_description: Gather what the sparkfleet planner and roles need to know of a host, as the fact sparkfleet_facts
version_added: 0.9.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Reads the GPU name, compute capability and driver version from nvidia-smi when it is present, the CUDA
    version and ptxas path, MemTotal and MemAvailable, the CPU architecture, glibc, the default systemd target,
    the vLLM release at O(release_dir) and the host's RDMA device nodes.
  - In the same call, the state the roles would otherwise ask for one module call each, so that a converged host
    is checked without changing anything; the accounts in O(users) and O(groups), the packages in O(packages)
    and the paths in O(paths).
  - A host without an NVIDIA GPU is reported as platform C(cpu); a GPU with compute capability 12.1 (GB10) as
    C(gb10); any other GPU as C(unsupported-gpu), which the planner refuses.
  - Reads only; safe in check mode.
options:
  platform:
    description:
      - C(auto) reports what the host is; C(gb10) or C(cpu) overrides it (for example to serve a CPU build on a
        GPU box, or to render a GB10 plan from recorded facts).
    type: str
    choices: [auto, gb10, cpu]
    default: auto
  release_dir:
    description:
      - Path of the current vLLM release (a venv, usually the C(current) symlink); its vLLM version, resolved path
        and release id (the directory name) are reported.
    type: path
  release_packages:
    description:
      - Also report the release's lock (C(lock_packages)) and the packages installed in it (C(installed_packages)).
    type: bool
    default: false
  meminfo:
    description: File to read MemTotal and MemAvailable from.
    type: path
    default: /proc/meminfo
  nvidia_smi:
    description: nvidia-smi executable.
    type: str
    default: nvidia-smi
  cuda_home:
    description: CUDA toolkit root used to find ptxas.
    type: path
    default: /usr/local/cuda
  cuda_ceiling_file:
    description:
      - On a GB10 host the facts carry CUDA's own free and total memory (cuMemGetInfo through the driver, after
        dropping the page cache, which CUDA counts as used there), the figure vLLM's start check reads.
      - What CUDA reports free with no sparkfleet instance running is the host's ceiling, recorded in this file (in a
        root-owned directory, since the planner trusts it; again when it moved by more than 1 % of the total; never
        in check mode) and read back while instances run. Unset, CUDA is not read.
    type: path
  users:
    description: Accounts to look up (C(accounts.users), each its uid, gid, group, home and shell, or null).
    type: list
    elements: str
    default: []
  user_prefix:
    description:
      - Also report every account whose name starts with this (in C(accounts.users)), so that accounts whose names
        the host plan makes are known before that plan is made.
    type: str
  groups:
    description: Groups to look up (C(accounts.groups), each its gid, or null).
    type: list
    elements: str
    default: []
  packages:
    description: Debian packages whose installed state is reported under C(packages) (null without dpkg).
    type: list
    elements: str
    default: []
  os_packages:
    description:
      - Also report every installed Debian package under C(os_packages) (a sorted list of names; null without
        dpkg), so that a role installing packages asks apt only for the ones missing, with no module call of its
        own.
    type: bool
    default: false
    version_added: 0.12.0
  paths:
    description: Paths reported under C(paths) (exists, link and its target, dir, executable).
    type: list
    elements: path
    default: []
attributes:
  facts:
    description: Sets the fact C(sparkfleet_facts).
    support: full
extends_documentation_fragment:
  - sparkfleet.vllm.read_only
"""

EXAMPLES = r"""
- name: Gather the host facts
  sparkfleet.vllm.host_facts:
    release_dir: /opt/sparkfleet/current
    users: [sparkfleet]
    packages: [nginx]
    paths: [/opt/sparkfleet/uv/0.13.9/bin/uv]

- name: Show the platform
  ansible.builtin.debug:
    msg: "{{ sparkfleet_facts.platform }}, nginx installed: {{ sparkfleet_facts.packages.nginx }}"
"""

RETURN = r"""
ansible_facts:
  description: The facts set.
  returned: always
  type: dict
  contains:
    sparkfleet_facts:
      description:
        - The host in the shape the planner's filters take (platform, arch, glibc, gpu_name, compute_capability,
          driver_version, cuda_version, ptxas_path, mem_total_bytes, mem_available_bytes, unified_memory,
          cuda_free_bytes, cuda_total_bytes, cuda_ceiling_bytes (GB10, with I(cuda_ceiling_file)),
          vllm_version, vllm_capabilities, release, side_releases (the releases installed beside current), rdma_devices,
          default_target), with C(accounts), C(packages), C(os_packages) and C(paths) as asked.
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.vllm.plugins.module_utils.host_state import (
    accounts,
    gather_host,
    installed_os_packages,
    package_state,
    path_state,
)


def gather(module):
    params = module.params
    facts = gather_host(module, params)
    facts["accounts"] = accounts(params["users"], params["groups"], params["user_prefix"])
    facts["packages"] = package_state(module.run_command, module.get_bin_path("dpkg-query"), params["packages"])
    if params["os_packages"]:
        facts["os_packages"] = installed_os_packages(module.run_command, module.get_bin_path("dpkg-query"))
    facts["paths"] = {path: path_state(path) for path in params["paths"]}
    return facts


def main():
    module = AnsibleModule(
        argument_spec={
            "platform": {"type": "str", "choices": ["auto", "gb10", "cpu"], "default": "auto"},
            "release_dir": {"type": "path"},
            "release_packages": {"type": "bool", "default": False},
            "meminfo": {"type": "path", "default": "/proc/meminfo"},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "cuda_home": {"type": "path", "default": "/usr/local/cuda"},
            "cuda_ceiling_file": {"type": "path"},
            "users": {"type": "list", "elements": "str", "default": []},
            "user_prefix": {"type": "str"},
            "groups": {"type": "list", "elements": "str", "default": []},
            "packages": {"type": "list", "elements": "str", "default": []},
            "os_packages": {"type": "bool", "default": False},
            "paths": {"type": "list", "elements": "path", "default": []},
        },
        supports_check_mode=True,
    )
    module.exit_json(changed=False, ansible_facts={"sparkfleet_facts": gather(module)})


if __name__ == "__main__":
    main()
