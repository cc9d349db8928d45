"""NVRTC in a child process: ``python nvrtc_worker.py LIBNVRTC...`` (qgpu.toolchain.cuda runs it).

The host compiles with NVRTC here rather than in its own process so that a compile can be
stopped: a C call into NVRTC cannot be interrupted, and a pathological source (template
recursion, a huge unrolled loop) would hold the host for minutes. One worker serves every
compile of its host process (starting one costs ~30 ms once; a compile then costs what it did
in process plus ~1 ms), and the host kills it at the compile time limit and starts a new one.

The file imports only the standard library, so the host can run it by path with ``-I -S``
(fast, and independent of how the host found the ``qgpu`` package).

Protocol on stdin/stdout, each message a 4-byte big-endian length and a UTF-8 JSON object: the
worker first says ``{"library", "version"}`` (the first of its arguments that loads) or
``{"error"}`` and exits; then it answers each ``{"source", "filename", "options"}`` with
``{"rc", "log", "ptx"}`` (rc 0: compiled, 6: the source has errors, in the log) or
``{"error"}`` (an NVRTC call failed), until stdin closes.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import struct
import sys
from pathlib import Path
from typing import Any, BinaryIO

NVRTC_SUCCESS = 0


class NvrtcError(Exception):
    """An NVRTC API call failed (not a compilation error: those come back in the log)."""


def open_nvrtc(path: Path) -> ctypes.CDLL:
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


def send(stream: BinaryIO, message: dict[str, Any]) -> None:
    data = json.dumps(message).encode()
    stream.write(struct.pack(">I", len(data)) + data)
    stream.flush()


def receive(stream: BinaryIO) -> dict[str, Any] | None:
    """The next message, or None at the end of the stream (also a cut-off one)."""
    head = stream.read(4)
    if len(head) < 4:
        return None
    (size,) = struct.unpack(">I", head)
    data = stream.read(size)
    return json.loads(data) if len(data) == size else None


def main(libraries: list[str]) -> int:
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever the library prints goes to stderr, never into the protocol
    lib, why = None, "no libnvrtc given"
    for path in libraries:
        try:
            lib = open_nvrtc(Path(path))
            ver = version(lib)
        except (OSError, AttributeError) as exc:  # not loadable, or not an NVRTC library
            lib, why = None, f"{path}: {exc}"
            continue
        if ver is not None:
            send(channel, {"library": path, "version": ver})
            break
        lib, why = None, f"{path}: nvrtcVersion failed"
    if lib is None:
        send(channel, {"error": why})
        return 1
    while (request := receive(sys.stdin.buffer)) is not None:
        try:
            rc, log, ptx = compile_program(
                lib, request["source"].encode(), request["filename"].encode(),
                [opt.encode() for opt in request["options"]])
        except NvrtcError as exc:
            send(channel, {"error": str(exc)})
            continue
        send(channel, {"rc": rc, "log": log, "ptx": ptx})
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the host's to handle: it kills us
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # the host is gone (it exited before our answer): so do we, quietly
        os._exit(0)
