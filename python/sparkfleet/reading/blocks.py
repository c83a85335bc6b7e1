"""Layouts a config gives one block per layer: DeciLM / Nemotron-NAS and Nemotron-H Puzzle. Pure; read as vLLM 0.32
builds the layers (the model file named in each reader)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import PlanError

# DeciLM / Nemotron-NAS (models/nemotron_nas.py): each layer in block_configs.
# Per-block fields vLLM 0.32 reads (nemotron_nas.py); any other set to something (a window, sink tokens,
# sparsity, an FFN replaced by a linear layer) would be built as a plain layer: the checkpoint would not match.
NAS_READ_FIELDS = {
    "attention": {"no_op", "n_heads_in_group", "replace_with_linear"},
    "ffn": {"no_op", "ffn_mult", "intermediate_size", "hidden_act"},
}
# Fields that lay out layers in other families; beside block_configs they contradict it.
LAYER_PATTERN_FIELDS = (
    "layer_types",
    "layers_block_type",
    "hybrid_override_pattern",
    "full_attention_interval",
    "sliding_window_pattern",
    "sliding_window",
)


def nas_attention(text: dict[str, Any], heads: int, source: str) -> tuple[int, list[str]]:
    """KV heads and layer kinds of a DeciLM / Nemotron-NAS config from its block_configs.

    A block whose attention is no_op holds no KV cache; the others have num_attention_heads /
    n_heads_in_group KV heads. vLLM 0.32 reads only no_op (models/nemotron_nas.py), so an attention
    replaced by a linear layer is refused, and it takes the KV heads of the first attention block for
    all (transformers_utils/model_arch_config_convertor.py), so blocks that disagree are refused too.
    """
    blocks = text.get("block_configs")
    if not isinstance(blocks, list) or not blocks or not all(isinstance(b, dict) for b in blocks):
        raise PlanError("model", f"{source}: unsupported layout: block_configs must be one mapping per layer")
    patterned = [field for field in LAYER_PATTERN_FIELDS if text.get(field) is not None]
    if patterned:
        raise PlanError(
            "model",
            f"{source}: unsupported layout: {', '.join(patterned)} beside block_configs (vLLM 0.32 reads only the blocks)",
        )
    ignored = sorted(
        {
            f"{part}.{field}"
            for block in blocks
            for part, read in NAS_READ_FIELDS.items()
            for field, value in (block.get(part) or {}).items()
            if field not in read and value not in (None, False)
        }
    )
    if ignored:
        raise PlanError(
            "model",
            f"{source}: unsupported layout: block_configs sets {', '.join(ignored)}, which vLLM 0.32 does not read "
            "(it would build plain layers the checkpoint does not hold)",
        )
    kinds, groups = [], set()
    for block in blocks:
        attention = block.get("attention") or {}
        if attention.get("replace_with_linear"):
            raise PlanError(
                "model",
                f"{source}: unsupported layout: block_configs attention replace_with_linear (vLLM 0.32 builds a full "
                "attention layer there)",
            )
        if attention.get("no_op"):
            continue
        kinds.append("full")
        groups.add(int(attention.get("n_heads_in_group") or 1))
    if not kinds:
        raise PlanError("model", f"{source}: unsupported layout: block_configs has no attention layer")
    if len(groups) > 1:
        raise PlanError(
            "model",
            f"{source}: unsupported layout: block_configs with n_heads_in_group {sorted(groups)}: vLLM sizes every "
            "layer by the first attention block",
        )
    return heads // groups.pop(), kinds


PUZZLE_BLOCK_KINDS = {"attention": "full", "mamba": "state", "moe": None, "mlp": None}
PUZZLE_PATTERN = {"attention": "*", "mamba": "M", "moe": "E", "mlp": "-"}
# Attention-block fields that change the layer's KV cache shape: vLLM builds each attention layer from the block's
# config, but sizes the hybrid block and the model's KV heads from the model's own, so a block that differs is refused.
PUZZLE_SHAPE_FIELDS = ("num_attention_heads", "num_key_value_heads", "head_dim")


@dataclass(frozen=True)
class PuzzleLayout:
    kinds: list[str]
    sliding_window: int | None


def puzzle_layout(text: dict[str, Any], source: str) -> PuzzleLayout:
    """Layer kinds and the sliding window of a Nemotron-H Puzzle config (NemotronHPuzzleForCausalLM, vLLM's
    models/nemotron_h.py). Its config code gives each layer the model's config with the block's non-null fields over
    it (get_nemotron_h_config_for_layer); vLLM builds an attention layer from that, with the block's sliding_window,
    and every Mamba layer from the model's own fields.
    """
    blocks = text.get("block_configs")
    if not isinstance(blocks, list) or not blocks or not all(isinstance(b, dict) for b in blocks):
        raise PlanError("model", f"{source}: unsupported layout: block_configs must be one mapping per layer")
    unknown = sorted({str(b.get("block_type")) for b in blocks} - PUZZLE_BLOCK_KINDS.keys())
    if unknown:
        raise PlanError(
            "model",
            f"{source}: unsupported layout: block_configs block_type {', '.join(unknown)} (known: "
            f"{', '.join(PUZZLE_BLOCK_KINDS)})",
        )
    layers = text.get("num_hidden_layers")
    if isinstance(layers, int) and layers != len(blocks):
        raise PlanError(
            "model",
            f"{source}: unsupported layout: block_configs has {len(blocks)} blocks for num_hidden_layers {layers} "
            "(one per decoder layer; the MTP layers' blocks are mtp_block_configs)",
        )
    # transformers' NemotronHConfig takes layers_block_type (or layer_types) before hybrid_override_pattern; the
    # checkpoint's config code sets them from the blocks, so a list that disagrees is not the checkpoint's layout.
    types = [str(b["block_type"]) for b in blocks]
    listed = next((text[f] for f in ("layers_block_type", "layer_types") if isinstance(text.get(f), list)), None)
    given = text.get("hybrid_override_pattern")
    if listed is not None and [str(t) for t in listed] != types:
        raise PlanError(
            "model", f"{source}: unsupported layout: layers_block_type {listed} disagrees with block_configs ({types})"
        )
    pattern = "".join(PUZZLE_PATTERN[t] for t in types)
    if listed is None and given is not None and given != pattern:
        raise PlanError(
            "model",
            f"{source}: unsupported layout: hybrid_override_pattern {given!r} disagrees with block_configs ({pattern!r})",
        )
    kinds: list[str] = []
    windows: set[int] = set()
    for index, block in enumerate(blocks):
        set_fields = {k: v for k, v in block.items() if v is not None and k != "block_type"}
        if block["block_type"] == "mamba" and any(text.get(k) != v for k, v in set_fields.items()):
            raise PlanError(
                "model",
                f"{source}: unsupported layout: block_configs[{index}] sets {', '.join(sorted(set_fields))} on a Mamba "
                "block; vLLM 0.32 builds every Mamba layer from the model's own fields, not the checkpoint's",
            )
        kind = PUZZLE_BLOCK_KINDS[block["block_type"]]
        if kind != "full":
            if kind:
                kinds.append(kind)
            continue
        reshaped = sorted(k for k in PUZZLE_SHAPE_FIELDS if k in set_fields and set_fields[k] != text.get(k))
        unread = sorted(k for k in set_fields if k.startswith("q_indexer_"))
        if reshaped or unread:
            raise PlanError(
                "model",
                f"{source}: unsupported layout: block_configs[{index}] sets {', '.join(reshaped + unread)} on an "
                "attention block, which sparkfleet does not plan (vLLM 0.32 sizes the hybrid by the model's own heads "
                "and reads no q_indexer field)",
            )
        window = set_fields.get("sliding_window", text.get("sliding_window"))
        if window is not None and not (isinstance(window, int) and window > 0):
            raise PlanError(
                "model",
                f"{source}: unsupported layout: block_configs[{index}] sliding_window {window!r} (a window of at least "
                "one token, or none; vLLM would build a sliding layer of it)",
            )
        if window:
            windows.add(window)
        kinds.append("sliding" if window else "full")
    if len(windows) > 1:
        raise PlanError(
            "model",
            f"{source}: unsupported layout: block_configs with sliding windows {sorted(windows)}; sparkfleet plans one",
        )
    return PuzzleLayout(kinds=kinds, sliding_window=windows.pop() if windows else None)
