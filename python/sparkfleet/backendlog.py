"""Which kernels vLLM selected at a start (attention, MoE experts, linear GEMMs), read from its log.

ANNOUNCEMENTS holds each line vLLM writes when it selects one, with the file and line it comes from in vLLM 0.33.0
(and 0.32.0, read in the CPU build). `sparkfleet.backends` compares what `parse` finds with what a plan asks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

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
WEIGHT_ONLY_FAMILIES = {"Marlin", "Emulation"}


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
        return self.family in WEIGHT_ONLY_FAMILIES or "W4A16" in self.name

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
