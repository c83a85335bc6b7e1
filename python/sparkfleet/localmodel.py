"""Build a ModelProfile from a staged Hugging Face model directory (config.json + safetensors sizes).

The file reading half; sparkfleet.reading.config turns what it read into a profile.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from .errors import PlanError
from .models import GIB, ModelProfile
from .reading.arithmetic import speed_reading
from .reading.config import profile_from_config
from .reading.tensors import Tensor, decode_reads, header_tensors

# safetensors puts a little-endian u64 (the header's length) before its JSON header; a larger one is no header.
HEADER_LIMIT = 100 * 2**20


def weight_bytes(model_dir: Path) -> int:
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        total = json.loads(index.read_text()).get("metadata", {}).get("total_size")
        if isinstance(total, int) and total > 0:
            return total
    files = list(model_dir.glob("*.safetensors")) or list(model_dir.glob("*.bin"))
    return sum(f.stat().st_size for f in files)


def served_shards(model_dir: Path) -> list[Path]:
    """The safetensors files the model loads: those its index maps tensors to, else every one in the directory (a
    Mistral repository ships consolidated.safetensors beside the shards: counted twice, a step would read double)."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        mapped = json.loads(index.read_text()).get("weight_map")
        if isinstance(mapped, dict) and mapped:
            return sorted({model_dir / str(name) for name in mapped.values()})
    return sorted(model_dir.glob("*.safetensors"))


def safetensors_header(path: Path) -> list[Tensor]:
    """The tensors one local safetensors file declares, from its header alone (the weights are not read)."""
    with path.open("rb") as handle:
        prefix = handle.read(8)
        (length,) = struct.unpack("<Q", prefix) if len(prefix) == 8 else (0,)
        if not 0 < length <= HEADER_LIMIT:
            raise PlanError("model", f"{path} is not a safetensors file (a header of {length} bytes)")
        try:
            header = json.loads(handle.read(length))
        except ValueError as exc:
            raise PlanError("model", f"{path}: its safetensors header is not JSON ({exc})") from exc
    return header_tensors(header)


def profile_from_dir(
    path: str | Path, weights_known: bool = False, variable: str = "model", size_flag: str = "--weights-gib"
) -> ModelProfile:
    """The profile of a staged directory. Its weights are sized from model.safetensors.index.json's total_size, else
    its *.safetensors (or *.bin) files; a directory with none of them is refused unless the caller gives their size
    (`weights_known`, by `size_flag`): a half-staged or wrong directory would otherwise be planned as weightless."""
    model_dir = Path(path)
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        raise PlanError(variable, f"{model_dir} has no config.json", ("a staged model directory", "a catalog id"))
    config = json.loads(config_path.read_text())
    weights = weight_bytes(model_dir)
    if not weights and not weights_known:
        raise PlanError(
            variable,
            f"{model_dir} holds no weights sparkfleet can size: no model.safetensors.index.json with its total_size, "
            "no *.safetensors, no *.bin; planned as it is, the model would look weightless",
            ("the whole model staged in it (model_stage)", f"{size_flag} G, the weights' size"),
        )
    profile = profile_from_config(str(model_dir), config, weights, str(model_dir))
    # What a step reads is for the speed prediction alone: headers it cannot read leave the plan as it was.
    reads, gap = None, "no safetensors files in the directory"
    shards = served_shards(model_dir)
    if shards:
        try:
            reads = decode_reads([t for shard in shards for t in safetensors_header(shard)], config, str(model_dir))
        except PlanError as exc:
            gap = exc.problem
    profile = speed_reading(profile, config, reads, gap)
    tokenizer = model_dir / "tokenizer_config.json"
    if tokenizer.is_file() and isinstance(json.loads(tokenizer.read_text()).get("auto_map"), dict):
        profile = profile.model_copy(update={"tokenizer_auto_map": True})
    largest = max((f.stat().st_size for f in model_dir.glob("*.safetensors")), default=0)
    return profile.model_copy(update={"largest_shard_gib": largest / GIB}) if largest else profile
