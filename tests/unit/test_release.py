"""The lock rules on recorded uv output (tests/fixtures/locks: vLLM 0.32.0 for a Spark, resolved by uv)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import FIXTURES

from sparkfleet.errors import PlanError
from sparkfleet.models import Platform
from sparkfleet.release import (
    Lock,
    LockRequest,
    build_lock,
    canonical_lock,
    check_lock_file,
    check_target,
    compile_argv,
    explain_resolution_failure,
    fork_requirement_lines,
    gb10_provider,
    index_cutoff,
    jit_cache_version,
    kernel_problems,
    lock_release_id,
    nccl_override,
    parse_lock,
    prebuilt_kernels,
    providers,
    release_id,
    requirements_in,
    target_for,
    torch_cuda,
)

GB10_LOCK = (FIXTURES / "locks" / "gb10-vllm-0.32.0.lock").read_text(encoding="utf-8")
SPARK = target_for(Platform.GB10)
REQUEST = LockRequest(platform=Platform.GB10, target=SPARK, vllm_version="0.32.0")
# uv 0.13.9's answer to `vllm==0.32.0` + `torch==2.12.0` for aarch64 / Python 3.12 (the issue's regression).
TORCH_CONFLICT = """\
  x No solution found when resolving dependencies:
  `-> Because vllm==0.32.0 depends on torch==2.13.0 and you require vllm==0.32.0, we can conclude that you require torch==2.13.0.
      And because you require torch==2.12.0, we can conclude that your requirements are unsatisfiable.
"""
JIT_UNREACHABLE = """\
error: Request failed after 3 retries in 8.6s
  Caused by: Failed to fetch: `https://flashinfer.ai/whl/cu130/vllm/`
  Caused by: error sending request for url (https://flashinfer.ai/whl/cu130/vllm/)
  Caused by: client error (Connect)
  Caused by: dns error
"""


def swap(text: str, name: str, old: str, new: str) -> str:
    return re.sub(rf"^{re.escape(name)}=={re.escape(old)}", f"{name}=={new}", text, flags=re.M)


def test_the_recorded_spark_lock_parses_with_versions_hashes_and_parents() -> None:
    packages = parse_lock(GB10_LOCK)
    assert len(packages) == 198
    assert packages["vllm"].version == "0.32.0"
    assert packages["torch"].version == "2.13.0" and packages["flashinfer-python"].version == "0.7.0.post1"
    assert packages["cuda-toolkit"].via == ("torch",)
    assert "cuda-toolkit" in packages["nvidia-cuda-runtime"].via
    assert all(len(p.hashes) == 1 for p in packages.values())


def test_pypi_torch_on_aarch64_runs_cuda_13_and_says_which_package_brought_it() -> None:
    finding = torch_cuda(parse_lock(GB10_LOCK))
    assert finding.cuda == "13.0"
    assert "cuda-toolkit 13.0.3.0 (required by torch) is CUDA 13.0" in finding.evidence
    assert check_target(Platform.GB10, parse_lock(GB10_LOCK)).cuda == "13.0"


def test_a_cu130_local_build_is_read_from_torchs_version() -> None:
    packages = parse_lock(swap(GB10_LOCK, "torch", "2.13.0", "2.13.0+cu130"))
    assert torch_cuda(packages).cuda == "13.0"


def test_a_cpu_torch_in_a_gb10_lock_is_refused_naming_the_pin() -> None:
    with pytest.raises(PlanError, match=r"CPU-only wheels \(torch 2.13.0\+cpu\)") as err:
        check_target(Platform.GB10, parse_lock(swap(GB10_LOCK, "torch", "2.13.0", "2.13.0+cpu")))
    assert err.value.variable == "vllm_install_torch_version"


def test_a_cuda_12_torch_is_refused_with_the_package_that_brought_it() -> None:
    text = swap(GB10_LOCK, "cuda-toolkit", "13.0.3.0", "12.8.1")
    text = text.replace("nvidia-cudnn-cu13==", "nvidia-cudnn-cu12==")
    with pytest.raises(PlanError) as err:
        check_target(Platform.GB10, parse_lock(text), naming="cli")
    assert err.value.variable == "--torch-version"
    assert "runs on CUDA 12.8" in err.value.problem
    assert "cuda-toolkit 12.8.1 (required by torch) is CUDA 12.8" in err.value.problem
    assert "nvidia-cudnn-cu12 9.20.0.48 (required by torch) is CUDA 12" in err.value.problem


def test_cpu_locks_carry_no_cuda() -> None:
    assert check_target(Platform.CPU, parse_lock(GB10_LOCK)).cuda is None


def test_release_id_is_the_packages_not_the_comments() -> None:
    packages = parse_lock(GB10_LOCK)
    reworded = GB10_LOCK.replace("# via", "# required by")
    assert canonical_lock(parse_lock(reworded)) == canonical_lock(packages)
    base = release_id(Platform.GB10, "0.32.0", canonical_lock(packages))
    bumped = parse_lock(swap(GB10_LOCK, "transformers", "5.19.0", "5.19.1"))
    rehashed = parse_lock(GB10_LOCK.replace(packages["triton"].hashes[0], "sha256:" + "0" * 64))
    assert re.match(r"^gb10-0\.32\.0-[0-9a-f]{12}$", base)
    assert base == release_id(Platform.GB10, "0.32.0", canonical_lock(parse_lock(GB10_LOCK)))
    assert base != release_id(Platform.GB10, "0.32.0", canonical_lock(bumped))
    assert base != release_id(Platform.GB10, "0.32.0", canonical_lock(rehashed))
    assert base != release_id(Platform.GB10, "0.32.0", canonical_lock(packages), ["a" * 64])
    assert base != release_id(Platform.GB10, "0.32.0", canonical_lock(packages), git_sha="f" * 40)


def test_a_lock_records_its_target_cuda_packages_and_id() -> None:
    lock = build_lock(REQUEST, GB10_LOCK)
    assert lock.target == "aarch64-manylinux_2_39" and lock.python == "3.12" and lock.cuda == "13.0"
    assert lock.packages["torch"] == "2.13.0" and len(lock.packages) == 198
    assert lock.release_id == lock_release_id(lock)
    assert lock.summary() == {
        "vllm": "0.32.0",
        "torch": "2.13.0",
        "flashinfer-python": "0.7.0.post1",
        "transformers": "5.19.0",
        "triton": "3.7.1",
        "nvidia-nccl-cu13": "2.29.7",
        "cuda": "13.0",
        "kernels": "compiled at first start (no JIT cache)",
    }


def test_the_resolver_is_asked_for_the_spark_not_the_controller() -> None:
    argv = compile_argv(REQUEST, "uv", "in.txt", "out.txt")
    assert argv[:4] == ["uv", "pip", "compile", "in.txt"]
    assert argv[argv.index("--python-platform") + 1] == "aarch64-manylinux_2_39"
    assert argv[argv.index("--python-version") + 1] == "3.12"
    assert "--generate-hashes" in argv and "--index-strategy" not in argv
    extra = REQUEST.model_copy(update={"index_urls": ("https://download.pytorch.org/whl/cu130",)})
    # A name on the extra index comes from it alone, never from whichever index offers a higher version.
    assert compile_argv(extra, "uv", "in", "out")[-2:] == ["--index-strategy", "first-index"]


def test_targets() -> None:
    assert target_for(Platform.GB10, host_arch="x86_64", host_glibc="2.36").python_platform == "aarch64-manylinux_2_39"
    assert target_for(Platform.GB10, host_arch="aarch64", host_glibc="2.41").glibc == "2.41"
    cpu = target_for(Platform.CPU, host_arch="x86_64", host_glibc="2.36")
    assert (cpu.python_platform, cpu.python, cpu.pip_platform) == ("x86_64-manylinux_2_36", "3.11", "manylinux_2_36_x86_64")


def test_unset_pins_take_what_vllm_requires() -> None:
    assert requirements_in(REQUEST) == ["vllm==0.32.0"]
    pinned = REQUEST.model_copy(update={"torch_version": "2.13.0", "extra_packages": ("ray[default]==2.60.0",)})
    assert requirements_in(pinned) == ["vllm==0.32.0", "torch==2.13.0", "ray[default]==2.60.0"]


def test_a_conflicting_pin_is_refused_with_the_resolvers_reason_and_the_variable() -> None:
    request = REQUEST.model_copy(update={"torch_version": "2.12.0"})
    err = explain_resolution_failure(TORCH_CONFLICT, request)
    assert err.variable == "vllm_install_torch_version"
    assert "vllm==0.32.0 depends on torch==2.13.0" in err.problem
    assert explain_resolution_failure(TORCH_CONFLICT, request, naming="cli").variable == "--torch-version"


def test_an_unreachable_jit_cache_index_is_named_as_an_option() -> None:
    request = REQUEST.model_copy(update={"flashinfer_jit_cache_index": "https://flashinfer.ai/whl/cu130"})
    err = explain_resolution_failure(JIT_UNREACHABLE, request)
    assert err.variable == "vllm_install_flashinfer_index_url"
    assert "https://flashinfer.ai/whl/cu130 cannot be reached from the controller" in err.problem
    assert "empty" in err.suggestions[0]
    other = explain_resolution_failure(
        JIT_UNREACHABLE.replace("flashinfer.ai/whl/cu130", "download.pytorch.org/whl"), REQUEST
    )
    assert other.variable == "vllm_install_index_urls"


def test_fork_requirements_follow_includes_like_vllms_setup() -> None:
    files = {
        "cuda.txt": "-r common.txt\ntorch==2.13.0  # pinned\nflashinfer-cubin==0.7.0\n--extra-index-url x\n",
        "common.txt": "# comment\nregex\ntransformers >= 5.16.1, < 5.20.0\n",
    }
    lines = fork_requirement_lines(files, "cuda.txt")
    assert lines == ["regex", "transformers >= 5.16.1, < 5.20.0", "torch==2.13.0", "flashinfer-cubin==0.7.0"]
    fork = REQUEST.model_copy(update={"source": "git", "fork_requirements": tuple(lines), "git_sha": "a" * 40})
    assert requirements_in(fork) == ["regex", "transformers >= 5.16.1, < 5.20.0", "torch==2.13.0"]
    with pytest.raises(PlanError, match=r"no requirements/cuda.txt") as err:
        fork_requirement_lines({}, "cuda.txt")
    assert err.value.variable == "vllm_install_git_ref"


def test_a_committed_lock_must_fit_the_host_and_the_pins() -> None:
    lock = build_lock(REQUEST, GB10_LOCK)
    check_lock_file(lock, REQUEST)
    cpu_host = LockRequest(platform=Platform.CPU, target=target_for(Platform.CPU, "3.11", "x86_64"), vllm_version="0.32.0")
    with pytest.raises(PlanError, match="locked for gb10, the host is cpu") as err:
        check_lock_file(lock, cpu_host)
    assert err.value.variable == "vllm_install_lock_file"
    with pytest.raises(PlanError, match="vllm_install_torch_version is 2.12.0 but the lock has torch 2.13.0"):
        check_lock_file(lock, REQUEST.model_copy(update={"torch_version": "2.12.0"}))
    tampered = lock.model_copy(update={"requirements": swap(GB10_LOCK, "torch", "2.13.0", "2.13.0+cpu")})
    with pytest.raises(PlanError, match="CPU-only"):
        check_lock_file(tampered, REQUEST)


def test_a_multi_node_gb10_release_overrides_an_nccl_too_old_for_graphs_across_nodes() -> None:
    cluster = REQUEST.model_copy(update={"multi_node": True})
    assert nccl_override(cluster, {"nvidia-nccl-cu13": "2.29.7"}) == "nvidia-nccl-cu13>=2.30.4,<2.31"
    # vLLM 0.33.0's torch pins 2.30.7 already; one node never needs it; nor does a lock without NCCL.
    assert nccl_override(cluster, {"nvidia-nccl-cu13": "2.30.7"}) is None
    assert nccl_override(REQUEST, {"nvidia-nccl-cu13": "2.29.7"}) is None
    assert nccl_override(cluster, {"torch": "2.13.0"}) is None
    argv = compile_argv(cluster, "uv", "in", "out", overrides_file="overrides.txt")
    assert argv[-2:] == ["--overrides", "overrides.txt"]


def test_a_re_resolve_with_the_same_package_set_keeps_the_cached_lock_and_its_cutoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sparkfleet import resolver

    first = build_lock(REQUEST, GB10_LOCK).model_copy(update={"resolved_at": "2026-11-25T08:00:00Z"})
    rehashed = first.model_copy(update={"release_id": "gb10-0.32.0-000000000000", "resolved_at": "2026-11-25T20:00:00Z"})
    moved = rehashed.model_copy(update={"packages": {**first.packages, "transformers": "5.18.0"}})
    path = tmp_path / f"{REQUEST.fingerprint()}.json"
    path.write_text(first.model_dump_json())
    monkeypatch.setattr(resolver, "compile_lock", lambda request, naming="role": rehashed)
    assert resolver.cached_lock(REQUEST, tmp_path, relock=True) == (first, False)
    monkeypatch.setattr(resolver, "compile_lock", lambda request, naming="role": moved)
    assert resolver.cached_lock(REQUEST, tmp_path, relock=True) == (moved, True)


def test_a_request_that_sets_none_of_the_later_fields_keeps_its_cache_key() -> None:
    import hashlib
    import json

    before = {k: v for k, v in REQUEST.model_dump(mode="json").items() if k not in ("multi_node", "overrides")}
    assert REQUEST.fingerprint() == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()
    assert REQUEST.model_copy(update={"multi_node": True}).fingerprint() != REQUEST.fingerprint()


SHIM = "0.7.2.post1+cu130"


def test_flashinfers_split_jit_cache_counts_only_with_a_provider_of_the_shims_full_version() -> None:
    base = {"flashinfer-python": "0.7.2.post1", "flashinfer-jit-cache": SHIM}
    assert jit_cache_version("0.7.2.post1", "13.0") == SHIM and jit_cache_version("0.7.2.post1", "13.4").endswith("+cu134")
    # The shim alone holds no kernel (flashinfer-ai/flashinfer#4514): nothing is prebuilt.
    assert prebuilt_kernels(base) is None
    assert prebuilt_kernels({**base, "flashinfer-jit-cache-sm121a": SHIM}) == f"flashinfer-jit-cache {SHIM} + sm121a"
    # A provider of another CUDA build is never loaded by this shim (#5096).
    assert prebuilt_kernels({**base, "flashinfer-jit-cache-sm121a": "0.7.2.post1+cu134"}) is None
    # Before 0.7 the JIT cache was one wheel holding every kernel.
    assert prebuilt_kernels({"flashinfer-python": "0.6.16", "flashinfer-jit-cache": "0.6.16+cu130"}) == (
        "flashinfer-jit-cache 0.6.16+cu130"
    )


def test_a_spark_loads_sm121a_before_the_sm120f_family_and_only_at_the_shims_version() -> None:
    assert gb10_provider({"sm120f": SHIM, "sm121a": SHIM, "sm90a": SHIM}, SHIM) == "sm121a"
    assert gb10_provider({"sm120f": SHIM, "sm90a": SHIM}, SHIM) == "sm120f"
    assert gb10_provider({"sm121a": "0.7.1+cu130", "sm90a": SHIM}, SHIM) is None
    assert providers({"flashinfer-jit-cache": SHIM, "flashinfer-jit-cache-sm121a": SHIM, "torch": "2.14.0"}) == {
        "sm121a": SHIM
    }


def test_kernel_problems_name_cubin_on_gb10_a_mismatched_provider_and_a_shim_without_gb10s() -> None:
    fine = {"flashinfer-python": "0.7.2.post1", "flashinfer-jit-cache": SHIM, "flashinfer-jit-cache-sm121a": SHIM}
    assert kernel_problems(fine, gb10=True) == []
    cubin = kernel_problems({**fine, "flashinfer-cubin": "0.7.2.post1"}, gb10=True)
    assert len(cubin) == 1 and "no sm_120/121 kernels" in cubin[0]
    assert kernel_problems({"flashinfer-python": "0.6.12", "flashinfer-cubin": "0.6.12"}, gb10=False) == []
    stale = kernel_problems({**fine, "flashinfer-jit-cache-sm121a": "0.7.1+cu130"}, gb10=True)
    assert any("0.7.1+cu130 is not the shim's version" in p for p in stale)
    assert any("no provider a Spark loads" in p for p in stale)
    other = kernel_problems({**fine, "flashinfer-jit-cache": "0.7.1+cu130"}, gb10=True)
    assert any("is not of flashinfer-python 0.7.2.post1" in p for p in other)


def test_a_lock_records_its_nccl_build_by_the_wheels_content_not_only_its_version() -> None:
    lock = build_lock(REQUEST, GB10_LOCK)
    nccl = parse_lock(GB10_LOCK)["nvidia-nccl-cu13"]
    assert lock.nccl_build == f"nvidia-nccl-cu13 2.29.7 {nccl.hashes[0][:19]}"
    # The same version from another file is another build (vllm-project/vllm#41725).
    rebuilt = build_lock(REQUEST, GB10_LOCK.replace(nccl.hashes[0], "sha256:" + "9" * 64))
    assert rebuilt.nccl_build != lock.nccl_build and rebuilt.packages["nvidia-nccl-cu13"] == "2.29.7"
    # A lock written before the field existed says it all the same.
    older = lock.model_dump(mode="json") | {"nccl_build": None}
    assert Lock.model_validate(older).nccl_build == lock.nccl_build


def test_a_lock_resolves_at_a_settled_cutoff_that_a_re_resolve_repeats() -> None:
    now = datetime(2026, 12, 3, 11, 47, 22, tzinfo=UTC)
    # uv may answer from index pages cached for up to ten minutes (PyPI's max-age=600): a quarter hour back.
    assert index_cutoff(None, now) == "2026-12-03T11:32:22Z"
    assert index_cutoff("2026-11-25T08:00:00Z", now) == "2026-11-25T08:00:00Z"
    argv = compile_argv(REQUEST, "uv", "in", "out", exclude_newer="2026-12-03T11:32:22Z")
    assert argv[argv.index("--exclude-newer") + 1] == "2026-12-03T11:32:22Z"
    assert "--exclude-newer" not in compile_argv(REQUEST, "uv", "in", "out")
