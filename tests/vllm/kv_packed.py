"""DeepSeek-V4's packed KV pool, vLLM's own against the planner's (imported by check_kv_geometry.py).

vLLM's CPU build cannot serve DeepSeek-V4 on this machine: its CPU kernels live only in the _C build that needs
AVX512-BF16 (docs/research/deepseek-v4-kv-layout.md §4.1). Everything that decides the KV pool runs short of
that: vLLM reads the config, builds the whole model on the meta device, asks every cache layer for its spec,
resolves the layout and computes the KV cache config and the concurrency, exactly as its engine core does
before it allocates. Only the forward pass is missing, and it plays no part in the pool.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sparkfleet.errors import PlanError
from sparkfleet.kv.packed import packed_geometry
from sparkfleet.localmodel import profile_from_dir
from sparkfleet.models import PackedMlaPool

# A pool that holds whole requests: vLLM refuses a pool smaller than one request, and a DeepSeek-V4 request
# charges its window groups for every token in flight (no allocation happens: this is arithmetic).
POOL_BYTES = 4 << 30
CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
# The published layer schedule and the kernels' own dimensions (head_dim 512, index_head_dim 128, window) stay;
# widths that decide no KV byte shrink so the meta-device model builds in seconds.
DOWNSCALED = {
    "hidden_size": 256,
    "num_attention_heads": 8,
    "q_lora_rank": 128,
    "o_lora_rank": 128,
    "o_groups": 2,
    "index_n_heads": 8,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 128,
    "vocab_size": 1024,
}


def dsv4_flash_fields(**schedule: Any) -> dict[str, Any]:
    published = json.loads((CONFIGS / "deepseek-ai--DeepSeek-V4-Flash-Base.json").read_text())
    return {**published, **DOWNSCALED, "bos_token_id": 0, "eos_token_id": 1, **schedule}


# Families whose pool vLLM packs from pages of several sizes: vLLM builds the model and its KV cache config without
# serving it.
PACKED_FAMILIES: dict[str, dict[str, Any]] = {
    # DeepSeek-V4-Flash's published schedule: 2 window-only, 21 ratio-4 and 20 ratio-128 layers.
    "deepseek_v4 (compressed sparse MLA, windows, indexer)": dsv4_flash_fields(),
    # Other schedules of the same config walk vLLM's other packing branches: as many ratio-4 as ratio-128 layers
    # (the MLA bucket repeats too), and no ratio-4 layer (no indexer: vLLM does not pack, and refuses).
    "deepseek_v4 schedule 4/128 x4": dsv4_flash_fields(num_hidden_layers=8, compress_ratios=[4, 128] * 4 + [0]),
    "deepseek_v4 schedule 0,128,128,0": dsv4_flash_fields(num_hidden_layers=4, compress_ratios=[0, 128, 128, 0, 0]),
}
# Packed families vLLM itself refuses, with the words of its refusal; the planner must refuse them too. No indexer
# means no block-outermost layout, so vLLM tries to unify the pages and cannot pad MLA ones.
PACKED_REFUSED = {
    "deepseek_v4 schedule 0,128,128,0": "cannot be padded. Padding is only supported for non-MLA attention layers",
}


def write_packed_model(root: Path, fields: dict[str, Any]) -> Path:
    model_dir = root / f"packed-{len(list(root.iterdir()))}"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(fields))
    return model_dir


@contextlib.contextmanager
def cuda_events_on_cpu() -> Iterator[None]:
    """DeepseekV4Attention.__init__ makes torch.cuda.Event()s for its side streams, which a CPU torch refuses
    ("Tried to instantiate dummy base class Event"); no cache spec reads them."""
    import torch

    if torch.cuda.is_available():
        yield
        return
    event = torch.cuda.Event
    torch.cuda.Event = lambda *args, **kwargs: object()  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        torch.cuda.Event = event  # type: ignore[misc]


def engine_config(model_dir: Path, max_model_len: int, **overrides: Any) -> Any:
    """vLLM's config for the model with dummy weights, as its engine core builds it."""
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs(
        model=str(model_dir),
        skip_tokenizer_init=True,
        load_format="dummy",
        dtype="bfloat16",
        max_model_len=max_model_len,
        max_num_seqs=4,
        enforce_eager=True,
        **overrides,
    )
    return args.create_engine_config()


def one_rank() -> None:
    """One tensor- and pipeline-parallel rank, as a single-GPU worker sets up (under the current vLLM config)."""
    from vllm.distributed import ensure_model_parallel_initialized, init_distributed_environment, parallel_state

    if not parallel_state.model_parallel_is_initialized():
        init_distributed_environment(
            world_size=1, rank=0, local_rank=0, distributed_init_method="tcp://127.0.0.1:29517", backend="gloo"
        )
        ensure_model_parallel_initialized(1, 1)


