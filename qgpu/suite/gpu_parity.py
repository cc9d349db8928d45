"""Real-GPU parity: run the suite's committed PTX on an NVIDIA GPU and record the outputs.

    python -m qgpu.suite.gpu_parity [--out tests/fixtures/gpu_parity.json] [--seeds 3] [names...]
    python -m qgpu.suite.gpu_parity --check tests/fixtures/gpu_parity.json

The interpreters are only as trustworthy as the oracle they are checked against; the intent
models are hand-written, so a real GPU running the *same PTX* is the independent witness. The
fixture file it writes is compared with both interpreters by tests/suite/test_gpu_parity.py, on any
machine, long after the GPU is gone.

The code is split so everything but the device calls runs (and is tested) without a GPU:
argument marshalling and record building (pure), the run loop (takes any ``Device``), and two
device backends: ``cuda-bindings`` (the driver API) and CuPy as a fallback. Exit status: 0
written, 1 some kernel failed on the GPU (still written), 2 no usable GPU or Python binding.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from qgpu.driver import SUITE_DIR, load_ptx
from qgpu.errors import QgpuError, UsageError
from qgpu.suite.manifest import SUITE, SuiteKernel, by_name
from qgpu.toolchain.ptx import ast
from qgpu.toolchain.ptx.interp import find_kernel
from qgpu.toolchain.ptx.parser import parse_module

PTX_DIR = SUITE_DIR / "ptx"
DEFAULT_OUT = SUITE_DIR.parent / "tests" / "fixtures" / "gpu_parity.json"
NO_GPU_EXIT = 2

# Parameter kinds: a device pointer to an int32 array, or a scalar of the parameter's width.
ARRAY, I32, I64 = "array", "i32", "i64"


class DeviceError(RuntimeError):
    """A failed device call: ``code`` is the CUresult name, so records say exactly what failed."""

    def __init__(self, what: str, code: str, detail: str = "") -> None:
        super().__init__(f"{what}: {code}" + (f" ({detail})" if detail else ""))
        self.code = code

    @property
    def unsupported_ptx_version(self) -> bool:
        return "UNSUPPORTED_PTX_VERSION" in self.code

    @property
    def sticky(self) -> bool:
        """Errors after which CUDA refuses all further work in the context."""
        return any(s in self.code for s in _STICKY)


_STICKY = ("ILLEGAL_ADDRESS", "LAUNCH_FAILED", "MISALIGNED_ADDRESS", "ILLEGAL_INSTRUCTION",
           "HARDWARE_STACK_ERROR", "INVALID_ADDRESS_SPACE", "INVALID_PC", "LAUNCH_TIMEOUT",
           "ASSERT", "ECC_UNCORRECTABLE", "CONTEXT_IS_DESTROYED")


class NoDevice(RuntimeError):
    """No Python binding, no driver or no GPU: the run cannot start (exit status 2)."""


# ---------------------------------------------------------------------------------------------
# (a) marshalling and records: pure, no device


@dataclass(frozen=True)
class Marshalled:
    """A launch's arguments in device form: one kind per parameter, host arrays, scalars."""

    kinds: tuple[str, ...]
    arrays: dict[int, np.ndarray]  # parameter index -> int32 host buffer (initial contents)
    scalars: dict[int, int]  # parameter index -> value, in the signed range of its width


