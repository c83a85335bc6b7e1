"""Turn the plain dictionaries Ansible passes (spark_facts output, staged-model facts, instance lists) into planner input."""

from __future__ import annotations

from typing import Any

from .catalog import get_profile, load_catalog
from .hostplan import HostPlan, InstanceRequest, plan_host
from .localmodel import profile_from_config
from .models import HostFacts, Intent, ModelProfile


def plain(value: Any) -> Any:
    """Deep copy into plain dicts and lists.

    ansible-core 2.19 hands filters lazily templated containers whose items resolve only through
    Python-level access; pydantic reads list items at C level and would see the unresolved wrappers.
    """
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


_HOST_KEYS = (
    "platform",
    "arch",
    "gpu_name",
    "compute_capability",
    "driver_version",
    "cuda_version",
    "ptxas_path",
    "mem_total_bytes",
    "mem_available_bytes",
    "unified_memory",
    "vllm_version",
)


def host_facts(facts: Any) -> HostFacts:
    if not isinstance(facts, dict):
        raise ValueError("host facts must be the spark_facts dictionary")
    facts = plain(facts)
    return HostFacts.model_validate({key: facts[key] for key in _HOST_KEYS if facts.get(key) is not None})


def model_profile(model: Any) -> tuple[ModelProfile, str]:
    """A catalog id, or a staged model's facts ({id, path, config, weight_bytes}); returns (profile, what vLLM loads).

    A staged model whose id is in the catalog keeps the catalog's curated profile but is loaded from
    its staged path, so the instance never reaches for the hub.
    """
    model = plain(model)
    if isinstance(model, str):
        return get_profile(model), model
    if not isinstance(model, dict) or "path" not in model:
        raise ValueError("model must be a catalog id or a staged model's facts (id, path, config, weight_bytes)")
    path = str(model["path"])
    model_id = str(model.get("id") or path)
    if model_id in load_catalog():
        return get_profile(model_id), path
    if not model.get("present", True) or "config" not in model:
        raise ValueError(f"model {model_id}: no config.json at {path}; stage it first")
    return profile_from_config(model_id, model["config"], int(model.get("weight_bytes", 0)), path), path


def instance_request(item: Any) -> InstanceRequest:
    if not isinstance(item, dict) or "name" not in item or "model" not in item:
        raise ValueError("each instance needs a name and a model")
    profile, ref = model_profile(item["model"])
    return InstanceRequest(
        name=item["name"], profile=profile, model_ref=ref, intent=Intent.model_validate(item.get("intent") or {})
    )


def host_plan(facts: Any, instances: Any, label: str = "instances") -> HostPlan:
    instances = plain(instances)
    if not isinstance(instances, list):
        raise ValueError(f"{label} must be a list")
    requests = []
    for index, item in enumerate(instances):
        try:
            requests.append(instance_request(item))
        except ValueError as exc:
            raise ValueError(f"{label}[{index}]: {exc}") from exc
    return plan_host(host_facts(facts), requests, label)
