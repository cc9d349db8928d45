"""A merged checkpoint with the GPU circuit, loaded with stock transformers, and the host's
decoding of the machine from the model's recurrent state (results, views, checks): every value
is read from a bank's GDN head, never computed."""

from __future__ import annotations

import collections
import json
import os
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from qgpu.compiler import numerics as nx
from qgpu.compiler.circuit_model import DTYPES
from qgpu.errors import ArgumentTypeError, LaunchError, UsageError
from qgpu.machine import limits
from qgpu.model.merge import METADATA_FILE
from qgpu.runtime.check import CircuitReference
from qgpu.runtime.engine import Engine, EngineSession
from qgpu.runtime.session import OnLayer, Session
from qgpu.runtime.stock import StockSession


class Turns:
    """A first-come, first-served lock: the model's steps, taken in turn by every launch that
    runs on it (``GpuModel.session``). Launches from several users interleave one decode step at
    a time, so a short launch waits for at most one step of each long one per token (a fair
    share) instead of for whole launches."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiting: collections.deque[threading.Event] = collections.deque()
        self._busy = False

    def __enter__(self) -> Turns:
        with self._guard:
            if not self._busy:
                self._busy = True
                return self
            turn = threading.Event()
            self._waiting.append(turn)
        turn.wait()  # handed over by the holder's __exit__
        return self

    def __exit__(self, *exc: object) -> None:
        with self._guard:
            if self._waiting:
                self._waiting.popleft().set()  # still busy: the turn passes on
            else:
                self._busy = False


class _TakingTurns:
    """A session whose model steps wait for their turn on the model (``Turns``)."""

    def __init__(self, session: Session, turns: Turns) -> None:
        self.session, self.turns = session, turns

    def prefill(self, prompts: list[list[int]], on_layer: OnLayer | None = None) -> list[int]:
        with self.turns:
            return self.session.prefill(prompts, on_layer)

    def step(self, ids: list[int | None], on_layer: OnLayer | None = None) -> list[int]:
        with self.turns:
            return self.session.step(ids, on_layer)

    def head(self, layer: int, head: int, batch: int) -> torch.Tensor:
        return self.session.head(layer, head, batch)


ENGINES = ("sparse", "stock")
"""How launches run: the sparse engine over the circuit layers (engine.py, the default) or the
whole merged model in stock transformers (stock.py, the reference path)."""


@dataclass
class GpuModel:
    """A merged checkpoint with the GPU circuit, and what the driver needs from its
    qgpu_circuit.json: the circuit tokens' ids and each bank's head. Launches run on `engine`;
    the stock model and the sparse engine are each loaded when first used (``load`` loads the
    chosen one, and times it)."""

    ids: dict[str, int]  # circuit token name -> id
    banks: dict[str, tuple[int, int]]  # bank -> (layer, GDN head)
    dtype: str
    path: Path
    d_base: int  # circuit dims start here in the merged residual
    circuit_layers: int  # the merged model's first layers
    config: dict  # the merged text config
    device: torch.device
    engine: str = "sparse"
    native: bool = True  # the sparse engine's decode step as one C call where it has one
    load_seconds: float = 0.0
    _loaded: dict = field(default_factory=dict, repr=False)  # shared by with_engine copies

    def __post_init__(self) -> None:
        self.names = {i: n for n, i in self.ids.items()}
        if self.engine not in ENGINES:
            raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, not {self.engine!r}")

    @classmethod
    def load(cls, build: str | Path, dtype: str | None = None, device: str = "cpu",
             engine: str = "sparse") -> GpuModel:
        """Load BUILD/merged (or a merged checkpoint directory itself) in `dtype` (default:
        the dtype it was built in) onto `device` (a torch device: cpu, cuda, cuda:1, ...),
        ready to run launches on `engine`."""
        t0 = time.perf_counter()
        for name, value, types in (("build", build, (str, os.PathLike)),
                                   ("dtype", dtype, (str, type(None))),
                                   ("device", device, (str, torch.device)),
                                   ("engine", engine, (str,))):
            if not isinstance(value, types):
                raise ArgumentTypeError(f"{name} must be a {' or '.join(t.__name__ for t in types)}"
                                        f", got {type(value).__name__}")
        path = Path(build)
        path = path / "merged" if (path / "merged" / METADATA_FILE).is_file() else path
        try:
            meta = json.loads((path / METADATA_FILE).read_text())
            config = json.loads((path / "config.json").read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise UsageError(f"{build}: not a qgpu build or merged checkpoint ({e})") from None
        try:  # a hand-edited or foreign file is a usage error, not a KeyError deep in the load
            circuit = meta["circuit"]["circuit"]
            built_dtype = meta["dtype"]
            banks = {b: (int(layer), int(head))
                     for b, (layer, head) in meta["circuit"]["banks"].items()}
            token_ids = dict(meta["token_ids"])
            dims, layers = int(meta["circuit_dims"][0]), int(meta["circuit_layers"][1])
            text_config = dict(config.get("text_config", config))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            raise UsageError(f"{build}: not a qgpu build or merged checkpoint (its "
                             f"{METADATA_FILE} or config.json is malformed: "
                             f"{type(e).__name__} {e})") from None
        if circuit != "gpu":
            raise UsageError(f"{path} holds the {circuit!r} circuit, not the GPU "
                             "(python -m qgpu build --circuit gpu)")
        dtype = dtype or built_dtype
        if dtype not in DTYPES:
            raise UsageError(f"dtype must be one of {', '.join(DTYPES)}")
        try:
            where = torch.device(device)
        except RuntimeError as e:
            raise UsageError(f"--device {device!r}: {e}") from None
        if where.type == "cuda" and not torch.cuda.is_available():
            raise UsageError(f"--device {device!r}: this torch sees no CUDA device")
        gm = cls(token_ids, banks, dtype, path, dims, layers, text_config, where, engine)
        gm._loaded["meta"] = meta
        gm.model if engine == "stock" else gm.sparse  # noqa: B018 (load it now, timed)
        gm.load_seconds = time.perf_counter() - t0
        return gm

    def with_engine(self, engine: str) -> GpuModel:
        """The same checkpoint running launches on another engine (what is loaded is shared)."""
        return replace(self, engine=engine)

    @property
    def model(self) -> torch.nn.Module:
        """The whole merged model in stock transformers (loaded when first used)."""
        if "stock" not in self._loaded:
            self._loaded["stock"] = AutoModelForCausalLM.from_pretrained(
                self.path, dtype=DTYPES[self.dtype]).to(self.device).eval()
        return self._loaded["stock"]

    @property
    def sparse(self) -> Engine:
        """The sparse engine over the circuit layers (derived and cached when first used)."""
        if "sparse" not in self._loaded:
            self._loaded["sparse"] = Engine.load(self.path, self._loaded["meta"],
                                                 DTYPES[self.dtype], self.device)
        return self._loaded["sparse"]

    @property
    def decode_step(self) -> str | None:
        """How the sparse engine runs a decode step: "native" (one C call) or "pytorch (why)";
        None on the stock path."""
        if self.engine == "stock":
            return None
        if not self.native:
            return "pytorch (native off)"
        return "native" if self.sparse.native is not None else \
            f"pytorch ({self.sparse.native_off})"

    def session(self) -> Session:
        """A new batch of launch sequences on this model's engine; its steps take turns with
        every other session's on this model (and its with_engine copies): ``Turns``."""
        if self.engine == "stock":
            session: Session = StockSession(self.model, self.d_base, self.circuit_layers)
        else:
            session = EngineSession(self.sparse, native=self.native)
        return _TakingTurns(session, self._loaded.setdefault("turns", Turns()))

    @property
    def reference(self) -> CircuitReference:
        """The circuit's reference semantics for layer checks (scheduled once, when asked)."""
        if "reference" not in self._loaded:
            self._loaded["reference"] = CircuitReference(self.config, self.banks,
                                                         self.circuit_layers, self.path)
        return self._loaded["reference"]

    def bank_rows(self, states: Session, bank: str, rows: int, width: int, batch: int = 0) \
            -> list[int]:
        """Rows of a bits bank read from its head's recurrent state, for sequence `batch` of a
        session (host side: decoding only). Every data entry must be exactly 0 or
        VALUE_SCALE."""
        layer, head = self.banks[bank]
        state = states.head(layer, head, batch).float().cpu()
        data = state[:rows, nx.ROW_ANCHORS:nx.ROW_ANCHORS + width]
        bad = (data != 0) & (data != nx.VALUE_SCALE)
        if bool(bad.any()):
            r = int(bad.nonzero()[0, 0])
            raise LaunchError(f"bank {bank} row {r} is not exact: {data[r].tolist()}")
        bits = (data == nx.VALUE_SCALE).long()  # width <= 63: each row's value fits an int64
        return (bits << torch.arange(width)).sum(1).tolist()

    def machine_state(self, states: Session, batch: int = 0) -> MachineState:
        """Registers, predicates, lane pcs and memories read from the banks' heads (one copy
        each: the model keeps several, written by the same frames), for sequence `batch`."""
        from qgpu.circuits.gpu.control import EXITED_BIT, LANE_ROW, TAG

        warps, lanes, regs = limits.MAX_WARPS, limits.WARP_LANES, limits.NUM_REGS
        registers = {}
        for lane in range(lanes):
            rows = self.bank_rows(states, f"regs.{lane}", warps * regs, 32, batch)
            registers |= {(w, lane, r): rows[w * regs + r]
                          for w in range(warps) for r in range(1, regs)}
        preds = self.bank_rows(states, "preds", warps, 4 * lanes, batch)
        predicates = {(w, lane, p): bool(preds[w] >> (4 * lane + p) & 1)
                      for w in range(warps) for lane in range(lanes)
                      for p in range(limits.NUM_PREDS)}
        pcs = {}
        for lane in range(lanes):
            for w, row in enumerate(self.bank_rows(states, f"lanes.{lane}", warps, LANE_ROW,
                                                   batch)):
                pcs[(w, lane)] = (row & ((1 << EXITED_BIT) - 1), bool(row >> EXITED_BIT & 1),
                                  row >> TAG)
        mask = (1 << 32) - 1
        glob = [v & mask for v in self.bank_rows(states, "gmem", limits.GLOBAL_WORDS, 33, batch)]
        return MachineState(registers, predicates, pcs, glob,
                            self.bank_rows(states, "smem", limits.SHARED_WORDS, 32, batch))


@dataclass
class MachineState:
    """The machine as the model's recurrent state holds it (host side: decoding only, for
    views and checks). Rows the launch never wrote read 0; thread blocks do not clear rows."""

    registers: dict[tuple[int, int, int], int]  # (warp, lane, register) -> value, r1..r15
    predicates: dict[tuple[int, int, int], bool]  # (warp, lane, predicate)
    lanes: dict[tuple[int, int], tuple[int, bool, int]]  # (warp, lane) -> (block, exited, cta)
    global_memory: list[int]  # words as stored (unsigned)
    shared_memory: list[int]
