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
options:
  release_dir:
    description: Path of the current vLLM release (a venv); its vLLM version is reported.
    type: path
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
attributes:
  check_mode:
    description: Only reads the host.
    support: full
  diff_mode:
    description: Nothing changes, so there is no diff.
    support: none
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
      description: Per staged directory, its config.json and the bytes of its weights.
      type: dict
"""

import glob
import json
import os
import platform as pyplatform
import re

from ansible.module_utils.basic import AnsibleModule

GB10_CAPABILITY = "12.1"


def parse_meminfo(text):
    values = {}
    for line in text.splitlines():
        match = re.match(r"^(\w+):\s+(\d+)\s*kB", line)
        if match:
            values[match.group(1)] = int(match.group(2)) * 1024
    return {"mem_total_bytes": values.get("MemTotal"), "mem_available_bytes": values.get("MemAvailable")}


def parse_gpu_query(text):
    """Rows of `nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader`."""
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 3 or fields[0].lower() == "name":
            continue
        gpus.append(
            {
                "name": fields[0],
                "compute_capability": fields[1],
                "driver_version": fields[2],
                "memory_total": fields[3] if len(fields) > 3 else None,
            }
        )
    return gpus


def parse_cuda_release(text):
    match = re.search(r"release (\d+\.\d+)", text or "")
    return match.group(1) if match else None


def platform_for(gpus):
    """gb10 for a GB10 (sm_121), cpu without a GPU; any other GPU is reported as such so the planner refuses it."""
    if not gpus:
        return "cpu"
    return "gb10" if gpus[0]["compute_capability"] == GB10_CAPABILITY else "unsupported-gpu"


def vllm_version_in(release_dir):
    if not release_dir:
        return None
    pattern = os.path.join(release_dir, "lib", "python3*", "site-packages", "vllm-*.dist-info", "METADATA")
    for metadata in sorted(glob.glob(pattern)):
        with open(metadata, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    return None


def describe_model(path):
    config_path = os.path.join(path, "config.json")
    if not os.path.isfile(config_path):
        return {"path": path, "present": False}
    with open(config_path, encoding="utf-8") as handle:
        config = json.load(handle)
    weights = 0
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as handle:
            weights = json.load(handle).get("metadata", {}).get("total_size") or 0
    if not weights:
        weights = sum(os.path.getsize(f) for f in glob.glob(os.path.join(path, "*.safetensors")))
    return {"path": path, "present": True, "config": config, "weight_bytes": int(weights)}


def gather(module):
    params = module.params
    facts = {"arch": pyplatform.machine(), "platform": "cpu", "unified_memory": False}
    with open("/proc/meminfo", encoding="utf-8") as handle:
        facts.update(parse_meminfo(handle.read()))
    smi = module.get_bin_path(params["nvidia_smi"])
    if smi:
        rc, out, _err = module.run_command(
            [smi, "--query-gpu=name,compute_cap,driver_version,memory.total", "--format=csv,noheader"]
        )
        gpus = parse_gpu_query(out) if rc == 0 else []
        if gpus:
            gpu = gpus[0]
            facts.update(
                gpu_name=gpu["name"],
                compute_capability=gpu["compute_capability"],
                driver_version=gpu["driver_version"],
                gpu_count=len(gpus),
            )
            facts.update(platform=platform_for(gpus), unified_memory=platform_for(gpus) == "gb10")
    ptxas = os.path.join(params["cuda_home"], "bin", "ptxas")
    if os.access(ptxas, os.X_OK):
        facts["ptxas_path"] = ptxas
        rc, out, _err = module.run_command([ptxas, "--version"])
        facts["cuda_version"] = parse_cuda_release(out) if rc == 0 else None
    facts["vllm_version"] = vllm_version_in(params["release_dir"])
    facts["models"] = {path: describe_model(path) for path in params["model_dirs"]}
    return {key: value for key, value in facts.items() if value is not None}


def main():
    module = AnsibleModule(
        argument_spec={
            "release_dir": {"type": "path"},
            "model_dirs": {"type": "list", "elements": "path", "default": []},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "cuda_home": {"type": "path", "default": "/usr/local/cuda"},
        },
        supports_check_mode=True,
    )
    module.exit_json(changed=False, spark_facts=gather(module))


if __name__ == "__main__":
    main()
