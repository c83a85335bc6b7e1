"""The door's router finds the body's model as vLLM's json.loads would, without building the body in nginx.

The router is njs (roles/front_door/files/sparkfleet_door.js); node runs the same function here, since njs
is a subset of the JavaScript node runs. Each case's answer must equal Python's json.loads(body)["model"].
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROUTER = Path(__file__).resolve().parents[2] / "roles" / "front_door" / "files" / "sparkfleet_door.js"
RUNNER = """
const fs = require('fs');
const source = fs.readFileSync(process.argv[1], 'utf8').replace(/export default/, 'module.exports =');
const m = {exports: {}};
new Function('module', 'require', source)(m, require);
const bodies = JSON.parse(fs.readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(bodies.map((b) => [m.exports.topLevelModel(b), m.exports.topLevelCap(b)])));
"""

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None, reason="node runs the door's njs router here (scripts/lib.sh: ensure_node)"
)


def scan_both(bodies: list[str]) -> list[tuple[Any, int | None]]:
    """The router's (model, output cap) of each body."""
    done = subprocess.run(
        ["node", "-e", RUNNER, str(ROUTER)], input=json.dumps(bodies), capture_output=True, text=True, check=True
    )
    return [(model, cap) for model, cap in json.loads(done.stdout)]


SLICED_RUNNER = """
const fs = require('fs');
const source = fs.readFileSync(process.argv[1], 'utf8').replace(/export default/, 'module.exports =');
const m = {exports: {}};
new Function('module', 'require', source)(m, require);
const [bodies, steps] = JSON.parse(fs.readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(bodies.map((b) => m.exports.scanSliced(b, steps))));
"""


def scan_sliced(bodies: list[str], steps: int) -> list[tuple[Any, int | None, int]]:
    """The router's (model, output cap, slices) of each body, scanned `steps` steps a slice as the door does."""
    done = subprocess.run(
        ["node", "-e", SLICED_RUNNER, str(ROUTER)],
        input=json.dumps([bodies, steps]),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,  # a scan that never ends fails here, not by holding the suite
    )
    return [tuple(answer) for answer in json.loads(done.stdout)]


def scan(bodies: list[str]) -> list[Any]:
    return [model for model, _ in scan_both(bodies)]


def json_object(body: str) -> dict[str, Any] | None:
    """The body as json.loads reads it, where it is a JSON object (what the router scans)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def expected_cap(body: str) -> int | None:
    """The output cap vLLM reads (max_completion_tokens, else max_tokens), where it is a whole number the router
    holds against a floor: 0 to 15 digits, no fraction or exponent."""
    parsed = json_object(body)
    if parsed is None:
        return None

    def whole(value: object) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**15 else None

    cap = whole(parsed.get("max_completion_tokens"))
    return cap if cap is not None else whole(parsed.get("max_tokens"))


def expected(body: str) -> str | None:
    parsed = json_object(body)
    if parsed is None:
        return None
    return parsed["model"] if isinstance(parsed.get("model"), str) else ""


CASES = [
    '{"model": "qwen", "messages": [{"role": "user", "content": "hi"}]}',
    '{"messages": [{"model": "inner"}], "model": "outer"}',
    '{"prompt": "say \\"model\\": \\"x\\"", "model": "real"}',
    '{"model": "first", "model": "last"}',
    '{"model": "a", "model": 5}',
    '{"model": null}',
    '{"model": ["x"]}',
    '{"model": {"name": "x"}}',
    '{"prompt": "a\\\\", "model": "after-backslash"}',
    '{"model": "caf\\u00e9"}',
    '{"mod\\u0065l": "escaped-key", "x": 1}',
    '{"\\u006D\\u006f\\u0064\\u0065\\u006C": "all-escaped"}',
    '{"model": "kept", "mod\\u0065": "not-model", "modelx": 1, "\\nmodel": 2}',
    '{"m\\u006fdel": 3}',
    '{"mod\\u00651": "x", "model": "y"}',
    '  {"stream": true, "model" : "spaced"}  ',
    "{}",
    '[{"model": "in-array"}]',
    '"model"',
    '{"model": "unterminated',
    '{"model": "x"} trailing',
    "",
]


def test_the_router_agrees_with_json_loads_on_hand_made_bodies() -> None:
    assert scan(CASES) == [expected(body) for body in CASES]


CAP_CASES = [
    '{"model": "m", "max_tokens": 100}',
    '{"max_tokens": 100, "max_completion_tokens": 20000, "model": "m"}',
    '{"max_completion_tokens": null, "max_tokens": 7}',
    '{"max_tokens": 5.0}',
    '{"max_tokens": 5e3}',
    '{"max_tokens": 1E2}',
    '{"max_tokens": -3}',
    '{"max_tokens": "100"}',
    '{"max_tokens": true}',
    '{"max_tokens": [1]}',
    '{"max_tokens": {"n": 1}}',
    '{"max_tokens": 1, "max_tokens": 2}',
    '{"max_tokens": 2, "max_tokens": null}',
    '{"max_t\\u006fkens": 64}',
    '{"messages": [{"max_tokens": 1}], "max_tokens": 4096}',
    '{"max_tokens":12}',
    '{"max_tokens" :  12 , "x": 1}',
    '{"max_tokens": 999999999999999}',
    '{"max_tokens": 1000000000000000}',
    '{"max_tokens": ' + "9" * 100_000 + "}",
    '{"max_tokens": 12} trailing',
    '{"max_tokens": 12',
]


def test_the_output_cap_is_what_vllm_reads() -> None:
    """Issue 49: the cap the door holds against a reasoning model's floor is the one vLLM will apply."""
    assert [cap for _, cap in scan_both(CAP_CASES)] == [expected_cap(body) for body in CAP_CASES]


