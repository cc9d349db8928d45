"""The launch service behind the CUDA tab and the ``run_cuda`` API: check a request against the
app's limits, compile it, place its arguments, run it on the shared model (in one of the host's
launch slots, its steps taking turns with the other launches') and say what happened — the
CLI's JSON object, or a stream of tokens with the machine state the model holds after each.

The model computes everything shown: results are read from its recurrent state
(``qgpu.driver.read_back`` of the gmem bank), the views' state after every token
(``GpuModel.machine_state``). The reference interpreter runs only to *compare* (``verify``) or
to say where a fault the model reported happened (``diagnose``), and the page labels both.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from qgpu import protocol as T
from qgpu.app.recording import Param, Recording, Snapshot, cuda_param_names
from qgpu.driver import CompiledModule, Kernel, Placement, compile_source
from qgpu.errors import LaunchError, QgpuError, UsageError
from qgpu.machine import limits
from qgpu.machine.interp import check_launch_shape
from qgpu.machine.races import Race

if TYPE_CHECKING:
    from qgpu.runtime import GpuModel, ModelRun

MAX_SOURCE_CHARS = 20_000
"""Longest CUDA source the service compiles (the ROM holds 128 blocks of 4 instructions: a
kernel that fits is far shorter)."""

MAX_ARGS_CHARS = 8_000
"""Longest argument JSON (global memory holds 127 words: 8,000 characters fit any that fits)."""

MAX_KERNEL_CHARS = 200


class Stopped(QgpuError):
    """The user stopped the launch (the Stop button) before the model ended it."""

    kind = "launch"


def _dims(text: Any, what: str) -> tuple[int, int]:
    """X or X,Y (as the CLI writes them); also a list or an int from API callers."""
    if isinstance(text, int) and not isinstance(text, bool):
        parts = [text]
    elif isinstance(text, list | tuple):
        parts = list(text)
    else:
        try:
            parts = [int(p) for p in str(text).replace("x", ",").split(",") if p.strip()]
        except ValueError:
            raise UsageError(f"{what} must be X or X,Y (integers), got {text!r}") from None
    if not 1 <= len(parts) <= 2 or not all(isinstance(p, int) for p in parts):
        raise UsageError(f"{what} must be X or X,Y (integers), got {text!r}")
    return (parts[0], parts[1] if len(parts) == 2 else 1)


@dataclass(frozen=True)
class Request:
    """A launch as the page or the API asks for it, checked against the app's limits."""

    source: str
    kernel: str | None
    grid: tuple[int, int]
    block: tuple[int, int]
    args: list[Any]
    dynamic_shared: int

    @classmethod
    def parse(cls, source: Any, kernel: Any, grid: Any, block: Any, args: Any,
              dynamic_shared: Any = 0) -> Request:
        if not isinstance(source, str) or not source.strip():
            raise UsageError("the CUDA source is empty")
        if len(source) > MAX_SOURCE_CHARS:
            raise UsageError(f"the CUDA source has {len(source):,} characters; this app "
                             f"compiles at most {MAX_SOURCE_CHARS:,} (the machine's ROM holds "
                             f"{limits.ROM_BLOCKS} blocks of {limits.BLOCK_SLOTS} instructions)")
        kernel = (kernel or "").strip() if isinstance(kernel, str | None) else str(kernel)
        if len(kernel) > MAX_KERNEL_CHARS:
            raise UsageError(f"the kernel name is longer than {MAX_KERNEL_CHARS} characters")
        if isinstance(args, str):
            if len(args) > MAX_ARGS_CHARS:
                raise UsageError(f"the arguments have {len(args):,} characters; at most "
                                 f"{MAX_ARGS_CHARS:,} (global memory holds "
                                 f"{limits.GLOBAL_WORDS - limits.GLOBAL_FIRST_WORD} words)")
            try:
                args = json.loads(args) if args.strip() else []
            except json.JSONDecodeError as e:
                raise UsageError(f"the arguments are not valid JSON: {e}") from None
        elif len(json.dumps(args)) > MAX_ARGS_CHARS:
            raise UsageError(f"the arguments are longer than {MAX_ARGS_CHARS:,} characters "
                             "of JSON")
        if not isinstance(args, list):
            raise UsageError("the arguments must be a JSON list with one entry per kernel "
                             'parameter, e.g. [[1,2,3], {"zeros": 3}, 3]')
        if dynamic_shared in (None, ""):
            dynamic_shared = 0
        try:
            shared = int(dynamic_shared)
        except (TypeError, ValueError):
            raise UsageError(f"dynamic shared memory must be a number of bytes, got "
                             f"{dynamic_shared!r}") from None
        if shared != dynamic_shared and not isinstance(dynamic_shared, str):
            raise UsageError(f"dynamic shared memory must be whole bytes, got {dynamic_shared}")
        if not 0 <= shared <= 4 * limits.SHARED_WORDS:
            raise UsageError(f"dynamic shared memory must be 0..{4 * limits.SHARED_WORDS} bytes "
                             f"(the machine has {limits.SHARED_WORDS} shared words), got {shared}")
        grid, block = _dims(grid, "grid"), _dims(block, "block")
        check_launch_shape(grid, block)
        return cls(source, kernel or None, grid, block, args, shared)


