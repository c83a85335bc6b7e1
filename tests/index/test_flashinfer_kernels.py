"""FlashInfer's prebuilt kernels in a gb10 release, locked from a stand-in of FlashInfer's index.

vLLM 0.33.0, torch and FlashInfer come from the REAL PyPI (its metadata, no wheel download); the JIT-cache shim
and its providers from a local PEP 503 index shaped like https://flashinfer.ai/whl/cu130 (flashinfer_index.py),
which the test machines cannot reach. The lock must take the shim and GB10's provider of exactly the FlashInfer
vLLM pins, +cu130, with hashes; never flashinfer-cubin; refuse a provider of another version; and say why when it
takes none. The sandbox then installs the locked kernel wheels offline from a wheelhouse with the recipe's own step.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from flashinfer_index import ALL_PROVIDERS, FlashInferIndex

from sparkfleet.errors import PlanError
from sparkfleet.recipes import inputs_from, recipe
from sparkfleet.release import parse_lock
from sparkfleet.resolver import download_wheelhouse, lock_for, uv_binary
from sparkfleet.versions import NEWEST_RELEASE

FLASHINFER = "0.7.2.post1"  # vLLM 0.33.0's own pin (Requires-Dist flashinfer-python==0.7.2.post1)
SHIM = f"{FLASHINFER}+cu130"
KERNEL_NAMES = ("flashinfer-jit-cache", "flashinfer-jit-cache-sm121a", "flashinfer-jit-cache-sm120f")


def gb10_lock(index: str, **values: object):  # type: ignore[no-untyped-def]
    inputs = {"platform": "gb10", "uv_version": "0.13.9", "vllm_version": "", "flashinfer_index_url": index, **values}
    return lock_for(inputs_from(inputs), cache_dir=None)


def stand_in(tmp_path: Path, *releases: dict[str, object]) -> FlashInferIndex:
    index = FlashInferIndex(tmp_path / "flashinfer-index")
    for release in releases:
        index.release(**release)  # type: ignore[arg-type]
    index.write()
    return index


@pytest.fixture(scope="module")
def full_index(tmp_path_factory: pytest.TempPathFactory) -> FlashInferIndex:
    """FlashInfer's CUDA 13 index as published: the release vLLM pins, its CUDA 13.4 twin, an older release."""
    return stand_in(
        tmp_path_factory.mktemp("full"),
        {"version": FLASHINFER},
        {"version": FLASHINFER, "cuda": "cu134"},
        {"version": "0.7.1"},
    )


@pytest.fixture(scope="module")
def full_lock(full_index: FlashInferIndex):  # type: ignore[no-untyped-def]
    return gb10_lock(full_index.url)


def test_the_lock_takes_the_shim_and_the_sm121a_provider_of_vllms_flashinfer_with_hashes(
    full_lock, full_index: FlashInferIndex
) -> None:  # type: ignore[no-untyped-def]
    assert full_lock.vllm_version == NEWEST_RELEASE["gb10"] == "0.33.0"
    assert full_lock.packages["flashinfer-python"] == FLASHINFER
    kernels = {name: version for name, version in full_lock.packages.items() if name.startswith("flashinfer-jit-cache")}
    # One provider, GB10's exact target, of the shim's full version; the other seven providers are left out.
    assert kernels == {"flashinfer-jit-cache": SHIM, "flashinfer-jit-cache-sm121a": SHIM}
    assert full_lock.prebuilt_kernels == f"flashinfer-jit-cache {SHIM} + sm121a"
    assert full_lock.kernels_index == full_index.url and full_lock.kernels_note is None
    assert "flashinfer-cubin" not in full_lock.packages
    # The hashes are those of the index's files: the shim's two machines, the aarch64-only provider's one.
    locked = parse_lock(full_lock.requirements)
    on_index = {
        name: sorted(
            f"sha256:{hashlib.sha256(w.read_bytes()).hexdigest()}" for w in full_index.projects[name] if SHIM in w.name
        )
        for name in kernels
    }
    assert {name: sorted(locked[name].hashes) for name in kernels} == on_index
    assert len(on_index["flashinfer-jit-cache-sm121a"]) == 1 and len(on_index["flashinfer-jit-cache"]) == 2
    assert full_lock.summary()["kernels"] == full_lock.prebuilt_kernels


def test_without_an_sm121a_provider_the_lock_takes_the_sm120f_family_build(tmp_path: Path) -> None:
    index = stand_in(tmp_path, {"version": FLASHINFER, "published": tuple(a for a in ALL_PROVIDERS if a != "sm121a")})
    lock = gb10_lock(index.url)
    assert lock.packages["flashinfer-jit-cache-sm120f"] == lock.packages["flashinfer-jit-cache"] == SHIM
    assert "flashinfer-jit-cache-sm121a" not in lock.packages
    assert lock.prebuilt_kernels == f"flashinfer-jit-cache {SHIM} + sm120f"


def test_a_provider_of_another_version_than_its_shim_is_refused_naming_the_variable(tmp_path: Path) -> None:
    stale = {"sm121a": "0.7.1+cu130", "sm120f": "0.7.1+cu130"}
    index = stand_in(tmp_path, {"version": "0.7.1"}, {"version": FLASHINFER, "pinned": stale})
    with pytest.raises(PlanError) as err:
        gb10_lock(index.url)
    assert err.value.variable == "vllm_install_flashinfer_index_url"
    assert "flashinfer-jit-cache-sm121a 0.7.1+cu130" in err.value.problem and "never loads" in err.value.problem


