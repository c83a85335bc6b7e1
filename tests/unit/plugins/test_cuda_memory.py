from __future__ import annotations

import ast
import ctypes
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sparkfleet.vllm.plugins.module_utils import cuda_memory

SCRIPT = Path(cuda_memory.__file__).resolve()
MIB = 1 << 20
GIB = 1 << 30
FREE = 120 * GIB + 12345
TOTAL = 128 * GIB
CONTEXT = 0xC0FFEE

ERROR_NAMES = {2: b"CUDA_ERROR_OUT_OF_MEMORY", 100: b"CUDA_ERROR_NO_DEVICE", 101: b"CUDA_ERROR_INVALID_DEVICE"}


class FakeDriver:
    """Behaves like libcuda's entry points: out-parameters set through ctypes pointers, CUresult codes returned.

    `fail` maps an entry point to the code it returns; `missing` names entry points the library lacks. It keeps
    the primary context's retain count and the thread's context stack, to see what a reading leaves behind.
    """

    def __init__(self, fail: dict[str, int] | None = None, missing: tuple[str, ...] = (), devices: int = 1) -> None:
        self.fail = fail or {}
        self.missing = set(missing)
        self.devices = devices
        self.calls: list[str] = []
        self.retained = 0
        self.stack: list[int] = []
        self.initialised = False

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("cu") and name in object.__getattribute__(self, "missing"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def _enter(self, name: str) -> int:
        self.calls.append(name)
        return self.fail.get(name, 0)

    def cuGetErrorName(self, code: ctypes.c_int, text: Any) -> int:  # noqa: N802
        name = ERROR_NAMES.get(code.value)
        if name is None:
            return 1
        text.contents.value = name
        return 0

    def cuInit(self, flags: ctypes.c_uint) -> int:  # noqa: N802
        assert flags.value == 0
        code = self._enter("cuInit")
        self.initialised = code == 0
        return code

    def cuDriverGetVersion(self, version: Any) -> int:  # noqa: N802
        code = self._enter("cuDriverGetVersion")
        if code == 0:
            version.contents.value = 13000
        return code

    def cuDeviceGet(self, device: Any, ordinal: ctypes.c_int) -> int:  # noqa: N802
        assert self.initialised
        code = self._enter("cuDeviceGet")
        if code == 0 and ordinal.value >= self.devices:
            return 101
        if code == 0:
            device.contents.value = ordinal.value
        return code

    def cuDevicePrimaryCtxRetain(self, context: Any, device: ctypes.c_int) -> int:  # noqa: N802
        code = self._enter("cuDevicePrimaryCtxRetain")
        if code == 0:
            self.retained += 1
            context.contents.value = CONTEXT + device.value
        return code

    def _release(self, name: str) -> int:
        code = self._enter(name)
        assert self.retained > 0, "released a context that was not retained"
        self.retained -= 1
        return code

    def cuDevicePrimaryCtxRelease_v2(self, device: ctypes.c_int) -> int:  # noqa: N802
        return self._release("cuDevicePrimaryCtxRelease_v2")

    def cuDevicePrimaryCtxRelease(self, device: ctypes.c_int) -> int:  # noqa: N802
        return self._release("cuDevicePrimaryCtxRelease")

    def cuCtxPushCurrent_v2(self, context: ctypes.c_void_p) -> int:  # noqa: N802
        code = self._enter("cuCtxPushCurrent_v2")
        if code == 0:
            assert context.value == CONTEXT, "pushed a context that was not the retained one"
            self.stack.append(context.value)
        return code

    def cuCtxPopCurrent_v2(self, context: Any) -> int:  # noqa: N802
        code = self._enter("cuCtxPopCurrent_v2")
        assert self.stack, "popped with no context current"
        context.contents.value = self.stack.pop()
        return code

    def cuMemGetInfo_v2(self, free: Any, total: Any) -> int:  # noqa: N802
        code = self._enter("cuMemGetInfo_v2")
        assert self.stack, "cuMemGetInfo with no context current"
        if code == 0:
            free.contents.value = FREE
            total.contents.value = TOTAL
        return code


def loader_of(driver: FakeDriver) -> Any:
    def load(library: str) -> FakeDriver:
        assert library == "libcuda.so.1"
        return driver

    return load


def read(driver: FakeDriver, device: int = 0) -> dict[str, int]:
    result: dict[str, int] = cuda_memory.read_cuda_memory(device=device, loader=loader_of(driver))
    return result


def test_reads_free_and_total_and_leaves_the_context_released() -> None:
    driver = FakeDriver()
    assert read(driver) == {
        "cuda_free_bytes": FREE,
        "cuda_total_bytes": TOTAL,
        "cuda_device": 0,
        "cuda_driver_version": 13000,
    }
    assert driver.calls == [
        "cuInit",
        "cuDriverGetVersion",
        "cuDeviceGet",
        "cuDevicePrimaryCtxRetain",
        "cuCtxPushCurrent_v2",
        "cuMemGetInfo_v2",
        "cuCtxPopCurrent_v2",
        "cuDevicePrimaryCtxRelease_v2",
    ]
    assert driver.retained == 0 and driver.stack == []


FAILING_CALLS = [
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGet",
    "cuDevicePrimaryCtxRetain",
    "cuCtxPushCurrent_v2",
    "cuMemGetInfo_v2",
    "cuCtxPopCurrent_v2",
    "cuDevicePrimaryCtxRelease_v2",
]


@pytest.mark.parametrize("call", FAILING_CALLS)
def test_each_failing_call_is_named_with_its_code_and_nothing_is_left_retained(call: str) -> None:
    driver = FakeDriver(fail={call: 100})
    with pytest.raises(cuda_memory.CudaMemoryError) as raised:
        read(driver)
    assert raised.value.call == call and raised.value.code == 100 and raised.value.name == "CUDA_ERROR_NO_DEVICE"
    assert f"CUDA driver call {call}" in str(raised.value)
    assert "CUresult 100 (CUDA_ERROR_NO_DEVICE)" in str(raised.value)
    assert driver.calls[-1] == call or call in {"cuCtxPushCurrent_v2", "cuMemGetInfo_v2", "cuCtxPopCurrent_v2"}
    assert driver.retained == 0 and driver.stack == []


def test_context_is_popped_and_released_when_mem_get_info_fails() -> None:
    driver = FakeDriver(fail={"cuMemGetInfo_v2": 2})
    with pytest.raises(
        cuda_memory.CudaMemoryError, match=r"cuMemGetInfo_v2 failed: CUresult 2 \(CUDA_ERROR_OUT_OF_MEMORY\)"
    ):
        read(driver)
    assert driver.calls[-3:] == ["cuMemGetInfo_v2", "cuCtxPopCurrent_v2", "cuDevicePrimaryCtxRelease_v2"]
    assert driver.retained == 0 and driver.stack == []


def test_the_first_failure_is_reported_not_a_later_cleanup_failure() -> None:
    driver = FakeDriver(fail={"cuMemGetInfo_v2": 2, "cuCtxPopCurrent_v2": 201, "cuDevicePrimaryCtxRelease_v2": 201})
    with pytest.raises(cuda_memory.CudaMemoryError) as raised:
        read(driver)
    assert raised.value.call == "cuMemGetInfo_v2" and raised.value.code == 2
    assert driver.retained == 0


def test_a_failed_push_is_not_popped_but_the_context_is_released() -> None:
    driver = FakeDriver(fail={"cuCtxPushCurrent_v2": 201})
    with pytest.raises(cuda_memory.CudaMemoryError, match="cuCtxPushCurrent_v2"):
        read(driver)
    assert "cuCtxPopCurrent_v2" not in driver.calls and "cuMemGetInfo_v2" not in driver.calls
    assert driver.calls[-1] == "cuDevicePrimaryCtxRelease_v2" and driver.retained == 0


def test_a_device_that_is_not_there_names_the_device() -> None:
    driver = FakeDriver(devices=1)
    with pytest.raises(cuda_memory.CudaMemoryError) as raised:
        read(driver, device=3)
    assert str(raised.value) == "CUDA driver call cuDeviceGet for device 3 failed: CUresult 101 (CUDA_ERROR_INVALID_DEVICE)"
    assert "cuDevicePrimaryCtxRetain" not in driver.calls


def test_error_names_without_cuGetErrorName_come_from_the_table_or_read_unknown() -> None:  # noqa: N802
    driver = FakeDriver(fail={"cuInit": 34}, missing=("cuGetErrorName",))
    with pytest.raises(cuda_memory.CudaMemoryError, match=r"CUresult 34 \(CUDA_ERROR_STUB_LIBRARY\)"):
        read(driver)
    driver = FakeDriver(fail={"cuInit": 12345})  # cuGetErrorName answers CUDA_ERROR_INVALID_VALUE for it
    with pytest.raises(cuda_memory.CudaMemoryError, match=r"CUresult 12345 \(\?\)"):
        read(driver)


def test_older_unversioned_entry_points_are_used_when_the_versioned_ones_are_missing() -> None:
    driver = FakeDriver(missing=("cuDevicePrimaryCtxRelease_v2",))
    assert read(driver)["cuda_free_bytes"] == FREE
    assert driver.calls[-1] == "cuDevicePrimaryCtxRelease" and driver.retained == 0


def test_a_library_without_cuMemGetInfo_v2_is_refused_by_name_before_any_call() -> None:  # noqa: N802
    driver = FakeDriver(missing=("cuMemGetInfo_v2",))
    with pytest.raises(cuda_memory.CudaMemoryError, match="has no cuMemGetInfo_v2"):
        read(driver)
    assert driver.calls == []


def test_a_missing_library_says_there_is_no_nvidia_driver_library() -> None:
    def missing(library: str) -> Any:
        raise OSError(f"{library}: cannot open shared object file: No such file or directory")

    with pytest.raises(cuda_memory.CudaMemoryError, match=r"^no NVIDIA driver library: cannot load libcuda\.so\.1"):
        cuda_memory.read_cuda_memory(loader=missing)
    # and through ctypes itself, with a library that is not there
    with pytest.raises(cuda_memory.CudaMemoryError, match="no NVIDIA driver library"):
        cuda_memory.read_cuda_memory(library="/nonexistent/libcuda.so.1")


def test_main_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cuda_memory.main(["--device", "0"], loader=loader_of(FakeDriver())) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert json.loads(out) == {
        "cuda_device": 0,
        "cuda_driver_version": 13000,
        "cuda_free_bytes": FREE,
        "cuda_total_bytes": TOTAL,
    }


def test_main_exits_1_with_the_error_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert cuda_memory.main(["--device", "5"], loader=loader_of(FakeDriver())) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        captured.err
        == "cuda_memory: CUDA driver call cuDeviceGet for device 5 failed: CUresult 101 (CUDA_ERROR_INVALID_DEVICE)\n"
    )


