"""Planning one model across several Sparks: what each node holds (vllm-semantics §2)."""

from __future__ import annotations

import pytest
from conftest import spark

from sparkfleet.catalog import get_profile
from sparkfleet.errors import InfeasibleError, PlanError
from sparkfleet.hostconfig.hardening import UnitKind, sandbox
from sparkfleet.kv.cache import geometry
from sparkfleet.models import ClusterBackend, Intent, NodePlacement, Platform
from sparkfleet.planning.hostplan import InstanceRequest, plan_host
from sparkfleet.planning.planner import plan

GQA = "openai/gpt-oss-120b"  # 8 KV heads: shards cleanly over TP 2 and 4
MLA = "mistralai/Mistral-Small-4-119B-2603-NVFP4"  # one latent per token, replicated on every TP rank
HYBRID = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
HEAD = NodePlacement(rank=0, master_addr="192.168.100.10", host_ip="192.168.100.10")


def cluster(model: str, tp: int = 1, pp: int = 1, **intent: object):  # type: ignore[no-untyped-def]
    nodes = tp * pp
    return plan(
        spark(),
        get_profile(model),
        Intent(trust_remote_code=True, nodes=nodes, tensor_parallel_size=tp, pipeline_parallel_size=pp, **intent),  # type: ignore[arg-type]
        model_ref=model,
        placement=HEAD if nodes > 1 else None,
    )


@pytest.mark.parametrize("tp", [2, 4])
def test_weights_and_gqa_kv_shard_across_tensor_parallel_ranks(tp: int) -> None:
    one, many = cluster(GQA, max_context=65536), cluster(GQA, tp=tp, max_context=65536)
    assert many.memory.weights == pytest.approx(one.memory.weights / tp, rel=0.01)
    profile = get_profile(GQA)
    per_rank = geometry(profile, kv_cache_dtype="auto", tensor_parallel=tp).attention_bytes_per_token_per_layer
    whole = geometry(profile, kv_cache_dtype="auto").attention_bytes_per_token_per_layer
    assert per_rank * tp == whole
    # Same requests, a tp-th of the bytes per token on each node.
    assert many.kv_cache_memory_bytes == pytest.approx(one.kv_cache_memory_bytes / tp, rel=0.05)
    assert many.max_model_len == one.max_model_len


def test_mla_latents_do_not_shard_across_tensor_parallel_ranks() -> None:
    one, two = cluster(MLA, max_context=65536), cluster(MLA, tp=2, max_context=65536)
    profile = get_profile(MLA)
    assert (
        geometry(profile, kv_cache_dtype="auto", tensor_parallel=2).attention_bytes_per_token_per_layer
        == geometry(profile, kv_cache_dtype="auto").attention_bytes_per_token_per_layer
    )
    assert two.kv_cache_memory_bytes == pytest.approx(one.kv_cache_memory_bytes, rel=0.02)
    assert two.memory.weights == pytest.approx(one.memory.weights / 2, rel=0.01)


def test_pipeline_parallel_splits_layers_and_weights_per_stage() -> None:
    one, two = cluster(GQA, max_context=65536), cluster(GQA, pp=2, max_context=65536)
    assert two.memory.weights == pytest.approx(one.memory.weights / 2, rel=0.01)
    # A stage holds half the layers; its sliding windows are reserved for one more chunk in flight (async
    # scheduling overlaps a step per stage plus one: 3 chunks, not 2), so a little more than half.
    half = one.kv_cache_memory_bytes / 2
    assert half < two.kv_cache_memory_bytes < half * 1.15
    assert "--pipeline-parallel-size" in two.argv


def test_multi_node_argv_asked_for_ray_uses_ray_and_the_sizes() -> None:
    p = plan(
        spark(),
        get_profile(HYBRID),
        Intent(trust_remote_code=True, nodes=2, tensor_parallel_size=2, max_context=131072, cluster_backend="ray"),  # type: ignore[arg-type]
        model_ref=HYBRID,
    )
    argv = " ".join(p.argv)
    assert "--tensor-parallel-size 2" in argv
    assert "--distributed-executor-backend ray" in argv
    assert "--nnodes" not in argv and "VLLM_HOST_IP" not in p.env
    assert p.cluster_backend is ClusterBackend.RAY
    assert "VLLM_SKIP_P2P_CHECK" not in p.env  # a single-GPU shortcut only


def test_multi_node_defaults_to_vllms_own_launch_with_rank_zero_serving() -> None:
    p = cluster(HYBRID, tp=2, max_context=131072)
    argv = " ".join(p.argv)
    assert p.cluster_backend is ClusterBackend.NATIVE and not p.headless and p.node_rank == 0
    assert "--distributed-executor-backend mp --nnodes 2 --node-rank 0 --master-addr 192.168.100.10" in argv
    assert "--master-port 29500" in argv and "--headless" not in p.argv and "--port" in p.argv
    assert p.env["VLLM_HOST_IP"] == "192.168.100.10"


