# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host is: its GPU, memory, CUDA, vLLM release, accounts, packages and paths (read only)."""

from __future__ import annotations

import glob
import json
import os
import platform as pyplatform
import re
import sys

from ansible_collections.sparkfleet.vllm.plugins.module_utils.cuda_memory import read_cuda_memory

GB10_CAPABILITY = "12.1"
# In each release directory: what it was built from (build.yml's manifest) and what its build implements (its smoke
# step's record). The roles read these names from the sparkfleet role's vars, the library from release/record.py.
RELEASE_MANIFEST = ".sparkfleet-release.json"
RELEASE_RECORD = ".sparkfleet-record.json"
# The host's ceiling is measured again only when an idle reading moves by more than this share of CUDA's total:
# plans follow it, and a plan that moved restarts its instance.
CEILING_HYSTERESIS = 0.01


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
        found["kernels_note"] = lock.get("kernels_note")
    # What a fork release declared it carries beyond its version (vllm_install_capabilities).
    found["capabilities"] = (read_json(os.path.join(real, RELEASE_MANIFEST)) or {}).get("capabilities") or []
    # What the build itself implements, as its smoke step read it (sparkfleet.release.record_reader); None for a
    # release built before records were kept.
    found["record"] = read_json(os.path.join(real, RELEASE_RECORD))
    if with_packages:
        found["lock_packages"] = (lock or {}).get("packages")
        found["installed_packages"] = installed_packages(real)
    return found


def side_releases(release_dir):
    """The releases installed beside current for the instances that name them (vllm_install_releases): each release
    directory whose manifest carries a side name, described as the planner reads it."""
    if not release_dir:
        return []
    releases = os.path.dirname(os.path.realpath(release_dir))
    if not os.path.isdir(releases):
        return []
    found = []
    for entry in sorted(os.listdir(releases)):
        path = os.path.join(releases, entry)
        manifest = read_json(os.path.join(path, RELEASE_MANIFEST)) or {}
        if os.path.islink(path) or not manifest.get("side_name"):
            continue
        described = describe_release(path) or {}
        found.append(
            {
                "name": manifest["side_name"],
                # The version its recipe named (as a plan names it), not the build's local tag (0.30.0+cpu).
                "vllm_version": manifest.get("vllm_version") or described.get("vllm_version"),
                "id": described.get("id"),
                "path": described.get("path"),
                "capabilities": described.get("capabilities") or [],
                "prebuilt_kernels": described.get("prebuilt_kernels"),
                "record": described.get("record"),
            }
        )
    return found


def rdma_devices():
    """The verbs nodes NCCL's RDMA transport opens (a cluster member's sandbox allows exactly these)."""
    return sorted(glob.glob("/dev/infiniband/uverbs[0-9]*")) + (
        ["/dev/infiniband/rdma_cm"] if os.path.exists("/dev/infiniband/rdma_cm") else []
    )


def accounts(users, groups, user_prefix=None):
    """Each named user's passwd entry (and every one whose name starts with user_prefix) and each named group's
    gid; None for one that does not exist."""
    import grp
    import pwd

    found = {"users": {}, "groups": {}}
    entries = {}
    for name in users:
        try:
            entries[name] = pwd.getpwnam(name)
        except KeyError:
            entries[name] = None
    if user_prefix:
        entries.update((entry.pw_name, entry) for entry in pwd.getpwall() if entry.pw_name.startswith(user_prefix))
    for name, entry in entries.items():
        found["users"][name] = (
            None
            if entry is None
            else {
                "uid": entry.pw_uid,
                "gid": entry.pw_gid,
                "group": _group_name(grp, entry.pw_gid),
                "home": entry.pw_dir,
                "shell": entry.pw_shell,
            }
        )
    for name in groups:
        try:
            found["groups"][name] = {"gid": grp.getgrnam(name).gr_gid}
        except KeyError:
            found["groups"][name] = None
    return found


def _group_name(grp, gid):
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return None


def parse_dpkg_status(text):
    """Package -> installed, from `dpkg-query --show --showformat='${Package} ${db:Status-Status}\\n'`."""
    return {
        fields[0]: fields[1] == "installed" for fields in (line.split() for line in text.splitlines()) if len(fields) == 2
    }


def package_state(run_command, dpkg_query, names):
    """Each named package's installed state (False for one dpkg does not know; None everywhere without dpkg)."""
    if not names:
        return {}
    if not dpkg_query:
        return {name: None for name in names}
    _rc, out, _err = run_command([dpkg_query, "--show", "--showformat=${Package} ${db:Status-Status}\\n", *names])
    known = parse_dpkg_status(out)
    return {name: known.get(name, False) for name in names}


