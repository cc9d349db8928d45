"""``gpu_calc``: evaluate an expression by launching kernels, one launch per operation.

    from qgpu.chat.calc import Launcher, calc
    calc("sum([1, 2, 3] * [4, 5, 6])").value                  # 32, on the reference machine
    gpu = qgpu.runtime.GpuModel.load("build/gpu")
    r = calc("[1, 2, 3] @ [4, 5, 6]", Launcher("model", gpu))  # the model writes the launch
    r.value, [(x.kernel, x.generated_tokens) for x in r.launches]

The host parses, plans every step (shapes and memory are checked before anything runs:
plan.check), places each step's operands as argument arrays, and reads its result back: on
the model backend from the model's recurrent state (``runtime.run_launch``), each launch in a
sequence of its own. A composition is several launches whose results go back in as the next
launches' inputs; the host computes nothing in between. A flag word a checked kernel raised
becomes an ``overflow`` or ``division_by_zero`` error naming the operation. This is also
``python -m qgpu calc`` (cli.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

from qgpu.chat.errors import ArithmeticFault
from qgpu.chat.expression import Node, format_expression, parse
from qgpu.chat.plan import Step, Value, check, data, labelled, operands_of, plan_step, shape
from qgpu.driver import SUITE_DIR, Kernel, load_ptx, read_back
from qgpu.errors import LaunchError, UsageError

BACKENDS = ("interp", "model")


@cache
def suite_kernel(name: str) -> Kernel:
    """A kernel of ``kernels/`` from its committed PTX (the pinned NVRTC's output, kept
    current by tests/toolchain/test_cuda.py), lowered once per process."""
    return load_ptx((SUITE_DIR / "ptx" / f"{name}.ptx").read_text(encoding="utf-8"),
                    "committed").kernel(name)


@dataclass
class LaunchRecord:
    """One launch: what it computed, where, and what it cost. `args` are the inputs as placed,
    `result` every argument's final value (the interp backend counts the tokens the model
    would have generated, from the machine's trace); `cuda` is the kernel's source."""

    what: str
    kernel: str
    grid: tuple[int, int]
    block: tuple[int, int]
    args: list[Any]
    result: list[Any]
    backend: str
    prompt_tokens: int
    generated_tokens: int
    seconds: float
    exact: bool | None = None  # model backend with check: every token and word was the machine's
    cuda: str = field(default="", repr=False)
    suite: bool = False  # the kernel is kernels/KERNEL.cu

    def to_json(self, source: bool = False) -> dict[str, Any]:
        """The record as JSON; the CUDA text only if `source` (suite kernels name their file)."""
        out: dict[str, Any] = {
            "kernel": self.kernel, "what": self.what, "grid": list(self.grid),
            "block": list(self.block), "args": self.args, "result": self.result,
            "backend": self.backend, "prompt_tokens": self.prompt_tokens,
            "generated_tokens": self.generated_tokens, "seconds": round(self.seconds, 3)}
        if self.exact is not None:
            out["exact"] = self.exact
        if self.suite:
            out["source_file"] = f"kernels/{self.kernel}.cu"
        if source:
            out["source"] = self.cuda
        return out


class LaunchWatch(Protocol):
    """Hears one model launch as it runs (the app records every chat launch this way, so its
    views can show the state the model held after each token)."""

    def token(self, i: int, token: str, session: Any) -> None:
        """Generated token i was read back; `session`'s state holds everything up to it
        (``GpuModel.machine_state(session)`` decodes it)."""

    def done(self, run: Any, error: BaseException | None) -> None:
        """The launch is over: its ``runtime.ModelRun`` (None if the model did not finish) and
        the error that ended it or rejected it (a fault, the token limit, a difference from
        the machine; None if it succeeded)."""


Watch = Callable[[Any, Kernel, list[Any], str], "LaunchWatch | None"]
"""watch(launch, kernel, args, what) as a model launch starts (launch: a protocol.Launch):
the LaunchWatch that hears it, or None."""


class Launcher:
    """Runs kernels on a backend: ``interp`` (the reference machine) or ``model`` (the GPU
    inside a merged model: `model` is a runtime.GpuModel). With `check`, each model launch is
    first run on the reference machine (a kernel that faults or never ends is stopped there,
    before the model starts), then the model's run must give the machine's token stream
    exactly and leave every global word as the machine does, else a ``launch`` error: a number
    the model did not compute exactly is never returned. The host still reads the result from
    the model's state. `token_limit` bounds a model launch's generated tokens;
    `on_token(what, n, total)` hears about the n-th generated token of a running model launch
    (`total`: the machine's token count when checked, else None). A page that shares the model
    passes `lock` (held around each model launch) and `watch` (a LaunchWatch per launch)."""

    def __init__(self, backend: str = "interp", model: Any = None, *, check: bool = False,
                 token_limit: int | None = None,
                 on_token: Callable[[str, int, int | None], None] | None = None,
                 lock: contextlib.AbstractContextManager | None = None,
                 watch: Watch | None = None) -> None:
        if backend not in BACKENDS:
            raise UsageError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        if backend == "model" and model is None:
            raise UsageError("the model backend needs a merged model (--model BUILD_DIR)")
        self.backend, self.model, self.check = backend, model, check
        self.token_limit, self.on_token = token_limit, on_token
        self.lock, self.watch = lock, watch

    def with_progress(self, on_token: Callable[[str, int, int | None], None] | None) \
            -> Launcher:
        """The same backend and settings reporting progress to `on_token` (a copy: launchers
        are shared between chats)."""
        return Launcher(self.backend, self.model, check=self.check,
                        token_limit=self.token_limit, on_token=on_token, lock=self.lock,
                        watch=self.watch)

    def run(self, step: Step) -> LaunchRecord:
        """One planned calculator step (a suite kernel)."""
        record = self.launch(suite_kernel(step.kernel), step.grid, step.block, step.args,
                             step.what)
        record.cuda, record.suite = suite_source(step.kernel), True
        return record

    def launch(self, kernel: Kernel, grid: tuple[int, int], block: tuple[int, int],
               args: list[Any], what: str, dynamic_shared: int = 0) -> LaunchRecord:
        """Any lowered kernel (driver.Kernel) with arguments in the driver's JSON form."""
        from qgpu import protocol as T

        grid, block = tuple(grid), tuple(block)
        place = kernel.place(args)
        launch = T.Launch.checked(kernel.program, grid, block, place, dynamic_shared)
        t0 = time.perf_counter()
        exact = None
        if self.backend == "interp":
            res = kernel.launch(grid=grid, block=block, args=args,
                                dynamic_shared=dynamic_shared)
            final = res.args
            generated = len(T.expected_tokens(launch, res.trace))
        else:
            from qgpu.runtime import DEFAULT_TOKEN_LIMIT, run_launch

            expected = want = None
            if self.check:
                ref = T.reference(launch)
                if ref.tokens is None:
                    raise ref.error
                expected, want = ref.tokens, ref.memory
            total = None if expected is None else len(expected)
            watch = None if self.watch is None else self.watch(launch, kernel, args, what)

            def report(i: int, tok: str, session: Any) -> None:
                if self.on_token is not None:
                    self.on_token(what, i + 1, total)
                if watch is not None:
                    watch.token(i, tok, session)

            run = None
            try:
                with self.lock if self.lock is not None else contextlib.nullcontext():
                    run = run_launch(self.model, launch, token_limit=self.token_limit or
                                     DEFAULT_TOKEN_LIMIT, expected=expected,
                                     on_token=report if self.on_token or watch else None)
                if self.check:
                    bad = [w for w, (m, r) in enumerate(zip(run.memory, want, strict=True))
                           if (m - r) & 0xFFFFFFFF]
                    if bad:
                        raise LaunchError(f"{what}: the model's launch of {kernel.name} left "
                                          f"global word {bad[0]} = {run.memory[bad[0]]}, the "
                                          f"machine {want[bad[0]]}")
                    exact = True
            except Exception as e:
                if watch is not None:
                    watch.done(run, e)
                if isinstance(e, LaunchError) and e.fault:
                    raise LaunchError(f"{e.message}. Where: {self._where(launch)}",
                                      e.fault) from e
                raise
            if watch is not None:
                watch.done(run, None)
            final = read_back(place, args, run.memory)
            generated = len(run.generated)
        return LaunchRecord(what, kernel.name, grid, block, args, final, self.backend,
                            len(T.prompt_tokens(launch)), generated, time.perf_counter() - t0,
                            exact)

    @staticmethod
    def _where(launch: Any) -> str:
        """Where the reference interpreter places the fault the model reported (the model's
        fault token names only its kind and thread block): the kernel's instruction, thread
        and address, so that whoever wrote the kernel can fix it."""
        from qgpu import protocol as T

        error = T.reference(launch).error
        if error is None:
            return "the reference interpreter runs this launch without a fault"
        return f"the reference interpreter: {error.message}"


@cache
def suite_source(name: str) -> str:
    return (SUITE_DIR / f"{name}.cu").read_text(encoding="utf-8")


def raise_flags(step: Step, final_args: list[Any]) -> None:
    """The error a checked kernel's flag words report, if any."""
    if step.flag is None:
        return
    flags = final_args[step.flag]
    if len(flags) > 1 and flags[1]:
        raise ArithmeticFault("division_by_zero", f"{step.what}: division by zero (reported by "
                                                  f"the GPU's {step.kernel} launch)")
    if flags[0]:
        raise ArithmeticFault(
            "overflow", f"{step.what}: the result does not fit in int32 (-2147483648.."
                        f"2147483647); the GPU's {step.kernel} launch flagged an overflow")


@dataclass
class CalcResult:
    """An evaluated expression: its value and every launch that computed it, in order."""

    expression: str
    value: Value
    launches: list[LaunchRecord] = field(default_factory=list)

    @property
    def canonical(self) -> str:
        return format_expression(parse(self.expression))

    def to_json(self) -> dict[str, Any]:
        """``{"expression", "value", "launches": [{"kernel", "prompt_tokens",
        "generated_tokens", ...}]}``: the ``python -m qgpu calc --json`` contract."""
        return {"expression": self.expression, "value": self.value,
                "launches": [x.to_json() for x in self.launches]}


def evaluate(node: Node, launcher: Launcher,
             on_launch: Callable[[LaunchRecord], None] | None = None) -> tuple[Value, list]:
    """The value of a checked tree, children first, one launch per operation (a postorder
    walk with a value stack: no recursion, however long a chain)."""
    launches: list[LaunchRecord] = []
    values: list[Value] = []
    for n, what in labelled(node):
        operands = operands_of(n, values)
        step = plan_step(n, operands, what)
        if step is None:
            values.append(data(n, operands))
            continue
        record = launcher.run(step)
        launches.append(record)
        if on_launch is not None:
            on_launch(record)
        raise_flags(step, record.result)
        value = step.result(record.result)
        assert shape(value) == step.shape
        values.append(value)
    (value,) = values
    return value, launches


def calc(expression: str, launcher: Launcher | None = None, *,
         on_launch: Callable[[LaunchRecord], None] | None = None) -> CalcResult:
    """Parse, check and evaluate an expression (on the reference machine by default);
    `on_launch(record)` hears about each launch as it finishes."""
    node = parse(expression)
    check(node)
    value, launches = evaluate(node, launcher or Launcher(), on_launch)
    return CalcResult(expression, value, launches)
