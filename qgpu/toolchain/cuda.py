"""CUDA C++ source -> PTX text with whatever compiler this machine has.

The host plays NVRTC: users write CUDA, we hand the PTX to the lowering. Preference order is
NVRTC from the pip wheel (in-process, no headers, no host compiler), then ``nvcc``, then clang
with the shipped ``cuda_clang.h`` (the only route on macOS). Every route targets compute_75 at
full optimisation: that is the PTX subset the lowering accepts (-G, -O0 and --Ofast-compile give
call.uni wrappers and generic loads; sm_100+ switches NVRTC to a different backend).
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from qgpu.errors import CompileError, UsageError

NVRTC_WHEEL = "nvidia-cuda-nvrtc==13.5.37"
COMPILERS = ("nvrtc", "nvcc", "clang")

# No -default-device: a source that NVRTC accepts must also compile with nvcc and clang, which
# have no such switch. c++17 is the default of NVRTC/nvcc 13 but not of clang-14: say it.
NVRTC_OPTIONS = ("--gpu-architecture=compute_75", "--std=c++17")
NVCC_OPTIONS = ("--ptx", "-arch=sm_75", "-O3", "-std=c++17")
CLANG_OPTIONS = (
    "-x", "cuda", "--cuda-device-only", "--cuda-gpu-arch=sm_75", "--cuda-path=/nonexistent",
    "-nocudainc", "-nocudalib", "-std=c++17", "-O3", "-S",
)  # fmt: skip
# The PTX ISA 6.4 feature (shfl.sync and votes need >= 6.0); spelled per clang version.
CLANG_PTX_FEATURE = (
    ("--cuda-feature=+ptx64",),
    ("-Xclang", "-target-feature", "-Xclang", "+ptx64"),
)
CLANG_HEADER = Path(__file__).with_name("cuda_clang.h")
SUBPROCESS_TIMEOUT_S = 300

_NVRTC_SUCCESS = 0
_NVRTC_ERROR_COMPILATION = 6
_CLANG_PROBE = (
    'extern "C" __global__ void probe(int *p) '
    "{ p[threadIdx.x] = __shfl_down_sync(0xffffffffu, p[0], 1, 4); }\n"
)

_DISCOVERY_LOCK = threading.Lock()
# NVRTC promises nothing about concurrent compilations; ~20-50 ms each, so serialise them.
_NVRTC_LOCK = threading.Lock()


@dataclass(frozen=True)
class PtxResult:
    """PTX text plus which toolchain made it (PTX differs between compilers and versions)."""

    ptx: str
    compiler: str  # "nvrtc" | "nvcc" | "clang"
    version: str
    log: str  # warnings; empty when the compiler said nothing


@dataclass(frozen=True)
class _Nvrtc:
    lib: ctypes.CDLL
    version: str  # major.minor from nvrtcVersion


@dataclass(frozen=True)
class _Clang:
    path: str
    version: str
    feature: tuple[str, ...]


def available_compilers() -> list[str]:
    """Names of the usable compilers, in the order ``compiler="auto"`` tries them."""
    return [name for name in COMPILERS if _discover(name) is not None]


def compile_cuda(source: str, *, filename: str = "kernel.cu", compiler: str = "auto") -> PtxResult:
    """Compile CUDA C++ to PTX for compute_75; errors carry the compiler's log and lines.

    ``filename`` is the name the compiler's messages use. ``compiler`` is "auto" or one of
    ``COMPILERS``; an explicitly requested compiler that is missing is an error, not a fallback.
    """
    if compiler == "auto":
        for name in COMPILERS:
            tool = _discover(name)
            if tool is not None:
                return _compile_with(tool, source, filename)
        raise CompileError(_install_message())
    if compiler not in COMPILERS:
        raise UsageError(
            f"unknown compiler {compiler!r}: use 'auto' or one of {', '.join(COMPILERS)}"
        )
    tool = _discover(compiler)
    if tool is None:
        raise CompileError(f"compiler {compiler!r} is not available: {_missing_hint(compiler)}")
    return _compile_with(tool, source, filename)


def _discover(name: str) -> _Nvrtc | str | _Clang | None:
    if name == "nvrtc":
        return _nvrtc()
    if name == "nvcc":
        return _nvcc()
    return _clang()


def _compile_with(tool: _Nvrtc | str | _Clang, source: str, filename: str) -> PtxResult:
    if isinstance(tool, _Nvrtc):
        return _compile_nvrtc(tool, source, filename)
    if isinstance(tool, _Clang):
        return _compile_clang(tool, source, filename)
    return _compile_nvcc(tool, source, filename)


def _install_message() -> str:
    if sys.platform == "darwin":
        first = (
            "install LLVM's clang, which has the NVPTX target (Apple's clang does not): "
            "`brew install llvm`, then put its bin/ on PATH or set QGPU_CLANG to its clang"
        )
    else:
        first = f"install NVRTC: `pip install {NVRTC_WHEEL}`"
    return (
        f"no CUDA compiler found: {first}. Alternatives: nvcc (CUDA toolkit) on PATH, or clang "
        "with the NVPTX target on PATH (or QGPU_CLANG); QGPU_NVRTC may name a libnvrtc library."
    )


def _missing_hint(name: str) -> str:
    if name == "nvrtc":
        env = os.environ.get("QGPU_NVRTC")
        if env:
            return f"QGPU_NVRTC={env!r} could not be loaded as libnvrtc"
        return f"`pip install {NVRTC_WHEEL}` (Linux x86_64/aarch64, Windows)"
    if name == "nvcc":
        return "install the CUDA toolkit and put nvcc (and a host C++ compiler) on PATH"
    return "put clang (LLVM, with the NVPTX target) on PATH or set QGPU_CLANG to it"


# --- NVRTC through ctypes -------------------------------------------------------------------


def _nvrtc() -> _Nvrtc | None:
    with _DISCOVERY_LOCK:
        return _load_nvrtc(os.environ.get("QGPU_NVRTC"))


@functools.cache
def _load_nvrtc(env: str | None) -> _Nvrtc | None:
    """Load libnvrtc once (QGPU_NVRTC, else the pip wheel); None when absent or unloadable."""
    candidates = [Path(env)] if env else _wheel_nvrtc_libraries()
    for path in candidates:
        try:
            lib = _open_nvrtc(path)
        except (OSError, AttributeError):  # not loadable, or not an NVRTC library
            continue
        major, minor = ctypes.c_int(), ctypes.c_int()
        if lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == _NVRTC_SUCCESS:
            return _Nvrtc(lib, f"{major.value}.{minor.value}")
    return None


def _wheel_nvrtc_libraries() -> list[Path]:
    """libnvrtc files inside the installed ``nvidia`` namespace package, newest major first."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or spec.submodule_search_locations is None:
        return []
    if sys.platform == "win32":
        pattern, name = "*/bin/**/nvrtc64_*.dll", r"nvrtc64_\d+_0\.dll"
    else:
        pattern, name = "*/lib/libnvrtc.so*", r"libnvrtc\.so[.\d]*"
    found = [
        path
        for root in spec.submodule_search_locations
        for path in Path(root).glob(pattern)
        if re.fullmatch(name, path.name)
    ]
    return sorted(found, key=lambda p: [int(n) for n in re.findall(r"\d+", p.name)], reverse=True)


