"""CUDA C++ source -> PTX text with whatever compiler this machine has.

The host plays NVRTC: users write CUDA, we hand the PTX to the lowering. Preference order is
NVRTC from the pip wheel (in a worker process, with the CUDA wheels' headers and qgpu's own C
library headers, no host compiler), then ``nvcc``, then clang with the shipped ``cuda_clang.h``
and qgpu's headers (the only route on macOS). Every route targets compute_75 at
full optimisation: that is the PTX subset the lowering accepts (-G, -O0 and --Ofast-compile give
call.uni wrappers and generic loads; sm_100+ switches NVRTC to a different backend).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from qgpu.errors import ArgumentTypeError, CompileError, QgpuError, ResourceError, UsageError
from qgpu.toolchain import jail, nvrtc_worker

NVRTC_WHEEL = "nvidia-cuda-nvrtc==13.5.37"
# The CUDA headers NVRTC does not ship: cuda_runtime.h and cooperative_groups.h (runtime), the
# cuda/std headers cooperative_groups.h includes (cccl).
HEADER_WHEELS = ("nvidia-cuda-runtime==13.5.37", "nvidia-cuda-cccl==13.3.5.0.6")
COMPILERS = ("nvrtc", "nvcc", "clang")

# No -default-device: a source that NVRTC accepts must also compile with nvcc and clang, which
# have no such switch. c++17 is the default of NVRTC/nvcc 13 but not of clang-14: say it.
IMPLICIT_HEADERS = ("math.h", "limits.h")
"""qgpu's headers that NVRTC and clang include before the source, as nvcc's implicit
cuda_runtime.h does: a kernel written for nvcc uses INFINITY, NAN, M_PI or INT_MAX without an
``#include`` (FLT_MAX needs <float.h> on nvcc too)."""
NVRTC_OPTIONS = ("--gpu-architecture=compute_75", "--std=c++17",
                 *(f"--pre-include={h}" for h in IMPLICIT_HEADERS))
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
QGPU_INCLUDE = Path(__file__).with_name("include")
"""qgpu's own headers, small and written for qgpu: the C and C++ library headers a pasted source
starts with (stdio.h, math.h, cmath, stdint.h, float.h, limits.h, iostream...), for the compilers
that have none on the device side: NVRTC (after the CUDA wheels' folders) and clang (before the
system's). nvcc uses its host compiler's. docs/ISA.md section 8 says what each declares."""
# Host limits on what the compilers get (docs/ERRORS.md): the largest suite kernel is 1.5 KB
# and compiles in ~20 ms; a source of megabytes or one that makes the compiler work for minutes
# is a mistake or an attack, and is stopped with an error naming the limit.
MAX_SOURCE_BYTES = 256 * 1024
COMPILE_TIME_LIMIT_S = 60.0
COMPILE_MEMORY_LIMIT = 4 << 30
"""Address space of each compiler process (bytes; NVRTC's worker peaked at 0.31 GB compiling the
111 suite kernels): a source that needs more is stopped (docs/SECURITY.md)."""
CONFINEMENTS = ("auto", "landlock", "namespace", "none")
"""``$QGPU_CONFINE``: how a compiler is kept from every file but the CUDA headers (auto: the
strongest this machine allows, docs/SECURITY.md); ``none`` is for debugging, and refuses
untrusted sources."""
_WORKER_SCRIPT = Path(nvrtc_worker.__file__)

_NVRTC_SUCCESS = 0
_NVRTC_ERROR_COMPILATION = 6
_CLANG_PROBE = (
    'extern "C" __global__ void probe(int *p) '
    "{ p[threadIdx.x] = __shfl_down_sync(0xffffffffu, p[0], 1, 4); }\n"
)

_DISCOVERY_LOCK = threading.Lock()
# NVRTC promises nothing about concurrent compilations; ~20-50 ms each, so one worker process
# serves them one at a time (_WORKER, guarded by _NVRTC_LOCK).
_NVRTC_LOCK = threading.Lock()
_WORKER: _Worker | None = None