@lru_cache(maxsize=64)
def compile_cached(source: str) -> CompiledModule:
    """CUDA -> PTX -> parsed module, remembered per source (NVRTC takes ~50 ms); a user's
    source, so only a confined compiler takes it (docs/SECURITY.md)."""
    return compile_source(source, filename="kernel.cu", untrusted=True)


def kernel_names(source: str) -> list[str]:
    """The kernels a source defines ([] if it does not compile)."""
    try:
        return compile_cached(source).kernel_names
    except QgpuError:
        return []


@dataclass
class Prepared:
    """A request compiled, lowered and placed: everything the prompt says."""

    request: Request
    kernel: Kernel
    place: Placement
    launch: T.Launch
    params: list[Param]

    @property
    def name(self) -> str:
        return self.kernel.name

    def recording(self, run_id: int = 0) -> Recording:
        return new_recording(self.launch, self.name, self.params, run_id)


def new_recording(launch: T.Launch, kernel: str, params: list[Param], run_id: int = 0) \
        -> Recording:
    """An empty recording of `launch`: what the prompt says, before any generated token (the
    CUDA tab's runs and the chat's launches are recorded alike)."""
    return Recording(kernel, launch.program, launch.grid, launch.block, launch.shared_words,
                     params, [T.body(t) for t in T.prompt_tokens(launch)],
                     Snapshot.prompt(launch.memory), run_id)


