"""How vLLM reads the checkpoint at start: the strategy, its flags, and what it holds while it loads.

Loading is a Spark's slowest step: mmap (vLLM's default) read Qwen3-Next-80B-FP8 in 8 min 41 s where eager
read it in 1 min 28 s (NVIDIA developer forum thread 349886, cited in issue 21). What each strategy holds,
read in vLLM 0.32's model_loader/weight_utils.py:
- mmap ("lazy"): the checkpoint's pages are file-backed and reclaimable; nothing is held beside the weights.
- eager: each shard is read whole into process memory and deserialised into a copy (safetensors
  `load(f.read())`), so up to two of the largest shard are held until its tensors are placed.
- prefetch: every shard is read into the page cache before loading; reclaimable, but on unified memory the
  page cache competes with the GPU's allocations (seed 003 drops caches before serving for that reason).
- fastsafetensors / instanttensor: their own loaders, which place each shard on the CUDA device through a
  shard-sized buffer; neither runs on a CPU platform.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..catalog import load_catalog
from ..errors import PlanError
from ..models import HostFacts, LoadStrategy, ModelProfile, Platform
from ..sources import SEED_NANO
from ..versions import FIRST_PREFETCH, LOADERS, VllmVersion

# vLLM's own list of network filesystems, on which it prefetches by itself (weight_utils.py _get_fs_type).
NETWORK_FS = frozenset({"nfs", "nfs4", "lustre"})
# seed 003: fastsafetensors froze a Spark briefly above this gpu_memory_utilization.
FASTSAFETENSORS_GB10_MAX_UTILIZATION = 0.76
FIELD_TIMES = "NVIDIA forum thread 349886: Qwen3-Next-80B-FP8 loads in 8 min 41 s with mmap, 1 min 28 s eager"


@dataclass(frozen=True)
class LoadChoice:
    strategy: LoadStrategy
    # Held beside the weights while loading and not reclaimable by the kernel (counted against the budget).
    transient_gib: float
    flag: tuple[str, str] | None
    reason: str
    source: str


def _shard_gib(profile: ModelProfile) -> tuple[float, str]:
    if profile.largest_shard_gib is not None:
        return profile.largest_shard_gib, f"its largest shard is {profile.largest_shard_gib:.2f} GiB"
    return profile.weights_gib, "its shard sizes are not known here, so one shard is bounded by the whole checkpoint"


def held_while_loading(strategy: LoadStrategy, profile: ModelProfile) -> tuple[float, str]:
    """(GiB held beside the weights, how that was counted)."""
    shard, shard_note = _shard_gib(profile)
    if strategy is LoadStrategy.EAGER:
        return 2 * shard, f"eager holds a shard's bytes and their copy: 2 x {shard:.2f} GiB ({shard_note})"
    if strategy is LoadStrategy.PREFETCH:
        return profile.weights_gib, f"prefetch reads all {profile.weights_gib:.2f} GiB into the page cache first"
    if strategy in (LoadStrategy.FASTSAFETENSORS, LoadStrategy.INSTANTTENSOR):
        return shard, f"{strategy.value} places a shard through a buffer of its size: {shard:.2f} GiB ({shard_note})"
    return 0.0, "mmap pages are file-backed and reclaimable"


def _refuse_unrunnable(strategy: LoadStrategy, host: HostFacts, version: VllmVersion) -> None:
    loader = LOADERS.get(strategy.value)
    if loader is not None and host.platform is Platform.CPU:
        raise PlanError(
            "intent.load",
            f"{strategy.value} loads onto a CUDA device; the cpu platform has none (vLLM 0.32 weight_utils.py)",
            ("load auto", "load eager", "load mmap"),
        )
    if loader is not None and version < VllmVersion.parse(loader.first):
        raise PlanError(
            "intent.load",
            f"--load-format {strategy.value} first shipped in vLLM {loader.first}; target is {version}",
            (f"vllm_version {loader.first} or newer", "load eager"),
        )
    if strategy is LoadStrategy.PREFETCH and version < VllmVersion.parse(FIRST_PREFETCH):
        raise PlanError(
            "intent.load",
            f"vLLM {version} reads --safetensors-load-strategy prefetch as lazy (prefetch from {FIRST_PREFETCH})",
            (f"vllm_version {FIRST_PREFETCH} or newer", "load eager"),
        )


def _flag(strategy: LoadStrategy) -> tuple[str, str]:
    if strategy.value in LOADERS:
        return ("--load-format", strategy.value)
    return ("--safetensors-load-strategy", "lazy" if strategy is LoadStrategy.MMAP else strategy.value)


def _package_note(strategy: LoadStrategy, version: VllmVersion) -> str:
    loader = LOADERS.get(strategy.value)
    if loader is None:
        return ""
    if version >= VllmVersion.parse(loader.required_from):
        return f"; vLLM {version} requires {loader.package} itself, so every release carries it"
    return (
        f"; vLLM {version} does not require {loader.package}: the release must add {loader.package}>={loader.minimum} "
        "(vllm_install does when an instance asks for this loader)"
    )


def _auto(host: HostFacts, profile: ModelProfile, room_gib: float, model_fs: str | None) -> LoadChoice:
    network = model_fs in NETWORK_FS
    if host.platform is not Platform.GB10:
        flag = ("--safetensors-load-strategy", "lazy") if network else None
        reason = "vLLM's default (mmap): a CPU host has no unified pool to spare"
        return LoadChoice(LoadStrategy.MMAP, 0.0, flag, reason, "vLLM config/load.py")
    where = f"the model is on {model_fs}" if model_fs else "the model's filesystem is not known (taken as local)"
    prefetch = held_while_loading(LoadStrategy.PREFETCH, profile)[0]
    if network and prefetch <= room_gib:
        return LoadChoice(
            LoadStrategy.PREFETCH,
            0.0,
            _flag(LoadStrategy.PREFETCH),
            f"{where}: read ahead once instead of random network reads; {prefetch:.1f} GiB of page cache fits the "
            f"{room_gib:.1f} GiB free while loading",
            "vLLM weight_utils.py (prefetch on network filesystems)",
        )
    eager, how = held_while_loading(LoadStrategy.EAGER, profile)
    if eager <= room_gib:
        return LoadChoice(
            LoadStrategy.EAGER,
            eager,
            _flag(LoadStrategy.EAGER),
            f"{where}; eager reads each shard in one pass, several times faster than mmap on a Spark; {how}, within "
            f"the {room_gib:.1f} GiB free while loading",
            FIELD_TIMES,
        )
    return LoadChoice(
        LoadStrategy.MMAP,
        0.0,
        _flag(LoadStrategy.MMAP) if network else None,
        f"mmap, the slow default: eager would hold {eager:.1f} GiB ({how}) and {room_gib:.1f} GiB is free while loading",
        FIELD_TIMES,
    )


def choose(
    host: HostFacts,
    profile: ModelProfile,
    strategy: LoadStrategy,
    version: VllmVersion,
    *,
    room_gib: float,
    model_fs: str | None = None,
) -> LoadChoice:
    """The load strategy for `strategy` (auto picks by platform, filesystem and the room beside the weights)."""
    if strategy is LoadStrategy.AUTO:
        return _auto(host, profile, room_gib, model_fs)
    _refuse_unrunnable(strategy, host, version)
    held, how = held_while_loading(strategy, profile)
    if held > room_gib:
        raise PlanError(
            "intent.load",
            f"{strategy.value} holds {held:.1f} GiB while loading ({how}); {room_gib:.1f} GiB is free beside the weights",
            ("load eager (a shard at a time)", "load mmap")
            if strategy is LoadStrategy.PREFETCH
            else ("load mmap", "load auto", "plan the staged model, whose shard sizes are read from its files"),
        )
    # Page cache is reclaimable: prefetch is checked against the room above but not held in the budget.
    transient = 0.0 if strategy is LoadStrategy.PREFETCH else held
    return LoadChoice(
        strategy,
        transient,
        _flag(strategy),
        f"asked for (intent.load); {how}{_package_note(strategy, version)}",
        "intent.load; vLLM config/load.py",
    )


def check_utilization(choice: LoadChoice, host: HostFacts, utilization: float) -> None:
    """seed 003: fastsafetensors at a high utilization froze a Spark; refuse it above the observed bound."""
    if (
        choice.strategy is LoadStrategy.FASTSAFETENSORS
        and host.platform is Platform.GB10
        and utilization > FASTSAFETENSORS_GB10_MAX_UTILIZATION
    ):
        raise PlanError(
            "intent.load",
            f"fastsafetensors froze a Spark above gpu_memory_utilization {FASTSAFETENSORS_GB10_MAX_UTILIZATION} "
            f"({SEED_NANO}); this plan needs {utilization:.2f}",
            ("load eager", "load instanttensor", "a shorter max_context or fewer concurrent sequences"),
        )


def packages_for(loads: list[str], version: VllmVersion, listed: list[str]) -> list[str]:
    """Requirements a release must add for the loaders its instances ask for: those vLLM `version` does not
    require itself (LOADERS), unless `listed` (the user's extra packages) names them already."""
    named = {re.split(r"[\s\[<>=!~;]", item.strip(), maxsplit=1)[0].lower() for item in listed}
    wanted = []
    for load in dict.fromkeys(loads):
        loader = LOADERS.get(load)
        if loader and version < VllmVersion.parse(loader.required_from) and loader.package not in named:
            wanted.append(f"{loader.package}>={loader.minimum}")
    return wanted


def extras_for(model_ids: list[str], vllm_package: str, listed: list[str]) -> list[str]:
    """`vllm[extra]` requirements for the vLLM extras the catalog profiles of these models need (vllm_extras),
    on the platform's vLLM package, unless `listed` (the user's extra packages) names that package with extras."""
    catalog = load_catalog()
    extras = sorted({extra for model in model_ids if model in catalog for extra in catalog[model].vllm_extras})
    if not extras or any(item.replace(" ", "").startswith(f"{vllm_package}[") for item in listed):
        return []
    return [f"{vllm_package}[{','.join(extras)}]"]