@dataclass(frozen=True)
class PtxResult:
    """PTX text plus which toolchain made it (PTX differs between compilers and versions)."""

    ptx: str
    compiler: str  # "nvrtc" | "nvcc" | "clang"
    version: str
    log: str  # warnings; empty when the compiler said nothing

    @property
    def warnings(self) -> list[str]:
        """The log as one entry per diagnostic (with its source lines), for display."""
        return split_log(self.log)


@dataclass(frozen=True)
class _Nvrtc:
    library: str  # the libnvrtc the worker loaded
    version: str  # major.minor from nvrtcVersion
    confinement: str  # "landlock (ABI n)", "namespace" or "none"


@dataclass(frozen=True)
class _Clang:
    path: str
    version: str
    feature: tuple[str, ...]


def available_compilers() -> list[str]:
    """Names of the usable compilers, in the order ``compiler="auto"`` tries them."""
    return [name for name in COMPILERS if _discover(name) is not None]


def compile_cuda(source: str, *, filename: str = "kernel.cu", compiler: str = "auto",
                 time_limit: float = COMPILE_TIME_LIMIT_S, untrusted: bool = False) -> PtxResult:
    """Compile CUDA C++ to PTX for compute_75; errors carry the compiler's log and lines.

    ``filename`` is the name the compiler's messages use. ``compiler`` is "auto" or one of
    ``COMPILERS``; an explicitly requested compiler that is missing is an error, not a fallback.
    The source is checked first (``check_source``); a compile that runs longer than
    ``time_limit`` seconds is stopped (ResourceError). Every compiler runs confined to the CUDA
    headers where this machine allows it (``confinement``); ``untrusted`` sources (a server's
    users) are refused where it does not (CompileError).
    """
    if not isinstance(filename, str) or not filename or re.search(r"[\x00-\x1f]", filename):
        raise ArgumentTypeError(f"filename must be a file name (a str without control "
                                f"characters), got {filename!r:.80}")
    if not isinstance(compiler, str):
        raise ArgumentTypeError(f"compiler must be a str ('auto' or one of "
                                f"{', '.join(COMPILERS)}), got {type(compiler).__name__}")
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) \
            or not 0 < time_limit < float("inf"):
        raise ArgumentTypeError(f"time_limit must be a positive number of seconds, got "
                                f"{time_limit!r:.80}")
    source = check_source(source, filename)
    check_includes(source, filename)
    source = space_linkage(source)
    if compiler == "auto":
        for name in COMPILERS:
            tool = _discover(name)
            if tool is not None:
                return _compile_with(tool, source, filename, time_limit, untrusted)
        raise CompileError(_install_message())
    if compiler not in COMPILERS:
        raise UsageError(
            f"unknown compiler {compiler!r:.80}: use 'auto' or one of {', '.join(COMPILERS)}"
        )
    tool = _discover(compiler)
    if tool is None:
        raise CompileError(f"compiler {compiler!r} is not available: {_missing_hint(compiler)}")
    return _compile_with(tool, source, filename, time_limit, untrusted)


def decode_source(data: bytes, filename: str) -> str:
    """A source file's bytes as text: UTF-8 (a leading byte-order mark is dropped); anything
    else is a CompileError naming the first bad byte's offset, line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise CompileError(
            f"{filename}:{line}:{column}: not UTF-8 text (byte 0x{data[exc.start]:02x} at byte "
            f"offset {exc.start}); save the source as UTF-8"
        ) from None


def check_source(source: str, filename: str) -> str:
    """The source as the compilers get it, or an error naming the problem and its place: a str
    (ArgumentTypeError), at most MAX_SOURCE_BYTES of UTF-8 (ResourceError), no NUL character
    (NVRTC would stop reading there and compile the rest silently away) and no lone surrogate
    (CompileError). A leading byte-order mark is dropped (NVRTC calls it an unrecognized
    token)."""
    if not isinstance(source, str):
        hint = " (decode it, or use compile_file)" if isinstance(source, bytes) else ""
        raise ArgumentTypeError(f"source must be a str, got "
                                f"{type(source).__name__}{hint}")
    source = source.removeprefix("\ufeff")
    try:
        size = len(source.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise CompileError(f"{_place(source, exc.start, filename)}: the character "
                           f"U+{ord(source[exc.start]):04X} (a lone surrogate) has no UTF-8 "
                           f"form") from None
    if size > MAX_SOURCE_BYTES:
        raise ResourceError(f"{filename} has {size:,} bytes; sources (CUDA or PTX) are at "
                            f"most {MAX_SOURCE_BYTES:,} bytes (256 KiB)")
    nul = source.find("\0")
    if nul >= 0:
        raise CompileError(f"{_place(source, nul, filename)}: a NUL character (byte offset "
                           f"{len(source[:nul].encode())}); a CUDA source is text")
    return source


_COMMENT_OR_LITERAL = re.compile(r"""
    (?P<comment>/\*.*?(\*/|\Z)|//[^\n]*)
  | R"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)"|"(\\.|[^"\\\n])*"?|'(\\.|[^'\\\n])*'?
