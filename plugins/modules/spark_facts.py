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
      description:
        - Per staged directory, its config.json, the bytes of its weights, its largest safetensors file
          (C(largest_weight_file_bytes)) and the type of the filesystem holding it (C(fs_type), from the mount table).
      type: dict
    staged:
      description:
        - Per model id in I(model_refs), its resolved path, source (local or hub), config, weight bytes, largest
          safetensors file, filesystem type and completeness.
        - A model staged from a directory also has the C(source_stamp) its manifest recorded.
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
"""

import glob
import json
import os
import platform as pyplatform
import re
import sys

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


def canonical_name(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_packages(release_dir):
    """Name -> version of every distribution in the release's site-packages (its dist-info METADATA)."""
    found = {}
    pattern = os.path.join(release_dir, "lib", "python3*", "site-packages", "*.dist-info", "METADATA")
    for metadata in glob.glob(pattern):
        name = version = None
        with open(metadata, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("Name:"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("Version:"):
                    version = line.split(":", 1)[1].strip()
                if (name and version) or not line.strip():
                    break
        if name and version:
            found[canonical_name(name)] = version
    return found


def read_json(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def read_lock(release_dir):
    return read_json(os.path.join(release_dir, ".sparkfleet-lock.json"))


def host_glibc():
    try:
        name, version = os.confstr("CS_GNU_LIBC_VERSION").split()
    except (AttributeError, ValueError, OSError):
        return None
    return version if name == "glibc" else None


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
    shards = [os.path.getsize(f) for f in glob.glob(os.path.join(path, "*.safetensors"))]
    if not weights:
        weights = sum(shards)
    found = {"path": path, "present": True, "config": config, "weight_bytes": int(weights)}
    # The tokenizer's own classes (tokenizer_config.json auto_map) need the repository's code too.
    tokenizer_path = os.path.join(path, "tokenizer_config.json")
    if os.path.isfile(tokenizer_path):
        try:
            with open(tokenizer_path, encoding="utf-8") as handle:
                found["tokenizer_auto_map"] = isinstance(json.load(handle).get("auto_map"), dict)
        except (OSError, ValueError, AttributeError):
            found["tokenizer_auto_map"] = False
    found["fs_type"] = filesystem_type(path)
    if shards:
        found["largest_weight_file_bytes"] = max(shards)
    return found


def describe_storage(path):
    """Free bytes and filesystem of the directory a model will be written to (or its nearest existing parent)."""
    existing = os.path.abspath(path)
    while not os.path.isdir(existing) and existing != os.path.dirname(existing):
        existing = os.path.dirname(existing)
    stats = os.statvfs(existing)
    return {
        "path": path,
        "measured_at": existing,
        "free_bytes": stats.f_bavail * stats.f_frsize,
        "device": os.stat(existing).st_dev,
        "fs_type": filesystem_type(existing),
    }


def filesystem_type(path, mounts="/proc/self/mounts"):
    """The type of the filesystem holding path: the longest mount point that contains it."""
    try:
        with open(mounts, encoding="utf-8") as handle:
            table = [line.split()[1:3] for line in handle if len(line.split()) >= 3]
    except OSError:
        return None
    real = os.path.realpath(path)
    best, kind = "", None
    for escaped, fstype in table:
        point = escaped.replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fstype
    return kind


def hub_snapshot(hf_home, model_id, revision):
    """The snapshot directory the hub cache holds for a revision (a commit, or a branch / tag through refs/)."""
    repo = os.path.join(hf_home, "hub", "models--" + model_id.replace("/", "--"))
    rev = revision or "main"
    ref_file = os.path.join(repo, "refs", rev)
    if os.path.isfile(ref_file):
        with open(ref_file, encoding="utf-8") as handle:
            rev = handle.read().strip()
    return repo, os.path.join(repo, "snapshots", rev)


def hub_complete(repo, snapshot):
    """All files the weight index names are in the snapshot and no download is half done."""
    if glob.glob(os.path.join(repo, "blobs", "*.incomplete")):
        return False
    index = os.path.join(snapshot, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as handle:
            shards = set(json.load(handle).get("weight_map", {}).values())
        return all(os.path.isfile(os.path.join(snapshot, shard)) for shard in shards)
    return bool(glob.glob(os.path.join(snapshot, "*.safetensors")))


MANIFEST = ".sparkfleet-staged.json"


def file_matches(path, recorded):
    """A file is as staged when its size (and, in newer manifests, its modification time) is unchanged."""
    if not os.path.isfile(path):
        return False
    found = os.stat(path)
    if isinstance(recorded, list):
        size, mtime = recorded
        return found.st_size == size and found.st_mtime == mtime
    return found.st_size == recorded


def local_staged(path):
    """Whether every file of the manifest model_stage wrote is as it was staged, and the source stamp it recorded."""
    manifest = os.path.join(path, MANIFEST)
    if not os.path.isfile(manifest):
        return False, None
    with open(manifest, encoding="utf-8") as handle:
        recorded = json.load(handle)
    files = recorded.get("files", {})
    complete = bool(files) and all(file_matches(os.path.join(path, name), value) for name, value in files.items())
    return complete, recorded.get("source")


def resolve_model(ref, hf_home, model_store):
    model_id = ref.get("id")
    if not model_id:
        return None
    if model_store:
        local = os.path.join(model_store, model_id)
        if os.path.isfile(os.path.join(local, "config.json")):
            found = describe_model(local)
            complete, source_stamp = local_staged(local)
            found.update(id=model_id, source="local", complete=complete, source_stamp=source_stamp)
            return found
    if hf_home:
        repo, snapshot = hub_snapshot(hf_home, model_id, ref.get("revision"))
        found = describe_model(snapshot)
        found.update(id=model_id, source="hub", complete=found["present"] and hub_complete(repo, snapshot))
        return found
    return {"id": model_id, "path": None, "present": False, "complete": False}


def read_text(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def read_int(path):
    text = read_text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def describe_netdev(sysfs, name):
    if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,15}", name) or name in (".", ".."):
        return None
    base = os.path.join(sysfs, "class", "net", name)
    if not os.path.isdir(base):
        return None
    speed = read_int(os.path.join(base, "speed"))
    return {
        "mtu": read_int(os.path.join(base, "mtu")),
        "operstate": read_text(os.path.join(base, "operstate")) or "",
        "speed_mbps": speed if speed is not None and speed > 0 else None,
    }


def read_link(sysfs, interfaces):
    """The RDMA ports (what ibstat and ibdev2netdev show) and the network interfaces they and the link use."""
    ports = []
    root = os.path.join(sysfs, "class", "infiniband")
    for device in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        netdir = os.path.join(root, device, "device", "net")
        netdevs = sorted(os.listdir(netdir)) if os.path.isdir(netdir) else []
        portdir = os.path.join(root, device, "ports")
        for port in sorted(os.listdir(portdir)) if os.path.isdir(portdir) else []:
            if not port.isdigit():
                continue
            here = os.path.join(portdir, port)
            ports.append(
                {
                    "device": device,
                    "port": int(port),
                    "state": read_text(os.path.join(here, "state")) or "",
                    "phys_state": read_text(os.path.join(here, "phys_state")) or "",
                    "rate": read_text(os.path.join(here, "rate")) or "",
                    "link_layer": read_text(os.path.join(here, "link_layer")) or "",
                    "netdevs": netdevs,
                }
            )
    names = sorted({name for port in ports for name in port["netdevs"]} | set(interfaces))
    described = {name: describe_netdev(sysfs, name) for name in names}
    return {"rdma_ports": ports, "netdevs": {name: found for name, found in described.items() if found is not None}}


def describe_release(release_dir, with_packages=False):
    if not release_dir or not os.path.isdir(release_dir):
        return None
    real = os.path.realpath(release_dir)
    found = {"path": real, "id": os.path.basename(real), "vllm_version": vllm_version_in(real)}
    lock = read_lock(real)
    if lock is not None:
        found.update(locked=True, cuda=lock.get("cuda"), source=lock.get("source"), vllm_package=lock.get("vllm_package"))
        # FlashInfer's kernels prebuilt for its exact version, as the lock recorded it (None: compiled at first start).
        found["prebuilt_kernels"] = lock.get("prebuilt_kernels")
    # What a fork release declared it carries beyond its version (vllm_install_capabilities).
    found["capabilities"] = (read_json(os.path.join(real, ".sparkfleet-release.json")) or {}).get("capabilities") or []
    if with_packages:
        found["lock_packages"] = (lock or {}).get("packages")
        found["installed_packages"] = installed_packages(real)
    return found


def gather(module):
    params = module.params
    facts = {
        "arch": pyplatform.machine(),
        "glibc": host_glibc(),
        "python_version": "%d.%d" % sys.version_info[:2],
        "platform": "cpu",
        "unified_memory": False,
    }
    with open(params["meminfo"], encoding="utf-8") as handle:
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
    systemctl = module.get_bin_path("systemctl")
    if systemctl and os.path.isdir("/run/systemd/system"):
        rc, out, _err = module.run_command([systemctl, "get-default"])
        facts["default_target"] = out.strip() if rc == 0 else None
    facts["vllm_version"] = vllm_version_in(params["release_dir"])
    facts["release"] = describe_release(params["release_dir"], params["release_packages"])
    facts["vllm_capabilities"] = (facts["release"] or {}).get("capabilities")
    facts["models"] = {path: describe_model(path) for path in params["model_dirs"]}
    refs = list(params["model_refs"]) + [{"id": model_id} for model_id in params["model_ids"]]
    staged = (resolve_model(ref, params["hf_home"], params["model_store"]) for ref in refs)
    facts["staged"] = {found["id"]: found for found in staged if found}
    # The verbs nodes NCCL's RDMA transport opens (a cluster member's sandbox allows exactly these).
    facts["rdma_devices"] = sorted(glob.glob("/dev/infiniband/uverbs[0-9]*")) + (
        ["/dev/infiniband/rdma_cm"] if os.path.exists("/dev/infiniband/rdma_cm") else []
    )
    facts["link"] = read_link(params["sysfs"], params["link_interfaces"])
    facts["storage"] = {name: describe_storage(params[name]) for name in ("hf_home", "model_store") if params[name]} or None
    if params["platform"] != "auto":
        facts["detected_platform"] = facts["platform"]
        facts.update(platform=params["platform"], unified_memory=params["platform"] == "gb10")
    return {key: value for key, value in facts.items() if value is not None}


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
