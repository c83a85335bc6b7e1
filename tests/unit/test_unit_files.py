"""Values reach unit files as one token systemd reads back, or are refused (issue 19, part 4).

The real vllm_serve unit template is rendered by Ansible's own templating with the collection's
filters, from plans the real planner made out of fuzzed fields, and from plans whose values were
swapped afterwards (as a validation bypass would); every unit that renders must pass
`systemd-analyze verify` without a warning, and its ExecStart must split back into the plan's argv.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rendering import RenderRefusedError, TemplateRenderer

from sparkfleet.boundary.adapters import host_plan
from sparkfleet.errors import PlanError
from sparkfleet.hostconfig.unitfile import Place, unit_value

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "roles" / "vllm_serve" / "templates" / "vllm.service.j2"
ANALYZE = shutil.which("systemd-analyze")

_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "s": " "}


def systemd_words(line: str, specifiers: bool = True, variables: bool = True) -> list[str]:
    """Split a command line as systemd.syntax(7) "Quoting" reads it (the subset unit_value writes:
    plain words and double-quoted words with backslash escapes), then undo `%%` and `$$`."""
    words: list[str] = []
    i, n = 0, len(line)
    while i < n:
        while i < n and line[i] in " \t":
            i += 1
        if i >= n:
            break
        word, quoted = "", False
        while i < n and (quoted or line[i] not in " \t"):
            char = line[i]
            if char == '"':
                quoted = not quoted
            elif char == "\\" and i + 1 < n:
                i += 1
                word += _ESCAPES.get(line[i], "\\" + line[i])
            else:
                word += char
            i += 1
        assert not quoted, f"unbalanced quotes in {line!r}"
        if specifiers:
            word = word.replace("%%", "%")
        if variables:
            word = word.replace("$$", "$")
        words.append(word)
    return words


texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        ['{"method": "mtp", "num_speculative_tokens": 3}', "../../etc/passwd", "-h", "--api-key", ";", "a\nb",
         "100%", "$HOME", "${X}", 'say "hi"', "back\\slash", "é-ünï", "\u2028", "\x85", "x" * 5000, "", " lead"]
    ),
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(texts, st.sampled_from(list(Place)))
def test_every_value_is_one_token_read_back_as_itself_or_refused(text: str, place: Place) -> None:
    try:
        spelled = unit_value(text, place, "fuzz")
    except PlanError as exc:
        assert exc.variable == "fuzz" and str(exc).startswith("fuzz: ")
        return
    assert "\n" not in spelled and "\r" not in spelled
    if place is Place.COMMENT:
        assert spelled == text
    elif place is Place.SETTING:
        assert spelled.replace("%%", "%") == text
    else:
        assert systemd_words(spelled, variables=place is Place.EXEC) == [text]


@pytest.mark.parametrize(
    ("text", "problem"),
    [("a\nExecStartPre=/bin/sh", "control character '\\n'"), ("a\rb", "control character '\\r'"),
     ("nul\x00", "control character '\\x00'"), ("c1\x85", "control character '\\x85'"),
     ("\u2028", "control character '\\u2028'"), (";", "lone ';'"), ("x" * 4097, "longer than a unit line")],
)  # fmt: skip
def test_what_cannot_be_spelled_is_refused_with_the_reason(text: str, problem: str) -> None:
    with pytest.raises(PlanError, match="served_name: ") as err:
        unit_value(text, Place.EXEC, "served_name")
    assert problem in str(err.value)


def test_dollar_is_doubled_on_command_lines_only() -> None:
    assert unit_value("$HOME", Place.EXEC) == '"$$HOME"'
    assert unit_value("A=$HOME", Place.ENVIRONMENT) == '"A=$HOME"'  # Environment= expands no variables
    assert unit_value("50%", Place.ENVIRONMENT) == '"50%%"'


# --------------------------------------------------------------------------- the real template

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 512,
    "max_position_embeddings": 2048, "torch_dtype": "bfloat16",
}  # fmt: skip
FACTS = {"platform": "cpu", "mem_total_bytes": 24 * 2**30, "mem_available_bytes": 20 * 2**30, "vllm_version": "0.32.0"}


@pytest.fixture(scope="module")
def render(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    release = tmp_path_factory.mktemp("release")
    (release / "bin").mkdir()
    (release / "bin" / "vllm").write_text("#!/bin/sh\n")  # ExecStart must name an executable for verify
    (release / "bin" / "vllm").chmod(0o755)
    defaults: dict[str, Any] = {}
    for role in ("sparkfleet", "vllm_serve"):
        defaults.update(yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()))
        defaults.update(yaml.safe_load((ROOT / "roles" / role / "vars" / "main.yml").read_text()) or {})
    # What the role has set by the time it renders the unit, in place of the role vars that would compute it.
    fixed = {"ansible_managed": "Ansible managed", "sparkfleet_facts": {"platform": "cpu"},
             "__vllm_serve_release": {"path": str(release)}}  # fmt: skip
    per_instance = ("__vllm_serve_this", "vllm_serve_plan", "__vllm_serve_instance")
    # Role defaults are templates themselves (one refers to another), as Ansible treats them.
    renderer = TemplateRenderer(
        TEMPLATE, [k for k, v in defaults.items() if isinstance(v, str) and k not in {*fixed, *per_instance}]
    )

    def rendered(plan: dict[str, Any], name: str) -> str:
        values = (plan["instances"][name], plan, {"name": name})
        return renderer.render({**defaults, **fixed, **dict(zip(per_instance, values, strict=True))})

    yield rendered
    renderer.close()


def verify(unit: str, directory: Path) -> str:
    """systemd-analyze verify's complaints about the unit; empty when it has none."""
    path = directory / "sparkfleet-vllm-fuzz.service"
    path.write_text(unit)
    done = subprocess.run([str(ANALYZE), "verify", str(path)], capture_output=True, text=True, check=False)
    complaints = [line for line in done.stderr.splitlines() if str(path) in line or "sparkfleet-vllm-fuzz" in line]
    assert done.returncode == 0 or complaints, done.stderr
    return "\n".join(complaints)


