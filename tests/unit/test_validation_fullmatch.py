"""Validators match the whole value: a trailing newline or a control character never slips through.

Python's `$` matches before a final newline, so `re.match("^...$")` accepted "name\\n"; a value with a
newline can add a line to a unit or an env file. Each field is fuzzed with a valid value plus anything
that is not part of its alphabet.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkfleet.catalog import get_profile
from sparkfleet.errors import PlanError
from sparkfleet.hostconfig.monitoring import thresholds
from sparkfleet.hub import parse_model_ref
from sparkfleet.models import Intent
from sparkfleet.planning.hostplan import InstanceRequest
from sparkfleet.recipes import inputs_from

NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
INSTALL = {"platform": "gb10", "uv_version": "0.13.9", "vllm_version": "0.32.0"}
# What must never pass: line ends, NUL and other controls, and a few characters that start trouble.
BAD_TAIL = st.sampled_from(
    ["\n", "\r", "\x00", "\t", "\x1b", "\u2028", " --x", "\nEVIL=1", "\n[Service]", "\u0663", "\u00e9"]
)


def refuses(build: Any) -> None:
    with pytest.raises((PlanError, ValueError)):
        build()


@settings(max_examples=30, deadline=None)
@given(BAD_TAIL)
def test_instance_names_and_served_names(tail: str) -> None:
    refuses(lambda: InstanceRequest(name="coder" + tail, profile=get_profile(NANO), model_ref=NANO, intent=Intent()))
    refuses(lambda: Intent(served_name="coder" + tail))


@settings(max_examples=30, deadline=None)
@given(BAD_TAIL)
def test_drafters_hub_ids_and_directories(tail: str) -> None:
    refuses(lambda: Intent(drafter="org/draft" + tail))
    refuses(lambda: Intent(drafter="/srv/models/draft" + tail))
    refuses(lambda: parse_model_ref("org/model" + tail))


@pytest.mark.parametrize("drafter", ["../draft", "/srv/../etc", "-rf", "org/draft@main/../../x", "draft", ""])
def test_a_drafter_that_climbs_or_is_an_option_is_refused(drafter: str) -> None:
    refuses(lambda: Intent(drafter=drafter))


@pytest.mark.parametrize("drafter", ["org/draft", "org/draft@0123abc", "/var/lib/sparkfleet/models/org/draft"])
def test_a_plain_drafter_passes(drafter: str) -> None:
    assert Intent(drafter=drafter).drafter == drafter


@settings(max_examples=30, deadline=None)
@given(BAD_TAIL)
def test_install_pins_refs_urls_and_requirements(tail: str) -> None:
    refuses(lambda: inputs_from({**INSTALL, "vllm_version": "0.32.0" + tail}))
    refuses(
        lambda: inputs_from(
            {**INSTALL, "vllm_source": "git", "vllm_git_repo": "https://x/v.git", "vllm_git_ref": "main" + tail}
        )
    )
    refuses(lambda: inputs_from({**INSTALL, "index_urls": ["https://download.pytorch.org/whl/cu130" + tail]}))
    refuses(lambda: inputs_from({**INSTALL, "extra_packages": ["transformers==5.19.0" + tail]}))


@settings(max_examples=30, deadline=None)
@given(BAD_TAIL)
def test_alert_durations(tail: str) -> None:
    refuses(lambda: thresholds({"down_for": "2m" + tail}))