def test_a_worker_rank_is_headless_meets_the_head_and_advertises_its_own_link_address() -> None:
    worker = NodePlacement(rank=1, master_addr="192.168.100.10", host_ip="192.168.100.11")
    intent = Intent(trust_remote_code=True, nodes=2, tensor_parallel_size=2, max_context=131072, cluster_port=29611)
    p = plan(spark(), get_profile(HYBRID), intent, model_ref=HYBRID, placement=worker)
    argv = " ".join(p.argv)
    assert p.headless and p.node_rank == 1
    assert "--node-rank 1 --master-addr 192.168.100.10 --master-port 29611 --headless" in argv
    assert p.env["VLLM_HOST_IP"] == "192.168.100.11"
    head = cluster(HYBRID, tp=2, max_context=131072)
    # Every rank holds the same share: the same memory plan on each node.
    assert p.memory == head.memory and p.kv_cache_memory_bytes == head.kv_cache_memory_bytes


def test_native_without_the_link_addresses_or_on_a_release_without_it_is_refused() -> None:
    intent = Intent(trust_remote_code=True, nodes=2, tensor_parallel_size=2, max_context=32768)
    with pytest.raises(PlanError, match="needs the cluster link's addresses") as err:
        plan(spark(), get_profile(GQA), intent, model_ref=GQA)
    assert err.value.variable == "intent.cluster_backend" and "cluster_backend ray" in str(err.value)
    with pytest.raises(PlanError, match="rank 2 of 2 nodes"):
        plan(spark(), get_profile(GQA), intent, model_ref=GQA, placement=HEAD.model_copy(update={"rank": 2}))
    with pytest.raises(PlanError, match="several nodes only"):
        plan(spark(), get_profile(GQA), Intent(trust_remote_code=True), model_ref=GQA, placement=HEAD)
    with pytest.raises(PlanError, match="Ray workers"):
        ray = intent.model_copy(update={"cluster_backend": ClusterBackend.RAY})
        plan(spark(), get_profile(GQA), ray, model_ref=GQA, placement=HEAD.model_copy(update={"rank": 1}))
    with pytest.raises(ValueError, match="not an IPv4 address"):
        NodePlacement(rank=0, master_addr="10.0.0.1\nX=1", host_ip="10.0.0.1")


def test_the_host_plan_counts_a_headless_rank_but_gives_it_no_endpoint() -> None:
    tiny = get_profile("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4")
    pp = Intent(trust_remote_code=True, nodes=2, pipeline_parallel_size=2, max_context=4096, port=8001)
    rank = NodePlacement(rank=1, master_addr="10.0.0.1", host_ip="10.0.0.2")
    own = Intent(trust_remote_code=True, max_context=4096, port=8001)
    requests = [
        InstanceRequest(name="own", profile=tiny, model_ref=tiny.id, intent=own),
        # Same API port as the local instance: a headless rank listens on no API port here.
        InstanceRequest(name="big", profile=tiny, model_ref=tiny.id, intent=pp, placement=rank),
    ]
    host = plan_host(spark(), requests)
    assert set(host.instances) == {"own"} and set(host.ranks) == {"big"} and set(host.endpoints) == {"own"}
    assert host.footprint_gib > 0 and host.ranks["big"].headless
    head = [
        InstanceRequest(
            name="big", profile=tiny, model_ref=tiny.id, intent=pp.model_copy(update={"cluster_port": 8001}), placement=HEAD
        )
    ]
    with pytest.raises(PlanError, match="also an instance's API port") as err:
        plan_host(spark(), head)
    assert err.value.variable == "instances[0].intent.cluster_port"


def test_behind_the_door_rank_zero_serves_its_api_on_a_socket_and_meets_its_ranks_on_the_link() -> None:
    """Issue 47: rank 0's API on loopback TCP gave every local account of the head keyless /invocations."""
    tiny = get_profile("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4")
    pp = Intent(trust_remote_code=True, nodes=2, pipeline_parallel_size=2, max_context=4096, port=8001)
    head = [InstanceRequest(name="big", profile=tiny, model_ref=tiny.id, intent=pp, placement=HEAD)]
    served = plan_host(spark(), head, behind_door=True)
    rank0 = served.instances["big"]
    assert served.endpoints["big"].socket == "/run/sparkfleet-vllm-big/api.sock"
    assert "--uds" in rank0.argv and "--port" not in rank0.argv and "--node-rank" in rank0.argv
    # Its unit admits the members' link addresses (the group meets there), not a namespace of its own.
    directives = {
        d.name: d.value for d in sandbox(UnitKind.VLLM, Platform.GB10, link_subnet="10.0.0.2", socket="/run/x/api.sock")
    }
    assert "PrivateNetwork" not in directives and directives["IPAddressAllow"] == "localhost 10.0.0.2"
    assert "-/run/x" in directives["ReadWritePaths"]
    single = {d.name: d.value for d in sandbox(UnitKind.VLLM, Platform.GB10, socket="/run/x/api.sock")}
    assert single["PrivateNetwork"] == "yes"
    # A headless rank serves no API: nothing to put on a socket.
    rank = NodePlacement(rank=1, master_addr="10.0.0.1", host_ip="10.0.0.2")
    worker = plan_host(spark(), [head[0].model_copy(update={"placement": rank})], behind_door=True)
    assert worker.endpoints == {} and "--uds" not in worker.ranks["big"].argv


