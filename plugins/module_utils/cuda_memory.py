# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CUDA's own free and total device memory, read through the CUDA driver API (libcuda) with ctypes, without torch.

vLLM's start check compares gpu_memory_utilization x total with the free figure CUDA reports (cuMemGetInfo).
On a DGX Spark (GB10, unified memory) that free figure is the kernel's MemFree, so page cache counts as used:
the planner and the unit's start have to read the same figure CUDA gives, and this is how.

The reading retains the device's primary context, makes it current (pushed, then popped), asks cuMemGetInfo_v2
and releases the context again, so it leaves nothing behind on the GPU. Standard library only: the roles also
copy this file to the hosts and run it as a script (`python3 cuda_memory.py --device 0` prints one JSON line).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

CUDA_SUCCESS = 0
DEFAULT_LIBRARY = "libcuda.so.1"

# Names for the codes most often met here, for drivers where cuGetErrorName itself cannot answer.
_ERROR_NAMES: Dict[int, str] = {
    1: "CUDA_ERROR_INVALID_VALUE",
    2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    4: "CUDA_ERROR_DEINITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    201: "CUDA_ERROR_INVALID_CONTEXT",
    304: "CUDA_ERROR_OPERATING_SYSTEM",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}


class CudaMemoryError(Exception):
    """The driver could not be read: no library, a missing entry point, or a driver call that did not succeed."""

    def __init__(
        self, message: str, call: Optional[str] = None, code: Optional[int] = None, name: Optional[str] = None
    ) -> None:
        super().__init__(message)
        self.call = call
        self.code = code
        self.name = name


def _function(lib: Any, *names: str) -> Tuple[str, Any]:
    """(name, function): the first of the driver's entry points `names` the library has (the versioned name first)."""
    for name in names:
        try:
            return name, getattr(lib, name)
        except AttributeError:
            continue
    raise CudaMemoryError(
        "the NVIDIA driver library has no %s: the driver is too old or not CUDA's" % names[0], call=names[0]
    )


def error_name(lib: Any, code: int) -> str:
    """CUresult `code` by name: cuGetErrorName's answer where the driver gives one, else the known name, else '?'."""
    try:
        get_name = lib.cuGetErrorName
    except AttributeError:
        get_name = None
    if get_name is not None:
        text = ctypes.c_char_p()
        try:
            answered = get_name(ctypes.c_int(code), ctypes.pointer(text)) == CUDA_SUCCESS
        except Exception:  # a driver that cannot even name the error: fall back to the table
            answered = False
        if answered and text.value:
            return text.value.decode("ascii", "replace")
    return _ERROR_NAMES.get(code, "?")


def _check(lib: Any, call: str, code: int, detail: str = "") -> None:
    code = int(code)
    if code != CUDA_SUCCESS:
        name = error_name(lib, code)
        raise CudaMemoryError(
            "CUDA driver call %s%s failed: CUresult %d (%s)" % (call, detail, code, name), call=call, code=code, name=name
        )


def _load(library: str, loader: Callable[[str], Any]) -> Any:
    try:
        return loader(library)
    except OSError as err:
        raise CudaMemoryError(
            "no NVIDIA driver library: cannot load %s (%s); is the NVIDIA driver installed and is this a GPU host?"
            % (library, err)
        ) from err


def read_cuda_memory(
    device: int = 0, library: str = DEFAULT_LIBRARY, loader: Optional[Callable[[str], Any]] = None
) -> Dict[str, int]:
    """CUDA's free and total memory on `device`, as cuMemGetInfo_v2 reports them, and the driver's CUDA version.

    Returns {"cuda_free_bytes", "cuda_total_bytes", "cuda_device", "cuda_driver_version"}; the driver version is
    cuDriverGetVersion's number (13000 for CUDA 13.0). The device's primary context is released before returning,
    also when a call fails. Raises CudaMemoryError when the library cannot be loaded or a driver call fails.
    `loader` opens the library (ctypes.CDLL by default); tests pass a fake driver.
    """
    lib = _load(library, loader if loader is not None else ctypes.CDLL)
    init = _function(lib, "cuInit")
    driver_get_version = _function(lib, "cuDriverGetVersion")
    device_get = _function(lib, "cuDeviceGet")
    retain = _function(lib, "cuDevicePrimaryCtxRetain")
    release = _function(lib, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease")
    push = _function(lib, "cuCtxPushCurrent_v2", "cuCtxPushCurrent")
    pop = _function(lib, "cuCtxPopCurrent_v2", "cuCtxPopCurrent")
    mem_get_info = _function(lib, "cuMemGetInfo_v2")

    _check(lib, init[0], init[1](ctypes.c_uint(0)))
    version = ctypes.c_int(0)
    _check(lib, driver_get_version[0], driver_get_version[1](ctypes.pointer(version)))
    handle = ctypes.c_int(0)
    _check(
        lib, device_get[0], device_get[1](ctypes.pointer(handle), ctypes.c_int(int(device))), " for device %d" % int(device)
    )

    context = ctypes.c_void_p()
    _check(lib, retain[0], retain[1](ctypes.pointer(context), handle), " for device %d" % int(device))
    free = ctypes.c_size_t(0)
    total = ctypes.c_size_t(0)
    try:
        _check(lib, push[0], push[1](context))
        try:
            _check(lib, mem_get_info[0], mem_get_info[1](ctypes.pointer(free), ctypes.pointer(total)))
        finally:
            pop_code = pop[1](ctypes.pointer(ctypes.c_void_p()))
        _check(lib, pop[0], pop_code)
    finally:
        release_code = release[1](handle)
    # Reached only when every call above succeeded: a failure there is the one reported, and the context was still
    # popped and released on the way out.
    _check(lib, release[0], release_code)

    return {
        "cuda_free_bytes": int(free.value),
        "cuda_total_bytes": int(total.value),
        "cuda_device": int(device),
        "cuda_driver_version": int(version.value),
    }


def main(argv: Optional[List[str]] = None, loader: Optional[Callable[[str], Any]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Print CUDA's free and total device memory (cuMemGetInfo) as one JSON line."
    )
    parser.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    parser.add_argument("--library", default=DEFAULT_LIBRARY, help="the driver library (default %s)" % DEFAULT_LIBRARY)
    args = parser.parse_args(argv)
    try:
        figures = read_cuda_memory(device=args.device, library=args.library, loader=loader)
    except CudaMemoryError as err:
        sys.stderr.write("cuda_memory: %s\n" % err)
        return 1
    sys.stdout.write(json.dumps(figures, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
