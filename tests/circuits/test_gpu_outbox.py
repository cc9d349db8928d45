"""The circuit chooses every token it generates: fed the prompt and then, token by token, the
stream the reference machine says a launch produces, each pass's selection — turned into
logits the way the tied embeddings do it (the token's own fields plus the selection, dotted
with every token's embedding) — picks exactly the next token of the stream, by a margin.

The launches cover several warps and thread blocks, divergence (park tokens), barriers (the
sweep), loops, local memory, shuffles and indexed addresses; a faulting launch chooses its fault.
"""

import numpy as np
import pytest

from qgpu import protocol as T
from qgpu.circuits.gpu import encoding, machine, outbox
from qgpu.circuits.gpu.encoding import FIELDS
from qgpu.compiler.evaluate import Evaluator
from qgpu.errors import LaunchError
from qgpu.machine import limits
from qgpu.machine.interp import run_program, s32
from qgpu.machine.isa import Atom, Block, Instr, Op, Program, Space, SReg, Term, TermKind
from tests.circuits.helpers import launch_stream

KERNELS = ("vec_add", "reverse", "shfl_broadcast", "transpose_shared", "matmul4_regs")
SELECTION = [(n, size) for f in FIELDS if f.selects for n, size in f.features().items()]


class Logits:
    """Every token's logit from a pass's values: its embedding (1 on each of its field dims)
    dotted with the residual's selection dims (the current token's own fields plus s.*)."""

    def __init__(self) -> None:
        self.cols = {(n, i): k for k, (n, i) in enumerate(
            (n, i) for n, size in SELECTION for i in range(size))}
        self.vocab = T.vocabulary()
        self.emb = np.zeros((len(self.vocab), len(self.cols)), dtype=np.int64)
        for t, tok in enumerate(self.vocab):
            for n, vals in encoding.features(tok).items():
                for i, v in enumerate(vals):
                    if v and (n, i) in self.cols:
                        self.emb[t, self.cols[(n, i)]] = v

    def choice(self, vals: dict[str, list[int]]) -> tuple[str, int]:
        """The greedy choice and its margin over the runner-up."""
        h = np.zeros(len(self.cols), dtype=np.int64)
        for n, size in SELECTION:
            own, sel = vals.get(n, [0] * size), vals[f"s.{n}"]
            for i in range(size):
                h[self.cols[(n, i)]] = own[i] + sel[i]
        logits = self.emb @ h
        best, second = np.argsort(-logits)[:2]
        return self.vocab[best], int(logits[best] - logits[second])


@pytest.fixture(scope="module")
def graph():
    return machine.build()


@pytest.fixture(scope="module")
def logits():
    return Logits()


def generate_checked(graph, logits: Logits, prompt: list[str], stream: list[str]) -> int:
    """Feed the prompt and the stream; every pass from GO on must choose the stream's next
    token. Returns the smallest margin."""
    ev = Evaluator(graph)
    for token in prompt[:-1]:
        ev.step(encoding.features(token))
    fed = [prompt[-1]] + stream
    margins = []
    for i, token in enumerate(fed[:-1]):
        got, margin = logits.choice(ev.step(encoding.features(token)))
        assert got == fed[i + 1], (i, [T.body(t) for t in fed[max(0, i - 3):i + 2]])
        margins.append(margin)
    return min(margins)


@pytest.mark.parametrize("name", KERNELS)
def test_the_circuit_generates_the_launch(graph, logits, name: str) -> None:
    launch, run, stream = launch_stream(name)
    prompt = T.prompt_tokens(launch)
    margin = generate_checked(graph, logits, prompt, stream[len(prompt):])
    # a rival shares all but one field of the choice, plus the current token's own fields
    assert margin >= outbox.GAIN - int(logits.emb.sum(axis=1).max())


def test_the_sweep_barriers_exits_and_thread_blocks(graph, logits) -> None:
    """Two warps meet at a barrier, exit, and two thread blocks follow (the control tokens of
    tests/protocol/test_tokens.py), here chosen by the circuit."""
    prog = Program("t", (
        Block((Instr(Op.S2R, 1, mod=SReg.TID_X), Instr(Op.SHL, 2, 1, imm=2, bi=True),
               Instr(Op.ST, 0, 2, 1, mod=Space.SHARED)), Term(TermKind.BAR, 1)),
        Block((Instr(Op.LD, 3, 2, mod=Space.SHARED), Instr(Op.ADD, 4, 3, imm=5, bi=True)),
              Term(TermKind.JMP, 2)),
        Block((Instr(Op.LD, 5, 0, mod=Space.PARAM), Instr(Op.ADD, 5, 5, 2)), Term(TermKind.JMP, 3)),
        Block((Instr(Op.ST, 0, 5, 4, mod=Space.GLOBAL),), Term(TermKind.EXIT)),
    ), 1, 32, 0, 0)
    memory, allocations = [0] * limits.GLOBAL_WORDS, [(4, 24)]
    run = run_program(prog, grid=(2, 1), block=(6, 1), params=[4], memory=memory,
                      allocations=allocations)
    assert run.memory[1:7] == [5, 6, 7, 8, 9, 10]
    launch = T.Launch(prog, (2, 1), (6, 1), [4], memory, allocations, 8)
    stream = T.expected_tokens(launch, run.trace)
    assert T.name("warp:w1") in stream and T.name("cta:1") in stream
    generate_checked(graph, logits, T.prompt_tokens(launch), stream)


