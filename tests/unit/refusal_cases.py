"""What a careless user types, and the refusal each gets before any host changes.

One table: test_refusals.py runs every case through the library entry point the preflight uses, and
scripts/refusals_doc.py renders docs/refusals.md from the same cases with the messages they produce.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkfleet.boundary.adapters import front_door_plan, host_plan
from sparkfleet.hostconfig.hardening import check_clients
from sparkfleet.hostconfig.monitoring import thresholds
from sparkfleet.modelsource import SourceFacts, planner_instances
from sparkfleet.recipes import inputs_from

GIB = 1024**3
SPARK = {"platform": "gb10", "mem_total_bytes": int(121.69 * GIB), "vllm_version": "0.32.0", "unified_memory": True}
QWEN = "nvidia/Qwen3.6-35B-A3B-NVFP4"
NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
INSTALL = {"platform": "gb10", "uv_version": "0.13.9", "vllm_version": "0.32.0"}
WHEEL = {"url": "https://wheels.example/vllm-0.32.0-cp38-abi3-manylinux_2_31_aarch64.whl", "sha256": "e" * 64}
PATCH = {"name": "fix.py", "kind": "overlay", "target": "vllm/x.py", "sha256": "a" * 64}


# Llama-3.3-Nemotron-Super-49B's shape (issue 21) with one block of other KV heads.
NAS = {
    "id": "nvidia/Llama-3_3-Nemotron-Super-49B-v1_5",
    "path": "/models/nas",
    "weight_bytes": 100 * GIB,
    "config": {
        "architectures": ["DeciLMForCausalLM"],
        "model_type": "nemotron-nas",
        "hidden_size": 8192,
        "num_attention_heads": 64,
        "num_hidden_layers": 80,
        # Two KV head counts: vLLM sizes every layer by the first attention block.
        "block_configs": [{"attention": {"no_op": False, "n_heads_in_group": 8}}] * 79
        + [{"attention": {"no_op": False, "n_heads_in_group": 4}}],
    },
}
# The same with a sliding window in one block: vLLM 0.32 would build a full attention layer there.
NAS_WINDOW = {
    **NAS,
    "config": {
        **NAS["config"],
        "block_configs": [{"attention": {"no_op": False, "n_heads_in_group": 8, "window_length": None}}] * 79
        + [{"attention": {"no_op": False, "n_heads_in_group": 8, "window_length": 4096}}],
    },
}


def instance(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "qwen",
        "model": QWEN,
        "intent": {"max_context": 32768, "concurrency": 4, "trust_remote_code": True},
    }
    intent = changes.pop("intent", {})
    return {**base, **changes, "intent": {**base["intent"], **intent}}


def serve(*items: Any, facts: Any = None) -> Callable[[], Any]:
    return lambda: host_plan(SPARK if facts is None else facts, list(items), "vllm_serve_instances")


def door(*items: Any, **settings: Any) -> Callable[[], Any]:
    return lambda: front_door_plan(host_plan(SPARK, list(items), "vllm_serve_instances").model_dump(), settings)


def sources(*items: Any, stage: list[dict[str, Any]] | None = None) -> Callable[[], Any]:
    facts = SourceFacts(stage_entries=stage or [], hf_home="/var/lib/sparkfleet/huggingface", model_store="/m")
    return lambda: planner_instances(list(items), facts, host="spark01", keyed=set(), link={})


def install(**changes: Any) -> Callable[[], Any]:
    return lambda: inputs_from({**INSTALL, **changes})


@dataclass(frozen=True)
class Case:
    what: str
    run: Callable[[], Any]
    variable: str
    says: str = ""  # a part of the message the test insists on
    setting: dict[str, Any] = field(default_factory=dict)


# fmt: off
CASES = [
    Case("instance name with a slash", serve(instance(name="a/b")), "vllm_serve_instances[0].name", "lower-case letters"),
    Case("instance name '..'", serve(instance(name="..")), "vllm_serve_instances[0].name"),
    Case("instance name with a space", serve(instance(name="two words")), "vllm_serve_instances[0].name"),
    Case("instance name with shell metacharacters", serve(instance(name="x;rm -rf /")), "vllm_serve_instances[0].name"),
    Case("instance name in capitals", serve(instance(name="Qwen")), "vllm_serve_instances[0].name"),
    Case("instance without a model", serve({"name": "qwen"}), "vllm_serve_instances[0]", "needs a name and a model"),
    Case("instances as a mapping, not a list", lambda: host_plan(SPARK, {"qwen": instance()}, "vllm_serve_instances"), "vllm_serve_instances", "must be a list"),
    Case("model neither in the catalog nor a directory", serve(instance(model="org/typo")), "vllm_serve_instances[0].model", "not in the catalog"),
    Case("two instances with one name", serve(instance(), instance(intent={"port": 8001})), "vllm_serve_instances[1].name", "already the name"),
    Case("two instances on one port", serve(instance(), instance(name="qwen2")), "vllm_serve_instances[1].port", "both listen on"),
    Case("port 0", serve(instance(intent={"port": 0})), "vllm_serve_instances[0].intent.port"),
    Case("port above 65535", serve(instance(intent={"port": 70000})), "vllm_serve_instances[0].intent.port"),
    Case("privileged port 80", serve(instance(intent={"port": 80})), "vllm_serve_instances[0].port", "privileged port"),
    Case("port of node_exporter", serve(instance(intent={"port": 9100})), "vllm_serve_instances[0].port", "node_exporter"),
    Case("port of Prometheus", serve(instance(intent={"port": 9090})), "vllm_serve_instances[0].port", "Prometheus"),
    Case("port of the Ray head", serve(instance(intent={"port": 6379})), "vllm_serve_instances[0].port", "Ray head"),
    Case("gpu_memory_utilization 0", serve(instance(intent={"gpu_memory_utilization": 0})), "vllm_serve_instances[0].intent.gpu_memory_utilization"),
    Case("gpu_memory_utilization above 1", serve(instance(intent={"gpu_memory_utilization": 1.5})), "vllm_serve_instances[0].intent.gpu_memory_utilization"),
    Case("context 0", serve(instance(intent={"max_context": 0})), "vllm_serve_instances[0].intent.max_context"),
    Case("context past the config's limit, no opt-in", serve(instance(model=NANO, intent={"max_context": 1048576, "concurrency": 1})), "vllm_serve_instances[0] (qwen) intent.max_context", "allow_long_context true"),
    Case("YaRN for a model without a YaRN override", serve(instance(model=NANO, intent={"max_context": 1048576, "concurrency": 1, "allow_yarn": True})), "vllm_serve_instances[0] (qwen) intent.max_context", "no YaRN override"),
    Case("long context past what the publisher supports", serve(instance(model=NANO, intent={"max_context": 2097152, "concurrency": 1, "allow_long_context": True})), "vllm_serve_instances[0] (qwen) intent.max_context", "supports up to 1048576"),
    Case("concurrency 0", serve(instance(intent={"concurrency": 0})), "vllm_serve_instances[0].intent.concurrency"),
    Case("nodes 0", serve(instance(intent={"nodes": 0})), "vllm_serve_instances[0].intent.nodes"),
    Case("tensor parallel 0", serve(instance(intent={"tensor_parallel_size": 0})), "vllm_serve_instances[0].intent.tensor_parallel_size"),
    Case("unknown profile", serve(instance(intent={"profile": "fast"})), "vllm_serve_instances[0].intent.profile"),
    Case("unknown KV cache dtype", serve(instance(intent={"kv_cache_dtype": "int4"})), "vllm_serve_instances[0].intent.kv_cache_dtype"),
    Case("unknown speculative method", serve(instance(intent={"speculative": "eagle9"})), "vllm_serve_instances[0].intent.speculative"),
    Case("eagle3 without a drafter", serve(instance(intent={"speculative": "eagle3"})), "vllm_serve_instances[0] (qwen) intent.drafter", "none was given"),
    Case("a drafter for ngram", serve(instance(intent={"speculative": "ngram", "drafter": "org/draft"})), "vllm_serve_instances[0] (qwen) intent.drafter", "not ngram"),
    Case("a drafter nothing has read", serve(instance(intent={"speculative": "eagle3", "drafter": "org/draft"})), "vllm_serve_instances[0] (qwen) intent.drafter", "drafter_weights_gib"),
    Case("a DFlash drafter that needs a build no release has", serve(instance(model="unsloth/Qwen3.6-27B-NVFP4", intent={"speculative": "dflash", "max_context": 16384})), "vllm_serve_instances[0] (qwen) intent.speculative", "dflash-interleaved-swa"),
    Case("misspelt intent key", serve(instance(intent={"max_ctx": 65536})), "vllm_serve_instances[0].intent.max_ctx", "Extra inputs"),
    Case("intent that is not a mapping", serve({**instance(), "intent": "65536"}), "vllm_serve_instances[0].intent", "must be a mapping"),
    Case("per-layer blocks with different KV heads", serve(instance(model=NAS)), "vllm_serve_instances[0].model", "unsupported layout: block_configs"),
    Case("a per-layer block with a window vLLM ignores", serve(instance(model=NAS_WINDOW)), "vllm_serve_instances[0].model", "attention.window_length"),
    Case("an infinite host reserve", serve(instance(intent={"host_reserve_gib": float("inf")})), "vllm_serve_instances[0].intent.host_reserve_gib", "finite"),
    Case("answer check with a line break in its question", serve(instance(intent={"answer_check": {"question": "What?\nSay 204", "answer": "204"}})), "vllm_serve_instances[0].intent.answer_check.question", "one line of printable text"),
    Case("answer check with an empty answer", serve(instance(intent={"answer_check": {"question": "What is 2+2?", "answer": ""}})), "vllm_serve_instances[0].intent.answer_check.answer"),
    Case("answer check with no question", serve(instance(intent={"answer_check": {"answer": "4"}})), "vllm_serve_instances[0].intent.answer_check.question"),
    Case("a model whose config only its own code defines, without consent", serve(instance(model="nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4", intent={"trust_remote_code": False})), "vllm_serve_instances[0] (qwen) intent.trust_remote_code", "only when asked"),
    Case("consent that names neither true nor a commit", serve(instance(model="nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4", intent={"trust_remote_code": "main"})), "vllm_serve_instances[0].intent.trust_remote_code"),
    Case("every address, key or not", serve(instance(intent={"host": "0.0.0.0", "api_key": True})), "vllm_serve_instances[0] (qwen) intent.host", "guards only the /v1 routes"),
    Case("host facts from an unknown platform", serve(instance(), facts={**SPARK, "platform": "tpu"}), "sparkfleet_facts.platform"),
    Case("a capability sparkfleet does not know", serve(instance(), facts={**SPARK, "vllm_capabilities": ["eagle9"]}), "sparkfleet_facts.vllm_capabilities", "not a capability"),
    Case("vLLM version 'latest'", install(vllm_version="latest"), "vllm_install_vllm_version", "not a version"),
    Case("git ref that is an option", install(vllm_source="git", vllm_git_repo="https://x/v.git", vllm_git_ref="--upload-pack=x"), "vllm_install_vllm_git_ref"),
    Case("git source without a ref", install(vllm_source="git", precompiled_wheel=WHEEL), "vllm_install_inputs", "needs vllm_git_repo and vllm_git_ref"),
    Case("fork build whose kernels are not pinned", install(vllm_source="git", vllm_git_repo="https://x/v.git", vllm_git_ref="main"), "vllm_install_precompiled_wheel", "download unpinned"),
    Case("precompiled wheel in plain http", install(vllm_source="git", vllm_git_repo="https://x/v.git", vllm_git_ref="main", precompiled_wheel={**WHEEL, "url": "http://wheels.example/vllm-0.32.0-cp38-abi3-manylinux_2_31_aarch64.whl"}), "vllm_install_precompiled_wheel.url", "not an https or file URL"),
    Case("precompiled wheel for a release from PyPI", install(precompiled_wheel=WHEEL), "vllm_install_precompiled_wheel", "only a fork build"),
    Case("capabilities declared for a release from PyPI", install(capabilities=["dflash"]), "vllm_install_capabilities", "only for a fork"),
    Case("torch pin that is not a version", install(torch_version="cu130"), "vllm_install_torch_version"),
    Case("index URL without a scheme", install(index_urls=["download.pytorch.org/whl/cu130"]), "vllm_install_index_urls"),
    Case("index URL in plain http", install(index_urls=["http://download.pytorch.org/whl/cu130"]), "vllm_install_index_urls", "only https or file"),
    Case("extra package with a shell command", install(extra_packages=["transformers; rm -rf /"]), "vllm_install_extra_packages"),
    Case("FlashInfer JIT-cache index on a cpu host", install(platform="cpu", flashinfer_index_url="https://flashinfer.ai/whl/cu130"), "vllm_install_flashinfer_index_url", "has no FlashInfer"),
    Case("b12x on a cpu host", install(platform="cpu", b12x=True), "vllm_install_b12x", "cannot load them"),
    Case("b12x with a vLLM before its extra", install(vllm_version="0.32.0", b12x=True), "vllm_install_b12x", "from 0.33.0"),
    Case("b12x extra on a fork", install(vllm_source="git", vllm_git_repo="https://x/v.git", vllm_git_ref="main", precompiled_wheel=WHEEL, b12x=True), "vllm_install_b12x", "declares its own extras"),
    Case("patch that climbs out of site-packages", install(patches=[{**PATCH, "target": "../../etc/passwd"}]), "vllm_install_patches[0].target", "inside"),
    Case("patch with an absolute target", install(patches=[{**PATCH, "target": "/etc/passwd"}]), "vllm_install_patches[0].target"),
    Case("Python version '3'", install(python_version="3"), "vllm_install_python_version"),
    Case("misspelt alert threshold", lambda: thresholds({"kv_cache": 0.8}), "monitoring_alerts.kv_cache", "Extra inputs"),
    Case("KV alert threshold above 1", lambda: thresholds({"kv_cache_usage": 1.5}), "monitoring_alerts.kv_cache_usage"),
    Case("client network that is a name", lambda: check_clients(["office"], "vllm_serve_allowed_clients"), "vllm_serve_allowed_clients[0]"),
    Case("door client key too short", door(instance(), clients=[{"name": "laptop", "key": "hunter2"}]), "front_door_clients[0].key", "the key is not shown"),
    Case("one key for two door clients", door(instance(), clients=[{"name": "a", "key": "k" * 32}, {"name": "b", "key": "k" * 32}]), "front_door_clients[1].key", "its own"),
    Case("door on an instance's port", door(instance(), port=8000), "front_door_port", "port of instance qwen"),
    Case("a public instance behind the door", door(instance(intent={"host": "0.0.0.0", "allow_unauthenticated_bind": True})), "vllm_serve_instances (qwen).host", "loopback only"),
    Case("two instances with one model name", door(instance(intent={"served_name": "chat"}), instance(name="qwen2", intent={"port": 8001, "served_name": "chat"})), "vllm_serve_instances (qwen2).served_name", "unique"),
    Case("a model neither staged nor in model_stage_models", sources(instance(model="org/not-here")),
         "vllm_serve_instances[0].model", "not in model_stage_models"),
    Case("a drafter neither staged nor in model_stage_models",
         sources(instance(intent={"speculative": "eagle3", "drafter": "org/eagle"}), stage=[{"id": QWEN}]),
         "vllm_serve_instances[0].intent.drafter", "loads it offline"),
]
# fmt: on

# Refused by the role's own checks in the same preflight (exercised by Molecule's refusal cases).
ROLE_CASES = [
    (
        "root as the service user",
        "sparkfleet_user",
        '(with sparkfleet_group) "root" / "sparkfleet" would run model code as root; use a dedicated account '
        "such as sparkfleet (host_prep creates it)",
    ),
    (
        "an existing login account as the service user",
        "sparkfleet_user",
        "alice exists on spark01 with uid 1000 and shell /bin/bash: a login account would run model code; "
        "name a new one (host_prep creates it with no login shell)",
    ),
    (
        "API key with a newline, quote, space or backslash",
        "vllm_serve_instances[N].api_key",
        "must be 16 to 512 characters of letters, digits and . _ ~ + / = - (no newline, quote, space or backslash); the key is not shown",
    ),
    (
        "model id that escapes the model store ('../etc')",
        "model_stage_models[N]",
        "needs an id such as org/name (letters, digits, '._-'), and either a hub revision or a src directory, not both",
    ),
]
# fmt: on