""", re.X | re.S)
_DIRECTIVE = re.compile(r"^[ \t]*(\#|%:)[ \t]*(?P<name>\w+)(?P<rest>[^\n]*)", re.M)
_HEADER = re.compile(r"<(?!/)(?!([^>]*/)?\.\.(/|>))[\w.+/-]+>")


def check_includes(source: str, filename: str) -> None:
    """Only the CUDA headers may be included: every ``#include`` names a header in angle
    brackets by a relative path without ``..``. A quoted, absolute or computed include is a
    CompileError naming its line: a source is compiled on its own, and on a server (the app)
    an include of any other file would show that file's lines in the compiler's errors.
    Directives are read as the preprocessor reads them: continued lines spliced, comments
    blanked (string literals kept), ``%:`` for ``#``."""
    splices = [m.start() for m in re.finditer(r"\\\r?\n", source)]
    text = re.sub(r"\\\r?\n", "", source)
    text = _COMMENT_OR_LITERAL.sub(
        lambda m: re.sub(r"[^\n]", " ", m.group()) if m.group("comment") else m.group(), text)
    for m in _DIRECTIVE.finditer(text):
        name, operand = m.group("name"), m.group("rest").strip()
        if name in ("include", "include_next", "import", "embed") \
                and not (name == "include" and _HEADER.fullmatch(operand)):
            at = m.start("name")
            at += sum(1 for i, pos in enumerate(splices) if pos - i <= at)  # back to source
            raise CompileError(
                f"{_place(source, at, filename)}: #{name} {operand[:60]}: only the CUDA "
                f"headers can be included, as #include <name.h> (a source is compiled on its "
                f"own: paste what a local header holds into the source)")


_GLUED_LINKAGE = re.compile(r"(?<![\w$])extern\s*\Z")


def space_linkage(source: str) -> str:
    """The source with a space put between a linkage string and a name glued to it:
    ``extern "C"__global__`` (pasted code has it; nvcc warns and accepts, but NVRTC and clang
    read ``"C"__global__`` as a string with a user-defined suffix and reject it) becomes
    ``extern "C" __global__``. Only in code: a ``"C"`` or ``"C++"`` string literal right after
    the word ``extern`` and right before a letter or ``_``, found with the lexing
    ``check_includes`` uses, so comments and other string and character literals are left as
    they are. Nothing else changes: no line is added or removed, so every message keeps its
    line number (a column after the space, on that line only, moves by one)."""
    if '"C' not in source:
        return source
    pieces, code_start, copied = [], 0, 0
    for m in _COMMENT_OR_LITERAL.finditer(source):
        if m.group() in ('"C"', '"C++"') and re.match(r"[A-Za-z_]", source[m.end():m.end() + 1]) \
                and _GLUED_LINKAGE.search(source, code_start, m.start()):
            pieces += [source[copied:m.end()], " "]
            copied = m.end()
        code_start = m.end()
    return "".join(pieces) + source[copied:] if pieces else source


