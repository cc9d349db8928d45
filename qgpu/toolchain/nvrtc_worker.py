"""NVRTC in a child process: ``python nvrtc_worker.py LIBNVRTC...`` (qgpu.toolchain.cuda runs it).

The host compiles with NVRTC here rather than in its own process so that a compile can be
stopped: a C call into NVRTC cannot be interrupted, and a pathological source (template
recursion, a huge unrolled loop) would hold the host for minutes. One worker serves every
compile of its host process (starting one costs a Python start and loading libnvrtc, once; a
compile then costs what it did in process plus ~1 ms), and the host kills it at the compile
time limit and starts a new one.

The file imports only the few standard modules a worker must (no json or pathlib: their imports
were half of a start), so the host runs it by path with ``-I -S``, independent of how the host
found the ``qgpu`` package. The host starts it in its own session: Ctrl-C is the host's to
handle, and the host kills it.

Protocol on stdin/stdout: a message is a list of str fields, sent as their count, their byte
lengths (4-byte big-endian each) and their UTF-8 bytes. The worker first says
``("library", PATH, VERSION)`` (the first of its arguments that loads) or ``("error", WHY)`` and
exits; then it answers each ``(SOURCE, FILENAME, *OPTIONS)`` with ``("ptx", RC, LOG, PTX)`` (RC
0: compiled; 6: the source has errors, in the log) or ``("error", WHY)`` (an NVRTC call
failed), until stdin closes.
"""

from __future__ import annotations

import _thread
import ctypes
import os
import struct
import sys
import time
from typing import BinaryIO

NVRTC_SUCCESS = 0


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


def main(libraries: list[str]) -> int:
    _thread.start_new_thread(watch_host, (os.getppid(),))
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever the library prints goes to stderr, never into the protocol
    lib, why = None, "no libnvrtc given"
    for path in libraries:
        try:
            lib = open_nvrtc(path)
            ver = version(lib)
        except (OSError, AttributeError) as exc:  # not loadable, or not an NVRTC library
            lib, why = None, f"{path}: {exc}"
            continue
        if ver is not None:
            send(channel, "library", path, ver)
            break
        lib, why = None, f"{path}: nvrtcVersion failed"
    if lib is None:
        send(channel, "error", why)
        return 1
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