def _open_nvrtc(path: Path) -> ctypes.CDLL:
    """dlopen libnvrtc after its builtins library, which some wheels cannot find alone."""
    if sys.platform == "win32":
        os.add_dll_directory(str(path.parent))
    pattern = "nvrtc-builtins64_*.dll" if sys.platform == "win32" else "libnvrtc-builtins.so*"
    for builtins in sorted(path.parent.glob(pattern)):
        ctypes.CDLL(str(builtins), mode=getattr(ctypes, "RTLD_GLOBAL", 0))
    lib = ctypes.CDLL(str(path))
    p, vp, sz = ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t
    signatures = {
        "nvrtcVersion": [ctypes.POINTER(ctypes.c_int)] * 2,
        "nvrtcCreateProgram": [ctypes.POINTER(vp), p, p, ctypes.c_int, vp, vp],
        "nvrtcCompileProgram": [vp, ctypes.c_int, ctypes.POINTER(p)],
        "nvrtcGetPTXSize": [vp, ctypes.POINTER(sz)],
        "nvrtcGetPTX": [vp, p],
        "nvrtcGetProgramLogSize": [vp, ctypes.POINTER(sz)],
        "nvrtcGetProgramLog": [vp, p],
        "nvrtcDestroyProgram": [ctypes.POINTER(vp)],
    }
    for name, argtypes in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
    lib.nvrtcGetErrorString.argtypes, lib.nvrtcGetErrorString.restype = [ctypes.c_int], p
    return lib