_MISSING_HEADER = re.compile(r'cannot open source file "(?P<nvrtc>[^"\n]+)"'
                             r"|'(?P<clang>[^'\n]+)' file not found"
                             r"|error: (?P<gcc>[\w.+/-]+): No such file or directory")


def _advice(log: str, compiler: str) -> str:
    """What qgpu adds to a compiler's errors for the common mistakes of a pasted source: a
    header the compiler does not have, thrust, host code. Empty when none applies."""
    notes = []
    missing = sorted({name for m in _MISSING_HEADER.finditer(log)
                      for name in m.groups() if name and _HEADER.fullmatch(f"<{name}>")})
    if missing:
        cuda_headers = "cuda_runtime.h (clang has no other CUDA header: cooperative_groups.h " \
            "and cuda/std/... need NVRTC or nvcc)" if compiler == "clang" else \
            "the CUDA runtime's and device headers (cuda_runtime.h, cooperative_groups.h, " \
            "cuda/std/...)"
        notes.append(
            f"{', '.join(missing)}: not a header {compiler} has here. qgpu compiles with "
            f"{cuda_headers} and the device side of the C library's (stdio.h, math.h, cmath, "
            f"stdint.h, float.h, limits.h, stdlib.h, string.h, assert.h, iostream...: "
            f"docs/ISA.md section 8); CUDA's libraries (cuBLAS, cuRAND, cuFFT...) are called "
            f"from host code and are not available")
    if "<cuda>/thrust/" in log:
        notes.append("thrust's containers and algorithms are host code (a device_vector lives "
                     "on the host): qgpu compiles kernels only; use plain arrays in the kernel")
    elif "not allowed in JIT mode" in log \
            or re.search(r"undeclared identifier '?cuda(ConfigureCall|[A-Z]\w*')", log):
        notes.append("host code: qgpu compiles a source's device code only (NVRTC refuses host "
                     "functions and variables; clang here has no CUDA runtime API): remove "
                     "main() and the other host code (cudaMalloc, cudaMemcpy, the <<<...>>> "
                     "launch, std::cout); qgpu launches the kernel itself")
    return "".join(f"\n(qgpu: {note})" for note in notes)


def _place(source: str, index: int, filename: str) -> str:
    """``file:line:column`` of a character index."""
    line = source.count("\n", 0, index) + 1
    return f"{filename}:{line}:{index - (source.rfind(chr(10), 0, index) + 1) + 1}"


def split_log(log: str) -> list[str]:
    """A compiler log as one entry per diagnostic: an entry starts at a line that names a
    place (``file(3): warning``, ``file:3:5: warning``, ``nvcc warning :``) and takes the
    source and caret lines after it; blank lines, the closing counts and NVRTC's "can be
    suppressed" remark are dropped."""
    entries: list[str] = []
    for line in log.splitlines():
        if not line.strip() or re.fullmatch(r"\d+ (warnings?|errors?)( and \d+ \w+)? "
                                            r"(generated|detected).*", line.strip()) \
                or line.startswith("Remark: The warnings can be suppressed"):
            continue
        if entries and line[:1].isspace():
            entries[-1] += "\n" + line
        else:
            entries.append(line)
    return entries


def _discover(name: str) -> _Nvrtc | str | _Clang | None:
    if name == "nvrtc":
        return _nvrtc()
    if name == "nvcc":
        return _nvcc()
    return _clang()


def _compile_with(tool: _Nvrtc | str | _Clang, source: str, filename: str,
                  time_limit: float, untrusted: bool) -> PtxResult:
    name = "nvrtc" if isinstance(tool, _Nvrtc) else "clang" if isinstance(tool, _Clang) \
        else "nvcc"
    if untrusted and confinement(name) == "none":
        raise CompileError(
            f"{name} cannot be confined on this machine (QGPU_CONFINE="
            f"{os.environ.get('QGPU_CONFINE', 'auto')}; no Landlock, no user namespaces), so it "
            f"does not compile sources from this server's users: docs/SECURITY.md")
    if isinstance(tool, _Nvrtc):
        return _compile_nvrtc(tool, source, filename, time_limit)
    if isinstance(tool, _Clang):
        return _compile_clang(tool, source, filename, time_limit)
    return _compile_nvcc(tool, source, filename, time_limit)


