"""Which layers of a config.json hold a KV cache, which a per-sequence state, and how big that state is.

Pure. Each family is read the way vLLM 0.32 builds its layers (the model file named in each reader), and
tests/vllm/check_kv_geometry.py compares the result with the KV cache config vLLM builds for a tiny model
of the same layout.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..errors import PlanError
from ..models import StateLayerKind, StateLayers
from .families import LayerRule, StateReader, family_of, layer_rule

ATTENTION_LAYER_TYPES = {
    "full_attention": "full",
    "attention": "full",
    "chunked_attention": "full",
    "sliding_attention": "sliding",
    # Zamba2's layers_block_type: a Mamba-2 layer with a shared attention block beside it (its own KV cache).
    "hybrid": "full",
    # Sparse attention with an indexer (GLM-5-Next's MLA, Qwen4-Exp's QSA; transformers writes full_attention as
    # indexed_attention for both): a full KV cache, and the indexer's keys (reading.indexers.indexer_bytes_per_token).
    "indexed_attention": "full",
    "qwen_sparse_attention": "full",
    # GLM-5.3-Flash's (glm5_next) spelling before transformers 5.18: vLLM 0.32 and 0.33 count it as full attention
    # (config/model.py _ATTENTION_LAYER_TYPES, "sparse attention still caches every token").
    "deepseek_sparse_attention": "full",
}
# Mamba (Nemotron-H, Granite-4.0-H), linear attention (Qwen3-Next / 3.5) and LFM2's short convolution.
STATE_LAYER_TYPES = {"linear_attention", "mamba", "conv"}
# Layers with no cache at all (Nemotron-H's MLP and MoE layers in layers_block_type).
CACHELESS_LAYER_TYPES = {"mlp", "moe"}
HYBRID_CACHELESS = {"-", "E"}  # hybrid_override_pattern's MLP and MoE layers
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# Bailing's linear hybrids: MLA on every layer_group_size-th layer, a linear-attention state between
# (models/bailing_moe_linear.py is_linear_layer; bailing_moe_v3.py _is_kda_layer, which also makes the layers after the
# last whole group MLA), and the state kind each keeps.
BAILING_HYBRIDS = {
    "BailingMoeV2_5ForCausalLM": StateLayerKind.LINEAR,
    "BailingMoeV3ForCausalLM": StateLayerKind.KDA,
    # Its text config is V3's (transformers_utils/configs/bailing_moe_v3_vl.py).
    "BailingMoeV3VLForConditionalGeneration": StateLayerKind.KDA,
}
# Architectures whose linear_attention layers are KDA over Gated-DeltaNet's flat fields (linear_num_key_heads x
# linear_key_head_dim, equal to the value heads): vLLM 0.33's alice_ai.py _make_kimi_kda_config.
FLAT_KDA_ARCHITECTURES = {"AliceAIForCausalLM"}


def model_dtype(text: dict[str, Any]) -> str:
    return str(text.get("dtype") or text.get("torch_dtype") or "bfloat16")


def _architecture(text: dict[str, Any]) -> str | None:
    architectures = text.get("architectures")
    return str(architectures[0]) if isinstance(architectures, list) and architectures else None


def _bailing(text: dict[str, Any]) -> StateLayerKind | None:
    """The state kind of a Bailing linear hybrid, by its architecture; None for any other model."""
    return BAILING_HYBRIDS.get(str(_architecture(text)))


def layer_kinds(text: dict[str, Any], layers: int, source: str) -> list[str]:
    """One of full / sliding / state per decoder layer, from whichever field the family uses.

    layer_types (Gemma-3/4, gpt-oss, Qwen3-Next / 3.5, Granite-4.0-H, LFM2, Qwen4-Exp, GLM-5-Next); full_attn_idxs
    (LFM2 as first published: the attention layers' indices, convolutions elsewhere, as transformers' Lfm2Config
    reads it); linear_attn_config's kda_layers (Kimi-Linear);
    hybrid_override_pattern
    (Nemotron-H as published: '*' attention, 'M' Mamba-2, '-' MLP, 'E' MoE; models/nemotron_h.py) or
    layers_block_type (the same, as transformers 5 saves it); attn_layer_period / attn_layer_offset
    (Jamba); full_attention_interval (Qwen3-Next without layer_types); sliding_window_pattern (Gemma-3
    configs before layer_types: every Nth layer is global). Layers with no cache (MLP, MoE) are left out.
    A parallel hybrid's (Falcon-H1) Mamba layers are counted by parallel_state_layers, not here.
    """
    pattern = text.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        kinds = {"*": "full", "M": "state"}
        unknown = sorted(set(pattern) - {*kinds, *HYBRID_CACHELESS})
        if unknown:
            raise PlanError(
                "model",
                f"{source}: unsupported layout: hybrid_override_pattern has {', '.join(repr(c) for c in unknown)}, "
                "not a layer kind sparkfleet plans ('*' attention, 'M' Mamba-2, '-' MLP, 'E' MoE)",
                ("a catalog id: sparkfleet catalog",),
            )
        return [kinds[c] for c in pattern if c in kinds]
    types = text.get("layer_types") if text.get("layer_types") is not None else text.get("layers_block_type")
    if isinstance(types, list) and types:
        known = ATTENTION_LAYER_TYPES.keys() | STATE_LAYER_TYPES | CACHELESS_LAYER_TYPES
        unknown = sorted({str(t) for t in types} - known)
        if unknown:
            raise PlanError(
                "model",
                f"{source}: layer_types {', '.join(unknown)} are not a layer kind sparkfleet plans "
                f"(known: {', '.join(sorted(known))})",
                ("a catalog id: sparkfleet catalog", "--kv-bytes-per-token with a measured figure"),
            )
        return [ATTENTION_LAYER_TYPES.get(str(t), "state") for t in types if str(t) not in CACHELESS_LAYER_TYPES]
    attention_at = text.get("full_attn_idxs")
    if isinstance(attention_at, list) and attention_at:
        return ["full" if i in attention_at else "state" for i in range(layers)]
    group, bailing = text.get("layer_group_size"), _bailing(text)
    if bailing and isinstance(group, int) and group > 0:
        whole = layers // group * group if bailing is StateLayerKind.KDA else layers
        return ["full" if (i + 1) % group == 0 or i >= whole else "state" for i in range(layers)]
    linear = text.get("linear_attn_config")
    if isinstance(linear, dict) and isinstance(linear.get("kda_layers"), list):
        # Kimi-Linear: KDA where the 1-based layer number is in kda_layers, MLA elsewhere (KimiLinearConfig.is_kda_layer).
        kda = set(linear["kda_layers"])
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in kda):
            raise PlanError(
                "model",
                f"{source}: linear_attn_config.kda_layers must list layer numbers (1-based integers), "
                f"not {sorted(map(repr, kda))}",
            )
        return ["state" if i + 1 in kda else "full" for i in range(layers)]
    if layer_rule(text) is LayerRule.PERIODIC:
        period, offset = int(text.get("attn_layer_period") or 0), int(text.get("attn_layer_offset") or 0)
        if period < 1 or not 0 <= offset < period:
            raise PlanError(
                "model",
                f"{source}: unsupported layout: attn_layer_period {period} and attn_layer_offset {offset} "
                "(the period must be at least 1 and the offset within it)",
            )
        return ["full" if i % period == offset else "state" for i in range(layers)]
    interval = text.get("full_attention_interval")
    if isinstance(interval, int) and interval > 0 and text.get("linear_num_value_heads"):
        return ["full" if (i + 1) % interval == 0 else "state" for i in range(layers)]
    every = text.get("sliding_window_pattern")
    if isinstance(every, int) and every > 1 and text.get("sliding_window"):
        return ["full" if (i + 1) % every == 0 else "sliding" for i in range(layers)]
    return ["full"] * layers


def parallel_state_layers(text: dict[str, Any], layers: int) -> int:
    """Mamba layers that sit beside an attention layer in the same decoder layer: every one of Falcon-H1's,
    and Zamba2's 'hybrid' layers."""
    rule = layer_rule(text)
    if rule is LayerRule.PARALLEL:
        return layers
    types = text.get("layers_block_type")
    if rule is LayerRule.SHARED_ATTENTION and isinstance(types, list):
        return sum(1 for t in types if t == "hybrid")
    return 0


