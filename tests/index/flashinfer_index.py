"""A local stand-in for FlashInfer's CUDA 13 index (https://flashinfer.ai/whl/cu130): a PEP 503 simple index
served from a directory (file://), holding wheels shaped like FlashInfer's since 0.7.

The shapes are FlashInfer's published ones (flashinfer-ai/flashinfer#4514, #5096; the file list of
v0.7.0.post1): `flashinfer_jit_cache-X+cuNNN-cp39-abi3-manylinux_2_28_{aarch64,x86_64}.whl`, a shim of a few kB
whose Requires-Dist pins one provider per architecture at exactly its own version, and
`flashinfer_jit_cache_smXX-X+cuNNN-...whl` providers; `flashinfer_cubin-X-py3-none-any.whl` beside them. The
sm_121a and sm_110a providers are aarch64 builds only (FlashInfer's ci/cuda-versions.json arch lists).
The wheels are real (installable, hash-checked); only their kernels are stand-ins.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

MACHINES = ("aarch64", "x86_64")
AARCH64_ONLY = ("sm110a", "sm121a")
ALL_PROVIDERS = ("sm80", "sm89", "sm90a", "sm100a", "sm103a", "sm110a", "sm120f", "sm121a")


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(directory: Path, name: str, version: str, tag: str, requires: tuple[str, ...] = ()) -> Path:
    """A minimal valid wheel: one module, METADATA, WHEEL and a RECORD with every file's hash."""
    module = name.replace("-", "_")
    dist_info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f"# stand-in for {name} {version}\nVERSION = {version!r}\n".encode(),
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            + "".join(f"Requires-Dist: {line}\n" for line in requires)
        ).encode(),
        f"{dist_info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: sparkfleet-tests\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
    }
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in files.items())
    files[f"{dist_info}/RECORD"] = (record + f"{dist_info}/RECORD,,\n").encode()
    path = directory / f"{module}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in files.items():
            archive.writestr(member, data)
    return path


@dataclass
class FlashInferIndex:
    """Build the index: `release()` adds a version's shim and providers, `url` is what uv is given."""

    root: Path
    projects: dict[str, list[Path]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return (self.root / "simple").as_uri()

    def _add(self, name: str, wheel: Path) -> None:
        self.projects.setdefault(name, []).append(wheel)

    def release(
        self,
        version: str,
        cuda: str = "cu130",
        published: tuple[str, ...] = ALL_PROVIDERS,
        pinned: dict[str, str] | None = None,
    ) -> None:
        """One FlashInfer release: its shim pins each provider of `published` at its own full version (or at
        `pinned[arch]`, an index publishing a mismatched set); providers, then the shim, for both machines."""
        files = self.root / "files"
        files.mkdir(parents=True, exist_ok=True)
        full = f"{version}+{cuda}"
        requires = []
        for arch in published:
            marker = '; platform_machine == "aarch64"' if arch in AARCH64_ONLY else ""
            requires.append(f"flashinfer-jit-cache-{arch}=={(pinned or {}).get(arch, full)}{marker}")
            provider_version = (pinned or {}).get(arch, full)
            for machine in MACHINES:
                if machine == "x86_64" and arch in AARCH64_ONLY:
                    continue
                tag = f"cp39-abi3-manylinux_2_28_{machine}"
                self._add(
                    f"flashinfer-jit-cache-{arch}", build_wheel(files, f"flashinfer-jit-cache-{arch}", provider_version, tag)
                )
        for machine in MACHINES:
            tag = f"cp39-abi3-manylinux_2_28_{machine}"
            self._add("flashinfer-jit-cache", build_wheel(files, "flashinfer-jit-cache", full, tag, tuple(requires)))
        self._add("flashinfer-cubin", build_wheel(files, "flashinfer-cubin", version, "py3-none-any"))

    def write(self) -> str:
        """The simple pages (each link carries its file's sha256, as a PEP 503 index does); returns the url."""
        simple = self.root / "simple"
        simple.mkdir(parents=True, exist_ok=True)
        names = sorted(self.projects)
        (simple / "index.html").write_text("".join(f'<a href="{n}/">{n}</a>\n' for n in names), encoding="utf-8")
        for name in names:
            page = simple / name
            page.mkdir(exist_ok=True)
            links = "".join(
                f'<a href="{wheel.as_uri()}#sha256={hashlib.sha256(wheel.read_bytes()).hexdigest()}">{wheel.name}</a>\n'
                for wheel in sorted(set(self.projects[name]))
            )
            (page / "index.html").write_text(links, encoding="utf-8")
        return self.url