def params_of(kernel: Kernel, place: Placement, args: list[Any], source: str = "") \
        -> list[Param]:
    """The views' labels for a launch's arguments: each parameter's CUDA name (from `source`,
    when it has one) and, for an array, where the host placed it."""
    cuda = cuda_param_names(source, kernel.name, len(kernel.ptx.params))
    params = []
    for i, arg in enumerate(args):
        array = None
        if i in place.arrays:
            addr, words = place.arrays[i]
            array = (addr // limits.WORD_BYTES, words)
        params.append(Param(i, cuda[i] if i < len(cuda) else "", array, arg))
    return params


def prepare(req: Request) -> Prepared:
    """Compile (errors name their lines), pick the kernel, lower it (ROM, registers), place the
    arguments and check the launch (threads, shared memory, parameters) — any QgpuError."""
    module = compile_cached(req.source)
    names = module.kernel_names
    if not names:
        raise UsageError("the source defines no __global__ kernel")
    if req.kernel is None and len(names) > 1:
        raise UsageError(f"the source has {len(names)} kernels ({', '.join(names)}): pick one")
    if req.kernel is not None and req.kernel not in names:
        raise UsageError(f"the source has no kernel {req.kernel!r}; it has {', '.join(names)}")
    kernel = module.kernel(req.kernel or names[0])
    program = kernel.program
    place = kernel.place(req.args)  # arguments, and the kernel's __device__/__constant__ data
    launch = T.Launch.checked(program, req.grid, req.block, place, req.dynamic_shared)
    return Prepared(req, kernel, place, launch, params_of(kernel, place, req.args, req.source))


# --- running on the model ---------------------------------------------------------------------


@dataclass
class Tick:
    """Generated token `index` and the machine state the model holds after reading it."""

    index: int
    token: str
    state: Snapshot


@dataclass
class Finished:
    """The launch is over: the model's run, or the error that ended it (a fault, the token
    limit, a stop)."""

    run: ModelRun | None = None
    error: QgpuError | None = None
    seconds: float = 0.0
    tokens: int = 0  # generated tokens the model read back before it ended
    extra: dict = field(default_factory=dict)


class _Reading:
    """A live session that notes which GDN heads ``GpuModel.machine_state`` reads."""

    def __init__(self, session) -> None:
        self.session, self.keys = session, []

    def head(self, layer: int, head: int, batch: int):
        self.keys.append((layer, head, batch))
        return self.session.head(layer, head, batch)


class _Copied:
    """Those heads as they were after one token (copied before the next step changes them)."""

    def __init__(self, session, keys) -> None:
        self.heads = {k: session.head(*k).clone() for k in keys}

    def head(self, layer: int, head: int, batch: int):
        return self.heads[(layer, head, batch)]


def stream_launch(gm: GpuModel, lock: threading.Lock, launch: T.Launch, token_limit: int) \
        -> Iterator[Tick | Finished]:
    """Run a launch on the model in a worker thread and yield a Tick per generated token it
    read back, then Finished. Each Tick's state is ``GpuModel.machine_state`` of the model's
    recurrent state after that token: the heads it reads are copied when the token is read
    (a fraction of a millisecond) and decoded by a second thread, so decoding overlaps the next
    steps instead of holding the model. Closing the generator stops the launch at its next
    token."""
    from qgpu.runtime import run_launch

    out: queue.Queue = queue.Queue()
    copies: queue.Queue = queue.Queue()
    stop = threading.Event()
    keys: list = []
    count = [0]

    def on_token(i: int, token: str, session) -> None:
        if stop.is_set():
            raise Stopped(f"stopped after {i} generated tokens")
        if not keys:  # the first token: learn which heads the decoding reads
            reading = _Reading(session)
            copies.put((i, token, Snapshot.of(gm.machine_state(reading))))
            keys.extend(dict.fromkeys(reading.keys))
        else:
            copies.put((i, token, _Copied(session, keys)))
        count[0] = i + 1

    def work() -> None:
        t0 = time.perf_counter()
        with lock:
            try:
                run = run_launch(gm, launch, token_limit=token_limit, on_token=on_token)
                fin = Finished(run, None, time.perf_counter() - t0, count[0])
            except QgpuError as e:
                fin = Finished(None, e, time.perf_counter() - t0, count[0])
            except Exception as e:  # noqa: BLE001 — shown in the page, never a traceback
                fin = Finished(None, QgpuError(f"{type(e).__name__}: {e}"),
                               time.perf_counter() - t0, count[0])
        copies.put(fin)

    def decode() -> None:
        while True:
            item = copies.get()
            if isinstance(item, Finished):
                out.put(item)
                return
            i, token, state = item
            if not stop.is_set():
                out.put(Tick(i, token, state if isinstance(state, Snapshot)
                             else Snapshot.of(gm.machine_state(state))))

    threads = [threading.Thread(target=work, name="qgpu-launch", daemon=True),
               threading.Thread(target=decode, name="qgpu-states", daemon=True)]
    for t in threads:
        t.start()
    try:
        while True:
            item = out.get()
            yield item
            if isinstance(item, Finished):
                return
    finally:
        stop.set()
        for t in threads:
            t.join()


def execute(gm: GpuModel, lock: threading.Lock, launch: T.Launch, token_limit: int) -> ModelRun:
    """One launch on the model, no views (the API): its ModelRun or the LaunchError."""
    from qgpu.runtime import run_launch

    with lock:
        return run_launch(gm, launch, token_limit=token_limit)


# --- the reference machine: compare and locate, never the result -----------------------------


@dataclass(frozen=True)
class Verdict:
    """Whether the model's launch equals the reference machine's: exact (True / False / None
    when the reference itself cannot run it), and the first difference in words; `races`: the
    data races the replay saw (the model runs the launch as the machine does, races and all)."""

    exact: bool | None
    message: str
    races: tuple[Race, ...] = ()


def verify(prep: Prepared, generated: list[str], memory: list[int] | None,
           complete: bool = True) -> Verdict:
    """Replay the launch on the reference interpreter and compare every generated token and
    (if the model finished) every global word; `complete` False compares the tokens the model
    generated before it was stopped. The verdict carries the replay's races."""
    ref = T.reference(prep.launch)
    named = prep.kernel.name_races(ref.races, prep.place, prep.request.dynamic_shared)
    return replace(_compare(ref.tokens, ref.memory, ref.error, generated, memory, complete),
                   races=tuple(named))


def _compare(expected: list[str] | None, want: list[int] | None, error: LaunchError | None,
             generated: list[str], memory: list[int] | None, complete: bool) -> Verdict:
    """The model's tokens and words against the reference's: the first difference."""
    if expected is None:
        return Verdict(None, f"the reference interpreter cannot run this launch: "
                             f"{error.message}")
    got = [T.name(t) if not t.startswith(T.PREFIX) else t for t in generated]
    for i, tok in enumerate(got):
        if i >= len(expected):
            return Verdict(False, f"generated token {i} is {T.body(tok)}; the reference "
                                  f"machine's stream had ended after {len(expected)} tokens")
        if tok != expected[i]:
            return Verdict(False, f"generated token {i} is {T.body(tok)}, the reference "
                                  f"machine says {T.body(expected[i])}")
    if not complete:
        return Verdict(True, f"each of the {len(got)} tokens generated before the launch "
                             f"stopped equals the reference machine's (it generates "
                             f"{len(expected)} in all)")
    if len(got) < len(expected):
        return Verdict(False, f"the model ended after {len(got)} tokens; the reference "
                              f"machine generates {len(expected)}")
    if memory is not None and want is not None:
        for w in range(limits.GLOBAL_WORDS):
            if memory[w] & 0xFFFFFFFF != want[w] & 0xFFFFFFFF:
                return Verdict(False, f"global word {w}: the model holds {memory[w]}, the "
                                      f"reference machine {want[w]}")
        return Verdict(True, f"exact: all {len(got)} generated tokens and all "
                             f"{limits.GLOBAL_WORDS} global words equal the reference machine's")
    return Verdict(True, f"exact: all {len(got)} generated tokens equal the reference "
                         f"machine's, which stops on the same fault")


def diagnose(prep: Prepared) -> str | None:
    """Where the reference interpreter places a fault (kernel, block, instruction, thread,
    address) — the model's fault token names only the kind and the block."""
    error = T.reference(prep.launch).error
    return None if error is None else error.message


# --- the CLI's JSON object ----------------------------------------------------------------------


def error_json(e: QgpuError) -> dict[str, Any]:
    return {"error": {"kind": e.kind, "message": e.message}}


def result_json(gm: GpuModel, prep: Prepared, run: ModelRun,
                verdict: Verdict | None = None) -> dict[str, Any]:
    """``python -m qgpu run --backend model --json``'s object for a finished launch."""
    from qgpu.driver import read_back

    prog = prep.launch.program
    out: dict[str, Any] = {
        "kernel": prep.name, "backend": "model",
        "args": read_back(prep.place, prep.request.args, run.memory),
        "stats": {"rom_blocks": len(prog.blocks), "instructions": prog.instruction_count()},
        "prompt_tokens": run.prompt_tokens, "generated_tokens": len(run.generated),
        "engine": gm.engine, "decode_step": gm.decode_step,
        "seconds": {"load": gm.load_seconds, **run.seconds},
    }
    if verdict is not None:
        out["exact"] = verdict.exact
        if not verdict.exact:
            out["divergence"] = verdict.message
        if verdict.races:
            out["races"] = [r.to_json() for r in verdict.races]
            out["warnings"] = [r.message() for r in verdict.races]
    return out


def run_json(gm: GpuModel, lock: threading.Lock, source: Any, kernel: Any, grid: Any,
             block: Any, args: Any, dynamic_shared: Any = 0, verify_run: bool = False,
             token_limit: int = 5_000) -> dict[str, Any]:
    """The ``run_cuda`` endpoint: one launch, the CLI's JSON object (or its error object)."""
    try:
        prep = prepare(Request.parse(source, kernel, grid, block, args, dynamic_shared))
        run = execute(gm, lock, prep.launch, token_limit)
        verdict = verify(prep, run.generated, run.memory) if verify_run else None
        return result_json(gm, prep, run, verdict)
    except QgpuError as e:
        return error_json(e)