def test_an_index_without_vllms_flashinfer_leaves_the_kernels_to_compile_and_says_why(tmp_path: Path) -> None:
    # Only an older FlashInfer and a CUDA 13.4 build of the right one: neither is taken.
    index = stand_in(tmp_path, {"version": "0.7.1"}, {"version": FLASHINFER, "cuda": "cu134"})
    lock = gb10_lock(index.url)
    assert lock.prebuilt_kernels is None and lock.kernels_index is None
    assert not [name for name in lock.packages if name.startswith("flashinfer-jit-cache")]
    assert lock.kernels_note is not None and f"flashinfer-jit-cache=={SHIM} could not be locked" in lock.kernels_note
    assert lock.summary()["kernels"].startswith("compiled at first start (")


def test_by_default_a_gb10_lock_asks_flashinfers_own_index_and_says_when_it_cannot(tmp_path: Path) -> None:
    lock = lock_for(inputs_from({"platform": "gb10", "uv_version": "0.13.9", "vllm_version": ""}), cache_dir=None)
    # The test machines cannot reach flashinfer.ai: the lock records it and the plan budgets the compiles.
    assert lock.prebuilt_kernels is None
    assert lock.kernels_note is not None and "https://flashinfer.ai/whl/cu130" in lock.kernels_note
    off = lock_for(
        inputs_from({"platform": "gb10", "uv_version": "0.13.9", "vllm_version": "", "flashinfer_prebuilt": False}),
        cache_dir=None,
    )
    assert off.kernels_note == "turned off (vllm_install_flashinfer_prebuilt)" and off.packages == lock.packages


def _kernel_lines(requirements: str, names: tuple[str, ...]) -> str:
    """The lock's blocks for these packages (each `name==version \\` line with its hash lines)."""
    out, keep = [], False
    for line in requirements.splitlines():
        if line and not line.startswith((" ", "#")):
            keep = line.split("==")[0] in names
        if keep and not line.lstrip().startswith("#"):
            out.append(line)
    return "\n".join(out) + "\n"


def test_the_sandbox_installs_the_locked_kernels_offline_from_a_wheelhouse(tmp_path: Path) -> None:
    """The recipe's own install step, no index at all: the x86-64 sandbox takes the sm120f build (sm121a is
    an aarch64 build only), hash-checked against the lock, and nothing else."""
    index = stand_in(tmp_path, {"version": FLASHINFER, "published": tuple(a for a in ALL_PROVIDERS if a != "sm121a")})
    lock = gb10_lock(index.url)
    kernels = _kernel_lines(lock.requirements, KERNEL_NAMES)
    sandbox_lock = lock.model_copy(update={"arch": "x86_64", "glibc": "2.28", "python": "3.11", "requirements": kernels})
    wheelhouse = tmp_path / "wheelhouse"
    assert download_wheelhouse(sandbox_lock, str(wheelhouse), index_urls=(index.url,)) == 2

    inputs = inputs_from({"platform": "gb10", "uv_version": "0.13.9", "vllm_version": "", "wheelhouse": str(wheelhouse)})
    steps = {step.name: step for step in recipe(inputs, lock, str(tmp_path / "root")).steps}
    install = steps["install exactly the locked packages"].argv
    assert "--no-index" in install and "--require-hashes" in install and lock.kernels_index not in install
    venv = tmp_path / "venv"
    subprocess.run([uv_binary(), "venv", "-q", "--python", "python3", str(venv)], check=True)
    (tmp_path / "kernels.lock").write_text(kernels, encoding="utf-8")
    argv = [uv_binary(), *install[1:-1], str(tmp_path / "kernels.lock")]
    argv[argv.index("--python") + 1] = str(venv / "bin" / "python")
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=False,
        env={"UV_OFFLINE": "1", "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    listed = subprocess.run(
        [uv_binary(), "pip", "list", "--python", str(venv / "bin" / "python"), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    installed = {row["name"]: row["version"] for row in json.loads(listed.stdout)}
    assert installed == {"flashinfer-jit-cache": SHIM, "flashinfer-jit-cache-sm120f": SHIM}


def test_the_gb10_recipe_checks_the_kernels_with_flashinfers_jit_disabled_before_a_switch(full_lock) -> None:  # type: ignore[no-untyped-def]
    inputs = inputs_from({"platform": "gb10", "uv_version": "0.13.9", "vllm_version": ""})
    built = recipe(inputs, full_lock, "/opt/sparkfleet")
    check = [step for step in built.smoke if step.env.get("FLASHINFER_DISABLE_JIT") == "1"]
    assert len(check) == 1 and "flashinfer.norm.rmsnorm" in check[0].argv[-1]
    install = built.steps[1].argv
    assert install[install.index("--extra-index-url") + 1] == full_lock.kernels_index
    # A release that compiles its kernels at first start has nothing to check that way, and no kernel index.
    compiled = recipe(inputs, full_lock.model_copy(update={"prebuilt_kernels": None, "kernels_index": None}), "/o")
    assert not [step for step in compiled.smoke if "FLASHINFER_DISABLE_JIT" in step.env]
    assert "--extra-index-url" not in compiled.steps[1].argv
