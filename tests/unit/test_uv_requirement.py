"""uv is installed on hosts from a hash-pinned requirement the controller resolved once (issue 19)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from sparkfleet.errors import PlanError
from sparkfleet.resolver import uv_requirement

H1, H2 = "a" * 64, "b" * 64
COMPILED = f"uv==0.13.9 \\\n    --hash=sha256:{H1} \\\n    --hash=sha256:{H2}\n    # via -r uv.in\n"


def fake_uv(tmp_path: Path, output: str, rc: int = 0) -> str:
    """A uv that writes OUTPUT to its --output-file and counts its calls."""
    script = tmp_path / "uv"
    (tmp_path / "out.txt").write_text(output)
    script.write_text(
        "#!/bin/sh\n"
        f'echo call >> "{tmp_path}/calls"\n'
        'while [ "$#" -gt 0 ]; do [ "$1" = --output-file ] && out="$2"; shift; done\n'
        f'cp "{tmp_path}/out.txt" "$out"\n'
        f'echo "  cause: no version of uv" >&2; exit {rc}\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_the_requirement_pins_every_file_by_hash_and_is_kept(tmp_path: Path) -> None:
    uv = fake_uv(tmp_path, COMPILED)
    cache = tmp_path / "locks"
    text = uv_requirement("0.13.9", cache, uv)
    assert text == f"uv==0.13.9 \\\n    --hash=sha256:{H1} \\\n    --hash=sha256:{H2}\n"
    assert (cache / "uv-0.13.9.requirements.txt").read_text() == text
    assert uv_requirement("0.13.9", cache, uv) == text
    assert (tmp_path / "calls").read_text().count("call") == 1  # the second run read the cache


@pytest.mark.parametrize(
    ("output", "rc", "problem"),
    [(COMPILED, 1, "does not resolve on the index: cause: no version of uv"),
     ("uv==0.13.9\n", 0, "is not one"),
     (COMPILED.replace("uv==0.13.9", "uv==0.14.0"), 0, "is not one"),
     (COMPILED + "evil==1.0\n", 0, "is not one")],
)  # fmt: skip
def test_a_requirement_that_is_not_exactly_uv_by_hash_is_refused(tmp_path: Path, output: str, rc: int, problem: str) -> None:
    with pytest.raises(PlanError, match="vllm_install_uv_version: ") as err:
        uv_requirement("0.13.9", None, fake_uv(tmp_path, output, rc))
    assert problem in str(err.value)


@pytest.mark.parametrize("version", ["latest", "0.13", "0.13.9\n", "0.13.9; rm -rf /", ""])
def test_a_version_that_is_not_a_release_is_refused_before_any_call(tmp_path: Path, version: str) -> None:
    with pytest.raises(PlanError, match="vllm_install_uv_version: .* is not a uv release"):
        uv_requirement(version, None, fake_uv(tmp_path, COMPILED))
    assert not (tmp_path / "calls").exists()


def test_a_tampered_cache_is_refused(tmp_path: Path) -> None:
    (tmp_path / "uv-0.13.9.requirements.txt").write_text("uv==0.13.9\n")
    with pytest.raises(PlanError, match="is not one"):
        uv_requirement("0.13.9", tmp_path, fake_uv(tmp_path, COMPILED))
