"""Which kernels vLLM selected at a start (attention, MoE experts, linear GEMMs), read from its log, against the plan's.

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

from .models import ServePlan
from .sources import SEED_GUIDE


class Layer(str, Enum):
    ATTENTION = "attention"
    MOE = "MoE"
    LINEAR = "linear"


@dataclass(frozen=True)
class Announcement:
    """One line in which vLLM names a kernel it selected; group 'value' is vLLM's name, 'quant' the scheme."""

    layer: Layer
    anchors: tuple[str, ...]  # literals the journal is grepped for
    pattern: re.Pattern[str]
    source: str  # where vLLM writes it


_MOE_SCHEMES = r"NvFp4|Fp8|Mxfp4|MxFp4|MxFp8|Int8|WNA16|W4A8 Int8|W4A8|Unquantized|Humming"

ANNOUNCEMENTS: tuple[Announcement, ...] = (
    Announcement(
        Layer.ATTENTION,
        ("attention backend out of potential backends",),
        re.compile(r"Using (?P<value>\w+) attention backend out of potential backends"),
        "vLLM 0.33 platforms/cuda.py:508 (0.32: :507), vLLM's own pick",
    ),
    Announcement(
        Layer.ATTENTION,
        ("Using AttentionBackendEnum.",),
        # logger.info("Using %s backend.", selected_backend) with the enum itself: its str is the qualified name.
        re.compile(r"Using AttentionBackendEnum\.(?P<value>\w+) backend\."),
        "vLLM 0.33 platforms/cuda.py:448 (0.32: :446), the one --attention-backend asked for",
    ),
    Announcement(
        Layer.ATTENTION,
        ("_MLA backend.",),
        re.compile(r"Using (?P<value>(?:CPU|AMX)_MLA) backend\."),
        "vLLM 0.33 platforms/cpu.py:174, :186 (0.32: :163, :175)",
    ),
    Announcement(
        Layer.MOE,
        ("MoE backend", "MoE LoRA backend"),
        # Quoted for NvFp4, Mxfp4, MxFp8, WNA16; bare for Fp8, Int8, W4A8, Unquantized (whose names hold spaces).
        re.compile(rf"Using '?(?P<value>[\w ]+?)'? (?P<quant>{_MOE_SCHEMES}) MoE (?:LoRA )?backend"),
        "vLLM 0.33 fused_moe/oracle/nvfp4.py:242, fp8.py:422, mxfp4.py:539, mxfp8.py:127 and :139, "
        "unquantized.py:266, int8.py:121, int_wna16.py:287, w4a8.py:96, w4a8_int8.py:102, "
        "quantization/utils/humming/moe.py:225",
    ),
    Announcement(
        Layer.LINEAR,
        ("for NVFP4 GEMM", "for MXFP4 GEMM", "for MXFP8 GEMM", "for MXFP6 GEMM"),
        re.compile(r"Using (?:NvFp4LinearBackend\.)?(?P<value>\w+) for (?P<quant>NVFP4|MXFP4|MXFP8|MXFP6) GEMM"),
        "vLLM 0.33 kernels/linear/__init__.py:1259 and :1303 (NVFP4), :1091 (MXFP4), :1004 (MXFP8), :1144 (MXFP6); "
        f"NvFp4LinearBackend.X on 0.19 ({SEED_GUIDE} §7.2.2)",
    ),
    Announcement(
        Layer.LINEAR,
        ("for mixed-precision linear",),
        re.compile(r"Using (?P<value>\w+) for (?P<quant>mixed-precision) linear"),
        "vLLM 0.33 kernels/linear/__init__.py:945",
    ),
    Announcement(
        Layer.LINEAR,
        ("Kernel for ",),
        # FP8 and INT8 scaled-mm layers name the quantization method they serve, not the scheme.
        re.compile(r"Selected (?P<value>\w+Kernel) for \w+"),
        "vLLM 0.33 kernels/linear/__init__.py:779, :818, :869, :1179",
    ),
)

