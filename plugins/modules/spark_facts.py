#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: spark_facts
short_description: Gather the facts the sparkfleet planner needs from a DGX Spark or CPU host
version_added: 0.1.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Reads GPU name, compute capability and driver version from nvidia-smi when it is present,
    the CUDA version and ptxas path, MemTotal and MemAvailable from /proc/meminfo, the CPU
    architecture, the vLLM version installed in the current release, and for each staged model
    directory its config.json and weight bytes.
  - A host without an NVIDIA GPU is reported as platform C(cpu); a GPU with compute capability
    12.1 (GB10) as C(gb10); any other GPU as C(unsupported-gpu), which the planner refuses.
  - Reads only; safe in check mode.
deprecated:
  removed_in: 1.0.0
  why: >-
    Its three parts are modules of their own, which the roles read - the host and its release (host_facts, with the
    free memory CUDA reports on GB10, which this module never read), the staged models (model_facts) and the link
    (link_facts).
  alternative: Use M(sparkfleet.vllm.host_facts), M(sparkfleet.vllm.model_facts) and M(sparkfleet.vllm.link_facts).
options:
  platform:
    description:
      - C(auto) reports what the host is; C(gb10) or C(cpu) overrides it (for example to serve a
        CPU build on a GPU box, or to render a GB10 plan from recorded facts).
    type: str
    choices: [auto, gb10, cpu]
    default: auto
  release_dir:
    description:
      - Path of the current vLLM release (a venv, usually the C(current) symlink); its vLLM
        version, resolved path and release id (the directory name) are reported.
    type: path
  release_packages:
    description:
      - Also report the release's lock (C(lock_packages), from C(.sparkfleet-lock.json)) and the
        packages installed in it (C(installed_packages), from the dist-info metadata), to compare them.
    type: bool
    default: false
  hf_home:
    description: The shared Hugging Face home that holds hub downloads (C(hub/models--org--name)).
    type: path
  model_store:
    description: Directory that holds models staged from a local or controller-side path (C(<model_store>/<id>)).
    type: path
  model_refs:
    description:
      - Models to resolve by id (and optional revision) in I(model_store), then in the I(hf_home) hub cache.
      - Each is reported under C(staged) with its path, config, weight bytes and whether it is complete.
    type: list
    elements: dict
    default: []
  model_ids:
    description: Like I(model_refs), by id only (the default revision, C(main)).
    type: list
    elements: str
    default: []
  meminfo:
    description: File to read MemTotal and MemAvailable from.
    type: path
    default: /proc/meminfo
  model_dirs:
    description: Staged model directories to describe (config.json and weight bytes).
    type: list
    elements: path
    default: []
  nvidia_smi:
    description: nvidia-smi executable.
    type: str
    default: nvidia-smi
  cuda_home:
    description: CUDA toolkit root used to find ptxas and nvcc.
    type: path
    default: /usr/local/cuda
  sysfs:
    description: Where sysfs is mounted; the RDMA ports and network interfaces are read under it.
    type: path
    default: /sys
  link_interfaces:
    description: Network interfaces to describe beside the RDMA devices' own (the cluster link, C(ray_cluster_interface)).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - sparkfleet.vllm.read_only
"""

EXAMPLES = r"""
- name: Gather Spark facts
  sparkfleet.vllm.spark_facts:
    release_dir: /opt/sparkfleet/releases/current
    model_dirs:
      - /srv/hf/models/tiny-llama
  register: __facts
