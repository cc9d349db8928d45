"""The engine's decode step as one native call (engine_native.c) on a CPU.

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
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from qgpu.cache import default_cache_dir, mark_used

if TYPE_CHECKING:
    from qgpu.runtime.engine import Engine, EngineState

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


class _Csc(ctypes.Structure):
    _fields_ = [("ptr", P), ("packed", P), ("idx", P), ("val", P), ("rows", I32),
                ("cols", I32)]


class _Layer(ctypes.Structure):
    _fields_ = [("heads", I32), ("channels", I32), ("mixing", I32), ("neurons", I32),
                ("input_scale", P), ("post_scale", P),
                ("proj", _Csc), ("out", _Csc), ("gate_up", _Csc), ("down", _Csc),
                ("mix_rows", P), ("taps", P), ("decay", P), ("norm_weight", P)]


class _Model(ctypes.Structure):
    _fields_ = [("layers", I32), ("dims", I32), ("dk", I32), ("dv", I32), ("taps", I32),
                ("bf16", I32), ("first_id", I32), ("vocab", I32), ("diffs", I32),
                ("selected", I32), ("eps", ctypes.c_float), ("width", ctypes.c_float),
                ("q_scale", ctypes.c_float), ("layer", ctypes.POINTER(_Layer)),
                ("embed_base", P), ("embed_cols", P), ("embed_vals", P),
                ("select_dims", P), ("select_scale", P), ("select", _Csc)]


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
    lib.qgpu_step_work.argtypes = [ctypes.POINTER(_Model), ctypes.c_int]
    lib.qgpu_step_work.restype = ctypes.c_size_t
    lib.qgpu_step.argtypes = [ctypes.POINTER(_Model), P, ctypes.c_int, P, P, P, P, P]
    lib.qgpu_step.restype = None
    return lib, ""


class NativeStep:
    """An engine's decode step bound to the compiled library (CPU, float32 or bfloat16)."""

    def __init__(self, lib: ctypes.CDLL, engine: Engine, pack: bool = True) -> None:
        """Bind `engine`'s tensors (`pack` False keeps every matrix's rows and values apart,
        the form a matrix that cannot be packed takes)."""
        self.lib, self.engine, self.pack = lib, engine, pack
        self.tensors: list[torch.Tensor] = []  # what the C structs point into
        self._work = threading.local()  # a scratch buffer per thread
        layers = (_Layer * len(engine.layers))()
        for slot, layer in zip(layers, engine.layers, strict=True):
            slot.heads, slot.channels = len(layer.heads), layer.channels
            slot.mixing, slot.neurons = len(layer.mixing), layer.neurons
            slot.input_scale, slot.post_scale = self._ptr(layer.input_scale), \
                self._ptr(layer.post_scale)
            for name in ("proj", "out", "gate_up", "down"):
                setattr(slot, name, self._columns(getattr(layer, name).by_columns()))
            slot.mix_rows = self._ptr(layer.mixing.int())
            slot.taps = self._ptr(layer.conv)
            slot.decay = self._ptr(None if layer.decay is None else layer.decay.flatten())
            slot.norm_weight = self._ptr(layer.norm_weight.float())
        self._layers = layers
        m = _Model(layers=len(engine.layers), dims=engine.embed_base.numel(), dk=engine.dk,
                   dv=engine.dv, taps=engine.taps, bf16=int(engine.dtype == torch.bfloat16),
                   first_id=engine.first_id, vocab=engine.select_rows.shape[1],
                   diffs=engine.embed_cols.shape[1], selected=engine.select_rows.shape[0],
                   eps=engine.eps, width=float(engine.width), q_scale=1 / engine.dk ** 0.5)
        m.layer = layers
        m.embed_base, m.embed_cols = self._ptr(engine.embed_base), self._ptr(engine.embed_cols)
        m.embed_vals, m.select_dims = self._ptr(engine.embed_vals), \
            self._ptr(engine.select_dims)
        m.select_scale = self._ptr(engine.select_scale)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "sparse CSR support is in beta"
            m.select = self._columns(engine.select_rows.to_sparse_csr())  # of [vocab, dims]
        self.model = m

    def _ptr(self, t: torch.Tensor | None) -> int | None:
        if t is None:
            return None
        t = t.contiguous()
        self.tensors.append(t)
        return t.data_ptr()

    def _compressed(self, m: torch.Tensor, shape: tuple[int, int], bound: int) -> _Csc:
        """A CSR tensor's pointers and entries (their indices below `bound`) as the C struct
        with `shape` (rows, cols); packed (index << 16 | bfloat16 bits, 4 bytes an entry) where
        every value is exact in bfloat16 and `bound` is at most 65,536."""
        ptr, idx, values = m.crow_indices().int(), m.col_indices(), m.values().float()
        halves = values.to(torch.bfloat16)
        if self.pack and bound <= 1 << 16 and torch.equal(halves.float(), values):
            packed = (idx.long() << 16) | (halves.view(torch.int16).long() & 0xFFFF)
            packed = torch.where(packed >= 1 << 31, packed - (1 << 32), packed)  # as uint32
            return _Csc(self._ptr(ptr), self._ptr(packed.int()), None, None, *shape)
        return _Csc(self._ptr(ptr), None, self._ptr(idx.int()), self._ptr(values), *shape)

    def _columns(self, by_columns: torch.Tensor) -> _Csc:
        """A matrix by its columns, given as the CSR of its transpose ([in, out])."""
        inputs, outputs = by_columns.shape
        return self._compressed(by_columns, (outputs, inputs), bound=outputs)

    def step(self, ids: list[int], state: EngineState,
             on_layer: Callable[[int, torch.Tensor], None] | None = None) -> list[int]:
        """One token per sequence through every circuit layer, the state updated in place:
        each sequence's greedy choice. `on_layer(i, h)` sees layer i's output ([dims, B], the
        model dtype) once the step is done, as Engine.forward's hook does."""
        B = len(ids)
        need = int(self.lib.qgpu_step_work(self.model, B))
        work = getattr(self._work, "buffer", None)
        if work is None or work.numel() < need:
            work = self._work.buffer = torch.empty(need)
        for states in (state.conv, state.recurrent):  # float32 [.., B, ..], as the C step reads
            for i, t in enumerate(states):
                if t.dtype != torch.float32 or not t.is_contiguous():
                    states[i] = t.float().contiguous()
        conv = (P * len(state.conv))(*(t.data_ptr() for t in state.conv))
        rec = (P * len(state.recurrent))(*(t.data_ptr() for t in state.recurrent))
        chosen = (ctypes.c_int64 * B)()
        outputs = None if on_layer is None else torch.empty(self.model.layers, self.model.dims, B)
        self.lib.qgpu_step(self.model, (ctypes.c_int64 * B)(*ids), B, conv, rec, chosen,
                           None if outputs is None else outputs.data_ptr(), work.data_ptr())
        if outputs is not None:
            for i, h in enumerate(outputs.to(self.engine.dtype)):
                on_layer(i, h)
        return list(chosen)