def exec_start(unit: str) -> list[str]:
    line = unit.split("ExecStart=", 1)[1].split("\nRestart=", 1)[0]
    return systemd_words(line.replace("\\\n", " "))


names = st.one_of(st.sampled_from(["tiny", "chat-2"]), st.text(max_size=12))
served = st.one_of(st.sampled_from(["org/tiny", "tiny:latest", "a.b_c-d"]), texts)
drafters = st.one_of(st.none(), st.sampled_from(["org/draft", "/models/draft", "../x", "-h", "org/d\n"]), texts)


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed (scripts/lib.sh: ensure_systemd_analyze)")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(names, served, drafters)
def test_fuzzed_fields_through_the_planner_render_units_systemd_accepts(
    render: Any, tmp_path: Path, name: str, served_name: str, drafter: str | None
) -> None:
    intent: dict[str, Any] = {"max_context": 1024, "served_name": served_name}
    if drafter is not None:
        intent |= {"speculative": "eagle3", "drafter": drafter}
    item = {"name": name, "model": {"id": "org/tiny", "path": "/m/tiny", "config": CONFIG}, "intent": intent}
    try:
        plan = host_plan(FACTS, [item], "vllm_serve_instances").model_dump(mode="json")
    except PlanError as exc:
        assert str(exc).startswith("vllm_serve_instances")
        return
    unit = render(plan, name)
    assert verify(unit, tmp_path) == ""
    assert exec_start(unit)[1:] == plan["instances"][name]["argv"][1:]


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed (scripts/lib.sh: ensure_systemd_analyze)")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(texts, texts, texts)
def test_values_that_bypassed_validation_are_still_one_token_or_refused(
    render: Any, tmp_path: Path, served_name: str, argument: str, env_value: str
) -> None:
    item = {
        "name": "tiny",
        "model": {"id": "org/tiny", "path": "/m/tiny", "config": CONFIG},
        "intent": {"max_context": 1024},
    }
    plan = host_plan(FACTS, [item], "vllm_serve_instances").model_dump(mode="json")
    this = plan["instances"]["tiny"]
    this["served_name"] = served_name
    # The unit reads the plan's flags (argv is made from them): the values go in as flags, the argv to match.
    this["flags"] = [
        *this["flags"],
        {"name": "--served-model-name", "values": [served_name], "reason": "a test", "source": "a test"},
        {"name": "--chat-template", "values": [argument], "reason": "a test", "source": "a test"},
    ]
    this["argv"] = [*this["argv"], "--served-model-name", served_name, "--chat-template", argument]
    this["env"] = {**this["env"], "SPARKFLEET_FUZZ": env_value}
    this["environment"] = [
        *this["environment"],
        {"name": "SPARKFLEET_FUZZ", "value": env_value, "reason": argument, "source": "a test"},
    ]
    try:
        unit = render(plan, "tiny")
    except RenderRefusedError as exc:
        assert "unit_value: " in str(exc), exc
        return
    assert verify(unit, tmp_path) == ""
    assert exec_start(unit)[1:] == this["argv"][1:]
    environment = [
        systemd_words(line[len("Environment=") :], variables=False)
        for line in unit.split("\n")
        if line.startswith("Environment=")
    ]
    assert ["SPARKFLEET_FUZZ=" + env_value] in environment


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed (scripts/lib.sh: ensure_systemd_analyze)")
def test_behind_the_door_the_unit_serves_on_its_socket_in_a_namespace_of_its_own(render: Any, tmp_path: Path) -> None:
    item = {
        "name": "tiny",
        "model": {"id": "org/tiny", "path": "/m/tiny", "config": CONFIG},
        "intent": {"max_context": 1024},
    }
    plan = host_plan(FACTS, [item], "vllm_serve_instances", True).model_dump(mode="json")
    unit = render(plan, "tiny")
    assert verify(unit, tmp_path) == ""
    argv = exec_start(unit)
    assert argv[argv.index("--uds") + 1] == "/run/sparkfleet-vllm-tiny/api.sock" and "--port" not in argv
    lines = unit.splitlines()
    assert "PrivateNetwork=yes" in lines and "IPAddressDeny=any" in lines
    assert [line for line in lines if line.startswith("IPAddressAllow=")] == ["IPAddressAllow=localhost"]
    assert "ExecStartPre=/bin/rm -f /run/sparkfleet-vllm-tiny/api.sock" in lines
    post = [systemd_words(line[len("ExecStartPost=") :]) for line in lines if line.startswith("ExecStartPost=")]
    assert len(post) == 1 and post[0][-1] == "/run/sparkfleet-vllm-tiny/api.sock"
    assert post[0][:2] == ["/bin/sh", "-c"] and "chmod 0660 $1" in post[0][2] and "kill -0 $MAINPID" in post[0][2]
    assert any(line.startswith("ReadWritePaths=") and "-/run/sparkfleet-vllm-tiny" in line for line in lines)