# One warning_once text for every FP4 layer Marlin takes, dense or MoE: it cannot say which.
MARLIN_FP4_WARNING = re.compile(r"Your GPU does not have native support for FP4 computation")
MARLIN_FP4_SOURCE = (
    "vLLM 0.33 kernels/linear/nvfp4/marlin.py:35 (dense), quantization/utils/marlin_utils_fp4.py:341 (MoE), "
    "compressed_tensors_moe_w4a4_mxfp4.py:227"
)
# vLLM's CPU platform logs no attention selection: it returns CPU_ATTN for every model that is not MLA
# (0.33 platforms/cpu.py:188-197, 0.32 :177-179), so the platform's own lines stand for it.
CPU_PLATFORM = re.compile(r"Automatically detected platform cpu\.|\bCPU KV cache size:")
CPU_PLATFORM_SOURCE = (
    "vLLM 0.33 platforms/cpu.py:197 returns CPU_ATTN without a line (0.32: :179); "
    "platforms/__init__.py:287 (0.32: :291), v1/core/kv_cache_utils.py:1148 (0.32: :2328)"
)

# vLLM's names for a kernel family (backend enums, --moe-backend / --linear-backend values, kernel classes), matched
# on the name lowered to letters and digits, first hit wins: the FlashInfer wrappers before the kernels they wrap.
_FAMILIES: tuple[tuple[str, str], ...] = (
    ("flashinfercutlass", "FlashInfer-CUTLASS"),
    ("flashinfercutedsl", "FlashInfer-CuteDSL"),
    ("flashinfertrtllm", "FlashInfer-TRTLLM"),
    ("trtllm", "FlashInfer-TRTLLM"),
    ("flashinfercudnn", "FlashInfer-cuDNN"),
    ("flashinferb12x", "FlashInfer-B12X"),
    ("flashinfermoeep", "FlashInfer-MoE-EP"),
    ("flashinfer", "FlashInfer"),
    ("b12x", "B12X"),
    ("emulation", "Emulation"),
    ("humming", "Humming"),
    ("marlin", "Marlin"),
    ("machete", "Machete"),
    ("conch", "Conch"),
    ("exllama", "ExLlama"),
    ("fbgemm", "FBGEMM"),
    ("deepgemm", "DeepGEMM"),
    ("cutlass", "CUTLASS"),
    ("aiter", "AITER"),
    ("triton", "Triton"),
    ("zentorch", "ZenTorch"),
    ("torch", "Torch"),
    ("xpu", "XPU"),
    ("cpu", "CPU"),
)
# Kernels that run FP4 weights without FP4 tensor cores: dequantized to BF16 on the fly (Marlin, emulation) or a
# weight-only W4A16 path, which vLLM calls "a fallback on a W4A4-capable checkpoint, not a preference"
# (kernels/linear/__init__.py:598).
_WEIGHT_ONLY_FAMILIES = {"Marlin", "Emulation"}


def family_of(layer: Layer, value: str) -> str:
    """The family of a kernel as vLLM names it; attention keeps vLLM's backend name (what --attention-backend takes)."""
    if layer is Layer.ATTENTION:
        return value.strip().upper().replace("-", "_")
    compact = re.sub(r"[^a-z0-9]", "", value.lower())
    found = next((family for key, family in _FAMILIES if key in compact), None)
    return found or re.sub(r"(?:Linear)?Kernel$", "", value.strip())


@dataclass(frozen=True)
class Selected:
    layer: Layer
    family: str  # normalised: "FlashInfer-CUTLASS", "Marlin", "B12X", "TRITON_ATTN", ...
    name: str  # as vLLM wrote it: "FLASHINFER_CUTLASS", "MarlinNvFp4LinearKernel"
    quant: str  # the scheme the line names ("NvFp4", "NVFP4", "Fp8", "Unquantized"); "" when it names none
    line: str
    source: str
    inferred: bool = False  # no line names it; the platform's lines stand for it (CPU attention)

    @property
    def fp4(self) -> bool:
        return "fp4" in self.quant.lower()

    @property
    def weight_only(self) -> bool:
        return self.family in _WEIGHT_ONLY_FAMILIES or "W4A16" in self.name

    def shown(self) -> str:
        said = ", ".join(part for part in (self.name if self.name != self.family else "", self.quant) if part)
        return f"{self.family} ({said})" if said else self.family


