"""The engine's decode step as one native call (engine_native.c) on a CPU: the C library and
the structs it reads (``engine.NativeStep`` binds an engine's tensors to them).

Eager PyTorch spends a decode step dispatching ~6,600 small operations (docs/ENGINE.md); the C
step runs the same operations, with the same rounding points, in one call, and lets a product
visit only the weight columns whose input is not zero. It is compiled on first use with the
machine's C compiler (``$CC``, else ``cc``, ``gcc`` or ``clang``) into the qgpu cache dir, keyed
by the source, the compiler and the flags. Where there is no compiler, the compile fails, or
``QGPU_NATIVE=0`` is set, the engine runs its PyTorch step (same tokens, slower) and
``Engine.native_off`` says why.

The C step reads the engine's own tensors (float32 values as the model dtype holds them; the
projections re-encoded by columns) and the session's state tensors in place: nothing here
computes anything of a launch.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
from pathlib import Path

from qgpu.cache import default_cache_dir, mark_used

SOURCE = Path(__file__).with_name("engine_native.c")
FLAGS = ["-O3", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math"]
"""No contraction, no fast math: every product and sum rounds on its own, as PyTorch's
separate operations do."""
TUNED = ["-march=native"]
"""The machine's own vector width (a batch's products run ~20 % faster with AVX-512 here; the
results are the same, vectorising reorders nothing without fast math); dropped where the
compiler refuses it. The library is then keyed by the processor too."""

P = ctypes.c_void_p
I32 = ctypes.c_int32


class CscMatrix(ctypes.Structure):
    _fields_ = [("ptr", P), ("packed", P), ("idx", P), ("val", P), ("rows", I32),
                ("cols", I32)]


class LayerStruct(ctypes.Structure):
    _fields_ = [("heads", I32), ("channels", I32), ("mixing", I32), ("neurons", I32),
                ("input_scale", P), ("post_scale", P),
                ("proj", CscMatrix), ("out", CscMatrix), ("gate_up", CscMatrix),
                ("down", CscMatrix),
                ("mix_rows", P), ("taps", P), ("decay", P), ("norm_weight", P)]


class ModelStruct(ctypes.Structure):
    _fields_ = [("layers", I32), ("dims", I32), ("dk", I32), ("dv", I32), ("taps", I32),
                ("bf16", I32), ("first_id", I32), ("vocab", I32), ("diffs", I32),
                ("selected", I32), ("eps", ctypes.c_float), ("width", ctypes.c_float),
                ("q_scale", ctypes.c_float), ("layer", ctypes.POINTER(LayerStruct)),
                ("embed_base", P), ("embed_cols", P), ("embed_vals", P),
                ("select_dims", P), ("select_scale", P), ("select", CscMatrix)]


def _compiler() -> str | None:
    named = os.environ.get("CC")
    return named if named else next(
        (p for p in map(shutil.which, ("cc", "gcc", "clang")) if p), None)


def _processor() -> str:
    """What -march=native compiles for: the CPU's model and feature flags where Linux says."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    lines = [line for line in info.splitlines() if line.startswith(("model name", "flags"))]
    return hashlib.sha256("\n".join(sorted(set(lines))).encode()).hexdigest()


def library() -> tuple[ctypes.CDLL | None, str]:
    """The compiled step, or None and why not."""
    if os.environ.get("QGPU_NATIVE", "1") == "0":
        return None, "QGPU_NATIVE=0"
    cc = _compiler()
    if cc is None:
        return None, "no C compiler (set CC, or install cc, gcc or clang)"
    key = hashlib.sha256(SOURCE.read_bytes())
    key.update(f"{cc}|{' '.join(FLAGS + TUNED)}|{platform.machine()}|{platform.system()}|"
               f"{_processor()}".encode())
    out = default_cache_dir() / "native" / f"engine_native-{key.hexdigest()[:20]}.so"
    mark_used(out)  # (no file yet: nothing to date)
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        why = ""
        for flags in (FLAGS + TUNED, FLAGS):
            try:
                done = subprocess.run([cc, *flags, "-o", str(tmp), str(SOURCE), "-lm"],
                                      capture_output=True, text=True, timeout=120)
            except (OSError, subprocess.TimeoutExpired) as err:
                return None, f"compiling {SOURCE.name} with {cc} failed: {err}"
            if done.returncode == 0:
                break
            why = done.stderr.strip()[-500:]
        else:
            return None, f"compiling {SOURCE.name} with {cc} failed: {why}"
        for old in out.parent.glob("engine_native-*.so"):  # other sources, compilers, CPUs
            old.unlink(missing_ok=True)  # (a process that loaded one keeps its mapping)
        tmp.replace(out)
    lib = ctypes.CDLL(str(out))
    lib.qgpu_step_work.argtypes = [ctypes.POINTER(ModelStruct), ctypes.c_int]
    lib.qgpu_step_work.restype = ctypes.c_size_t
    lib.qgpu_step.argtypes = [ctypes.POINTER(ModelStruct), P, ctypes.c_int, P, P, P, P, P]
    lib.qgpu_step.restype = None
    return lib, ""