def engine_pool(config: Any, specs: dict[str, Any], backends: Any) -> tuple[Any, int, float]:
    """What the engine core does before it allocates (under the current vLLM config): resolve one layout from the
    backends' and the specs', build the KV cache config for a POOL_BYTES pool, and its bytes per block and concurrency."""
    from vllm.v1.attention.backends.utils import (
        get_supported_kv_cache_layouts,
        record_kv_cache_layout,
        resolve_kv_cache_layout,
    )
    from vllm.v1.core.kv_cache_utils import (
        _get_kv_cache_bytes_per_block,
        get_kv_cache_configs,
        get_max_concurrency_for_kv_cache_config,
    )

    supported = [layout.name for layout in get_supported_kv_cache_layouts(backends)]
    layout = resolve_kv_cache_layout(config, [supported], list(specs.values()))
    record_kv_cache_layout(config.cache_config, layout.name)
    [kv] = get_kv_cache_configs(config, [specs], [POOL_BYTES])
    return kv, _get_kv_cache_bytes_per_block(kv.kv_cache_groups, layout), get_max_concurrency_for_kv_cache_config(config, kv)


def vllm_packed_layout(model_dir: Path, max_model_len: int) -> tuple[tuple[Any, ...], int]:
    """vLLM's groups, bytes per block, blocks and concurrency for the model, and the tokens in flight it assumed."""
    import torch
    from vllm.config import get_layers_from_vllm_config, set_current_vllm_config
    from vllm.distributed.kv_transfer.kv_connector.utils import get_current_attn_backends
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import initialize_model

    config = engine_config(model_dir, max_model_len)
    with set_current_vllm_config(config), cuda_events_on_cpu():
        one_rank()
        with torch.device("meta"):
            initialize_model(vllm_config=config)
        layers = get_layers_from_vllm_config(config, AttentionLayerBase)  # type: ignore[type-abstract]
        specs = {name: spec for name, layer in layers.items() if (spec := layer.get_kv_cache_spec(config)) is not None}
        kv, block_bytes, concurrency = engine_pool(config, specs, get_current_attn_backends(config))
    groups = []
    for group in kv.kv_cache_groups:
        spec = group.kv_cache_spec
        window = getattr(spec.first_spec, "sliding_window", None)
        groups.append(("full" if window is None else f"sliding w{window}", len(group.layer_names), spec.block_size))
    return (tuple(sorted(groups)), block_bytes, kv.num_blocks, round(concurrency, 6)), config.max_in_flight_tokens


def planner_packed_layout(model_dir: Path, max_model_len: int, in_flight: int) -> tuple[Any, ...]:
    layout = profile_from_dir(model_dir, weights_known=True).kv_layout
    shape = layout.shape if isinstance(layout, PackedMlaPool) else None
    if shape is None:
        raise AssertionError(f"{model_dir}: the planner did not read a compressed MLA layout")
    geo = packed_geometry(shape, kv_cache_dtype="auto")
    groups = tuple(
        sorted(("full" if g.window is None else f"sliding w{g.window}", g.layers, g.block_size) for g in geo.groups)
    )
    concurrency = round(geo.max_concurrency(POOL_BYTES, max_model_len, in_flight), 6)
    return groups, geo.bytes_per_block, geo.num_blocks(POOL_BYTES), concurrency


def describe_packed(layout: tuple[Any, ...]) -> str:
    groups, block_bytes, blocks, concurrency = layout
    listed = ", ".join(f"{kind} x{layers} @{block}" for kind, layers, block in groups)
    return (
        f"groups [{listed}] {block_bytes} B per block ({block_bytes / 256:.2f} B per token beyond the windows), "
        f"{blocks} blocks in {POOL_BYTES >> 30} GiB, {concurrency} requests at full context"
    )


def planner_refuses(model_dir: Path, max_model_len: int) -> str:
    try:
        planner_packed_layout(model_dir, max_model_len, max_model_len)
    except PlanError as exc:
        return exc.problem
    return ""


def check_packed(root: Path, max_model_len: int, only: str | None) -> tuple[int, int]:
    """Each packed family: vLLM's layout equals the planner's, or both refuse it. Returns (passed, failed)."""
    passed = failed = 0
    for family, fields in PACKED_FAMILIES.items():
        if only and not any(name in family for name in only.split(",")):
            continue
        model_dir = write_packed_model(root, fields)
        try:
            actual, in_flight = vllm_packed_layout(model_dir, max_model_len)
        except Exception as exc:  # vLLM refusing a family is the finding PACKED_REFUSED lists
            said = f"{type(exc).__name__}: {exc}"
            # Only the refusal listed counts: a broken build or an import error is a failure, not agreement.
            expected = PACKED_REFUSED.get(family)
            refused = planner_refuses(model_dir, max_model_len) if expected and expected in said else ""
            passed, failed = (passed + 1, failed) if refused else (passed, failed + 1)
            print(f"{'ok' if refused else 'FAIL':<10}{family}: vLLM refuses ({said}); planner: {refused or 'planned it'}")
            continue
        if family in PACKED_REFUSED:
            failed += 1
            print(f"FAIL      {family}: listed as refused, but vLLM built it; compare it instead")
            continue
        expected = planner_packed_layout(model_dir, max_model_len, in_flight)
        if actual == expected:
            passed += 1
            print(f"ok        {family} (built, not served): {describe_packed(actual)}")
        else:
            failed += 1
            print(f"FAIL      {family}:\n  vLLM    {describe_packed(actual)}\n  planner {describe_packed(expected)}")
    return passed, failed