def test_the_file_runs_as_a_standalone_script_with_the_standard_library_only(tmp_path: Path) -> None:
    tree = ast.parse(SCRIPT.read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
    # a copy outside the collection, as the roles put it on a host
    copy = tmp_path / "cuda_memory.py"
    copy.write_text(SCRIPT.read_text())
    done = subprocess.run(
        [sys.executable, "-I", str(copy), "--library", str(tmp_path / "libcuda.so.1")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("cuda_memory: no NVIDIA driver library: cannot load")


# The recorded run on a real GPU (tests/fixtures/nvidia-h100-driver580/README.md says how it was made).


def recorded_blocks(text: str) -> list[tuple[str, list[str], int]]:
    """(command, output lines, exit status) for each `$ command` ... `[exit N]` block of the recording."""
    blocks = []
    command = None
    lines: list[str] = []
    for line in text.splitlines():
        if command is None and line.startswith("$ "):
            command, lines = line[2:], []
        elif command is not None and (match := re.fullmatch(r"\[exit (\d+)\]", line)):
            blocks.append((command, lines, int(match.group(1))))
            command = None
        elif command is not None:
            lines.append(line)
    return blocks


def torch_pair(line: str) -> tuple[int, int]:
    """torch.cuda.mem_get_info()'s printed (free, total)."""
    match = re.fullmatch(r"\((\d+), (\d+)\)", line)
    assert match, line
    return int(match.group(1)), int(match.group(2))


def test_recorded_h100_reader_agrees_with_torch_and_drops_by_an_allocation(fixtures: Path) -> None:
    blocks = recorded_blocks((fixtures / "nvidia-h100-driver580" / "cuda-memory.txt").read_text())
    reader = "python3 plugins/module_utils/cuda_memory.py"
    readings = [json.loads(lines[0]) for command, lines, status in blocks if command.endswith(reader) and status == 0]
    torch = [
        torch_pair(lines[0]) for command, lines, status in blocks if "torch.cuda.mem_get_info()" in command and status == 0
    ]
    assert len(readings) == 3 and len(torch) == 2  # idle, while 8 GiB are held, after they are let go
    idle, held, after = readings
    for ours, (torch_free, torch_total) in zip((idle, held), torch, strict=True):
        assert set(ours) == {"cuda_free_bytes", "cuda_total_bytes", "cuda_device", "cuda_driver_version"}
        assert abs(ours["cuda_free_bytes"] - torch_free) <= 64 * MIB
        assert abs(ours["cuda_total_bytes"] - torch_total) <= 64 * MIB
    assert idle["cuda_driver_version"] == 13000 and idle["cuda_device"] == 0
    # The 8 GiB tensor plus the holding process's own CUDA context (some hundreds of MiB) are gone from free.
    drop = idle["cuda_free_bytes"] - held["cuda_free_bytes"]
    assert 8 * GIB <= drop <= 8 * GIB + GIB
    assert abs(after["cuda_free_bytes"] - idle["cuda_free_bytes"]) <= 64 * MIB
    # The real driver's failure for a device that is not there, and the primary context inactive after a reading.
    failed = [lines for command, lines, status in blocks if command.endswith(reader + " --device 7")]
    assert failed == [
        ["cuda_memory: CUDA driver call cuDeviceGet for device 7 failed: CUresult 101 (CUDA_ERROR_INVALID_DEVICE)"]
    ]
    state = [line for _, lines, _ in blocks for line in lines if line.startswith("cuDevicePrimaryCtxGetState")]
    assert state == ["cuDevicePrimaryCtxGetState 0 active 0"]