@dataclass(frozen=True)
class SelectedBackends:
    """Each layer's selections in the order vLLM logged them, one per kernel and scheme."""

    attention: tuple[Selected, ...] = ()
    moe: tuple[Selected, ...] = ()
    linear: tuple[Selected, ...] = ()
    marlin_fp4_warning: str | None = None

    def of(self, layer: Layer) -> tuple[Selected, ...]:
        return {Layer.ATTENTION: self.attention, Layer.MOE: self.moe, Layer.LINEAR: self.linear}[layer]


def _quant(announcement: Announcement, match: re.Match[str]) -> str:
    quant = match.groupdict().get("quant")
    if quant:
        return quant
    value = match.group("value").lower()
    if announcement.layer is Layer.LINEAR:
        return "INT8" if "int8" in value else "FP8"
    return ""


def _announced(line: str) -> Selected | None:
    for announcement in ANNOUNCEMENTS:
        match = announcement.pattern.search(line)
        if match:
            value = match.group("value").strip()
            return Selected(
                layer=announcement.layer,
                family=family_of(announcement.layer, value),
                name=value,
                quant=_quant(announcement, match),
                line=line.strip(),
                source=announcement.source,
            )
    return None


def parse(journal: str) -> SelectedBackends:
    """What one start's log says vLLM selected; the same kernel and scheme logged again (per layer, per rank) once."""
    found: dict[Layer, dict[tuple[str, str, str], Selected]] = {layer: {} for layer in Layer}
    warning: str | None = None
    platform_line: str | None = None
    for line in journal.splitlines():
        selected = _announced(line)
        if selected is not None:
            found[selected.layer].setdefault((selected.family, selected.name, selected.quant), selected)
        elif warning is None and MARLIN_FP4_WARNING.search(line):
            warning = line.strip()
        if platform_line is None and CPU_PLATFORM.search(line):
            platform_line = line.strip()
    attention = tuple(found[Layer.ATTENTION].values())
    if not attention and platform_line is not None:
        attention = (
            Selected(Layer.ATTENTION, "CPU_ATTN", "CPU_ATTN", "", platform_line, CPU_PLATFORM_SOURCE, inferred=True),
        )
    moe, linear = tuple(found[Layer.MOE].values()), tuple(found[Layer.LINEAR].values())
    if warning is not None and not linear and not any(s.family == "Marlin" and s.fp4 for s in moe):
        # The warning's FP4 layer is not an MoE on Marlin: a dense one is, where no GEMM line said so.
        linear = (Selected(Layer.LINEAR, "Marlin", "Marlin", "FP4", warning, MARLIN_FP4_SOURCE, inferred=True),)
    return SelectedBackends(attention=attention, moe=moe, linear=linear, marlin_fp4_warning=warning)


def journal_anchors() -> tuple[str, ...]:
    """The literals a journal grep needs for every line `parse` reads."""
    anchors = [anchor for announcement in ANNOUNCEMENTS for anchor in announcement.anchors]
    return (*anchors, "native support for FP4 computation", "Automatically detected platform", "CPU KV cache size")


# What the plan asks of each layer.


@dataclass(frozen=True)
class Expected:
    family: str
    asked: str  # how the plan says it: "--moe-backend marlin", "VLLM_NVFP4_GEMM_BACKEND=marlin"
    reason: str  # the plan's reason for it
    forced: bool = True  # False: the plan leaves it to vLLM, counting on vLLM picking this one

    @property
    def native_fp4(self) -> bool:
        return self.family not in _WEIGHT_ONLY_FAMILIES


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
            name, _, value = word.partition("=")
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