def test_a_model_name_longer_than_any_served_is_neither_decoded_nor_echoed() -> None:
    # The router marks it (an empty object here) and answers 404 without the name.
    assert scan(['{"model": "' + "x" * 2000 + '"}', '{"model": "' + "x" * 1000 + '"}']) == [{}, "x" * 1000]


def test_a_deeply_nested_body_is_scanned_without_building_it() -> None:
    nested = '{"messages": ' + "[" * 200_000 + "]" * 200_000 + ', "model": "deep"}'
    assert scan([nested]) == ["deep"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.sampled_from('ab"\\:,{}[] model')),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["model", "m", "x", '"model"']), inner, max_size=4)
    ),
    max_leaves=12,
)


# Each example is one node process: fewer examples of more bodies each check as many bodies in a third the time.
@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(
                ["model", "messages", "prompt", "x", "mode", "models", "\u006d", "max_tokens", "max_completion_tokens"]
            ),
            json_values,
            max_size=5,
        ),
        min_size=1,
        max_size=60,
    )
)
def test_the_router_agrees_with_json_loads_on_generated_bodies(objects: list[dict[str, Any]]) -> None:
    bodies = [json.dumps(o, separators=(",", ":") if i % 2 else (", ", ": ")) for i, o in enumerate(objects)]
    # A key spelled with escapes is the key json.loads reads: the router must decode it the same way.
    bodies += [b.replace('"model"', '"m\\u006fd\\u0065l"').replace('"max_tokens"', '"max_t\\u006fkens"') for b in bodies]
    assert scan_both(bodies) == [(expected(body), expected_cap(body)) for body in bodies]


# Each example is two node runs: many bodies an example, few examples (the suite's time is counted, issue 60).
@given(st.lists(st.text(alphabet='"\\m{}[]:,ode lu0123456789abcdef', max_size=40), min_size=1, max_size=80),
       st.integers(min_value=1, max_value=5))  # fmt: skip
@settings(max_examples=12, deadline=None)
def test_a_scan_in_slices_of_a_few_steps_answers_as_one_in_a_single_go(bodies: list[str], steps: int) -> None:
    """Issue 61: a slice can end inside a string, between two of its escapes; the scan picks up where it stopped."""
    # And strings of more escapes than a slice's steps, so that slices end inside them.
    escapes = [f'{{"prompt": "{chr(92) + chr(34)}{chr(92) * 2 * k}x", "model": "m{k}"}}' for k in range(1, 7)]
    wrapped = [*bodies, *(f'{{"prompt": "{b}", "model": "m"}}' for b in bodies), *escapes]
    assert [(model, cap) for model, cap, _ in scan_sliced(wrapped, steps)] == scan_both(wrapped)


def test_a_string_of_escapes_is_walked_an_escape_a_step() -> None:
    """Issue 61: 2 MiB of escaped quotes in one string was one step (the worker held for seconds, other clients' p50
    8 ms -> 4.9 s); each escape is now a step, so a slice of 16,384 steps covers at most 32 KiB of it."""
    escaped = '\\"' * (1024 * 1024)  # 1,048,576 escaped quotes: 2 MiB
    backslashes = "\\\\" * (1024 * 1024)  # as many escaped backslashes
    bodies = [f'{{"prompt": "{escaped}", "model": "m"}}', f'{{"prompt": "{backslashes}", "model": "m"}}']
    for model, cap, slices in scan_sliced(bodies, 16384):
        assert (model, cap) == ("m", None)
        assert slices >= 1024 * 1024 // 16384