def _compile_nvrtc(nvrtc: _Nvrtc, source: str, filename: str) -> PtxResult:
    lib = nvrtc.lib

    def check(rc: int, what: str) -> None:
        if rc != _NVRTC_SUCCESS:
            message = (lib.nvrtcGetErrorString(rc) or b"?").decode()
            raise CompileError(f"nvrtc: {what} failed for {filename}: {message}")

    options = [opt.encode() for opt in NVRTC_OPTIONS]
    prog = ctypes.c_void_p()
    with _NVRTC_LOCK:
        check(
            lib.nvrtcCreateProgram(
                ctypes.byref(prog), source.encode(), filename.encode(), 0, None, None
            ),
            "nvrtcCreateProgram",
        )
        try:
            rc = lib.nvrtcCompileProgram(
                prog, len(options), (ctypes.c_char_p * len(options))(*options)
            )
            size = ctypes.c_size_t()
            check(lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
            buf = ctypes.create_string_buffer(size.value)
            check(lib.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
            log = buf.value.decode(errors="replace").strip()
            if rc == _NVRTC_ERROR_COMPILATION:
                raise CompileError(f"nvrtc could not compile {filename}:\n{log}")
            check(rc, "nvrtcCompileProgram")
            check(lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
            buf = ctypes.create_string_buffer(size.value)
            check(lib.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))
    ptx = buf.value.decode()
    return PtxResult(ptx, "nvrtc", _toolkit_version(ptx, nvrtc.version), log)


def _toolkit_version(ptx: str, default: str) -> str:
    """Full NVIDIA version ("13.5.37") from the PTX banner, which is more exact than the API."""
    match = re.search(r"^// Cuda compilation tools, release [\d.]+, V(\S+)", ptx, re.MULTILINE)
    return match.group(1) if match else default


# --- command-line compilers -----------------------------------------------------------------


def _nvcc() -> str | None:
    return shutil.which("nvcc")


def _clang() -> _Clang | None:
    with _DISCOVERY_LOCK:
        return _probe_clang(os.environ.get("QGPU_CLANG"), os.environ.get("PATH"))


@functools.cache
def _probe_clang(env: str | None, search_path: str | None) -> _Clang | None:
    """First clang (QGPU_CLANG, clang-N newest first, clang) that compiles a shuffle kernel."""
    names = [env] if env else [*(f"clang-{v}" for v in range(30, 13, -1)), "clang"]
    for name in names:
        path = shutil.which(name, path=search_path)
        if path is None:
            continue
        version = _clang_version(path)
        for feature in CLANG_PTX_FEATURE:
            clang = _Clang(path, version, feature)
            try:
                _compile_clang(clang, _CLANG_PROBE, "probe.cu")
            except CompileError:
                continue
            return clang
    return None


def _clang_version(path: str) -> str:
    out = subprocess.run(
        [path, "--version"],
        check=False,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
    ).stdout
    match = re.search(r"version (\S+)", out)
    return match.group(1) if match else "unknown"


def _compile_nvcc(nvcc: str, source: str, filename: str) -> PtxResult:
    ptx, log = _run_tool("nvcc", [nvcc, *NVCC_OPTIONS], source, filename)
    return PtxResult(ptx, "nvcc", _toolkit_version(ptx, "unknown"), log)


def _compile_clang(clang: _Clang, source: str, filename: str) -> PtxResult:
    command = [clang.path, *CLANG_OPTIONS, *clang.feature, "-include", str(CLANG_HEADER)]
    ptx, log = _run_tool("clang", command, source, filename)
    return PtxResult(ptx, "clang", clang.version, log)


def _run_tool(name: str, command: list[str], source: str, filename: str) -> tuple[str, str]:
    """Run ``command -o out.ptx FILE`` in a scratch dir; messages name ``filename``."""
    local = Path(filename).name
    if not re.fullmatch(r"[\w.-]+\.cu", local):
        local = "kernel.cu"
    if local != filename:  # keep the caller's name (and line numbers) in every message
        escaped = filename.replace("\\", "\\\\").replace('"', '\\"')
        source = f'#line 1 "{escaped}"\n{source}'
    with tempfile.TemporaryDirectory(prefix="qgpu-") as tmp:
        Path(tmp, local).write_text(source, encoding="utf-8")
        try:
            done = subprocess.run(
                [*command, "-o", "out.ptx", local],
                check=False,
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=SUBPROCESS_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as exc:
            raise CompileError(f"{name} timed out after {exc.timeout} s on {filename}") from exc
        log = (done.stdout + done.stderr).strip()
        out = Path(tmp, "out.ptx")
        if done.returncode != 0 or not out.exists():
            raise CompileError(f"{name} could not compile {filename}:\n{log}")
        return out.read_text(encoding="utf-8"), log
