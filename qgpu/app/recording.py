"""One launch as the page shows it: what the host knew before it (program, arguments, prompt),
every token the model generated, and the machine state read from the model's recurrent state
after each of them (``GpuModel.machine_state``) — the data the views draw, nothing computed.

State arrays per token (``Snapshot``): registers [warp, lane, register] (r0 reads 0), predicates
[warp, lane, p], lane pcs [warp, lane] with their exited bit and thread block, global words
(128) and shared words (64), all as the banks hold them (unsigned 32-bit words). The model never
reads its last token (END or a fault) back, so that token shows the state after the one before.
Before the first generated token the views compare with the *prompt state*: every register,
predicate and pc 0, shared memory 0, global memory as the host placed it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from qgpu import protocol as T
from qgpu.errors import UsageError
from qgpu.machine import limits
from qgpu.machine.isa import Program

if TYPE_CHECKING:
    from qgpu.runtime import MachineState

W, L, R, P = limits.MAX_WARPS, limits.WARP_LANES, limits.NUM_REGS, limits.NUM_PREDS


@dataclass(frozen=True)
class Snapshot:
    """The machine as the model's state holds it after one token (see the module doc)."""

    regs: np.ndarray  # [W, L, R] uint32, r0 = 0
    preds: np.ndarray  # [W, L, P] bool
    pcs: np.ndarray  # [W, L] int16: the block each lane runs next
    exited: np.ndarray  # [W, L] bool
    ctas: np.ndarray  # [W, L] int16: the thread block the lane's pc belongs to
    gmem: np.ndarray  # [GLOBAL_WORDS] uint32
    smem: np.ndarray  # [SHARED_WORDS] uint32

    @classmethod
    def of(cls, state: MachineState) -> Snapshot:
        regs = np.zeros((W, L, R), np.uint32)
        for (w, ln, r), v in state.registers.items():
            regs[w, ln, r] = v
        preds = np.zeros((W, L, P), bool)
        for (w, ln, p), v in state.predicates.items():
            preds[w, ln, p] = v
        pcs = np.zeros((W, L), np.int16)
        exited = np.zeros((W, L), bool)
        ctas = np.zeros((W, L), np.int16)
        for (w, ln), (block, done, cta) in state.lanes.items():
            pcs[w, ln], exited[w, ln], ctas[w, ln] = block, done, cta
        return cls(regs, preds, pcs, exited, ctas,
                   np.array(state.global_memory, np.uint32),
                   np.array(state.shared_memory, np.uint32))

    @classmethod
    def prompt(cls, memory: list[int]) -> Snapshot:
        """The prompt state (module doc): only global memory is not zero."""
        return cls(np.zeros((W, L, R), np.uint32), np.zeros((W, L, P), bool),
                   np.zeros((W, L), np.int16), np.zeros((W, L), bool), np.zeros((W, L), np.int16),
                   np.array([v & 0xFFFFFFFF for v in memory], np.uint32),
                   np.zeros(limits.SHARED_WORDS, np.uint32))


@dataclass(frozen=True)
class Param:
    """A kernel parameter as the views label it: its CUDA name, and for an array where the host
    placed it."""

    index: int
    name: str
    array: tuple[int, int] | None  # (first word, words) for an array argument
    value: object  # what was passed (list, {"zeros": n} or int)

    @property
    def label(self) -> str:
        return self.name if self.name else f"arg {self.index}"


def cuda_param_names(source: str, kernel: str, count: int) -> list[str]:
    """The parameter names of `kernel` in its CUDA source (the PTX has only mangled ones);
    empty names where the signature cannot be read."""
    m = re.search(r"__global__\s+(?:__\w+__\s*(?:\([^)]*\))?\s*)*void\s+" + re.escape(kernel)
                  + r"\s*\(([^)]*)\)", source)
    if not m:
        return [""] * count
    parts = [p.strip() for p in m.group(1).split(",") if p.strip()]
    names = []
    for p in parts:
        idents = re.findall(r"[A-Za-z_]\w*", p.split("=")[0])
        names.append(idents[-1] if len(idents) >= 2 else "")
    return names if len(names) == count else [""] * count


def lanes_of(mask: int) -> list[int]:
    return [ln for ln in range(L) if mask >> ln & 1]