def serving_compiler() -> str:
    """What compiles a server's users' sources here, in words (the app says it at start)."""
    for name in available_compilers():
        how = confinement(name)
        if how != "none":
            return f"{name}, confined by {how}"
    return "none: no compiler can be confined here, pasted CUDA is refused (docs/SECURITY.md)"


def _confine_setting() -> str:
    setting = os.environ.get("QGPU_CONFINE", "auto").strip().lower() or "auto"
    if setting not in CONFINEMENTS:
        raise UsageError(f"QGPU_CONFINE={setting!r:.40}: use one of {', '.join(CONFINEMENTS)}")
    return setting


def confinement(compiler: str) -> str:
    """How ``compiler`` is confined here: "landlock (ABI n)" (NVRTC only: the worker may read the
    CUDA headers and nothing else), "namespace" (a private filesystem view, qgpu.toolchain.jail)
    or "none" (docs/SECURITY.md). Only Landlock keeps a compiler from *stat*ing a path, and
    gcc (under nvcc) and clang answer ``__has_include`` of a forbidden file differently from a
    missing one, so the command-line compilers are confined by namespaces only."""
    setting = _confine_setting()
    if compiler == "nvrtc":
        nvrtc = _nvrtc()
        if nvrtc is not None:
            return nvrtc.confinement
    if setting in ("auto", "namespace") and jail.available():
        return "namespace"
    return "none"



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


# --- CUDA headers for NVRTC -----------------------------------------------------------------