def shared_attention_shape(text: dict[str, Any], heads: int, hidden: int) -> tuple[int, int]:
    """KV heads and head size of Zamba2's shared attention: vLLM builds it with as many KV heads as query heads,
    each attention_head_dim wide (2 x hidden_size / heads where the file leaves it out, as Zamba2Config does)."""
    width = int(text.get("attention_hidden_size") or 2 * hidden)
    return heads, int(text.get("attention_head_dim") or width // heads)


def state_layers(text: dict[str, Any], count: int, hidden: int, source: str) -> StateLayers | None:
    """The per-sequence state of `count` state layers (vllm-semantics §2.5; mamba_utils.MambaStateShapeCalculator)."""
    if not count:
        return None
    family = family_of(text.get("model_type"))
    # A family's own reader alone; a model_type with no entry is read by whichever reader finds its fields.
    readers = (READERS[family.state],) if family and family.state else READ_ORDER
    for reader in readers:
        try:
            found = reader(text, count, hidden)
        except KeyError as exc:
            raise PlanError(
                "model",
                f"{source}: {count} state layers, but the config lacks {exc.args[0]}, which their state shape needs",
                ("a catalog id: sparkfleet catalog",),
            ) from exc
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(part) for part in error["loc"])
            raise PlanError("model", f"{source}: the state layers' {field} is not valid: {error['msg']}") from exc
        except (TypeError, ValueError) as exc:
            raise PlanError("model", f"{source}: a state-layer field is not a number ({exc})") from exc
        if found is not None:
            return found
    raise PlanError(
        "model",
        f"{source}: {count} state (linear-attention / Mamba / convolution) layers whose state shape this config "
        "does not give",
        ("a catalog id: sparkfleet catalog",),
    )