def test_a_model_that_fits_only_across_nodes_is_planned_and_refused_on_one() -> None:
    big = get_profile(GQA).model_copy(update={"weights_gib": 150.0})
    with pytest.raises(InfeasibleError) as err:
        plan(spark(), big, Intent(trust_remote_code=True, max_context=32768), model_ref=GQA)
    assert "nodes 2 (tensor parallel)" in str(err.value)
    two = plan(
        spark(),
        big,
        Intent(trust_remote_code=True, nodes=2, tensor_parallel_size=2, max_context=32768),
        model_ref=GQA,
        placement=HEAD,
    )
    assert two.memory.weights == pytest.approx(75.0, rel=0.01)


def test_a_share_that_still_does_not_fit_per_node_is_refused_with_more_nodes_suggested() -> None:
    huge = get_profile(GQA).model_copy(update={"weights_gib": 400.0})
    with pytest.raises(InfeasibleError) as err:
        plan(
            spark(),
            huge,
            Intent(trust_remote_code=True, nodes=2, tensor_parallel_size=2, max_context=32768),
            model_ref=GQA,
            placement=HEAD,
        )
    assert err.value.variable == "intent"
    assert "nodes 4 (tensor parallel)" in str(err.value)


def test_nodes_must_match_tensor_times_pipeline_parallel() -> None:
    with pytest.raises(PlanError) as err:
        plan(spark(), get_profile(GQA), Intent(trust_remote_code=True, nodes=2), model_ref=GQA)
    assert err.value.variable == "intent.nodes"
    with pytest.raises(PlanError, match="a DGX Spark has one GPU"):
        plan(spark(), get_profile(GQA), Intent(trust_remote_code=True, tensor_parallel_size=2), model_ref=GQA)


def test_a_ray_plan_on_cpu_warns_that_vllm_cannot_run_it_a_native_one_does_not() -> None:
    from conftest import cpu_host

    intent = Intent(trust_remote_code=True, nodes=2, pipeline_parallel_size=2, max_context=8192, cluster_backend="ray")  # type: ignore[arg-type]
    p = plan(cpu_host(), get_profile(GQA), intent, model_ref=GQA)
    assert any("CPU platform has no Ray device" in w for w in p.warnings)
    assert p.nodes == 2
    native = intent.model_copy(update={"cluster_backend": ClusterBackend.AUTO})
    q = plan(cpu_host(), get_profile(GQA), native, model_ref=GQA, placement=HEAD)
    assert not any("Ray" in w for w in q.warnings) and q.cluster_backend is ClusterBackend.NATIVE


def test_each_member_after_the_head_runs_the_next_rank_of_a_native_instance_without_its_key() -> None:
    from sparkfleet.boundary.adapters import cluster_ranks

    head_list = [
        {"name": "one", "model": "m", "api_key": "k" * 20, "intent": {"max_context": 512}},
        {"name": "big", "model": "m", "api_key": "k" * 20, "intent": {"nodes": 3, "tensor_parallel_size": 3}},
        {"name": "viaray", "model": "m", "intent": {"nodes": 2, "cluster_backend": "ray"}},
        {"name": "pair", "model": "m", "intent": {"nodes": 2, "pipeline_parallel_size": 2}},
    ]
    members = ["s1", "head", "s2", "s3"]
    assert cluster_ranks(head_list, "head", members, "head") == []
    first = cluster_ranks(head_list, "head", members, "s1")
    assert [(r["name"], r["rank"]) for r in first] == [("big", 1), ("pair", 1)]
    assert all("api_key" not in r for r in first)
    assert [(r["name"], r["rank"]) for r in cluster_ranks(head_list, "head", members, "s2")] == [("big", 2)]
    assert cluster_ranks(head_list, "head", members, "s3") == []  # nodes 3: ranks 0-2 only
    assert cluster_ranks(head_list, "head", members, "elsewhere") == []
    with pytest.raises(PlanError, match="spans 3 nodes but the cluster of head has 2 members") as err:
        cluster_ranks(head_list, "head", ["head", "s1"], "s1")
    assert err.value.variable == "vllm_serve_instances[1].intent.nodes"
