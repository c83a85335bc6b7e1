"""Which kernels a plan asks vLLM for (attention, MoE experts, linear GEMMs), against what vLLM's log says it selected.

vLLM names each selection in an INFO line at start. ANNOUNCEMENTS holds each format string with the file and line it
comes from in vLLM 0.33.0 (and 0.32.0, read in the CPU build); tests/unit/test_backends.py fills each as vLLM does.
`parse` reads one start's journal into what was selected, `expected_backends` reads what a plan forces (its flags
and environment) or counts on (a reason that leaves a backend to vLLM and names the one it expects), and `compare`
says per layer whether the two agree. A backend the plan neither forces nor counts on is vLLM's choice: nothing is
expected of it.

How vLLM 0.33 is told (engine/arg_utils.py, config/kernel.py):
  --attention-backend NAME (arg_utils.py:1114; also --attention-config '{"backend": NAME}', :1894)
  --moe-backend NAME (arg_utils.py:1845; config/kernel.py:122 MoEBackend, :305)
  --linear-backend NAME (arg_utils.py:1848; config/kernel.py:245 LinearBackend, :363; per scheme through
      --kernel-config '{"linear_backend_per_quant": {...}}', :1898)
  b12x (the b12x package, vllm[b12x]; utils/b12x.py): its attention and MoE kernels run only when asked for,
      --attention-backend B12X (v1/attention/backends/registry.py:126; not in platforms/cuda.py:84-181's
      priorities), --moe-backend b12x (NVFP4 and MXFP4 experts: fused_moe/oracle/nvfp4.py:166, mxfp4.py:359) or
      --moe-backend flashinfer_b12x (nvfp4.py:200: out of auto until CUTLASS guards its SM121 MMA op);
      VLLM_B12X_MOE_FP4_FORCE_A16=1 (envs.py:1681) runs its FP4 MoE on BF16 activations. --linear-backend b12x
      asks for its FP8, MXFP8, MXFP4 and NVFP4 linear kernels (kernels/linear/__init__.py:287); those are in the
      automatic lists too, behind FlashInfer, CUTLASS or Marlin (FP8 :458, MXFP8 :568, NVFP4 :592, MXFP4 :625), as is
      FlashInferB12xNvFp4LinearKernel (third for NVFP4, behind FlashInfer CUTLASS, which sm_121 can run).
The environment variables that chose these before (VLLM_ATTENTION_BACKEND, VLLM_USE_FLASHINFER_MOE_FP4,
VLLM_NVFP4_GEMM_BACKEND, VLLM_MXFP4_USE_MARLIN) are gone from 0.33's envs.py; a plan for an older release that sets
them is still read (sparkfleet.versions has when each went).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .backendlog import (
    MARLIN_FP4_SOURCE,
    WEIGHT_ONLY_FAMILIES,
    Layer,
    Selected,
    SelectedBackends,
    family_of,
)
from .models import ServePlan

# What the plan asks of each layer.


@dataclass(frozen=True)
class Expected:
    family: str
    asked: str  # how the plan says it: "--moe-backend marlin", "VLLM_NVFP4_GEMM_BACKEND=marlin"
    reason: str  # the plan's reason for it
    forced: bool = True  # False: the plan leaves it to vLLM, counting on vLLM picking this one

    @property
    def native_fp4(self) -> bool:
        return self.family not in WEIGHT_ONLY_FAMILIES


@dataclass(frozen=True)
class ExpectedBackends:
    attention: Expected | None = None
    moe: Expected | None = None
    linear: Expected | None = None
    # The MTP draft's own MoE kernel (--speculative-config moe_backend), logged beside the target's.
    draft_moe: Expected | None = None

    def of(self, layer: Layer) -> Expected | None:
        return {Layer.ATTENTION: self.attention, Layer.MOE: self.moe, Layer.LINEAR: self.linear}[layer]


@dataclass(frozen=True)
class _Flag:
    values: list[str]
    reason: str


def _flags(plan: Mapping[str, Any]) -> dict[str, _Flag]:
    """The plan's flags with their reasons; a plan recorded before flags were kept has only its argv."""
    if plan.get("flags"):
        return {
            str(f["name"]): _Flag([str(v) for v in f.get("values", [])], str(f.get("reason", ""))) for f in plan["flags"]
        }
    out: dict[str, _Flag] = {}
    name: str | None = None
    for word in [str(w) for w in plan.get("argv", [])]:
        if word.startswith("--"):
            name, value = word.split("=", 1) if "=" in word else (word, "")
            out[name] = _Flag([value] if value else [], "")
        elif name is not None:
            out[name].values.append(word)
    return out


