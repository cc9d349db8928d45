"""Run fuzz programs on the PTX interpreter, the machine interpreter and the model, and say
whether (and how) they disagree."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from qgpu.driver import Kernel, compile_source, place_arguments
from qgpu.errors import QgpuError, ResourceError, UnsupportedError
from qgpu.suite.fuzz.generate import NORMAL, Size, generate
from qgpu.suite.fuzz.program import Program
from qgpu.suite.runner import first_difference

WORK_LIMIT = 12_000
"""PTX warp instructions a program may run; longer ones are generated again (the machine's step
limit is 20,000 blocks, and the model pays a token per block)."""
TOKEN_BUDGET = 1000
"""Generated tokens a program may cost on the model (a batch runs as long as its longest)."""
ATTEMPTS = 50


@dataclass(frozen=True)
class Outcome:
    """One backend's result: the final arguments, or the error it stopped with."""

    args: tuple | None
    error: str | None = None
    work: int = field(default=0, compare=False)  # warp instructions it ran

    def describe(self) -> str:
        return f"error {self.error}" if self.error else "ok"


@dataclass
class Case:
    """A program that fits the machine, its kernel and each backend's outcome."""

    index: int
    program: Program
    kernel: Kernel
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    tokens: int = 0  # generated tokens the machine's stream has (the model's cost)

    @property
    def divergent(self) -> bool:
        return divergent(self.outcomes)

    def report(self) -> str:
        return describe(self.outcomes)


def _freeze(args: list[Any]) -> tuple:
    return tuple(tuple(a) if isinstance(a, list) else a for a in args)


def divergent(outcomes: dict[str, Outcome]) -> bool:
    """Any error, or two backends whose final arguments differ."""
    values = list(outcomes.values())
    return any(o.error for o in values) or any(o.args != values[0].args for o in values)


def signature(outcomes: dict[str, Outcome]) -> tuple:
    """What the minimiser keeps: which backends erred and with which kind, and which of the
    others agree (by index of the first backend with the same result)."""
    seen: list[tuple | None] = []
    out = []
    for name, o in outcomes.items():
        if o.error:  # its kind and first plain words: "launch: shuffle source lane is"
            kind, message = o.error.split(":", 1)
            out.append((name, " ".join([kind] + [w for w in message.split() if w.isalpha()][:4])))
            continue
        if o.args not in seen:
            seen.append(o.args)
        out.append((name, seen.index(o.args)))
    return tuple(out)


def describe(outcomes: dict[str, Outcome]) -> str:
    """Each backend against the first one that completed: the first difference or its error."""
    names = list(outcomes)
    ref = next((n for n in names if not outcomes[n].error), None)
    parts = []
    for n in names:
        o = outcomes[n]
        if o.error:
            parts.append(f"{n}: {o.error}")
        elif n != ref and o.args != outcomes[ref].args:
            diff = first_difference([list(a) if isinstance(a, tuple) else a
                                     for a in outcomes[ref].args],
                                    [list(a) if isinstance(a, tuple) else a for a in o.args])
            parts.append(f"{n} differs from {ref}: {diff}")
    return "; ".join(parts) or "all agree"


def compile_program(p: Program) -> Kernel:
    """CUDA -> PTX -> machine program (the lowering runs here, so its limits raise here)."""
    kernel = compile_source(p.source(), filename="fuzz.cu").kernel("fuzz")
    _ = kernel.program
    return kernel


def run_interpreters(p: Program, kernel: Kernel) -> dict[str, Outcome]:
    """The PTX interpreter (the oracle for the lowering) and the machine interpreter."""
    out: dict[str, Outcome] = {}
    for backend in ("ptx", "interp"):
        try:
            res = kernel.launch(grid=p.grid, block=p.block, args=p.args(), backend=backend)
            out[backend] = Outcome(_freeze(res.args),
                                   work=res.stats.get("warp_instructions", 0))
        except QgpuError as e:
            out[backend] = Outcome(None, f"{e.kind}: {e.message}")
    return out


@dataclass
class Rejections:
    """Generated programs that were generated again, by reason (machine limits, toolchain gaps,
    work budget), with the first message of each reason."""

    counts: Counter = field(default_factory=Counter)
    first: dict[str, str] = field(default_factory=dict)

    def add(self, reason: str, message: str) -> None:
        self.counts[reason] += 1
        self.first.setdefault(reason, message)

    def summary(self) -> str:
        if not self.counts:
            return "generated again: none"
        return "generated again: " + ", ".join(f"{n} {r}" for r, n in self.counts.most_common())


def _rejection(e: QgpuError) -> str | None:
    """Why a program that did not build is generated again, or None if that is a finding."""
    if isinstance(e, ResourceError):
        return "over a machine limit"
    if isinstance(e, UnsupportedError):
        return "unsupported by the toolchain"
    return None


def prepare(seed: int, index: int, rejected: Rejections, size: Size = NORMAL,
            token_budget: int | None = None) -> Case:
    """Program `index` of a run: generated (again, while it does not fit the machine, runs more
    than WORK_LIMIT warp instructions or, with a `token_budget`, would make the model generate
    more tokens than that), compiled and run on both interpreters. A divergent program is
    never generated again; one the CUDA compiler rejects is a fuzzer bug and raises."""
    for attempt in range(ATTEMPTS):
        p = generate(seed, index, attempt, size)
        try:
            kernel = compile_program(p)
        except QgpuError as e:
            reason = _rejection(e)
            if reason is None:
                raise
            rejected.add(reason, e.message)
            continue
        case = Case(index, p, kernel, run_interpreters(p, kernel))
        ptx = case.outcomes["ptx"]
        if not ptx.error and ptx.work > WORK_LIMIT:
            rejected.add("over the work budget", f"more than {WORK_LIMIT} warp instructions")
            continue
        if token_budget is not None and not case.divergent:
            case.tokens = model_tokens(case)
            if case.tokens > token_budget:
                rejected.add("over the token budget", f"more than {token_budget} tokens")
                continue
        return case
    raise RuntimeError(f"program {index} of seed {seed}: no attempt fits the machine")


# --- the model --------------------------------------------------------------------------------


def model_tokens(case: Case) -> int:
    """Generated tokens of the machine's stream for a case (0 when the machine erred)."""
    from qgpu import protocol as T

    ref = T.reference(_launch(case.program, case.kernel))
    return 0 if ref.error is not None else len(ref.tokens)


def _launch(p: Program, kernel: Kernel):
    from qgpu import protocol as T

    place = place_arguments(kernel.ptx.params, p.args())
    return T.Launch.checked(kernel.program, p.grid, p.block, place)


def run_model(gpu: Any, cases: list[Case]) -> None:
    """Run cases side by side on the model (one batch), checked token by token against the
    machine's stream and word by word against its memory; adds each case's "model" outcome
    (its args when exact, so that it compares with the others; else what differed)."""
    from qgpu.driver import read_back
    from qgpu.runtime import run_checked_batch

    launches = [_launch(c.program, c.kernel) for c in cases]
    try:
        runs = run_checked_batch(gpu, launches, layers=False)
    except QgpuError as e:
        runs = [e] * len(cases)
    for c, run in zip(cases, runs, strict=True):
        if isinstance(run, QgpuError):
            c.outcomes["model"] = Outcome(None, f"{run.kind}: {run.message}")
        elif not run.exact:
            c.outcomes["model"] = Outcome(None, f"diverged: {run.divergence}")
        else:
            place = place_arguments(c.kernel.ptx.params, c.program.args())
            c.outcomes["model"] = Outcome(_freeze(read_back(place, c.program.args(),
                                                            run.memory)))