def test_compiled_kernels_are_cached_per_release(render: Any, tmp_path: Path) -> None:
    """Seed 002 §4: an upgrade can meet a stale compile-cache entry. Each release compiles into a cache of its own;
    the caches that are no kernels (temporary files, XDG) stay where they were."""
    item = {
        "name": "tiny",
        "model": {"id": "org/tiny", "path": "/m/tiny", "config": CONFIG},
        "intent": {"max_context": 1024},
    }
    unit = render(host_plan(FACTS, [item], "vllm_serve_instances", True).model_dump(mode="json"), "tiny")
    env = dict(
        line[len("Environment=") :].strip('"').split("=", 1) for line in unit.splitlines() if line.startswith("Environment=")
    )
    release = next(line for line in unit.splitlines() if line.startswith("ExecStart=")).split()[0].split("=", 1)[1]
    tag = Path(release).parent.parent.name
    for name, kind in (("VLLM_CACHE_ROOT", "vllm"), ("TORCHINDUCTOR_CACHE_DIR", "torch-compile"),
                       ("TRITON_CACHE_DIR", "triton"), ("FLASHINFER_WORKSPACE_BASE", "flashinfer")):  # fmt: skip
        assert env[name] == f"/var/cache/sparkfleet/instances/tiny/{kind}/{tag}", name
    assert env["TMPDIR"] == "/var/cache/sparkfleet/instances/tiny/tmp"


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed (scripts/lib.sh: ensure_systemd_analyze)")
def test_a_first_start_compile_finds_the_releases_tools_and_the_cuda_toolkit(render: Any, tmp_path: Path) -> None:
    """Issue 64 (seed 000 §3.1): FlashInfer's JIT runs ninja from the release and nvcc from the CUDA toolkit, and links
    against its libraries; systemd's own PATH has neither. The cpu platform gets the release's tools only."""
    item = {
        "name": "tiny",
        "model": {"id": "org/tiny", "path": "/m/tiny", "config": CONFIG},
        "intent": {"max_context": 1024},
    }

    def environment(facts: dict[str, Any]) -> dict[str, str]:
        unit = render(host_plan(facts, [item], "vllm_serve_instances", True).model_dump(mode="json"), "tiny")
        assert verify(unit, tmp_path) == ""
        lines = [line[len("Environment=") :].strip('"') for line in unit.splitlines() if line.startswith("Environment=")]
        return dict(line.split("=", 1) for line in lines)

    release = str(
        Path(
            exec_start(render(host_plan(FACTS, [item], "vllm_serve_instances", True).model_dump(mode="json"), "tiny"))[0]
        ).parent
    )
    gb10 = environment({**FACTS, "platform": "gb10", "mem_total_bytes": 128 * 2**30, "mem_available_bytes": 120 * 2**30})
    assert gb10["PATH"].split(":")[:2] == [release, "/usr/local/cuda/bin"]
    assert gb10["CUDA_HOME"] == "/usr/local/cuda"
    assert gb10["LD_LIBRARY_PATH"] == "/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64"
    cpu = environment(FACTS)
    assert cpu["PATH"].split(":")[0] == release and "cuda" not in cpu["PATH"] and "CUDA_HOME" not in cpu