def describe(event: T.Event, params: list[Param] | None = None) -> str:
    """An event in words."""
    f, v = event.fields, event.value
    lanes = lambda m: ",".join(map(str, lanes_of(int(m[1:]))))  # noqa: E731
    k = event.kind
    if k == "exec":
        return f"warp {f[1][1:]} runs block B{f[0]} with lanes {lanes(f[2])}"
    if k == "val":
        who = "every active lane" if f[1] == T.LANE_ALL else f"lane {f[1]}"
        return f"{f[0]} of {who} ← {_signed(v)}"
    if k == "prow":
        bits = [f"l{ln}:" + "".join(f"p{p}" for p in range(P) if v >> (P * ln + p) & 1)
                for ln in range(L) if v >> (P * ln) & 0xF]
        return "the warp's predicates ← " + (" ".join(bits) if bits else "all false")
    if k == "mem":
        return f"{memory_label(f[0], params)} ← {_signed(v)}"
    if k == "park":
        return f"lanes {lanes(f[2])} of warp {f[1][1:]} wait at block B{f[0]}"
    if k == "exit":
        return f"lanes {lanes(f[1])} of warp {f[0][1:]} exit"
    if k == "warp":
        return f"the scheduler looks at warp {f[0][1:]}"
    if k == "cta":
        return f"thread block {f[0]} starts"
    if k == "end":
        return "the launch is over"
    if k == "fault":
        return f"the launch stops on a {f[0]} fault"
    return ":".join((k, *f))


def memory_label(row: str, params: list[Param] | None = None) -> str:
    """A MEM row (g9, s3, l1.2) in words, with the argument array a global word belongs to."""
    if row.startswith("g"):
        word = int(row[1:])
        for p in params or []:
            if p.array and p.array[0] <= word < p.array[0] + p.array[1]:
                return f"{p.label}[{word - p.array[0]}] (global word {word})"
        return f"global word {word}"
    if row.startswith("s"):
        return f"shared word {row[1:]}"
    lane, word = row[1:].split(".")
    return f"local word {word} of lane {lane}"


def _signed(v: int | None) -> str:
    if v is None:
        return ""
    v &= 0xFFFFFFFF
    return str(v - (1 << 32) if v >> 31 else v)


@dataclass
class Recording:
    """A launch while it runs and after: tokens and states grow together (one writer, the
    launch's thread; readers see a consistent prefix: ``len(self)``)."""

    kernel: str
    program: Program
    grid: tuple[int, int]
    block: tuple[int, int]
    shared_words: int
    params: list[Param]
    prompt: list[str]  # prompt token bodies
    initial: Snapshot
    run_id: int = 0
    tokens: list[str] = field(default_factory=list)  # generated token bodies
    states: list[Snapshot] = field(default_factory=list)
    outcome: str | None = None  # "end", "fault:KIND", "stopped", "token limit", "error"
    unread: set[int] = field(default_factory=set)  # tokens the model never read back
    _cache: dict = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return min(len(self.tokens), len(self.states))

    @property
    def warps(self) -> int:
        return -(-self.block[0] * self.block[1] // L)

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1]

    def add(self, token: str, state: Snapshot | None) -> None:
        """Generated token `token` (a body or a full name) and the state after the model read
        it (None: it was not read back — the state stays the last one)."""
        body = T.body(token) if token.startswith(T.PREFIX) else token
        prev = self.states[-1] if self.states else self.initial
        if state is None:
            self.unread.add(len(self.tokens))
        self.tokens.append(body)
        self.states.append(state if state is not None else prev)

    def state(self, i: int) -> Snapshot:
        return self.states[i]

    def before(self, i: int) -> Snapshot:
        """The state before token i (the prompt state before the first)."""
        return self.states[i - 1] if i > 0 else self.initial

    # --- the token stream as machine events ------------------------------------------------

    def events(self) -> tuple[list[T.Event], list[int | None]]:
        """The generated tokens as events, and for every token the event it belongs to (None
        for data tokens whose header has not come yet)."""
        n = len(self)
        cached = self._cache.get("events")
        if cached and cached[0] == n:
            return cached[1], cached[2]
        toks = self.tokens[:n]
        # a frame still open at the end (data tokens before their header) is left out
        cut = n
        while cut and re.match(r"d\d:", toks[cut - 1]):
            cut -= 1
        try:
            events = T.decode([T.name(t) for t in toks[:cut]])
        except UsageError:
            events = []
        owner: list[int | None] = [None] * n
        for e_index, e in enumerate(events):
            for t in range(e.first, e.last + 1):
                owner[t] = e_index
        self._cache["events"] = (n, events, owner)
        return events, owner

    def exec_at(self, i: int) -> T.Event | None:
        """The EXEC whose block token i belongs to: the last one at or before it."""
        events, owner = self.events()
        for t in range(min(i, len(owner) - 1), -1, -1):
            e = owner[t]
            if e is not None and events[e].kind == "exec":
                return events[e]
        return None

    def runs_before(self, i: int) -> dict[int, int]:
        """How often each ROM block ran up to token i (EXEC tokens at or before it)."""
        counts: dict[int, int] = {}
        events, _ = self.events()
        for e in events:
            if e.kind == "exec" and e.last <= i:
                b = int(e.fields[0])
                counts[b] = counts.get(b, 0) + 1
        return counts

    def param_of_word(self, word: int) -> Param | None:
        for p in self.params:
            if p.array and p.array[0] <= word < p.array[0] + p.array[1]:
                return p
        return None