def _json_field(flags: Mapping[str, _Flag], name: str, key: str) -> tuple[str, str] | None:
    flag = flags.get(name)
    if flag is None or not flag.values:
        return None
    try:
        loaded = json.loads(flag.values[0])
    except json.JSONDecodeError:
        return None
    value = loaded.get(key) if isinstance(loaded, dict) else None
    return (str(value), flag.reason) if value and value != "auto" else None


def _from_flag(layer: Layer, flags: Mapping[str, _Flag], name: str) -> Expected | None:
    flag = flags.get(name)
    if flag is None or not flag.values or flag.values[0] == "auto":
        return None
    return Expected(family_of(layer, flag.values[0]), f"{name} {flag.values[0]}", flag.reason)


def _from_config(layer: Layer, flags: Mapping[str, _Flag], name: str, key: str) -> Expected | None:
    found = _json_field(flags, name, key)
    if found is None:
        return None
    return Expected(family_of(layer, found[0]), f"{name} {key}={found[0]}", found[1])


def _from_env(layer: Layer, plan: Mapping[str, Any], name: str, family: str | None = None) -> Expected | None:
    value = (plan.get("env") or {}).get(name)
    if value is None:
        return None
    reasons = {str(e.get("name")): str(e.get("reason", "")) for e in plan.get("environment") or []}
    return Expected(family or family_of(layer, str(value)), f"{name}={value}", reasons.get(name, ""))


# The planner's reason for a backend it leaves to vLLM names the one it counts on: "dense NVFP4 GEMM left to vLLM
# (FLASHINFER_CUTLASS)" (planner.py). Read from the plan, not assumed here.
_COUNTED_ON = re.compile(r"(?P<what>.*?)\s*left to vLLM \((?P<value>[\w-]+)\)")


def _counted_on(plan: Mapping[str, Any]) -> dict[Layer, Expected]:
    out: dict[Layer, Expected] = {}
    for reason in plan.get("reasons") or []:
        match = _COUNTED_ON.search(str(reason.get("item", "")))
        if not match:
            continue
        what = match.group("what")
        layer = Layer.MOE if "MoE" in what else Layer.ATTENTION if "attention" in what else Layer.LINEAR
        value = match.group("value")
        out.setdefault(
            layer,
            Expected(family_of(layer, value), f"'{reason['item']}'", str(reason.get("reason", "")), forced=False),
        )
    return out


def _first(*found: Expected | None) -> Expected | None:
    return next((e for e in found if e is not None), None)


def expected_backends(plan: ServePlan | Mapping[str, Any]) -> ExpectedBackends:
    """What the plan forces per layer (a flag before its configuration JSON before an environment variable), or
    else counts on in its reasons; None where it leaves the layer to vLLM without naming one."""
    data: Mapping[str, Any] = plan.model_dump(mode="json") if isinstance(plan, ServePlan) else plan
    flags = _flags(data)
    counted = _counted_on(data)
    true_env = {"1", "true", "True"}
    env = data.get("env") or {}
    return ExpectedBackends(
        attention=_first(
            _from_flag(Layer.ATTENTION, flags, "--attention-backend"),
            _from_config(Layer.ATTENTION, flags, "--attention-config", "backend"),
            _from_env(Layer.ATTENTION, data, "VLLM_ATTENTION_BACKEND"),
            counted.get(Layer.ATTENTION),
        ),
        moe=_first(
            _from_flag(Layer.MOE, flags, "--moe-backend"),
            _from_config(Layer.MOE, flags, "--kernel-config", "moe_backend"),
            _from_env(Layer.MOE, data, "VLLM_MXFP4_USE_MARLIN", "Marlin")
            if str(env.get("VLLM_MXFP4_USE_MARLIN")) in true_env
            else None,
            _from_env(Layer.MOE, data, "VLLM_USE_FLASHINFER_MOE_FP4", "FlashInfer")
            if str(env.get("VLLM_USE_FLASHINFER_MOE_FP4")) in true_env
            else None,
            counted.get(Layer.MOE),
        ),
        linear=_first(
            _from_flag(Layer.LINEAR, flags, "--linear-backend"),
            _from_config(Layer.LINEAR, flags, "--kernel-config", "linear_backend"),
            _from_env(Layer.LINEAR, data, "VLLM_NVFP4_GEMM_BACKEND"),
            counted.get(Layer.LINEAR),
        ),
        draft_moe=_from_config(Layer.MOE, flags, "--speculative-config", "moe_backend"),
    )


# Comparing the two.


class Agreement(str, Enum):
    MATCH = "match"
    DIFFERS = "differs"
    VLLMS_CHOICE = "vLLM's choice"
    NOT_SEEN = "not seen"


class Severity(str, Enum):
    GREEN = "green"
    YELLOW = "yellow"
    RED = "red"


@dataclass(frozen=True)
class Verdict:
    layer: Layer
    agreement: Agreement
    severity: Severity
    detail: str