@functools.cache
def cuda_include_dirs() -> tuple[str, ...]:
    """Include directories with the CUDA headers users write (``cuda_runtime.h``,
    ``cooperative_groups.h`` and the ``cuda/std`` headers it needs), from the pinned
    ``nvidia-cuda-runtime`` and ``nvidia-cuda-cccl`` wheels (HEADER_WHEELS). NVRTC ships no
    headers of its own, so without these ``#include <cooperative_groups.h>`` cannot be found;
    nvcc uses its toolkit's. Empty when the wheels are not installed."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or spec.submodule_search_locations is None:
        return ()
    found: list[str] = []
    for root in spec.submodule_search_locations:
        for include in sorted(Path(root).glob("*/include"), reverse=True):
            if (include / "cuda_runtime.h").is_file():
                found.append(str(include))
            if (include / "cccl" / "cuda" / "std").is_dir():
                found.append(str(include / "cccl"))
    return tuple(found)


def nvrtc_header_dirs() -> tuple[str, ...]:
    """Every folder NVRTC may read while compiling (its Landlock rules, its jail's binds): the
    CUDA wheels' (cuda_include_dirs), then qgpu's own headers (QGPU_INCLUDE), searched last so
    that a CUDA header is always NVIDIA's."""
    return (*cuda_include_dirs(), str(QGPU_INCLUDE))


def nvrtc_include_options() -> tuple[str, ...]:
    """``--include-path`` options for NVRTC (see nvrtc_header_dirs)."""
    return tuple(f"--include-path={d}" for d in nvrtc_header_dirs())


_LOCATED = re.compile(r"^(?P<file>[^\s(:][^(:\n]*?)(\(\d+\)|:\d+(:\d+)?):")
_ERRNO_TAIL = re.compile(r'(cannot open source file "[^"\n]*")[^\n]*')


def withhold_paths(log: str, filename: str) -> str:
    """A compiler's message as a user may see it: the CUDA header directories shown as
    ``<cuda>`` (qgpu's own as ``<qgpu>``), a diagnostic located in any file but ``filename`` and
    those headers withheld, and why a file could not be opened left out (a forbidden file's
    "Permission denied" would tell that it exists). Confinement already keeps other files from
    being read; this keeps the server's paths out of the messages too."""
    shown = {directory: "<cuda>/" for directory in cuda_include_dirs()}
    shown[str(QGPU_INCLUDE)] = "<qgpu>/"
    for directory in sorted(shown, key=len, reverse=True):
        log = log.replace(directory.rstrip("/") + "/", shown[directory])
    log = _ERRNO_TAIL.sub(r"\1", log)
    lines = []
    for line in log.split("\n"):
        place = _LOCATED.match(line)
        if place and place.group("file") not in (filename, Path(filename).name) \
                and not place.group("file").startswith(("<cuda>/", "<qgpu>/")):
            line = "(a diagnostic located in a file other than the source and the CUDA headers " \
                   "was withheld)"
        lines.append(line)
    return "\n".join(lines)


# --- NVRTC in a worker process --------------------------------------------------------------


def _nvrtc() -> _Nvrtc | None:
    with _DISCOVERY_LOCK:
        return _load_nvrtc(os.environ.get("QGPU_NVRTC"), _confine_setting())


@functools.cache
def _load_nvrtc(env: str | None, setting: str) -> _Nvrtc | None:
    """Start the NVRTC worker once per library and confinement setting (QGPU_NVRTC, else the pip
    wheel's library); None when no libnvrtc loads. The worker stays up for this process's
    later compiles."""
    global _WORKER
    candidates = [Path(env)] if env else _wheel_nvrtc_libraries()
    if not candidates:
        return None
    try:
        worker, hello = _Worker.start([str(p) for p in candidates], COMPILE_TIME_LIMIT_S)
    except (OSError, QgpuError):
        return None
    if worker is None:
        return None
    with _NVRTC_LOCK:
        if _WORKER is not None:  # started under another setting or library
            _WORKER.stop()
        _WORKER = worker
    return _Nvrtc(hello[1], hello[2], worker.confinement)


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


class _Worker:
    """The host's side of one ``nvrtc_worker.py`` process (its docstring has the protocol)."""

    def __init__(self, proc: subprocess.Popen, confinement: str, scratch: str | None) -> None:
        self.proc = proc
        self.owner = os.getpid()  # a forked child must not talk to its parent's worker
        self.confinement = confinement
        self.setting = _confine_setting()  # what QGPU_CONFINE asked for when it started
        self.scratch = scratch  # the namespace jail's mount points, removed with the worker

    @classmethod
    def start(cls, libraries: list[str], time_limit: float) -> tuple[_Worker | None, list[str]]:
        """A running, confined worker and its hello, or (None, hello) when no library loaded
        (or the worker could not be confined as the setting asks)."""
        setting = _confine_setting()
        options: list[str] = ["--memory", str(COMPILE_MEMORY_LIMIT)]
        preexec, scratch, how = None, None, "none"
        script = [str(_WORKER_SCRIPT)]
        headers = list(nvrtc_header_dirs())
        if setting in ("auto", "landlock") and nvrtc_worker.landlock_abi() >= 1 \
                and cuda_include_dirs():
            options += ["--chdir", headers[0]]
            options += [arg for d in headers for arg in ("--landlock", d)]
            how = "landlock"
        elif setting in ("auto", "namespace") and jail.available():
            scratch = tempfile.mkdtemp(prefix="qgpu-nvrtc-")
            work, root = os.path.join(scratch, "work"), os.path.join(scratch, "root")
            os.mkdir(work)
            os.mkdir(root)
            # the worker's code as -c's text, not a file: no file of qgpu's but its headers is
            # in the jail (a file there could be included: `#include <../nvrtc_worker.py>`)
            script = ["-c", _WORKER_SCRIPT.read_text(encoding="utf-8")]
            visible = [*jail.SYSTEM_PATHS, *headers,
                       *{sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent)},
                       *{str(Path(lib).resolve().parent) for lib in libraries}]
            preexec, how = jail.preexec(visible, work, root), "namespace"
        elif setting in ("landlock", "namespace"):
            return None, ["error", f"QGPU_CONFINE={setting}: not available on this machine"]
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", *script, *options, *libraries],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_COMPILER_ENV,
            preexec_fn=preexec,
            # Ctrl-C is the host's to handle (it kills the worker): keep it from the worker
            start_new_session=os.name == "posix",
            creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0),
        )
        worker = cls(proc, how, scratch)
        hello = worker._exchange(None, time_limit, "starting NVRTC")
        if hello[0] == "error":
            worker.stop()
            return None, hello
        if how == "landlock":
            worker.confinement = hello[3]
        atexit.register(worker.stop)
        return worker, hello

    def usable(self) -> bool:
        """Running, this process's, and confined as QGPU_CONFINE now asks."""
        return self.owner == os.getpid() and self.proc.poll() is None \
            and self.setting == _confine_setting()

    def compile(self, source: str, filename: str, time_limit: float) -> list[str]:
        request = [source, filename, *NVRTC_OPTIONS, *nvrtc_include_options()]
        return self._exchange(request, time_limit, f"compiling {filename}")

    def _exchange(self, request: list[str] | None, time_limit: float, what: str) -> list[str]:
        """Send a request (None: just read the next message) and read the answer, killing the
        worker when the answer takes longer than ``time_limit`` seconds."""
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            self.proc.kill()

        timer = threading.Timer(time_limit, expire)
        timer.start()
        try:
            if request is not None:
                nvrtc_worker.send(self.proc.stdin, *request)
            answer = nvrtc_worker.receive(self.proc.stdout)
        except OSError:  # the worker is gone (killed at the limit, or crashed)
            answer = None
        except BaseException:  # Ctrl-C: its answer would otherwise meet the next request
            self.stop()
            raise
        finally:
            timer.cancel()
        if answer is not None:
            return answer
        self.stop()
        if expired.is_set():
            raise ResourceError(
                f"nvrtc: {what} took longer than the compile time limit of {time_limit:g} s "
                f"(stopped); simplify the source"
            )
        raise CompileError(f"nvrtc: the compiler process ended (exit status "
                           f"{self.proc.returncode}) while {what}")

    def kill(self) -> None:
        """End the worker now (at exit: it holds nothing worth waiting for, and may be in the
        middle of a long compile)."""
        if self.owner == os.getpid() and self.proc.returncode is None:
            self.proc.kill()

    def stop(self) -> None:
        """Kill the worker and collect its exit status and pipes."""
        if self.owner != os.getpid():
            return
        self.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