def _word(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise UsageError(f"{where}: expected an integer, got {v!r}")
    if not -(1 << 31) <= v < 1 << 32:
        raise UsageError(f"{where}: {v} does not fit in 32 bits")
    return v - (1 << 32) if v >= 1 << 31 else v


def marshal_args(params: Sequence[ast.Param], args: list[Any]) -> Marshalled:
    """JSON args -> int32 host buffers and scalar values, typed by the PTX ``.param`` widths.

    An array must meet a 64-bit parameter (a pointer); a scalar given to a ``.u64``/``.s64``
    parameter is passed as a 64-bit integer, to a 32-bit one as an int32.
    """
    if len(args) != len(params):
        raise UsageError(f"the kernel takes {len(params)} parameters, {len(args)} args were given")
    kinds: list[str] = []
    arrays: dict[int, np.ndarray] = {}
    scalars: dict[int, int] = {}
    for i, (p, arg) in enumerate(zip(params, args, strict=True)):
        width = ast.type_width(p.type)
        if width not in (32, 64):
            raise UsageError(f"parameter {i} ({p.name}) is .{p.type}: only 32- and 64-bit "
                             "parameters are passed")
        if isinstance(arg, dict | list):
            if width != 64:
                raise UsageError(f"argument {i}: an array was given for the 32-bit parameter "
                                 f"{p.name}")
            if isinstance(arg, dict):
                if set(arg) != {"zeros"} or not isinstance(arg["zeros"], int) \
                        or arg["zeros"] < 0:
                    raise UsageError(f"argument {i}: an output array is written "
                                     '{"zeros": n} with n >= 0')
                arrays[i] = np.zeros(arg["zeros"], dtype=np.int32)
            else:
                arrays[i] = np.array([_word(v, f"argument {i}[{j}]") for j, v in enumerate(arg)],
                                     dtype=np.int32)
            kinds.append(ARRAY)
        elif width == 64:
            if isinstance(arg, bool) or not isinstance(arg, int) \
                    or not -(1 << 63) <= arg < 1 << 64:
                raise UsageError(f"argument {i}: expected a 64-bit integer, got {arg!r}")
            scalars[i] = arg - (1 << 64) if arg >= 1 << 63 else arg
            kinds.append(I64)
        else:
            scalars[i] = _word(arg, f"argument {i}")
            kinds.append(I32)
    return Marshalled(tuple(kinds), arrays, scalars)


def final_args(args: list[Any], outputs: dict[int, np.ndarray]) -> list[Any]:
    """Every parameter's final value as the intents give it: int32 lists, scalars unchanged."""
    return [[int(v) for v in outputs[i]] if i in outputs else a for i, a in enumerate(args)]


def build_record(k: SuiteKernel, seed: int, inputs: list[Any], *,
                 outputs: dict[int, np.ndarray] | None = None,
                 error: str | None = None) -> dict[str, Any]:
    """One fixture record; the launch and inputs are stored so the record replays on its own,
    even after the manifest's generators change."""
    rec: dict[str, Any] = {
        "kernel": k.name, "seed": seed, "inputs": inputs,
        "launch": {"grid": list(k.grid), "block": list(k.block),
                   "dynamic_shared": k.dynamic_shared},
    }
    if error is not None:
        rec["error"] = error
    else:
        rec["args"] = final_args(inputs, outputs or {})
    return rec


def ptx_path(name: str) -> Path:
    return PTX_DIR / f"{name}.ptx"


def ptx_sha256(name: str) -> str:
    """Hash of the committed PTX bytes: a fixture recorded from other PTX is stale."""
    return hashlib.sha256(ptx_path(name).read_bytes()).hexdigest()


_VERSION = re.compile(r"^(\s*\.version\s+)(\d+)\.(\d+)", re.MULTILINE)


def ptx_isa_version(ptx: str) -> tuple[int, int]:
    m = _VERSION.search(ptx)
    if not m:
        raise UsageError("the PTX has no .version directive")
    return int(m.group(2)), int(m.group(3))


def with_isa_version(ptx: str, version: tuple[int, int]) -> str:
    """The same PTX under an older ``.version`` header (for a driver older than NVRTC)."""
    return _VERSION.sub(lambda m: f"{m.group(1)}{version[0]}.{version[1]}", ptx, count=1)


def older_isa_versions(version: tuple[int, int], floor: tuple[int, int] = (7, 0)) \
        -> list[tuple[int, int]]:
    """PTX ISA versions below ``version``, newest first, down to ``floor`` (sm_75 needs 6.3+)."""
    out = []
    major, minor = version
    while (major, minor) > floor:
        minor -= 1
        if minor < 0:
            major, minor = major - 1, 9
        out.append((major, minor))
    return out


def dump_fixtures(meta: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """Sorted-key JSON, metadata indented and one record per line: readable and diffable."""
    lines = ["{", f'"meta": {json.dumps(meta, sort_keys=True, indent=1)},', '"records": [']
    body = [json.dumps(r, sort_keys=True) for r in records]
    lines.append(",\n".join(body))
    lines.append("]}")
    return "\n".join(lines) + "\n"


def load_fixtures(path: Path) -> dict[str, Any]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or set(data) != {"meta", "records"}:
        raise UsageError(f"{path}: expected an object with 'meta' and 'records'")
    return data


# ---------------------------------------------------------------------------------------------
# (b) the device protocol and the run loop


class Device(Protocol):
    """What the run loop needs from a GPU binding (a fake one runs the interpreter in tests)."""

    tool: str

    def info(self) -> dict[str, Any]: ...  # gpu, driver_version, compute_capability
    def load(self, ptx: str, name: str) -> Any: ...  # a launchable function handle
    def alloc(self, nbytes: int) -> Any: ...
    def to_device(self, buf: Any, host: np.ndarray) -> None: ...
    def launch(self, fn: Any, grid: tuple[int, int], block: tuple[int, int],
               dynamic_shared: int, params: list[tuple[str, Any]]) -> None: ...
    def synchronize(self) -> None: ...
    def to_host(self, buf: Any, host: np.ndarray) -> None: ...
    def free(self, buf: Any) -> None: ...
    def recover(self) -> None: ...  # a fresh context after a sticky error (modules are lost)


class _Loader:
    """Loads each kernel's PTX once; lowers ``.version`` when the driver's JIT is older."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.cache: dict[str, Any] = {}
        self.rewrites: dict[str, str] = {}  # kernel -> ISA version it was loaded as
        self._works: tuple[int, int] | None = None  # newest version this driver accepted
        self._rejected: set[tuple[int, int]] = set()  # versions this driver refused

    def function(self, name: str, entry: str, ptx: str) -> Any:
        if name in self.cache:
            return self.cache[name]
        version = ptx_isa_version(ptx)
        if version in self._rejected:
            fn = self._load_older(name, entry, ptx, None)
        else:
            try:
                fn = self.device.load(ptx, entry)
            except DeviceError as e:
                if not e.unsupported_ptx_version:
                    raise
                self._rejected.add(version)
                fn = self._load_older(name, entry, ptx, e)
        self.cache[name] = fn
        return fn

    def _load_older(self, name: str, entry: str, ptx: str, first: DeviceError | None) -> Any:
        tries = older_isa_versions(ptx_isa_version(ptx))
        if self._works in tries:
            tries.remove(self._works)
            tries.insert(0, self._works)
        for version in tries:
            try:
                fn = self.device.load(with_isa_version(ptx, version), entry)
            except DeviceError as e:
                if e.unsupported_ptx_version:
                    self._rejected.add(version)
                    first = first or e
                    continue
                raise
            self._works = version
            self.rewrites[name] = f"{version[0]}.{version[1]}"
            return fn
        raise first or DeviceError("cuModuleLoadData", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
                                   "no PTX ISA version from the file's down to 7.0 was accepted")


def run_kernel(device: Device, loader: _Loader, k: SuiteKernel, seed: int,
               parsed: ast.Module, ptx: str) -> dict[str, Any]:
    """One kernel, one seed: copy in, launch, synchronize, copy every array back."""
    inputs = k.make_args(np.random.default_rng(seed))
    kernel = find_kernel(parsed, k.name)
    m = marshal_args(kernel.params, inputs)
    bufs: dict[int, Any] = {}
    try:
        fn = loader.function(k.name, kernel.name, ptx)
        for i, host in m.arrays.items():
            bufs[i] = device.alloc(max(4, host.nbytes))
            if host.size:
                device.to_device(bufs[i], host)
        params = [(kind, bufs[i] if kind == ARRAY else m.scalars[i])
                  for i, kind in enumerate(m.kinds)]
        device.launch(fn, k.grid, k.block, k.dynamic_shared, params)
        device.synchronize()
        outputs = {i: np.empty_like(host) for i, host in m.arrays.items()}
        for i, out in outputs.items():
            if out.size:
                device.to_host(bufs[i], out)
    except DeviceError as e:
        if e.sticky:
            raise
        return build_record(k, seed, inputs, error=str(e))
    finally:
        for buf in bufs.values():
            try:
                device.free(buf)
            except DeviceError:
                pass  # the run goes on; a leak of a few bytes is harmless
    return build_record(k, seed, inputs, outputs=outputs)


def run_parity(device: Device, kernels: Iterable[SuiteKernel], seeds: int,
               log: Callable[[str], None] = lambda s: None) -> tuple[dict[str, Any],
                                                                      list[dict[str, Any]]]:
    """Run every kernel on every seed; a failing kernel becomes an error record, not an abort."""
    kernels = list(kernels)
    loader = _Loader(device)
    records: list[dict[str, Any]] = []
    lost: str | None = None
    for k in kernels:
        ptx = ptx_path(k.name).read_text(encoding="utf-8")
        parsed = parse_module(ptx)
        for seed in range(seeds):
            if lost:
                records.append(build_record(k, seed, k.make_args(np.random.default_rng(seed)),
                                            error=lost))
                continue
            try:
                rec = run_kernel(device, loader, k, seed, parsed, ptx)
            except DeviceError as e:  # sticky: the context is gone
                rec = build_record(k, seed, k.make_args(np.random.default_rng(seed)),
                                   error=str(e))
                lost = _recover(device, loader, k.name)
            records.append(rec)
            log(f"{k.name:24} seed {seed}: {rec.get('error', 'ok')}")
    meta = dict(device.info(), tool=device.tool, seeds=seeds,
                date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                ptx_sha256={k.name: ptx_sha256(k.name) for k in kernels},
                ptx_isa_loaded_as=loader.rewrites,
                generator="python -m qgpu.suite.gpu_parity")
    return meta, records


def _recover(device: Device, loader: _Loader, culprit: str) -> str | None:
    """A fresh context after a sticky error; the message for the rest if that fails too."""
    loader.cache.clear()
    try:
        device.recover()
        probe = np.arange(4, dtype=np.int32)
        buf = device.alloc(probe.nbytes)
        device.to_device(buf, probe)
        back = np.empty_like(probe)
        device.to_host(buf, back)
        device.free(buf)
        if np.array_equal(probe, back):
            return None
    except DeviceError:
        pass
    return (f"not run: the CUDA context was lost after {culprit}'s error; rerun "
            f"python -m qgpu.suite.gpu_parity without {culprit}")


def write_fixtures(path: Path, meta: dict[str, Any], records: list[dict[str, Any]]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = dump_fixtures(meta, records)
    json.loads(text)  # never write a file the test cannot read
    path.write_text(text, encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# comparison with the interpreters (used by the test, --check and docs)


@dataclass(frozen=True)
class Comparison:
    """One record against one interpreter: ``diff`` is None when they agree."""

    kernel: str
    seed: int
    backend: str
    diff: str | None


def compare_record(rec: dict[str, Any], backends: Sequence[str] = ("ptx", "interp")) \
        -> list[Comparison]:
    """Replay a record's inputs on the interpreters and say where each differs from the GPU.

    An error record agrees when the interpreter rejects the launch too.
    """
    from qgpu.suite.runner import first_difference

    module = load_ptx(ptx_path(rec["kernel"]).read_text(encoding="utf-8"), "committed")
    kernel = module.kernel(rec["kernel"])
    launch = rec["launch"]
    out = []
    for backend in backends:
        try:
            res = kernel.launch(grid=tuple(launch["grid"]), block=tuple(launch["block"]),
                                args=rec["inputs"], dynamic_shared=launch["dynamic_shared"],
                                backend=backend)
        except QgpuError as e:
            diff = None if "error" in rec else f"the interpreter rejects it: {e.kind}: {e}"
        else:
            if "error" in rec:
                diff = f"the GPU failed ({rec['error']}) but the interpreter ran it"
            else:
                diff = first_difference(rec["args"], res.args)
        out.append(Comparison(rec["kernel"], rec["seed"], backend, diff))
    return out


def fresh_records(data: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Records whose kernel's committed PTX is unchanged since recording; and the stale kernels."""
    hashes = data["meta"].get("ptx_sha256", {})
    fresh, stale = [], set()
    for rec in data["records"]:
        name = rec["kernel"]
        if ptx_path(name).is_file() and hashes.get(name) == ptx_sha256(name):
            fresh.append(rec)
        else:
            stale.add(name)
    return fresh, sorted(stale)


def parity_summary(path: Path = DEFAULT_OUT) -> tuple[int, int]:
    """(suite kernels whose fresh GPU records all match both interpreters, suite kernels).

    A kernel with no fresh record does not count as matching; a missing file gives (0, total).
    """
    total = len(SUITE)
    if not Path(path).is_file():
        return 0, total
    fresh, _ = fresh_records(load_fixtures(Path(path)))
    ok: dict[str, bool] = {}
    suite_names = {k.name for k in SUITE}
    for rec in fresh:
        if rec["kernel"] in suite_names:
            agree = all(c.diff is None for c in compare_record(rec))
            ok[rec["kernel"]] = ok.get(rec["kernel"], True) and agree
    return sum(ok.values()), total


# ---------------------------------------------------------------------------------------------
# device backends


class CudaBindingsDevice:
    """The CUDA driver API through ``cuda-bindings``: primary context on device 0."""

    def __init__(self, ordinal: int = 0, driver: Any = None) -> None:
        if driver is None:  # tests pass a stand-in module
            try:
                from cuda.bindings import driver
            except ImportError:
                from cuda import cuda as driver  # cuda-python before 12.6 named it so
        self.cu = driver
        self.tool = f"cuda-bindings {_dist_version('cuda-bindings', 'cuda-python')}"
        try:
            self._check(driver.cuInit(0), "cuInit")
        except DeviceError as e:
            raise NoDevice(f"the CUDA driver did not initialise: {e}") from None
        except Exception as e:  # the binding raises when libcuda.so is absent
            raise NoDevice(f"no NVIDIA driver (libcuda) found: {e}") from None
        count = self._check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
        if count <= ordinal:
            raise NoDevice(f"the driver sees {count} CUDA device(s)")
        self.dev = self._check(driver.cuDeviceGet(ordinal), "cuDeviceGet")
        self._retain()

    def _retain(self) -> None:
        self.ctx = self._check(self.cu.cuDevicePrimaryCtxRetain(self.dev),
                               "cuDevicePrimaryCtxRetain")
        self._check(self.cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    def _check(self, result: Any, what: str) -> Any:
        """Unpack a binding's (CUresult, values...) tuple; raise DeviceError on failure."""
        result = result if isinstance(result, tuple) else (result,)
        err, rest = result[0], result[1:]
        if err != self.cu.CUresult.CUDA_SUCCESS:
            name = getattr(err, "name", str(err))
            _, detail = self.cu.cuGetErrorString(err)
            raise DeviceError(what, name, detail.decode() if isinstance(detail, bytes) else "")
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else rest

    def info(self) -> dict[str, Any]:
        cu = self.cu
        name = self._check(cu.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        ver = self._check(cu.cuDriverGetVersion(), "cuDriverGetVersion")
        attr = cu.CUdevice_attribute
        major = self._check(cu.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.dev), "cuDeviceGetAttribute")
        minor = self._check(cu.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.dev), "cuDeviceGetAttribute")
        return {"gpu": name.split(b"\0", 1)[0].decode(),
                "driver_version": f"{ver // 1000}.{ver % 1000 // 10}",
                "compute_capability": f"{major}.{minor}"}

    def load(self, ptx: str, name: str) -> Any:
        mod = self._check(self.cu.cuModuleLoadData(ptx.encode() + b"\0"), "cuModuleLoadData")
        return self._check(self.cu.cuModuleGetFunction(mod, name.encode()), "cuModuleGetFunction")

    def alloc(self, nbytes: int) -> Any:
        return self._check(self.cu.cuMemAlloc(nbytes), "cuMemAlloc")

    def to_device(self, buf: Any, host: np.ndarray) -> None:
        self._check(self.cu.cuMemcpyHtoD(buf, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")

    def to_host(self, buf: Any, host: np.ndarray) -> None:
        self._check(self.cu.cuMemcpyDtoH(host.ctypes.data, buf, host.nbytes), "cuMemcpyDtoH")

    def free(self, buf: Any) -> None:
        self._check(self.cu.cuMemFree(buf), "cuMemFree")

    def launch(self, fn: Any, grid: tuple[int, int], block: tuple[int, int],
               dynamic_shared: int, params: list[tuple[str, Any]]) -> None:
        # void** kernelParams: one pointer per parameter to a value of exactly its width.
        values: list[Any] = []
        for kind, v in params:
            if kind == ARRAY:
                values.append(ctypes.c_uint64(int(v)))
            elif kind == I64:
                values.append(ctypes.c_int64(v))
            else:
                values.append(ctypes.c_int32(v))
        ptrs = (ctypes.c_void_p * max(1, len(values)))(
            *[ctypes.addressof(v) for v in values])
        self._check(self.cu.cuLaunchKernel(fn, grid[0], grid[1], 1, block[0], block[1], 1,
                                           dynamic_shared, self.cu.CUstream(0),
                                           ctypes.addressof(ptrs), 0),
                    "cuLaunchKernel")

    def synchronize(self) -> None:
        self._check(self.cu.cuCtxSynchronize(), "cuCtxSynchronize")

    def recover(self) -> None:
        self._check(self.cu.cuDevicePrimaryCtxRelease(self.dev), "cuDevicePrimaryCtxRelease")
        self._check(self.cu.cuDevicePrimaryCtxReset(self.dev), "cuDevicePrimaryCtxReset")
        self._retain()


class CupyDevice:
    """The fallback: CuPy's RawModule loads the PTX file, RawKernel launches it."""

    def __init__(self) -> None:
        try:
            import cupy
        except ImportError:
            raise
        except Exception as e:  # CuPy raises other errors when its CUDA libraries are broken
            raise NoDevice(f"CuPy did not import: {e}") from None
        self.cp = cupy
        self._errors: tuple[type[BaseException], ...] = (
            cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError)
        self.tool = f"cupy {cupy.__version__}"
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:
            raise NoDevice(f"CuPy finds no CUDA device: {e}") from None
        if count < 1:
            raise NoDevice("CuPy finds no CUDA device")
        self._modules: list[Any] = []  # RawModules must outlive their kernels' launches

    def _call(self, what: str, f: Callable[[], Any]) -> Any:
        try:
            return f()
        except self._errors as e:
            text = str(e)
            code = text.split(":", 1)[0].strip() or type(e).__name__
            raise DeviceError(what, code, text) from None

    def info(self) -> dict[str, Any]:
        rt = self.cp.cuda.runtime
        props = rt.getDeviceProperties(0)
        ver = rt.driverGetVersion()
        name = props["name"]
        return {"gpu": name.decode() if isinstance(name, bytes) else str(name),
                "driver_version": f"{ver // 1000}.{ver % 1000 // 10}",
                "compute_capability": f"{props['major']}.{props['minor']}"}

    def load(self, ptx: str, name: str) -> Any:
        fd, tmp = tempfile.mkstemp(suffix=".ptx")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(ptx)
            mod = self._call("RawModule", lambda: self.cp.RawModule(path=tmp))
            fn = self._call("get_function", lambda: mod.get_function(name))
        finally:
            os.unlink(tmp)
        self._modules.append(mod)
        return fn

    def alloc(self, nbytes: int) -> Any:
        return self._call("alloc", lambda: self.cp.zeros(nbytes // 4, dtype=self.cp.int32))

    def to_device(self, buf: Any, host: np.ndarray) -> None:
        self._call("copy to device", lambda: buf.set(host))

    def to_host(self, buf: Any, host: np.ndarray) -> None:
        host[:] = self._call("copy to host", lambda: buf.get())[:host.size]

    def free(self, buf: Any) -> None:
        pass  # CuPy's memory pool frees when the array is dropped

    def launch(self, fn: Any, grid: tuple[int, int], block: tuple[int, int],
               dynamic_shared: int, params: list[tuple[str, Any]]) -> None:
        args = tuple(v if kind == ARRAY else (np.int64(v) if kind == I64 else np.int32(v))
                     for kind, v in params)
        self._call("launch", lambda: fn((grid[0], grid[1], 1), (block[0], block[1], 1), args,
                                        shared_mem=dynamic_shared))

    def synchronize(self) -> None:
        self._call("synchronize", lambda: self.cp.cuda.runtime.deviceSynchronize())

    def recover(self) -> None:
        self._call("deviceReset", lambda: self.cp.cuda.runtime.deviceReset())
        self._modules.clear()


def _dist_version(*dists: str) -> str:
    """The installed version of the first distribution found, for the fixture's metadata."""
    from importlib.metadata import PackageNotFoundError, version

    for dist in dists:
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "unknown version"


def open_device(tool: str = "auto") -> Device:
    """cuda-bindings first, CuPy if that is not installed; NoDevice if neither gives a GPU."""
    reasons = []
    if tool in ("auto", "cuda-bindings"):
        try:
            return CudaBindingsDevice()
        except ImportError as e:
            reasons.append(f"cuda-bindings is not importable ({e})")
        except NoDevice as e:
            if tool == "cuda-bindings":
                raise
            reasons.append(f"cuda-bindings: {e}")
    if tool in ("auto", "cupy"):
        try:
            return CupyDevice()
        except ImportError as e:
            reasons.append(f"CuPy is not importable ({e})")
        except NoDevice as e:
            reasons.append(f"CuPy: {e}")
    raise NoDevice("; ".join(reasons) or f"unknown tool {tool!r}")


# ---------------------------------------------------------------------------------------------
# command line


def check_file(path: Path) -> int:
    """Print how a fixture file compares with both interpreters; 1 if anything differs."""
    data = load_fixtures(path)
    fresh, stale = fresh_records(data)
    meta = data["meta"]
    print(f"{path}: {meta.get('gpu')} (sm {meta.get('compute_capability')}, driver "
          f"{meta.get('driver_version')}, {meta.get('tool')}, {meta.get('date')})")
    bad = 0
    for rec in fresh:
        for c in compare_record(rec):
            if c.diff:
                bad += 1
                print(f"  {c.kernel} seed {c.seed} vs {c.backend}: {c.diff}")
    errors = sum("error" in r for r in data["records"])
    matching, total = parity_summary(path)
    print(f"{matching}/{total} suite kernels match the GPU on both interpreters; "
          f"{len(fresh)} fresh records, {errors} GPU errors, stale: {', '.join(stale) or 'none'}")
    return 1 if bad or stale else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qgpu.suite.gpu_parity",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="suite kernels (default: all)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tool", choices=("auto", "cuda-bindings", "cupy"), default="auto")
    parser.add_argument("--check", type=Path, metavar="FIXTURES",
                        help="compare a fixture file with the interpreters; needs no GPU")
    parser.add_argument("-v", "--verbose", action="store_true")
    ns = parser.parse_args(argv)
    if ns.check:
        return check_file(ns.check)
    try:
        kernels = [by_name(n) for n in ns.names] if ns.names else list(SUITE)
    except KeyError as e:
        parser.error(str(e.args[0]))
    try:
        device = open_device(ns.tool)
    except NoDevice as e:
        print(f"gpu_parity: no usable NVIDIA GPU: {e}", file=sys.stderr)
        return NO_GPU_EXIT
    meta, records = run_parity(device, kernels, ns.seeds,
                               log=(lambda s: print(s, file=sys.stderr)) if ns.verbose
                               else (lambda s: None))
    write_fixtures(ns.out, meta, records)
    errors = [r for r in records if "error" in r]
    rewrites = meta["ptx_isa_loaded_as"]
    print(f"{meta['gpu']} (sm {meta['compute_capability']}, driver {meta['driver_version']}, "
          f"{meta['tool']}): {len(records)} runs of {len(kernels)} kernels, {len(errors)} errors"
          f"{f'; PTX .version lowered for {len(rewrites)} kernels' if rewrites else ''}"
          f" -> {ns.out}")
    for r in errors:
        print(f"  {r['kernel']} seed {r['seed']}: {r['error']}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
