"""NVRTC in a child process: ``python nvrtc_worker.py [OPTIONS] LIBNVRTC...`` (qgpu.toolchain.cuda
runs it).

The host compiles with NVRTC here rather than in its own process so that a compile can be
stopped: a C call into NVRTC cannot be interrupted, and a pathological source (template
recursion, a huge unrolled loop) would hold the host for minutes. One worker serves every
compile of its host process (starting one costs a Python start and loading libnvrtc, once; a
compile then costs what it did in process plus ~1 ms), and the host kills it at the compile
time limit and starts a new one.

The file imports only the few standard modules a worker must (no json or pathlib: their imports
were half of a start), so the host runs it by path with ``-I -S``, independent of how the host
found the ``qgpu`` package (in a namespace jail, as the text of ``-c``: the jail then holds no
file of qgpu's but its headers). The host starts it in its own session: Ctrl-C is the host's to
handle, and the host kills it.

Confinement (docs/SECURITY.md): the worker compiles untrusted source, and NVRTC's preprocessor
opens any path a source names (``#include "/etc/passwd"``, ``__has_include``). Options before
the libraries: ``--memory BYTES`` caps the address space; ``--landlock DIR`` (repeatable) makes
the worker, once libnvrtc is loaded, restrict itself with Landlock to reading the files under
those directories (the CUDA headers and qgpu's own, ``cuda.nvrtc_header_dirs``): opening
anything else fails with EACCES, and nothing can be written, executed or connected to;
``--chdir DIR`` sets the working directory first. The host may instead start the worker inside
a namespace jail (qgpu.toolchain.jail).

Protocol on stdin/stdout: a message is a list of str fields, sent as their count, their byte
lengths (4-byte big-endian each) and their UTF-8 bytes. The worker first says
``("library", PATH, VERSION, CONFINEMENT)`` (the first of its arguments that loads; CONFINEMENT
"landlock (ABI n)" or "none") or ``("error", WHY)`` and exits; then it answers each
``(SOURCE, FILENAME, *OPTIONS)`` with ``("ptx", RC, LOG, PTX)`` (RC 0: compiled; 6: the source
has errors, in the log) or ``("error", WHY)`` (an NVRTC call failed), until stdin closes.
"""

from __future__ import annotations

import _thread
import ctypes
import os
import struct
import sys
import time
from typing import BinaryIO

try:
    import resource
except ImportError:  # Windows: no address-space limit
    resource = None

NVRTC_SUCCESS = 0
_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38


class NvrtcError(Exception):
    """An NVRTC API call failed (not a compilation error: those come back in the log)."""


def open_nvrtc(path: str) -> ctypes.CDLL:
    """dlopen libnvrtc after its builtins library, which some wheels cannot find alone."""
    folder = os.path.dirname(os.path.abspath(path))
    if sys.platform == "win32":
        os.add_dll_directory(folder)
        prefix, suffix = "nvrtc-builtins64_", ".dll"
    else:
        prefix, suffix = "libnvrtc-builtins.so", ""
    for name in sorted(os.listdir(folder)):
        if name.startswith(prefix) and name.endswith(suffix):
            ctypes.CDLL(os.path.join(folder, name), mode=getattr(ctypes, "RTLD_GLOBAL", 0))
    lib = ctypes.CDLL(path)
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