def test_a_fault_is_chosen_right_after_its_exec(graph, logits) -> None:
    """One lane reads past its array: the EXEC of that block chooses fault:global_bounds."""
    prog = Program("t", (
        Block((Instr(Op.S2R, 1, mod=SReg.TID_X), Instr(Op.LD, 2, 0, mod=Space.PARAM)),
              Term(TermKind.JMP, 1)),
        Block((Instr(Op.LD, 3, 2, 1, mod=Space.GLOBAL | 4),), Term(TermKind.EXIT)),
    ), 1, 0, 0, 0)
    memory, allocations = [0] * limits.GLOBAL_WORDS, [(4, 12)]
    with pytest.raises(LaunchError) as err:
        run_program(prog, grid=(1, 1), block=(4, 1), params=[4], memory=memory,
                    allocations=allocations)
    launch = T.Launch(prog, (1, 1), (4, 1), [4], memory, allocations, 0)
    stream = T.fault_tokens(launch, err.value)
    assert stream[-1] == T.name("fault:global_bounds")
    generate_checked(graph, logits, T.prompt_tokens(launch), stream)


ATOMIC_CASES = {  # op: (the word's first value, each lane's b, each lane's c): lanes collide
    Atom.ADD: (7, [1, -3, 100, 1 << 31], [0] * 4),
    Atom.MIN: (5, [9, -2, 3, -7], [0] * 4),
    Atom.MAX: (-5, [-9, 2, -3, 7], [0] * 4),
    Atom.MINU: (5, [9, -2, 3, 4], [0] * 4),
    Atom.MAXU: (5, [2, -2, 3, -1], [0] * 4),
    Atom.EXCH: (5, [1, 2, 3, 4], [0] * 4),
    Atom.CAS: (5, [5, 5, 7, 0], [7, 9, 1, 3]),
    Atom.AND: (-1, [0x0FF0, 0x7F00, -1, 0x0300], [0] * 4),
    Atom.OR: (0, [1, 2, 0x100, 1 << 31], [0] * 4),
    Atom.XOR: (0x0F, [1, 3, 0x0F, -1], [0] * 4),
    Atom.INC: (2, [3, 3, 3, 3], [0] * 4),  # 2 -> 3 -> 0 -> 1 -> 2
    Atom.DEC: (1, [2, 2, 2, 5], [0] * 4),  # 1 -> 0 -> 2 -> 1 -> 0
}


def atomic_program(kind: Atom, space: Space) -> Program:
    """Every lane of a warp applies `kind` to one word (global word `base`, or shared word 0
    set to the global one first) with its own b and c from memory, then stores the old value
    it got: the lanes' chain, the old values' write-back and the word's one record."""
    op = Op.ATOMG if space == Space.GLOBAL else Op.ATOMS
    word = 0 if space == Space.SHARED else 2  # r0 or the base pointer
    setup = [Block((Instr(Op.S2R, 1, mod=SReg.TID_X), Instr(Op.SHL, 3, 1, imm=2, bi=True),
                    Instr(Op.LD, 2, 0, mod=Space.PARAM)), Term(TermKind.JMP, 1)),
             Block((Instr(Op.LD, 7, 2, mod=Space.GLOBAL), Instr(Op.ADD, 3, 2, 3)),
                   Term(TermKind.JMP, 2)),
             Block((Instr(Op.LD, 4, 3, imm=4, mod=Space.GLOBAL), Instr(Op.ADD, 0, 0, 0),
                    Instr(Op.LD, 5, 3, imm=20, mod=Space.GLOBAL)), Term(TermKind.JMP, 3))]
    if space == Space.SHARED:
        setup.append(Block((Instr(Op.ST, 0, 0, 7, mod=Space.SHARED),), Term(TermKind.JMP, 4)))
    n = len(setup)
    return Program("t", (*setup,
                         Block((Instr(op, 6, word, 4, 5, mod=kind),), Term(TermKind.JMP, n + 1)),
                         Block((Instr(Op.ST, 0, 3, 6, imm=36, mod=Space.GLOBAL),),
                               Term(TermKind.EXIT))), 1, 4 if space == Space.SHARED else 0, 0, 0)


@pytest.mark.parametrize("kind", list(Atom), ids=lambda k: k.name)
def test_atomics_chain_the_lanes_of_one_word(graph, logits, kind: Atom) -> None:
    """Four lanes on one word, for every atomic operation (and ADD on shared memory): the
    circuit writes back each lane's old value and the word's final value, as generated tokens."""
    for space in (Space.GLOBAL, Space.SHARED) if kind == Atom.ADD else (Space.GLOBAL,):
        first, bs, cs = ATOMIC_CASES[kind]
        memory = [0] * limits.GLOBAL_WORDS
        memory[1], memory[2:6], memory[6:10] = first, bs, cs
        prog, allocations = atomic_program(kind, space), [(4, 52)]
        run = run_program(prog, grid=(1, 1), block=(4, 1), params=[4], memory=memory,
                          allocations=allocations)
        olds = [s32(v) for v in run.memory[10:14]]
        assert len(set(olds)) > 1 or kind == Atom.CAS, olds  # the lanes saw each other
        launch = T.Launch(prog, (1, 1), (4, 1), [4], memory, allocations,
                          prog.shared_bytes(0) // 4)
        generate_checked(graph, logits, T.prompt_tokens(launch),
                         T.expected_tokens(launch, run.trace))