def replicated_state_layers(text: dict[str, Any], hidden: int, layers: int) -> StateLayers | None:
    """Qwen4-Exp's n-gram layers (ple_layer_ids): a short convolution over hc_count copies of the hidden state, dilated by
    ngram_size, held whole on every tensor-parallel rank (models/qwen4_exp/nvidia/model.py
    get_ple_mamba_state_shape_from_config)."""
    listed = text.get("ple_layer_ids")
    # 1-based decoder layer numbers; vLLM adds the layer to whichever decoder layer is listed (nvidia/model.py).
    numbers = {n for n in listed if isinstance(n, int) and 1 <= n <= layers} if isinstance(listed, list) else set()
    if not (numbers and text.get("ple_conv_kernel_size")):
        return None
    dilated = (int(text["ple_conv_kernel_size"]) - 1) * int(text.get("ngram_size") or 1)
    return StateLayers(
        kind=StateLayerKind.SHORT_CONV,
        count=len(numbers),
        conv_dim=hidden * int(text.get("hc_count") or 1),
        conv_kernel=dilated + 1,
        state_shape=(),
    )


def _gated_deltanet(text: dict[str, Any], count: int, hidden: int) -> StateLayers | None:
    """Qwen3-Next / 3.5 (models/qwen3_next.py, qwen3_5.py)."""
    if not text.get("linear_num_value_heads") or _architecture(text) in FLAT_KDA_ARCHITECTURES:
        return None
    k_heads, v_heads = int(text["linear_num_key_heads"]), int(text["linear_num_value_heads"])
    k_dim, v_dim = int(text["linear_key_head_dim"]), int(text["linear_value_head_dim"])
    # Qwen3.5 names its recurrent state dtype (models/config.py Qwen3_5ForConditionalGenerationConfig).
    ssm = str(text.get("mamba_ssm_dtype") or model_dtype(text))
    return StateLayers(
        kind=StateLayerKind.GATED_DELTANET,
        count=count,
        conv_dim=k_dim * k_heads * 2 + v_dim * v_heads,
        conv_kernel=int(text.get("linear_conv_kernel_dim", 4)),
        state_shape=(v_heads, v_dim, k_dim),
        state_dtype_bytes=DTYPE_BYTES.get(ssm, 2),
    )


