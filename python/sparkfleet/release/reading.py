"""Reading a lock uv wrote: its packages, and the CUDA build they target."""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import PlanError
from ..models import Platform, Strict
from .packages import GB10_CUDA_MAJOR, GB10_CUDA_SOURCE
from .request import (
    _CU_LOCAL,
    _CU_SUFFIX,
    _HASH,
    _REQ_LINE,
    _VIA_HEAD,
    _VIA_INLINE,
    _VIA_ITEM,
    PIN_VARIABLES,
    Naming,
    canonical_name,
)


class LockedPackage(Strict):
    name: str
    version: str
    hashes: tuple[str, ...] = ()
    via: tuple[str, ...] = ()


def parse_lock(text: str) -> dict[str, LockedPackage]:
    """Packages of a `uv pip compile` lock: name -> version, hashes and what required it."""
    packages: dict[str, LockedPackage] = {}
    current: dict[str, object] | None = None
    in_via = False

    def flush() -> None:
        if current is not None:
            pkg = LockedPackage.model_validate(current)
            packages[pkg.name] = pkg

    for line in text.splitlines():
        match = _REQ_LINE.match(line)
        if match:
            flush()
            current = {"name": canonical_name(match.group(1)), "version": match.group(3), "hashes": [], "via": []}
            current["hashes"] = list(_HASH.findall(line))
            in_via = False
            continue
        if current is None:
            continue
        hashes = _HASH.findall(line)
        via_list = current["via"]
        assert isinstance(via_list, list)
        if hashes:
            hash_list = current["hashes"]
            assert isinstance(hash_list, list)
            hash_list.extend(hashes)
        elif inline := _VIA_INLINE.match(line):
            via_list.append(canonical_name(inline.group(1).split()[0]))
        elif _VIA_HEAD.match(line):
            in_via = True
        elif in_via and (item := _VIA_ITEM.match(line)):
            via_list.append(canonical_name(item.group(1)))
    flush()
    return packages


def canonical_lock(packages: Mapping[str, LockedPackage]) -> str:
    """The lock's identity: every package, version and hash, in name order (comments do not count)."""
    return "\n".join(
        f"{p.name}=={p.version} {' '.join(sorted(p.hashes))}" for p in sorted(packages.values(), key=lambda pkg: pkg.name)
    )


class CudaFinding(Strict):
    cuda: str | None
    evidence: tuple[str, ...]


def _major_minor(version: str) -> str:
    parts = version.split(".")
    return ".".join(parts[:2])


def torch_cuda(packages: Mapping[str, LockedPackage]) -> CudaFinding:
    """The CUDA version the lock's torch runs on, with the packages that say so."""
    torch = packages.get("torch")
    if torch is None:
        return CudaFinding(cuda=None, evidence=("the lock has no torch",))
    if torch.version.endswith("+cpu"):
        return CudaFinding(cuda=None, evidence=(f"torch {torch.version} is the CPU build",))
    if local := _CU_LOCAL.search(torch.version):
        digits = local.group(1)
        return CudaFinding(cuda=f"{digits[:-1]}.{digits[-1]}", evidence=(f"torch {torch.version} is a +cu{digits} build",))
    runtime = [p for p in packages.values() if "torch" in p.via and _cuda_runtime(p) is not None]
    evidence = tuple(f"{p.name} {p.version} (required by torch) is CUDA {_cuda_runtime(p)}" for p in runtime)
    toolkit = packages.get("cuda-toolkit")
    if toolkit is not None and "torch" in toolkit.via:
        return CudaFinding(cuda=_major_minor(toolkit.version), evidence=evidence)
    runtimes = sorted({v for p in runtime if (v := _cuda_runtime(p)) and "." in v})
    if runtimes:
        return CudaFinding(cuda=runtimes[-1], evidence=evidence)
    majors = sorted({v for p in runtime if (v := _cuda_runtime(p))})
    none = (f"torch {torch.version} requires no CUDA runtime package: a CPU-only build",)
    return CudaFinding(cuda=majors[-1] if majors else None, evidence=evidence or none)


def _cuda_runtime(pkg: LockedPackage) -> str | None:
    """The CUDA a package is built for: cuda-toolkit / nvidia-cuda-runtime by version, nvidia-*-cuNN by name."""
    if pkg.name in ("cuda-toolkit", "nvidia-cuda-runtime"):
        return _major_minor(pkg.version)
    if pkg.name.startswith("nvidia-") and (suffix := _CU_SUFFIX.search(pkg.name)):
        return suffix.group(1)
    return None


def check_target(platform: Platform, packages: Mapping[str, LockedPackage], naming: Naming = "role") -> CudaFinding:
    """Refuse a lock that cannot run on the platform: on gb10 a CUDA-13 torch and no +cpu wheel."""
    names = PIN_VARIABLES[naming]
    if platform is Platform.CPU:
        return CudaFinding(cuda=None, evidence=())
    finding = torch_cuda(packages)
    cpu_wheels = sorted(f"{p.name} {p.version}" for p in packages.values() if p.version.endswith("+cpu"))
    if cpu_wheels:
        raise PlanError(
            names["torch"],
            f"the gb10 lock carries CPU-only wheels ({', '.join(cpu_wheels)}); GB10 needs CUDA {GB10_CUDA_MAJOR} builds "
            f"({GB10_CUDA_SOURCE})",
            (
                f"leave {names['torch']} empty to take the CUDA build vLLM requires",
                f"drop a CPU index from {names['*index']}",
            ),
        )
    major = finding.cuda.split(".")[0] if finding.cuda else None
    if major != str(GB10_CUDA_MAJOR):
        brought = "; ".join(finding.evidence) or "no CUDA runtime package"
        raise PlanError(
            names["torch"],
            f"the gb10 lock's torch {packages['torch'].version if 'torch' in packages else '(none)'} runs on CUDA "
            f"{finding.cuda or 'none'} ({brought}); GB10 needs CUDA {GB10_CUDA_MAJOR} ({GB10_CUDA_SOURCE})",
            (
                f"a +cu130 torch from https://download.pytorch.org/whl/cu130 in {names['*index']}",
                f"an empty {names['torch']}",
            ),
        )
    return finding