def _compile_nvrtc(nvrtc: _Nvrtc, source: str, filename: str, time_limit: float) -> PtxResult:
    global _WORKER
    with _NVRTC_LOCK:
        if _WORKER is None or not _WORKER.usable():
            if _WORKER is not None:
                _WORKER.stop()
            _WORKER, hello = _Worker.start([nvrtc.library], time_limit)
            if _WORKER is None:
                raise CompileError(f"nvrtc: {nvrtc.library} no longer loads: {hello[1]}")
        answer = _WORKER.compile(source, filename, time_limit)
    if answer[0] == "error":
        raise CompileError(f"nvrtc: {answer[1]} for {filename}")
    rc, log, ptx = int(answer[1]), withhold_paths(answer[2], filename), answer[3]
    if rc == _NVRTC_ERROR_COMPILATION:
        raise CompileError(f"nvrtc could not compile {filename}:\n{log}"
                           f"{_advice(log, 'nvrtc')}")
    if rc != _NVRTC_SUCCESS:
        raise CompileError(f"nvrtc: nvrtcCompileProgram failed for {filename} (status "
                           f"{rc}):\n{log}")
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
                _compile_clang(clang, _CLANG_PROBE, "probe.cu", COMPILE_TIME_LIMIT_S)
            except QgpuError:
                continue
            return clang
    return None


def _clang_version(path: str) -> str:
    out = subprocess.run(
        [path, "--version"],
        check=False,
        capture_output=True,
        text=True,
        timeout=COMPILE_TIME_LIMIT_S,
    ).stdout
    match = re.search(r"version (\S+)", out)
    return match.group(1) if match else "unknown"


def _compile_nvcc(nvcc: str, source: str, filename: str, time_limit: float) -> PtxResult:
    ptx, log = _run_tool("nvcc", [nvcc, *NVCC_OPTIONS], source, filename, time_limit)
    return PtxResult(ptx, "nvcc", _toolkit_version(ptx, "unknown"), log)


