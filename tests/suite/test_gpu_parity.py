"""Real-GPU parity: the recording flow (with a fake device) and the committed GPU fixtures.

The fake device executes each launch on the machine interpreter, so marshalling, the run loop,
record building and the fixture file are all exercised here without a GPU; only the two real
backends' driver calls are left for a machine that has one.
"""

from __future__ import annotations

import ctypes
import enum
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qgpu.driver import Kernel, load_ptx
from qgpu.errors import QgpuError, UsageError
from qgpu.suite import gpu_parity
from qgpu.suite.gpu_parity import (
    ARRAY,
    DEFAULT_OUT,
    I32,
    I64,
    CudaBindingsDevice,
    DeviceError,
    NoDevice,
    compare_record,
    fresh_records,
    load_fixtures,
    marshal_args,
    parity_summary,
    ptx_isa_version,
    ptx_sha256,
    run_parity,
    write_fixtures,
)
from qgpu.suite.runner import SUITE, by_name, first_difference
from qgpu.toolchain.ptx import ast

FIXTURES = DEFAULT_OUT
NO_FIXTURES = ("no real-GPU fixtures recorded yet (run python -m qgpu.suite.gpu_parity on a "
               "machine with an NVIDIA GPU)")


class FakeDevice:
    """A Device whose launches run on the machine interpreter, with a driver as old as asked."""

    tool = "fake"

    def __init__(self, max_isa: tuple[int, int] = (99, 0), fail: frozenset[str] = frozenset(),
                 sticky: frozenset[str] = frozenset()) -> None:
        self.max_isa = max_isa
        self.fail = fail  # kernels whose launch fails (non-sticky)
        self.sticky = sticky  # kernels whose launch loses the context
        self.memory: dict[int, np.ndarray] = {}
        self.next = 0x1000
        self.loads: list[tuple[int, int]] = []
        self.launches: list[dict[str, Any]] = []
        self.recovered = 0

    def info(self) -> dict[str, Any]:
        return {"gpu": "Fake GPU", "driver_version": "0.0", "compute_capability": "7.5"}

    def load(self, ptx: str, name: str) -> Kernel:
        version = ptx_isa_version(ptx)
        self.loads.append(version)
        if version > self.max_isa:
            raise DeviceError("cuModuleLoadData", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION")
        return load_ptx(ptx).kernel(name)

    def alloc(self, nbytes: int) -> int:
        assert nbytes > 0 and nbytes % 4 == 0
        addr, self.next = self.next, self.next + nbytes
        self.memory[addr] = np.zeros(nbytes // 4, dtype=np.int32)
        return addr

    def to_device(self, buf: int, host: np.ndarray) -> None:
        assert host.dtype == np.int32
        self.memory[buf][:host.size] = host

    def to_host(self, buf: int, host: np.ndarray) -> None:
        host[:] = self.memory[buf][:host.size]

    def free(self, buf: int) -> None:
        del self.memory[buf]

    def launch(self, fn: Kernel, grid: tuple[int, int], block: tuple[int, int],
               dynamic_shared: int, params: list[tuple[str, Any]]) -> None:
        self.launches.append({"kernel": fn.name, "grid": grid, "block": block,
                              "dynamic_shared": dynamic_shared, "params": params})
        if fn.name in self.sticky:
            raise DeviceError("cuCtxSynchronize", "CUDA_ERROR_ILLEGAL_ADDRESS")
        if fn.name in self.fail:
            raise DeviceError("cuLaunchKernel", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")
        args = [[int(v) for v in self.memory[v]] if kind == ARRAY else v for kind, v in params]
        res = fn.launch(grid=grid, block=block, args=args, dynamic_shared=dynamic_shared,
                        backend="interp")
        for (kind, buf), out in zip(params, res.args, strict=True):
            if kind == ARRAY:
                self.memory[buf][:] = out

    def synchronize(self) -> None:
        pass

    def recover(self) -> None:
        self.recovered += 1


def _intent(rec: dict[str, Any]) -> list[Any]:
    k = by_name(rec["kernel"])
    return [list(map(int, a)) if isinstance(a, list) else a for a in k.intent(rec["inputs"])]


# ---------------------------------------------------------------------------------------------
# marshalling


def _params(*types: str) -> tuple[ast.Param, ...]:
    return tuple(ast.Param(f"k_param_{i}", t, 1) for i, t in enumerate(types))


def test_marshal_types_each_parameter_by_its_ptx_width() -> None:
    m = marshal_args(_params("u64", "u64", "u32", "u64", "s32"),
                     [[1, -2, 0xFFFFFFFF], {"zeros": 2}, 0xFFFFFFFF, 7, -5])
    assert m.kinds == (ARRAY, ARRAY, I32, I64, I32)
    assert m.arrays[0].dtype == np.int32 and m.arrays[0].tolist() == [1, -2, -1]
    assert m.arrays[1].tolist() == [0, 0]
    assert m.scalars == {2: -1, 3: 7, 4: -5}


@pytest.mark.parametrize("types, args", [
    (("u32",), [[1, 2]]),           # an array for a 32-bit parameter
    (("u32",), [1 << 32]),          # too wide for 32 bits
    (("u64",), [{"zero": 1}]),      # misspelt output array
    (("u32", "u32"), [1]),          # too few arguments
    (("u16",), [1]),                # a width the GPU path does not pass
])
def test_marshal_rejects_what_the_launch_cannot_pass(types: tuple[str, ...], args: list) -> None:
    with pytest.raises(UsageError):
        marshal_args(_params(*types), args)


# ---------------------------------------------------------------------------------------------
# the whole recording flow, on the fake device


def test_recording_flow_writes_records_equal_to_the_intents(tmp_path: Path) -> None:
    names = ["axpy", "reverse_dyn", "compact", "matmul_tiled", "atomic_exch_flag"]
    device = FakeDevice(max_isa=(9, 0))  # older than the committed PTX: .version is lowered
    meta, records = run_parity(device, [by_name(n) for n in names], seeds=2)
    out = tmp_path / "sub" / "gpu_parity.json"
    write_fixtures(out, meta, records)

    text = out.read_text()
    data = json.loads(text)
    assert list(data) == ["meta", "records"]
    assert len(text.splitlines()) > len(records)  # one record per line, readable
    meta = data["meta"]
    for key in ("gpu", "driver_version", "compute_capability", "tool", "date", "ptx_sha256"):
        assert key in meta, key
    assert meta["tool"] == "fake" and meta["seeds"] == 2
    assert meta["ptx_sha256"] == {n: ptx_sha256(n) for n in names}
    assert set(meta["ptx_isa_loaded_as"]) == set(names)
    assert all(v == "9.0" for v in meta["ptx_isa_loaded_as"].values())
    assert len(device.loads) == 6 + len(names) - 1  # 9.5..9.0 once, then 9.0 straight away

    assert [(r["kernel"], r["seed"]) for r in data["records"]] == \
        [(n, s) for n in names for s in range(2)]
    for rec in data["records"]:
        assert "error" not in rec
        assert rec["args"] == _intent(rec), rec["kernel"]
        k = by_name(rec["kernel"])
        assert rec["launch"] == {"grid": list(k.grid), "block": list(k.block),
                                 "dynamic_shared": k.dynamic_shared}
        assert rec["inputs"] == k.make_args(np.random.default_rng(rec["seed"]))
        assert all(c.diff is None for c in compare_record(rec))
    assert device.memory == {}  # every buffer freed
    dyn = [la for la in device.launches if la["kernel"] == "reverse_dyn"]
    assert dyn and all(la["dynamic_shared"] == 64 for la in dyn)


def test_failures_become_error_records_and_the_run_goes_on(tmp_path: Path) -> None:
    device = FakeDevice(fail=frozenset({"fill"}), sticky=frozenset({"copy"}))
    meta, records = run_parity(device, [by_name(n) for n in ("fill", "copy", "iota")], seeds=1)
    by_kernel = {r["kernel"]: r for r in records}
    assert "LAUNCH_OUT_OF_RESOURCES" in by_kernel["fill"]["error"]
    assert "ILLEGAL_ADDRESS" in by_kernel["copy"]["error"]
    assert device.recovered == 1
    assert "error" not in by_kernel["iota"] and by_kernel["iota"]["args"] == \
        _intent(by_kernel["iota"])
    # The interpreters run fill, so its GPU error record is reported as a disagreement.
    assert all(c.diff and "GPU failed" in c.diff for c in compare_record(by_kernel["fill"]))
    path = tmp_path / "f.json"
    write_fixtures(path, meta, records)
    assert parity_summary(path) == (1, len(SUITE))


def test_stale_records_are_detected(tmp_path: Path) -> None:
    meta, records = run_parity(FakeDevice(), [by_name("iota")], seeds=1)
    meta["ptx_sha256"]["iota"] = "0" * 64
    path = tmp_path / "f.json"
    write_fixtures(path, meta, records)
    fresh, stale = fresh_records(load_fixtures(path))
    assert fresh == [] and stale == ["iota"]
    assert parity_summary(path) == (0, len(SUITE))
    assert parity_summary(tmp_path / "missing.json") == (0, len(SUITE))


def test_main_exits_2_without_a_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    def no_device(tool: str = "auto") -> None:
        raise gpu_parity.NoDevice("cuda-bindings is not importable; CuPy is not importable")

    monkeypatch.setattr(gpu_parity, "open_device", no_device)
    assert gpu_parity.main(["--out", str(tmp_path / "x.json"), "iota"]) == 2
    assert "no usable NVIDIA GPU" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_main_records_through_a_device(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(gpu_parity, "open_device", lambda tool="auto": FakeDevice())
    out = tmp_path / "g.json"
    assert gpu_parity.main(["--out", str(out), "--seeds", "1", "iota", "dot"]) == 0
    assert gpu_parity.main(["--check", str(out)]) == 0
    assert parity_summary(out) == (2, len(SUITE))


# ---------------------------------------------------------------------------------------------
# the cuda-bindings backend, against a stand-in driver module


class _Result(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222
    CUDA_ERROR_NOT_FOUND = 500


class _Attr(enum.Enum):
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class FakeDriver:
    """Stands in for ``cuda.bindings.driver``: same call shapes and (CUresult, ...) tuples;
    host memory plays device memory, so the real backend's pointer and ``void**`` handling is
    what gets tested; launches decode the parameter block and run the PTX interpreter."""

    CUresult = _Result
    CUdevice_attribute = _Attr
    CUstream = int
    OK = (_Result.CUDA_SUCCESS,)

    def __init__(self, devices: int = 1, max_isa: tuple[int, int] = (9, 0)) -> None:
        self.devices = devices
        self.max_isa = max_isa
        self.bufs: dict[int, ctypes.Array] = {}

    def cuInit(self, flags: int) -> tuple:
        return self.OK if self.devices else (_Result.CUDA_ERROR_NO_DEVICE,)

    def cuDeviceGetCount(self) -> tuple:
        return (*self.OK, self.devices)

    def cuDeviceGet(self, ordinal: int) -> tuple:
        return (*self.OK, ordinal)

    def cuDevicePrimaryCtxRetain(self, dev: int) -> tuple:
        return (*self.OK, "ctx")

    def cuCtxSetCurrent(self, ctx: str) -> tuple:
        return self.OK

    def cuGetErrorString(self, err: _Result) -> tuple:
        return (*self.OK, err.name.lower().encode())

    def cuDeviceGetName(self, n: int, dev: int) -> tuple:
        return (*self.OK, b"Fake H200".ljust(n, b"\0"))

    def cuDriverGetVersion(self) -> tuple:
        return (*self.OK, 13000)

    def cuDeviceGetAttribute(self, attr: _Attr, dev: int) -> tuple:
        return (*self.OK, 9 if attr.name.endswith("MAJOR") else 0)

    def cuModuleLoadData(self, image: bytes) -> tuple:
        assert image.endswith(b"\0")
        ptx = image[:-1].decode()
        if ptx_isa_version(ptx) > self.max_isa:
            return (_Result.CUDA_ERROR_UNSUPPORTED_PTX_VERSION, None)
        return (*self.OK, load_ptx(ptx))

    def cuModuleGetFunction(self, mod: Any, name: bytes) -> tuple:
        if name.decode() not in mod.kernel_names:
            return (_Result.CUDA_ERROR_NOT_FOUND, None)
        return (*self.OK, mod.kernel(name.decode()))

    def cuMemAlloc(self, n: int) -> tuple:
        buf = ctypes.create_string_buffer(n)
        self.bufs[ctypes.addressof(buf)] = buf
        return (*self.OK, ctypes.addressof(buf))

    def cuMemcpyHtoD(self, dst: int, src: int, n: int) -> tuple:
        ctypes.memmove(dst, src, n)
        return self.OK

    def cuMemcpyDtoH(self, dst: int, src: int, n: int) -> tuple:
        ctypes.memmove(dst, src, n)
        return self.OK

    def cuMemFree(self, addr: int) -> tuple:
        del self.bufs[addr]
        return self.OK

    def cuLaunchKernel(self, f: Kernel, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                       shared: int, stream: int, params: int, extra: int) -> tuple:
        assert gz == bz == 1 and stream == 0 and extra == 0
        ptrs = (ctypes.c_void_p * len(f.ptx.params)).from_address(params)
        args: list[Any] = []
        arrays: dict[int, np.ndarray] = {}
        for i, (p, ptr) in enumerate(zip(f.ptx.params, ptrs, strict=True)):
            if ast.type_width(p.type) == 32:
                args.append(ctypes.c_int32.from_address(ptr).value)
            elif ctypes.c_uint64.from_address(ptr).value in self.bufs:
                arrays[i] = np.frombuffer(self.bufs[ctypes.c_uint64.from_address(ptr).value],
                                          dtype=np.int32)
                args.append(arrays[i].tolist())
            else:
                args.append(ctypes.c_int64.from_address(ptr).value)
        res = f.launch(grid=(gx, gy), block=(bx, by), args=args, dynamic_shared=shared,
                       backend="ptx")
        for i, a in arrays.items():
            a[:] = res.args[i]
        return self.OK

    def cuCtxSynchronize(self) -> tuple:
        return self.OK


def test_cuda_bindings_backend_marshals_pointers_and_scalars() -> None:
    driver = FakeDriver()
    device = CudaBindingsDevice(driver=driver)
    names = ["axpy", "reverse_dyn", "histogram", "matvec_warp"]
    meta, records = run_parity(device, [by_name(n) for n in names], seeds=2)
    assert {k: meta[k] for k in ("gpu", "driver_version", "compute_capability")} == \
        {"gpu": "Fake H200", "driver_version": "13.0", "compute_capability": "9.0"}
    assert meta["tool"].startswith("cuda-bindings")
    assert set(meta["ptx_isa_loaded_as"]) == set(names)
    for rec in records:
        assert "error" not in rec, rec["error"]
        assert rec["args"] == _intent(rec), rec["kernel"]
    assert driver.bufs == {}


def test_cuda_bindings_backend_reports_cuda_errors_by_name() -> None:
    with pytest.raises(NoDevice):
        CudaBindingsDevice(driver=FakeDriver(devices=0))
    device = CudaBindingsDevice(driver=FakeDriver())
    with pytest.raises(DeviceError, match="cuModuleGetFunction: CUDA_ERROR_NOT_FOUND"):
        device.load(gpu_parity.ptx_path("iota").read_text().replace(".version 9.5",
                                                                     ".version 9.0"), "nope")
    old = CudaBindingsDevice(driver=FakeDriver(max_isa=(6, 0)))
    meta, records = run_parity(old, [by_name("iota")], seeds=1)
    assert "UNSUPPORTED_PTX_VERSION" in records[0]["error"]


# ---------------------------------------------------------------------------------------------
# the committed real-GPU fixtures


def test_interpreters_match_real_gpu_fixtures() -> None:
    if not FIXTURES.is_file():
        pytest.skip(NO_FIXTURES)
    data = load_fixtures(FIXTURES)
    fresh, stale = fresh_records(data)
    if not fresh:
        pytest.skip(f"every GPU fixture is stale (PTX changed since recording): {stale}")
    failures = []
    for rec in fresh:
        if "error" in rec:
            for c in compare_record(rec):
                if c.diff:
                    failures.append(f"{c.kernel} seed {c.seed} ({c.backend}): {c.diff}")
            continue
        module = load_ptx(gpu_parity.ptx_path(rec["kernel"]).read_text(), "committed")
        kernel = module.kernel(rec["kernel"])
        launch = rec["launch"]
        for backend in ("ptx", "interp"):
            try:
                res = kernel.launch(grid=tuple(launch["grid"]), block=tuple(launch["block"]),
                                    args=rec["inputs"], dynamic_shared=launch["dynamic_shared"],
                                    backend=backend)
            except QgpuError as e:
                failures.append(f"{rec['kernel']} seed {rec['seed']} ({backend}): the GPU ran "
                                f"it, the interpreter rejects it: {e.kind}: {e}")
                continue
            diff = first_difference(rec["args"], res.args)
            if diff:
                failures.append(f"{rec['kernel']} seed {rec['seed']} ({backend} vs GPU): {diff}")
    assert not failures, "\n".join(failures)