def version(lib: ctypes.CDLL) -> str | None:
    """major.minor from nvrtcVersion; None if the call fails."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    if lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) != NVRTC_SUCCESS:
        return None
    return f"{major.value}.{minor.value}"


def compile_program(lib: ctypes.CDLL, source: bytes, filename: bytes,
                    options: list[bytes]) -> tuple[int, str, str]:
    """(nvrtcCompileProgram's status, the program log, the PTX or "")."""

    def check(rc: int, what: str) -> None:
        if rc != NVRTC_SUCCESS:
            raise NvrtcError(f"{what} failed: {(lib.nvrtcGetErrorString(rc) or b'?').decode()}")

    prog = ctypes.c_void_p()
    check(lib.nvrtcCreateProgram(ctypes.byref(prog), source, filename, 0, None, None),
          "nvrtcCreateProgram")
    try:
        rc = lib.nvrtcCompileProgram(prog, len(options), (ctypes.c_char_p * len(options))(*options))
        size = ctypes.c_size_t()
        check(lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
        buf = ctypes.create_string_buffer(size.value)
        check(lib.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
        log = buf.value.decode(errors="replace").strip()
        if rc != NVRTC_SUCCESS:
            return rc, log, ""
        check(lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
        buf = ctypes.create_string_buffer(size.value)
        check(lib.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
        return rc, log, buf.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (old kernel, not enabled, not
    Linux, another architecture's syscall numbers: x86-64 and arm64 share these)."""
    if not sys.platform.startswith("linux") or os.uname().machine not in ("x86_64", "aarch64"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                           ctypes.c_uint32(1))  # LANDLOCK_CREATE_RULESET_VERSION
    return max(version, 0)


def landlock_read_only(directories: list[str]) -> int:
    """Restrict this process for good: read the files and directories under ``directories``,
    nothing else — no other read, no write, exec, device ioctl or TCP (every right the kernel's
    Landlock ABI handles is denied outside those rules; ABI 6 also scopes abstract unix sockets
    and signals). Returns the ABI used; OSError when the kernel refuses."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError("Landlock is not available")
    libc = ctypes.CDLL(None, use_errno=True)
    fs = (1 << 13) - 1  # ABI 1: execute .. make_sym
    fs |= (1 << 13 if abi >= 2 else 0) | (1 << 14 if abi >= 3 else 0) \
        | (1 << 15 if abi >= 5 else 0)  # refer, truncate, ioctl_dev
    net = 3 if abi >= 4 else 0  # bind_tcp, connect_tcp
    scoped = 3 if abi >= 6 else 0  # abstract unix sockets, signals
    attr = struct.pack("QQQ", fs, net, scoped) if abi >= 6 else \
        struct.pack("QQ", fs, net) if abi >= 4 else struct.pack("Q", fs)
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.c_char_p(attr),
                           ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        read = (1 << 2) | (1 << 3)  # read_file, read_dir
        for directory in directories:
            fd = os.open(directory, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY)
            try:
                rule = struct.pack("=Qi", read, fd)  # struct landlock_path_beneath_attr
                if libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.c_char_p(rule), 0):
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {directory}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) \
                or libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0):
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def send(stream: BinaryIO, *fields: str) -> None:
    data = [field.encode() for field in fields]
    stream.write(struct.pack(f">{len(data) + 1}I", len(data), *map(len, data)) + b"".join(data))
    stream.flush()


def receive(stream: BinaryIO) -> list[str] | None:
    """The next message, or None at the end of the stream (also a cut-off one)."""
    head = stream.read(4)
    if len(head) < 4:
        return None
    (count,) = struct.unpack(">I", head)
    sizes = stream.read(4 * count)
    if len(sizes) < 4 * count:
        return None
    fields = []
    for size in struct.unpack(f">{count}I", sizes):
        data = stream.read(size)
        if len(data) < size:
            return None
        fields.append(data.decode())
    return fields


def watch_host(host: int) -> None:
    """End the worker when its host has gone (killed mid-compile: stdin closing is only read
    after the compile, which may run for hours)."""
    while os.getppid() == host:
        time.sleep(1)
    os._exit(0)


def main(argv: list[str]) -> int:
    _thread.start_new_thread(watch_host, (os.getppid(),))
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever the library prints goes to stderr, never into the protocol
    landlock: list[str] = []
    memory, workdir, confinement = None, None, "none"
    while argv and argv[0].startswith("--"):
        option, value, *argv = argv
        if option == "--landlock":
            landlock.append(value)
        elif option == "--memory":
            memory = int(value)
        elif option == "--chdir":
            workdir = value
    libraries = argv
    lib, why = None, "no libnvrtc given"
    for path in libraries:
        try:
            lib = open_nvrtc(path)
            ver = version(lib)
        except (OSError, AttributeError) as exc:  # not loadable, or not an NVRTC library
            lib, why = None, f"{path}: {exc}"
            continue
        if ver is not None:
            break
        lib, why = None, f"{path}: nvrtcVersion failed"
    if lib is None:
        send(channel, "error", why)
        return 1
    try:  # the library and everything the worker needs are loaded: lock the door now
        if workdir is not None:
            os.chdir(workdir)
        if memory is not None and resource is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if landlock:
            confinement = f"landlock (ABI {landlock_read_only(landlock)})"
    except (OSError, ValueError) as exc:
        send(channel, "error", f"cannot confine the worker: {exc}")
        return 1
    send(channel, "library", path, ver, confinement)
    while (request := receive(sys.stdin.buffer)) is not None:
        source, filename, *options = request
        try:
            rc, log, ptx = compile_program(lib, source.encode(), filename.encode(),
                                           [opt.encode() for opt in options])
        except NvrtcError as exc:
            send(channel, "error", str(exc))
            continue
        send(channel, "ptx", str(rc), log, ptx)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # the host is gone (it exited before our answer): so do we, quietly
        os._exit(0)