"""

RETURN = r"""
spark_facts:
  description: Host facts in the shape the serve_plan filter takes.
  returned: always
  type: dict
  contains:
    platform:
      description: gb10 or cpu.
      type: str
    mem_total_bytes:
      description: MemTotal in bytes.
      type: int
    models:
      description:
        - Per staged directory, its config.json, the bytes of its weights, its largest safetensors file
          (C(largest_weight_file_bytes)) and the type of the filesystem holding it (C(fs_type), from the mount table).
      type: dict
    staged:
      description:
        - Per model id in I(model_refs), its resolved path, source (local or hub), config, weight bytes, largest
          safetensors file, filesystem type and completeness.
        - A model staged from a directory also has the C(source_stamp) its manifest recorded.
        - A model staged from the hub also has the C(manifest_digest) its files last passed verification against
          and C(failing) (path and why, for each file not present at its size or changed since).
      type: dict
    rdma_devices:
      description: The host's RDMA verbs nodes (C(/dev/infiniband/uverbsN)) and C(/dev/infiniband/rdma_cm), when it has them.
      type: list
      elements: str
    link:
      description:
        - C(rdma_ports), each RDMA device port from sysfs (device, port, state, phys_state, rate, link_layer and the
          netdevs of its PCI function), and C(netdevs), those netdevs and I(link_interfaces) with mtu, operstate and
          speed_mbps; what the cluster's link preflight and doctor judge.
      type: dict
    storage:
      description:
        - For I(hf_home) and I(model_store), where models are written, C(free_bytes) (for an unprivileged writer),
          C(fs_type), C(device) (one filesystem shares it) and C(measured_at) (the nearest existing directory).
      type: dict
    release:
      description:
        - The release I(release_dir) points to (path, id, vllm_version, the lock's cuda and prebuilt FlashInfer kernels, declared capabilities), when it exists;
          with I(release_packages) also C(lock_packages) and C(installed_packages) (name to version).
      type: dict
    glibc:
      description: The host's glibc version (the target a release is locked for).
      type: str
    python_version:
      description: Major.minor of the Python that ran this module.
      type: str
    default_target:
      description: The systemd target the host boots to (C(systemctl get-default)), on systemd hosts.
      type: str
    vllm_capabilities:
      description: What the current release declared it carries beyond its vLLM version (a fork's C(vllm_install_capabilities)).
      type: list
      elements: str
    side_releases:
      description:
        - The releases installed beside current for the instances that name them (C(vllm_install_releases)), each
          with its C(name), C(vllm_version), C(id), C(path), C(capabilities), C(prebuilt_kernels) and C(record).
      type: list
      elements: dict
"""


from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.vllm.plugins.module_utils.host_state import gather_host
from ansible_collections.sparkfleet.vllm.plugins.module_utils.link_state import read_link
from ansible_collections.sparkfleet.vllm.plugins.module_utils.model_state import (
    describe_model,
    describe_storage,
    resolve_model,
)


def gather(module):
    params = module.params
    host = gather_host(module, params)
    refs = list(params["model_refs"]) + [{"id": model_id} for model_id in params["model_ids"]]
    staged = (resolve_model(ref, params["hf_home"], params["model_store"]) for ref in refs)
    more = {
        "models": {path: describe_model(path) for path in params["model_dirs"]},
        "staged": {found["id"]: found for found in staged if found},
        "link": read_link(params["sysfs"], params["link_interfaces"]),
        "storage": {name: describe_storage(params[name]) for name in ("hf_home", "model_store") if params[name]} or None,
    }
    return {**host, **{key: value for key, value in more.items() if value is not None}}


def main():
    module = AnsibleModule(
        argument_spec={
            "platform": {"type": "str", "choices": ["auto", "gb10", "cpu"], "default": "auto"},
            "release_dir": {"type": "path"},
            "release_packages": {"type": "bool", "default": False},
            "hf_home": {"type": "path"},
            "model_store": {"type": "path"},
            "model_refs": {"type": "list", "elements": "dict", "default": []},
            "model_ids": {"type": "list", "elements": "str", "default": []},
            "meminfo": {"type": "path", "default": "/proc/meminfo"},
            "model_dirs": {"type": "list", "elements": "path", "default": []},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "cuda_home": {"type": "path", "default": "/usr/local/cuda"},
            "sysfs": {"type": "path", "default": "/sys"},
            "link_interfaces": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    module.exit_json(changed=False, spark_facts=gather(module))


if __name__ == "__main__":
    main()