# vLLM fell back to Marlin for an NVFP4 MoE on its own: it works on sm_121, at a cost worth knowing.
MARLIN_FALLBACK = (
    "vLLM chose Marlin for the NVFP4 MoE on its own: the published aarch64 wheels carry no sm_121 code for "
    "vLLM's own MoE kernels (vllm-project/vllm#50925), so FP4 weights are dequantized to BF16 on the fly, with "
    "no FP4 tensor cores: long prompts prefill slower (time to first token; seed 002, measured GB10 performance), "
    "decode is unharmed (seed 003: 16% faster than FlashInfer's sm_121 fallback). Its repacked weights keep "
    "their size (4-bit, fp8 scales: vLLM marlin_utils_fp4.py). Pin --moe-backend marlin to make it the plan's "
    "choice, or use a release with sm_121 MoE kernels"
)
WEIGHT_ONLY_FP4 = (
    "FP4 weights on a weight-only kernel where the plan expects a native FP4 one: vLLM found no FP4 kernel it "
    f'could run ("Your GPU does not have native support for FP4 computation", {MARLIN_FP4_SOURCE}), so each FP4 weight is '
    "dequantized to BF16 on the fly, without FP4 tensor cores: the field's slow or garbage output from the wrong "
    "FP4 kernel. Check that the release's vLLM and FlashInfer carry sm_121 FP4 code (a cu130 build), or pin the "
    "backend in the plan"
)


def _matches(selected: Selected, expected: Expected) -> bool:
    # "FlashInfer" (an environment variable of old) takes any FlashInfer variant.
    return selected.family == expected.family or selected.family.startswith(f"{expected.family}-")


def _seen(selections: tuple[Selected, ...]) -> str:
    return ", ".join(
        s.shown() + (" (inferred from the platform's lines)" if s.layer is Layer.ATTENTION and s.inferred else "")
        for s in selections
    )


def _verdict(layer: Layer, selections: tuple[Selected, ...], expected: Expected | None, draft: Expected | None) -> Verdict:
    name = layer.value
    # The MTP draft's MoE is logged beside the target's, on the kernel its own configuration asks for.
    drafts = tuple(
        s
        for s in selections
        if layer is Layer.MOE and draft is not None and _matches(s, draft)
        if expected is None or not _matches(s, expected)
    )
    selections = tuple(s for s in selections if s not in drafts)
    drafted = f"; the MTP draft's MoE {_seen(drafts)} as the plan asked ({draft.asked})" if drafts and draft else ""
    if expected is None:
        if any(layer is Layer.MOE and s.family == "Marlin" and s.quant == "NvFp4" for s in selections):
            detail = f"{name} {_seen(selections)}: {MARLIN_FALLBACK}{drafted}"
            return Verdict(layer, Agreement.VLLMS_CHOICE, Severity.YELLOW, detail)
        return Verdict(layer, Agreement.VLLMS_CHOICE, Severity.GREEN, f"{name} {_seen(selections)} (vLLM's choice){drafted}")
    how = "asked" if expected.forced else "counts on"
    if not selections:
        if not expected.forced:
            detail = f"{name}: no line names its kernel (left to vLLM; the plan counts on {expected.family}){drafted}"
            return Verdict(layer, Agreement.NOT_SEEN, Severity.GREEN, detail)
        detail = f"{name}: no line in the start log names its kernel; the plan asked {expected.asked} ({expected.family})"
        return Verdict(layer, Agreement.NOT_SEEN, Severity.YELLOW, detail + drafted)
    matching = tuple(s for s in selections if _matches(s, expected))
    others = tuple(s for s in selections if s not in matching)
    if matching:
        also = f"; also {_seen(others)} (another layer type)" if others else ""
        detail = f"{name} {_seen(matching)} as the plan {how} ({expected.asked}){also}{drafted}"
        return Verdict(layer, Agreement.MATCH, Severity.GREEN, detail)
    weight_only_fp4 = expected.native_fp4 and any(s.fp4 and s.weight_only for s in others)
    detail = f"{name} {_seen(others)}, but the plan {how} {expected.family} ({expected.asked})"
    if expected.forced:
        detail += ": the flag did not apply" + (f"; the plan's reason: {expected.reason}" if expected.reason else "")
    if weight_only_fp4:
        detail += f"; {WEIGHT_ONLY_FP4}"
    severity = Severity.RED if expected.forced or weight_only_fp4 else Severity.YELLOW
    return Verdict(layer, Agreement.DIFFERS, severity, detail + drafted)


def compare(selected: SelectedBackends, expected: ExpectedBackends) -> list[Verdict]:
    """One verdict per layer that vLLM logged or the plan asks for; a layer with neither says nothing."""
    out = []
    for layer in Layer:
        selections, asked = selected.of(layer), expected.of(layer)
        if selections or asked is not None:
            out.append(_verdict(layer, selections, asked, expected.draft_moe))
    return out