def installed_os_packages(run_command, dpkg_query):
    """The names of every installed Debian package, sorted (None without dpkg)."""
    if not dpkg_query:
        return None
    _rc, out, _err = run_command([dpkg_query, "--show", "--showformat=${Package} ${db:Status-Status}\\n"])
    return sorted(name for name, installed in parse_dpkg_status(out).items() if installed)


def path_state(path):
    """Whether a path exists, what it is, and for a link where it points."""
    if not os.path.lexists(path):
        return {"exists": False}
    found = {"exists": os.path.exists(path), "link": os.path.islink(path), "dir": os.path.isdir(path)}
    if found["link"]:
        found["target"] = os.readlink(path)
    if found["exists"] and not found["dir"]:
        found["executable"] = os.access(path, os.X_OK)
    return found


def cpu_amx_tile(cpuinfo="/proc/cpuinfo"):
    """Whether this is an x86 CPU with AMX tiles (vLLM's CPU platform picks its MLA kernel, and block size, by it)."""
    if pyplatform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return "amx_tile" in line.split()
    except OSError:
        pass
    return False


def drop_page_cache(path="/proc/sys/vm/drop_caches"):
    """Free the page cache before CUDA's free figure is read: on GB10 CUDA counts it as used (the kernel's MemFree).
    False where it cannot be dropped (a container's read-only /proc/sys)."""
    try:
        os.sync()
        with open(path, "w", encoding="ascii") as handle:
            handle.write("3\n")
        return True
    except OSError:
        return False


def instances_running(run_command, systemctl):
    """The sparkfleet vLLM units that are active or starting (None where systemd cannot be asked)."""
    if not systemctl:
        return None
    rc, out, _err = run_command(
        [
            systemctl,
            "list-units",
            "--type=service",
            "--state=active,activating,reloading",
            "--plain",
            "--no-legend",
            "sparkfleet-vllm-*",
        ]
    )
    return sorted(line.split()[0] for line in out.splitlines() if line.strip()) if rc == 0 else None


def cuda_memory_facts(read, drop, running, ceiling_file, check_mode):
    """CUDA's own free and total after dropping the page cache, and the host's ceiling: what CUDA reports free with
    no sparkfleet instance running, recorded in `ceiling_file` (a root-owned directory: the planner trusts it) on an
    idle host when it moved by more than CEILING_HYSTERESIS of the total (never in check mode), and read back while
    instances run."""
    dropped = drop()
    try:
        figures = read()
    except Exception as exc:  # a driver that cannot be read is reported, not fatal to the facts
        return {"cuda_memory_error": str(exc), "cuda_caches_dropped": dropped}
    facts = {
        "cuda_free_bytes": figures["cuda_free_bytes"],
        "cuda_total_bytes": figures["cuda_total_bytes"],
        "cuda_caches_dropped": dropped,
    }
    recorded = read_json(ceiling_file) or {}
    if running == []:
        moved = abs(figures["cuda_free_bytes"] - recorded.get("cuda_free_bytes", 0))
        if not recorded or moved > CEILING_HYSTERESIS * figures["cuda_total_bytes"]:
            recorded = {
                "cuda_free_bytes": figures["cuda_free_bytes"],
                "cuda_total_bytes": figures["cuda_total_bytes"],
                "caches_dropped": dropped,
            }
            if not check_mode and os.path.isdir(os.path.dirname(ceiling_file)):
                # Written atomically and never through a link planted where it goes (the planner trusts it).
                tmp = ceiling_file + ".tmp"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(recorded, handle)
                os.replace(tmp, ceiling_file)
    if recorded.get("cuda_free_bytes"):
        facts["cuda_ceiling_bytes"] = recorded["cuda_free_bytes"]
    return facts


def gather_host(module, params):
    """The host as the planner reads it; `params` has platform, meminfo, nvidia_smi, cuda_home, release_dir and
    release_packages. None values are dropped; C(platform) other than auto overrides what was detected."""
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
    facts["side_releases"] = side_releases(params["release_dir"])
    facts["rdma_devices"] = rdma_devices()
    facts["cpu_amx_tile"] = cpu_amx_tile()
    if params["platform"] != "auto":
        facts["detected_platform"] = facts["platform"]
        facts.update(platform=params["platform"], unified_memory=params["platform"] == "gb10")
    # On GB10 vLLM's start check reads CUDA's own free figure: the planner and the preflight read the same one.
    if facts["platform"] == "gb10" and facts.get("detected_platform", "gb10") == "gb10" and params.get("cuda_ceiling_file"):
        running = instances_running(module.run_command, systemctl if os.path.isdir("/run/systemd/system") else None)
        facts.update(
            cuda_memory_facts(read_cuda_memory, drop_page_cache, running, params["cuda_ceiling_file"], module.check_mode)
        )
        if running is not None:
            facts["running_instances"] = running
    return {key: value for key, value in facts.items() if value is not None}
