"""Install recipes: the exact commands that install a locked vLLM release (a venv) on a host.

The role's inputs become a LockRequest (resolved on the controller, `sparkfleet.resolver`); the
recipe installs exactly that lock with `uv pip sync`. The release id is a hash of the lock, the
patches' content and a fork's commit sha, so equal ids mean equal packages on every host and a
changed lock always yields a new release directory.
"""

from __future__ import annotations

from .inputs import DIST_ALIAS, SEED_GUIDE, TRITON_PTXAS, InstallInputs, PrecompiledWheel, ReleasePatch
from .steps import (
    PLATFORM_PACKAGES,
    PlatformPackages,
    Recipe,
    Step,
    WheelFetch,
    inputs_from,
    lock_request,
    packages_for,
    recipe,
    target_of,
)

__all__ = [
    "DIST_ALIAS",
    "PLATFORM_PACKAGES",
    "SEED_GUIDE",
    "TRITON_PTXAS",
    "InstallInputs",
    "PlatformPackages",
    "PrecompiledWheel",
    "Recipe",
    "ReleasePatch",
    "Step",
    "WheelFetch",
    "inputs_from",
    "lock_request",
    "packages_for",
    "recipe",
    "target_of",
]