def _compile_clang(clang: _Clang, source: str, filename: str, time_limit: float) -> PtxResult:
    command = [clang.path, *CLANG_OPTIONS, *clang.feature, "-isystem", str(QGPU_INCLUDE),
               "-include", CLANG_HEADER.name,
               *(arg for h in IMPLICIT_HEADERS for arg in ("-include", h))]
    ptx, log = _run_tool("clang", command, source, filename, time_limit, [CLANG_HEADER],
                         [str(QGPU_INCLUDE)])
    return PtxResult(ptx, "clang", clang.version, log)


_COMPILER_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C",
                 **{k: v for k, v in os.environ.items() if k.upper() == "SYSTEMROOT"}}
"""The environment a compiler gets: none of the server's (its secrets, and variables such as
CPATH that add include directories); Windows needs SYSTEMROOT to start a process."""


def _run_tool(name: str, command: list[str], source: str, filename: str,
              time_limit: float, extra: list[Path] = (), folders: list[str] = ()) \
        -> tuple[str, str]:
    """Run ``command -o out.ptx FILE`` in a scratch dir (with copies of the ``extra`` files),
    confined to a namespace jail where the machine allows it (the system, the compiler's
    installation and the header ``folders``, read-only), its address space capped, stopped
    after ``time_limit`` seconds; messages name ``filename``."""
    local = Path(filename).name
    if not re.fullmatch(r"[\w.-]+\.cu", local):
        local = "kernel.cu"
    if local != filename:  # keep the caller's name (and line numbers) in every message
        escaped = filename.replace("\\", "\\\\").replace('"', '\\"')
        source = f'#line 1 "{escaped}"\n{source}'
    with tempfile.TemporaryDirectory(prefix="qgpu-") as scratch:
        tmp, root = os.path.join(scratch, "work"), os.path.join(scratch, "root")
        os.mkdir(tmp)
        os.mkdir(root)
        Path(tmp, local).write_text(source, encoding="utf-8")
        for path in extra:
            shutil.copyfile(path, Path(tmp, path.name))
        tool = Path(command[0]).resolve()
        env = {**_COMPILER_ENV, "HOME": tmp, "TMPDIR": tmp,
               "PATH": f"{Path(command[0]).parent}:{tool.parent}:{_COMPILER_ENV['PATH']}"}
        if confinement(name) == "namespace":
            visible = [*jail.SYSTEM_PATHS, str(tool.parent.parent), str(Path(command[0]).parent),
                       *folders]
            preexec = jail.preexec(visible, tmp, root, COMPILE_MEMORY_LIMIT)
        else:
            preexec = functools.partial(jail.limit_memory, COMPILE_MEMORY_LIMIT) \
                if os.name == "posix" else None
        proc = subprocess.Popen(
            [*command, "-o", "out.ptx", local], cwd=tmp, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, encoding="utf-8", errors="replace", env=env,
            preexec_fn=preexec,
            start_new_session=os.name == "posix",  # its own process group: see _kill_tree
        )
        try:
            log = proc.communicate(timeout=time_limit)[0].strip()
        except BaseException as exc:  # the time limit, or Ctrl-C (which the group never sees)
            _kill_tree(proc)
            proc.communicate()
            if not isinstance(exc, subprocess.TimeoutExpired):
                raise
            raise ResourceError(
                f"{name}: compiling {filename} took longer than the compile time limit of "
                f"{time_limit:g} s (stopped); simplify the source"
            ) from None
        out = Path(tmp, "out.ptx")
        log = withhold_paths(log, filename)
        if proc.returncode != 0 or not out.exists():
            raise CompileError(f"{name} could not compile {filename}:\n{log}"
                               f"{_advice(log, name)}")
        return out.read_text(encoding="utf-8"), log


def _kill_tree(proc: subprocess.Popen) -> None:
    """Kill a compiler and the processes it started (nvcc runs cicc, which would otherwise run
    on, holding the output pipe open)."""
    if os.name == "posix":
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    else:
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(proc.pid)], capture_output=True,
                       check=False)
        proc.kill()
