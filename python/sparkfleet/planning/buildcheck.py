"""A plan held to what its release's own build implements (sparkfleet.models.ReleaseRecord), where its record was
read: the model's architecture in the build's registry, and every flag of the argv in the build's serve parser with a
value among its choices. Pure. Without a record the sampled stock tables stand (vllmregistry, versions)."""

from __future__ import annotations

from ..errors import PlanError
from ..models import Flag, ModelProfile, Reason, ReleaseRecord, ServePlan


def _build(record: ReleaseRecord) -> str:
    return f"vLLM {record.vllm_version} as built ({record.source or 'its release record'})"


def check_architecture(profile: ModelProfile, record: ReleaseRecord) -> None:
    """The build's own registry decides: a fork or nightly serves what it registers, and nothing it does not."""
    if profile.architecture == "unknown" or profile.architecture in record.architectures:
        return
    raise PlanError(
        "vllm_version",
        f"{_build(record)} does not implement {profile.id} ({profile.architecture}): its model registry lists "
        f"{len(record.architectures)} architectures, not this one",
        ("a release whose build registers it", "a model of an architecture this build implements"),
    )


def check_flags(flags: list[Flag], record: ReleaseRecord) -> None:
    """Every flag the plan passes is one the build's parser takes, with a value among its choices."""
    for flag in flags:
        if flag.name not in record.flags:
            raise PlanError(
                "vllm_version",
                f"{_build(record)} has no {flag.name}, which the plan passes ({flag.reason})",
                ("a release whose parser takes it", "an intent that does not need it"),
            )
        choices = record.choices(flag.name)
        wrong = [value for value in flag.values if choices is not None and value not in choices]
        if wrong:
            raise PlanError(
                "vllm_version",
                f"{_build(record)} takes {flag.name} only as one of {', '.join(choices or ())}, not {wrong[0]} "
                f"({flag.reason})",
                ("a release whose build carries it", f"an intent that plans {flag.name} otherwise"),
            )


def held_to_build(served: ServePlan, record: ReleaseRecord) -> ServePlan:
    """The plan, its flags checked against the build, with the reason it was held to that build."""
    check_flags(served.flags, record)
    reason = Reason(
        item=f"vLLM {record.vllm_version} as built",
        reason=f"the plan was held to the release's own record: its architecture among the build's "
        f"{len(record.architectures)} registered, its {len(served.flags)} flags and their values among the "
        f"{len(record.flags)} options its serve parser takes",
        source=f"sparkfleet/release/record_reader.py run by the release's Python ({record.source or 'its smoke step'})",
    )
    return served.model_copy(update={"reasons": [*served.reasons, reason]})
