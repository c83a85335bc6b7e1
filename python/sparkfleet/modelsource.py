"""Where each instance's model and drafter come from, and what the planner is told about them.

The vllm_serve role gathers the facts: what is staged on the host (model_facts), what model_stage will copy
from a controller directory (described there by the same code) or download from the hub (described from its
config and headers, pinned to a commit). This module decides, in one place, which of them describes each
model and each drafter, refuses an instance whose model nothing will provide, and turns the inventory's
instances into the planner's requests. Pure: the role passes what it read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from .errors import PlanError
from .models import Strict

# The instance keys that reach the planner as they are (besides name, model and intent).
SWITCHING_KEYS = ("on_demand", "idle_stop_after", "release")


class SourceFacts(Strict):
    """What the role read before planning; each mapping is keyed by model id, or by a controller directory."""

    # model_facts' staged: each id with `complete` and, when complete, its description.
    staged: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # model_stage_models: {id, src?, remote_src?, ...}.
    stage_entries: list[dict[str, Any]] = Field(default_factory=list)
    # Controller directories (src) model_stage will copy, described on the controller.
    described: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Hub models model_stage will download, described from their config.json and headers.
    hub: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # model_stage's pins: id to {commit, ...}.
    pins: dict[str, dict[str, Any]] = Field(default_factory=dict)
    hf_home: str
    model_store: str
    # vllm_serve_render_only: units are rendered for a host that will not run them (a model may be missing).
    render_only: bool = False
    # Where the role writes an instance's chat template (its `chat_template`, a controller file) on the host.
    template_dir: str | None = None


def chat_template_path(template_dir: str, name: str) -> str:
    """The host file an instance's own chat template is written to and vLLM reads (--chat-template)."""
    return f"{template_dir.rstrip('/')}/{name}.chat-template.jinja"


def _entry(facts: SourceFacts, model_id: str) -> Mapping[str, Any]:
    return next((e for e in facts.stage_entries if e.get("id") == model_id), {})


def source_of(facts: SourceFacts, model_id: str, kind: Literal["model", "drafter"]) -> dict[str, Any] | str:
    """What the planner reads for one model or drafter: a description (a dict) or the bare id.

    In order: the staged copy, once complete; the controller directory model_stage will copy (at its place in
    the model store); the hub description (a model is served at the commit model_stage pinned, by id, with its
    files in hf_home); a pinned hub model nothing described yet (by id at that commit); else the id itself (a
    catalog id, or a drafter known by its size only).
    """
    staged = facts.staged.get(model_id, {})
    if staged.get("complete"):
        return dict(staged)
    src = _entry(facts, model_id).get("src")
    if isinstance(src, str) and src in facts.described:
        placed = {**facts.described[src], "id": model_id, "path": f"{facts.model_store}/{model_id}"}
        return {**placed, "fs_type": None} if kind == "model" else placed
    hub = facts.hub.get(model_id, {})
    pin = facts.pins.get(model_id, {})
    # A drafter is loaded from its staged copy by path: only the served model is asked for by commit.
    pinned = {"commit": pin["commit"], "hf_home": facts.hf_home} if "commit" in pin and kind == "model" else {}
    if "config" in hub:
        return {**hub, **pinned}
    if pinned:
        return {"id": model_id, "path": model_id, **pinned}
    return model_id


def provided(facts: SourceFacts, model_id: str) -> bool:
    """Whether the model is staged on the host or model_stage will stage it in this play."""
    return bool(facts.staged.get(model_id, {}).get("complete")) or bool(_entry(facts, model_id)) or facts.render_only


def check_provided(facts: SourceFacts, instances: list[dict[str, Any]], host: str, label: str) -> None:
    for index, item in enumerate(instances):
        if not provided(facts, str(item["model"])):
            raise PlanError(
                f"{label}[{index}].model",
                f"{item['model']} is not staged on {host} and not in model_stage_models",
                (f"add {{'id': '{item['model']}'}} (hub) or {{'id': ..., 'src': DIR}} to model_stage_models",),
            )
        drafter = (item.get("intent") or {}).get("drafter")
        if isinstance(drafter, str) and not provided(facts, drafter):
            raise PlanError(
                f"{label}[{index}].intent.drafter",
                f"{drafter} is not staged on {host} and not in model_stage_models (the service loads it offline)",
                (f"add {{'id': '{drafter}'}} to model_stage_models",),
            )


def planner_instances(
    instances: list[dict[str, Any]],
    facts: SourceFacts,
    *,
    host: str,
    keyed: set[str],
    link: Mapping[str, str],
    label: str = "vllm_serve_instances",
) -> list[dict[str, Any]]:
    """The planner's request for each inventory instance (keys set aside: only whether one is set).

    `link` is this host's place on the cluster link ({master_addr, host_ip}): a rank of a native multi-node
    instance (nodes above 1, cluster_backend not ray) runs there. Host and port fall back to the Intent's
    defaults; the served name to the model id the inventory names.
    """
    check_provided(facts, instances, host, label)
    out = []
    for item in instances:
        raw_intent = item.get("intent") or {}
        if not isinstance(raw_intent, Mapping):
            raise PlanError(f"{label}.intent", "must be a mapping such as {max_context: 65536, concurrency: 4}")
        intent = dict(raw_intent)
        if "host" in item:
            intent["host"] = item["host"]
        if "port" in item:
            intent["port"] = int(item["port"])
        intent["api_key"] = item["name"] in keyed
        intent["served_name"] = item.get("served_name", item["model"])
        if item.get("chat_template"):
            if not facts.template_dir:
                raise PlanError(f"{label}.chat_template", "needs the directory the role writes templates to")
            intent["chat_template"] = chat_template_path(facts.template_dir, str(item["name"]))
        drafter = intent.get("drafter")
        native = int(intent.get("nodes", 1)) > 1 and intent.get("cluster_backend", "auto") != "ray"
        out.append(
            {
                "name": item["name"],
                "model": source_of(facts, str(item["model"]), "model"),
                "drafter": source_of(facts, drafter, "drafter") if isinstance(drafter, str) and drafter else None,
                "intent": intent,
                "placement": {"rank": int(item.get("rank", 0)), **link} if native else None,
                **{key: item[key] for key in SWITCHING_KEYS if key in item},
            }
        )
    return out


def unstaged_refusal(
    instances: list[dict[str, Any]],
    drafters: list[str],
    complete: set[str],
    release: dict[str, Any] | None,
    where: dict[str, str],
) -> str:
    """Why the host cannot serve yet, in one message: no release, and every model and drafter not staged completely (each
    instance's by its index in vllm_serve_instances, then the drafters); '' when it can. `where`: the host, the release
    root, the model store and the hub home the message names."""
    host = where["host"]
    parts = []
    if not release or release.get("vllm_version") is None:
        parts.append(
            f"{host} has no vLLM release at {where['root']}/current; run the sparkfleet.vllm.vllm_install role (or the "
            "site playbook) first."
        )
    wanted = [(f"vllm_serve_instances[{i}].model", str(item["model"])) for i, item in enumerate(instances)]
    wanted += [("vllm_serve_instances[*].intent.drafter", drafter) for drafter in drafters]
    parts += [
        f"{variable}: {model} is not staged on {host} (looked in {where['model_store']}/{model} and "
        f"{where['hf_home']}/hub); add it to model_stage_models and run the model_stage role."
        for variable, model in wanted
        if model not in complete
    ]
    return " ".join(parts)
