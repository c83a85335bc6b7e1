"""Whether the target vLLM would run a repository's own code, and whether it implements the model at all.

Recipes pass --trust-remote-code out of habit; with it, transformers runs the repository's config code
instead of its own class. So consent is asked only where vLLM itself would need the code, decided from
what that release implements (sparkfleet.vllmregistry), never from a recipe.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PlanError
from ..models import Intent, ModelProfile, ReleaseRecord
from ..versions import VllmVersion
from ..vllmregistry import (
    SOURCE,
    architecture_support,
    beyond_table,
    reads_config_natively,
    rules_release,
    transformers_of,
)
from . import buildcheck

_REVISION_FLAG = "--revision"


@dataclass(frozen=True)
class CodeVerdict:
    needed: bool
    why: str
    source: str = SOURCE


def _reader(version: VllmVersion) -> str:
    return f"vLLM {version} (registry of {rules_release(version)}, transformers {transformers_of(version)} in its lock)"


def verdict(profile: ModelProfile, version: VllmVersion) -> CodeVerdict:
    """Does vLLM `version` need the repository's code to load this model's config and tokenizer?"""
    if profile.tokenizer_auto_map:
        return CodeVerdict(True, "its tokenizer_config.json auto_map names tokenizer classes the repository defines")
    if profile.model_type is None:
        if profile.config_auto_map:
            return CodeVerdict(True, "its config.json has no model_type: only its auto_map names the config class")
        return CodeVerdict(False, "its config.json names no repository code")
    if reads_config_natively(version, profile.model_type):
        what = "ignoring the repository's auto_map" if profile.config_auto_map else "and the repository ships no code"
        return CodeVerdict(False, f"{_reader(version)} reads model_type {profile.model_type} natively, {what}")
    if profile.config_auto_map:
        return CodeVerdict(
            True, f"{_reader(version)} has no config class for model_type {profile.model_type}: the repository's does"
        )
    if beyond_table(version):
        return CodeVerdict(
            False,
            f"vLLM {version} is newer than the registry ({rules_release(version)}): "
            f"model_type {profile.model_type} may be one it added; its own parser checks on the host",
        )
    raise PlanError(
        "model",
        f"{profile.id}: {_reader(version)} does not know model_type {profile.model_type}, and config.json names no "
        "code that would define it",
        ("a vLLM release whose transformers knows it", "a model of a type vLLM reads"),
    )


def check_architecture(profile: ModelProfile, version: VllmVersion, record: ReleaseRecord | None = None) -> None:
    """vLLM serves a model only through an architecture it implements (its model registry): the build's own, where its
    record was read, else the sampled stock releases'."""
    if record is not None:
        buildcheck.check_architecture(profile, record)
        return
    if profile.architecture == "unknown":
        return
    support = architecture_support(version, profile.architecture)
    # A release newer than the registry may implement what the table never saw; it may not revive a dropped one.
    if support.implemented or (beyond_table(version) and not (support.last_release or support.plugin)):
        return
    name = f"{profile.id} ({profile.architecture})"
    if support.last_release:
        raise PlanError(
            "vllm_version",
            f"vLLM {version} no longer implements {name}: the last release that served it is {support.last_release}",
            (f"vllm_version {support.last_release} or older", "a model of an architecture vLLM still serves"),
        )
    if support.plugin:
        raise PlanError(
            "model",
            f"vLLM {version} serves {name} only through an out-of-tree plugin, which sparkfleet does not install",
            ("a model of an architecture vLLM implements in-tree",),
        )
    if support.first_release:
        raise PlanError(
            "vllm_version",
            f"vLLM {version} does not implement {name} yet: it first appears in {support.first_release}",
            (f"vllm_version {support.first_release} or newer",),
        )
    raise PlanError(
        "model",
        f"no vLLM release up to {rules_release(version)} implements {name} (its model registry)",
        ("a model of an architecture vLLM implements", "sparkfleet catalog"),
    )


def pinned_commit(profile: ModelProfile) -> str | None:
    return next((a.value for a in profile.extra_args if a.flag == _REVISION_FLAG and a.value), None)


def consent(profile: ModelProfile, intent: Intent, version: VllmVersion, what: str) -> CodeVerdict | None:
    """The repository-code verdict when vLLM will run the code (consent given), None when it need not.

    Refuses a model that needs code without consent, and consent given for another commit than the pinned one.
    """
    found = verdict(profile, version)
    if not found.needed:
        return None
    if not intent.trust_remote_code:
        files = ", ".join(profile.remote_code_files) or "the modules its auto_map names"
        raise PlanError(
            "intent.trust_remote_code",
            f"{what} {profile.id} needs its own Python code ({files}), which vLLM would import and run: {found.why}; "
            "sparkfleet runs a repository's code only when asked",
            ("trust_remote_code: true (or the commit you read) once you have read that code (CLI --trust-remote-code)",),
        )
    consented = intent.trust_remote_code
    pinned = pinned_commit(profile)
    if isinstance(consented, str) and not pinned:
        raise PlanError(
            "intent.trust_remote_code",
            f"consent was given for the code at commit {consented[:12]}, but {what} {profile.id} is not pinned to a "
            "commit, so vLLM could run other code",
            ("stage the model from the hub (model_stage pins its commit)", "trust_remote_code: true for a local directory"),
        )
    if isinstance(consented, str) and pinned and consented != pinned:
        raise PlanError(
            "intent.trust_remote_code",
            f"consent was given for the code at commit {consented[:12]}, but {what} {profile.id} is pinned at "
            f"{pinned[:12]}, whose code nobody has consented to",
            (f"read the code at {pinned[:12]} and set trust_remote_code to that commit",),
        )
    return found