def _bailing_state(text: dict[str, Any], count: int, hidden: int) -> StateLayers | None:
    """Bailing-V2.5's lightning attention, one (heads, head_dim, head_dim) state in the model's dtype and no
    convolution (bailing_moe_linear.py get_mamba_state_shape_from_config, linear_attention_state_dtype); Bailing-V3's
    KDA over num_attention_heads x head_dim with short_conv_kernel_size (bailing_moe_v3.py
    _get_kda_state_shape_for_config)."""
    kind = _bailing(text)
    if kind is None:
        return None
    heads = int(text["num_attention_heads"])
    width = int(text.get("head_dim") or hidden // heads)
    if kind is StateLayerKind.KDA:
        return _kda_state(count, heads, width, int(text["short_conv_kernel_size"]))
    return StateLayers(
        kind=StateLayerKind.LINEAR,
        count=count,
        conv_dim=0,
        conv_kernel=1,
        state_shape=(heads, width, width),
        state_dtype_bytes=4 if model_dtype(text) == "float32" else 2,
    )


def _kda(text: dict[str, Any], count: int, hidden: int) -> StateLayers | None:
    """Kimi Delta Attention: GLM-5-Next's (models/glm5next/common/model.py) and Kimi-Linear's
    (models/kimi_k3/amd/linear.py) get_mamba_state_shape_from_config, as _kda_state lays it out. Kimi-Linear's
    config keeps the fields in its linear_attn_config dict; transformers' Glm5NextTextConfig reads that dict into the
    flat fields vLLM reads; AliceAI (vLLM 0.33) names them as Gated-DeltaNet does."""
    given = text.get("linear_attn_config")
    nested: dict[str, Any] = given if isinstance(given, dict) else {}
    flat = _architecture(text) in FLAT_KDA_ARCHITECTURES
    heads = text.get("linear_num_key_heads" if flat else "linear_num_heads") or nested.get("num_heads")
    width = text.get("linear_key_head_dim" if flat else "linear_head_dim") or nested.get("head_dim")
    if not (heads and width):
        return None
    # vLLM reads the kernel with no default (Kimi-Linear's linear_attn_config["short_conv_kernel_size"]): a config
    # without one is refused, naming it.
    kernel = text.get("linear_conv_kernel_dim") or nested["short_conv_kernel_size"]
    return _kda_state(count, int(heads), int(width), int(kernel))


def _kda_state(count: int, heads: int, width: int, kernel: int) -> StateLayers:
    """mamba_utils.kda_state_shape with as many key heads as heads: a convolution over q, k and v, and a
    heads x width x width recurrent state in float32 (kda_state_dtype with vLLM's default SSM cache dtype)."""
    return StateLayers(
        kind=StateLayerKind.KDA,
        count=count,
        conv_dim=3 * heads * width,
        conv_kernel=kernel,
        state_shape=(heads, width, width),
        state_dtype_bytes=4,
    )


def _mamba2(
    count: int, *, heads: int, head_dim: int, state: int, groups: int, inner: int, kernel: int, ssm: str
) -> StateLayers:
    return StateLayers(
        kind=StateLayerKind.MAMBA2,
        count=count,
        conv_dim=inner + 2 * groups * state,
        conv_kernel=kernel,
        state_shape=(heads, head_dim, state),
        state_dtype_bytes=DTYPE_BYTES.get(ssm, 4),
    )


def _nemotron_mamba2(text: dict[str, Any], count: int, hidden: int) -> StateLayers | None:
    """Nemotron-H (models/nemotron_h.py): its inner size is heads x head size."""
    if not text.get("mamba_num_heads"):
        return None
    heads, head_dim = int(text["mamba_num_heads"]), int(text["mamba_head_dim"])
    # NemotronH keeps its SSM state in float32 unless its config names another dtype (models/config.py).
    return _mamba2(
        count,
        heads=heads,
        head_dim=head_dim,
        state=int(text["ssm_state_size"]),
        groups=int(text.get("n_groups", 1)),
        inner=heads * head_dim,
        kernel=int(text.get("conv_kernel", 4)),
        ssm=str(text.get("mamba_ssm_cache_dtype") or "float32"),
    )


def _granite_mamba2(text: dict[str, Any], count: int, hidden: int) -> StateLayers | None:
    """Granite-4.0-H and Falcon-H1 (models/granitemoehybrid.py, falcon_h1.py): the inner size is mamba_d_ssm
    where given (Falcon-H1), else mamba_expand x hidden_size; the state keeps the model's dtype."""
    if not text.get("mamba_n_heads"):
        return None
    inner = text.get("mamba_d_ssm") or int(float(text.get("mamba_expand", 2)) * hidden)
    return _mamba2(
        count,
        heads=int(text["mamba_n_heads"]),
        head_dim=int(text["mamba_d_head"]),
        state=int(text["mamba_d_state"]),
        groups=int(text.get("mamba_n_groups", 1)),
        inner=int(inner),
        kernel=int(text.get("mamba_d_conv", 4)),
        ssm=model_dtype(text),
    )


def _zamba_mamba2(text: dict[str, Any], count: int, hidden: int) -> StateLayers | None:
    """Zamba2 (models/zamba2.py): its own field names; the inner size is mamba_expand x hidden_size."""
    if not text.get("n_mamba_heads"):
        return None
    return _mamba2(
        count,
        heads=int(text["n_mamba_heads"]),
        head_dim=int(text["mamba_headdim"]),
        state=int(text["mamba_d_state"]),
        groups=int(text.get("mamba_ngroups", 1)),
        inner=int(text.get("mamba_expand", 2)) * hidden,
        kernel=int(text.get("mamba_d_conv", 4)),
        ssm=model_dtype(text),
    )


def _jamba_mamba1(text: dict[str, Any], count: int, hidden: int) -> StateLayers | None:
    """Jamba's Mamba-1 (models/jamba.py): a convolution over the inner size and a state of inner x d_state."""
    if layer_rule(text) is not LayerRule.PERIODIC:
        return None
    inner = int(text.get("mamba_expand", 2)) * hidden
    return StateLayers(
        kind=StateLayerKind.MAMBA1,
        count=count,
        conv_dim=inner,
        conv_kernel=int(text.get("mamba_d_conv", 4)),
        state_shape=(inner, int(text.get("mamba_d_state", 16))),
        state_dtype_bytes=DTYPE_BYTES.get(model_dtype(text), 2),
    )


def _short_conv(text: dict[str, Any], count: int, hidden: int) -> StateLayers | None:
    """LFM2's gated short convolution (models/lfm2.py): only a window of conv_L_cache - 1 inputs."""
    if not text.get("conv_L_cache"):
        return None
    return StateLayers(
        kind=StateLayerKind.SHORT_CONV,
        count=count,
        conv_dim=int(text.get("conv_dim") or hidden),
        conv_kernel=int(text["conv_L_cache"]),
        state_shape=(),
    )


READERS = {
    StateReader.GATED_DELTANET: _gated_deltanet,
    StateReader.KDA: _kda,
    StateReader.NEMOTRON_MAMBA2: _nemotron_mamba2,
    StateReader.GRANITE_MAMBA2: _granite_mamba2,
    StateReader.ZAMBA_MAMBA2: _zamba_mamba2,
    StateReader.JAMBA_MAMBA1: _jamba_mamba1,
    StateReader.SHORT_CONV: _short_conv,
}
# The order a config of no known family is tried in: the first reader whose fields it has.
READ_ORDER = (
    _gated_deltanet,
    _bailing_state,
    _kda,
    _nemotron_mamba2,
    _granite_mamba2,
    _zamba_mamba2,
    _jamba_mamba1,
    _short_conv,
)
