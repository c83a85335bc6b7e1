"""Parameter counts from a config alone, for a checkpoint whose safetensors headers were not read (a directory with
only its config.json and a size given by --weights-gib): the mixer and MLP arithmetic of decoder-only layouts
(standard, gated and MLA attention with sparse indexers, Gated-DeltaNet and KDA linear attention; dense and MoE MLPs
with shared experts). Pure; a layout it cannot count is named."""

from __future__ import annotations

from typing import Any

from ..errors import PlanError
from ..models import ModelProfile
from ..models.speed import DecodeReads, Parameters
from . import hybrid, mixers
from .config import EXPERTS_KEYS, LAYERS_KEYS, TOP_K_KEYS, compress_schedule, text_config
from .indexers import indexer_layer_count
from .mixers import positive as _int
from .states import layer_kinds, state_layers

# How a profile's parameters read when no header was: its speed prediction says so.
CONFIG_ARITHMETIC = "config arithmetic"
# The layer_types this arithmetic counts; any other kind is named, not guessed (its shapes live in per-family code).
COUNTED_KINDS = frozenset(
    {
        "attention",
        "full_attention",
        "sliding_attention",
        "global",
        "local",
        "sliding",
        "linear_attention",
        "indexed_attention",
        "deepseek_sparse_attention",
    }
)


def _uncounted_kinds(text: dict[str, Any]) -> set[str]:
    kinds = text.get("layer_types") or text.get("layers_block_type") or ()
    pattern = text.get("hybrid_override_pattern")
    found = {str(kind) for kind in kinds} - COUNTED_KINDS
    if isinstance(pattern, str) and set(pattern) - {"*", "-"}:
        found.add(f"hybrid_override_pattern {pattern[:12]}...")
    if text.get("ssm_cfg") or text.get("mamba_d_state"):
        found.add("state-space")
    if text.get("ple_layer_ids"):
        found.add("n-gram (ple_layer_ids)")
    if text.get("indexer_n_heads"):
        found.add("QSA indexer (indexer_n_heads)")
    return found


def _mixers(text: dict[str, Any], hidden: int, heads: int, layers: int, source: str) -> int:
    """Every decoder layer's token mixer: attention with its indexer where it builds one, or a linear-attention
    layer whose state the config gives, and the hyper-connections around it (sparkfleet.reading.mixers)."""
    connections = layers * mixers.hyper_connections(text, hidden)
    if text.get("o_groups"):
        # DeepSeek-V4's layers, each by its compress ratio (the MLA arithmetic would say 291.3B / 20.8B active for
        # V4-Flash, where transformers builds 284.3B / 13.8B).
        schedule = compress_schedule(text, layers, source)
        return sum(mixers.compressed_attention(text, hidden, ratio) for ratio in schedule) + connections
    kinds = layer_kinds(text, layers, source)
    attending = sum(1 for kind in kinds if kind != "state")
    indexed = indexer_layer_count(text, layers)
    total = attending * mixers.attention(text, hidden, heads) + connections
    total += (attending if indexed is None else indexed) * mixers.indexer(text, hidden)
    stateful = len(kinds) - attending
    if stateful:
        state = state_layers(text, stateful, hidden, source)
        assert state is not None
        try:
            total += stateful * mixers.state_mixer(state, text, hidden)
        except KeyError as exc:
            raise PlanError("model", f"{source}: config arithmetic does not count {exc.args[0]}") from exc
    return total


def parameters_from_config(config: dict[str, Any], source: str) -> Parameters:
    """Total and active weights of a decoder-only checkpoint by its config's arithmetic (MTP layers and towers not
    counted: a text decode step does not read them)."""
    text = text_config(config)
    hidden, layers = _int(text, "hidden_size", "d_model", "dim"), _int(text, *LAYERS_KEYS)
    heads, vocab = _int(text, "num_attention_heads", "n_heads"), _int(text, "vocab_size")
    if not (hidden and layers and heads and vocab):
        raise PlanError("model", f"{source}: config arithmetic needs hidden_size, num_hidden_layers, heads and vocab_size")
    blocks = hybrid.block_kinds(text)
    uncounted = set() if text.get("o_groups") or blocks else _uncounted_kinds(text)
    if uncounted:
        raise PlanError("model", f"{source}: config arithmetic does not count {', '.join(sorted(uncounted))} layers")
    if blocks is not None:
        return _blocks(text, blocks, hidden, heads, vocab)
    experts, top_k = _int(text, *EXPERTS_KEYS), _int(text, *TOP_K_KEYS)
    dense_width = _int(text, "intermediate_size", "ffn_dim")
    expert_width = _int(text, "moe_intermediate_size", "expert_intermediate_size") or dense_width
    if not dense_width and not (experts and expert_width):
        raise PlanError("model", f"{source}: config arithmetic needs intermediate_size or moe_intermediate_size")
    moe_layers = 0
    if experts:
        if not top_k or top_k >= experts:
            raise PlanError("model", f"{source}: {experts} experts but no top-k under it ({' / '.join(TOP_K_KEYS)})")
        only_dense = text.get("mlp_only_layers") or []
        moe_layers = layers - _int(text, "first_k_dense_replace") - len(only_dense)
    expert = 3 * hidden * expert_width
    shared = _int(text, "n_shared_experts") * expert + 3 * hidden * _int(text, "shared_expert_intermediate_size")
    tied = bool(text.get("tie_word_embeddings", False))
    total = vocab * hidden * (1 if tied else 2) + _mixers(text, hidden, heads, layers, source)
    total += (layers - moe_layers) * 3 * hidden * dense_width
    total += moe_layers * (experts * expert + shared + experts * hidden)
    idle = moe_layers * (experts - top_k) * expert
    return Parameters(
        total_b=total / 1e9,
        active_b=(total - idle) / 1e9,
        experts=experts or None,
        experts_per_token=top_k or None,
        tied_embeddings=tied,
    )


def _blocks(text: dict[str, Any], blocks: list[str], hidden: int, heads: int, vocab: int) -> Parameters:
    """A layout of one block a layer (Nemotron-H), counted block by block (sparkfleet.reading.hybrid)."""
    weights, idle = hybrid.counted(text, blocks, hidden, heads)
    tied = bool(text.get("tie_word_embeddings", False))
    total = vocab * hidden * (1 if tied else 2) + weights
    experts, top_k = _int(text, *EXPERTS_KEYS), _int(text, *TOP_K_KEYS)
    moe = experts and top_k and "moe" in blocks
    return Parameters(
        total_b=total / 1e9,
        active_b=(total - idle) / 1e9,
        experts=experts if moe else None,
        experts_per_token=top_k if moe else None,
        tied_embeddings=tied,
    )


def speed_reading(profile: ModelProfile, config: dict[str, Any], reads: DecodeReads | None, gap: str) -> ModelProfile:
    """The profile with what its speed prediction reads: the headers' reading, else the config's arithmetic (marked
    so in its source), else why neither is known."""
    if reads is not None:
        return profile.model_copy(update={"decode_reads": reads})
    try:
        counted = parameters_from_config(config, profile.id)
    except PlanError as exc:
        return profile.model_copy(update={"decode_reads_gap": f"{gap}; {exc.problem}"})
    source = f"{CONFIG_ARITHMETIC} over {profile.id}'s config.json ({gap})"
    return profile.model_copy(update={"parameters": counted, "sources": profile.sources | {"parameters": source}})
