"""The differential fuzzer: deterministic generation, feature coverage, a clean CI run on both
interpreters, the minimiser against an injected bug, the CLI, and a few programs on the model."""

from __future__ import annotations

import pytest

from qgpu.cli import main
from qgpu.machine import interp
from qgpu.machine.isa import Op
from qgpu.suite.fuzz import features, fuzz, generate, minimise, outcomes_of
from qgpu.suite.fuzz.generate import SMALL
from qgpu.suite.fuzz.minimise import size
from qgpu.suite.fuzz.program import ATOMIC_CALL, COMMUTATIVE, OPS, SHUFFLES, UPDATE
from qgpu.suite.fuzz.run import Outcome, Rejections, prepare, signature

CI_PROGRAMS = 300

EVERY_FEATURE = (
    {f"op.{o}" for o in OPS}
    | {f"op.{o}.const" for o in ("udiv", "urem", "sdiv", "srem")}
    | {f"shfl.{m}" for m in SHUFFLES}
    | {f"shared.{o}" for o in (*COMMUTATIVE, "inc", "dec")}
    | {f"atomic.comm.{o}" for o in COMMUTATIVE}
    | {f"atomic.fixed.{o}" for o in ATOMIC_CALL}
    | {f"atomic.casloop.{o}" for o in UPDATE}
    | {"Assign", "Store", "If", "else", "Loop", "loop", "unrolled_loop", "nested_loop",
       "BreakIf", "break", "continue", "Shuffle", "Exchange", "SharedAtomic", "GlobalAtomic",
       "atomic.old", "Barrier", "leaf.var", "leaf.const", "leaf.ctr", "leaf.own", "leaf.old",
       "StoreSub.8", "StoreSub.16", "leaf.own8", "leaf.own16",
       "warps>1", "warps=1", "blocks>1", "blocks=1", "2d", "partial_warp"}
    | {f"atom.{a}" for a in ("tid", "tx", "ty", "gid", "lane", "warp", "bx", "by", "ntx", "nbx",
                             "n")}
)


def test_generation_is_deterministic_per_seed() -> None:
    for i in range(20):
        assert generate(7, i) == generate(7, i)
        assert generate(7, i).source() == generate(7, i).source()
        assert generate(7, i, size=SMALL) == generate(7, i, size=SMALL)
    assert len({generate(7, i).source() for i in range(20)}) == 20
    assert [generate(7, i).source() for i in range(5)] != [generate(8, i).source()
                                                           for i in range(5)]


def test_a_ci_run_is_exact_and_covers_every_feature() -> None:
    """CI_PROGRAMS programs compile, fit (or are generated again for a machine limit, never
    for a toolchain gap), agree on both interpreters and exercise every feature."""
    rejected = Rejections()
    seen: set[str] = set()
    bad = []
    for i in range(CI_PROGRAMS):
        case = prepare(11, i, rejected)
        seen |= features(case.program)
        if case.divergent:
            bad.append(f"program {i}: {case.report()}\n{case.program.source()}")
    assert not bad, bad[0]
    assert EVERY_FEATURE - seen == set()
    assert set(rejected.counts) <= {"over a machine limit", "over the work budget"}, \
        rejected.first
    assert sum(rejected.counts.values()) < CI_PROGRAMS // 3


_ALU = interp.alu


def _popc_off_by_one(op: Op, a: int, b: int, c: int = 0, mod: int = 0) -> int:
    """The machine's popc, one too high: the bug the minimiser must isolate."""
    return a.bit_count() + 1 if op == Op.POPC else _ALU(op, a, b, c, mod)


@pytest.mark.parametrize("chunk", [1, 8])
def test_the_minimiser_shrinks_an_injected_interpreter_bug(monkeypatch, chunk: int) -> None:
    """Chunks of 8 are how the model tests candidates (one batch each)."""
    monkeypatch.setattr(interp, "alu", _popc_off_by_one)
    for i in range(40):
        p = generate(3, i)
        outcomes = outcomes_of([p])[0]
        if outcomes is not None and signature(outcomes) == (("ptx", 0), ("interp", 1)):
            break
    else:
        pytest.fail("no program shows the injected bug")
    want = signature(outcomes)

    def still_fails(programs):
        return [o is not None and signature(o) == want for o in outcomes_of(programs)]

    small, _ = minimise(p, still_fails, chunk=chunk)
    statements, nodes = size(small)
    assert size(p) > (statements, nodes)
    # NVRTC folds a popc of a constant: a variable or a comparison may have to stay around it
    assert statements <= 3 and nodes <= 8, small.source()
    assert "__popc" in small.source()
    assert small.grid == (1, 1) and small.threads <= 4
    assert still_fails([small]) == [True]


def test_cli_prints_the_summary_last_and_exits_by_divergences(capsys) -> None:
    assert main(["fuzz", "--n", "3", "--seed", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "fuzz: seed 2, 3 normal programs on ptx, interp"
    assert lines[-1] == "3 programs, 0 divergences"


def test_cli_reports_a_divergence_minimised(capsys, monkeypatch) -> None:
    monkeypatch.setattr(interp, "alu", _popc_off_by_one)
    seed = next(s for s in range(20) if prepare(s, 0, Rejections()).divergent)
    assert main(["fuzz", "--n", "2", "--seed", str(seed)]) == 1
    out = capsys.readouterr().out
    assert f"divergence: program 0 of seed {seed}" in out and "minimised from" in out
    assert "__popc" in out
    assert out.splitlines()[-1] in ("2 programs, 1 divergences", "2 programs, 2 divergences")


@pytest.mark.parametrize("argv", [
    ["fuzz", "--n", "0"],
    ["fuzz", "--seed", "-1"],
    ["fuzz", "--backend", "model"],
    ["fuzz", "--model", "somewhere"],
    ["fuzz", "--backend", "gpu"],
    ["fuzz", "--size", "huge"],
])
def test_cli_bad_arguments_exit_2(argv: list[str]) -> None:
    assert main(argv) == 2


def test_a_model_divergence_is_reported_and_minimised_in_batches(monkeypatch, capsys) -> None:
    """The model's path without a model: a stand-in that 'diverges' on every program with a
    popc; the minimiser sends its candidates in batches of --batch."""
    import qgpu.suite.fuzz as fuzz_package

    batches: list[int] = []

    def fake_run_model(gpu, cases) -> None:
        batches.append(len(cases))
        for c in cases:
            bad = "__popc" in c.program.source()
            c.outcomes["model"] = Outcome(None, "diverged: at token 3") if bad \
                else c.outcomes["interp"]

    monkeypatch.setattr(fuzz_package, "run_model", fake_run_model)
    found = fuzz(6, 4, gpu=object(), batch=4)
    out = capsys.readouterr().out
    assert found > 0 and out.splitlines()[-1] == f"6 programs, {found} divergences"
    assert "model: error diverged: at token 3" in out and "minimised from" in out
    assert max(batches) == 4 and batches.count(4) > 2


def test_fuzz_on_the_model(gpu, capsys) -> None:
    """A few small programs on the model, checked token by token against the machine."""
    assert fuzz(3, 1, gpu=gpu, batch=3) == 0
    out = capsys.readouterr().out
    assert "3 small programs on ptx, interp, model" in out
    assert out.splitlines()[-1] == "3 programs, 0 divergences"
