"""The demo circuit: a 4-register machine that the merged model runs through plain ``generate``.

It exercises the whole path before the GPU exists. A program of up to 8 instructions arrives as
prompt tokens (one LOAD token per instruction writes it into a ROM bank); a STEP token carries
the register write of the previous instruction and the pc to fetch; the model fetches, decodes,
reads registers, executes and writes the next STEP token (or HALT) itself. Registers hold 4-bit
values in two GDN banks (two read ports), where the host reads them back.

Layers: 0 = ROM (GDN) + decode (MLP), 1 = registers (GDN) + execute (MLP), 2 = choose the next
token (MLP).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from qgpu.compiler import numerics as nx
from qgpu.compiler.graph import Graph, Rule, word_dims
from qgpu.compiler.schedule import LayerShape, Schedule, schedule
from qgpu.compiler.weights import CircuitWeights, embed, emit

REGS, PCS, VALUES = 4, 8, 16
OPS = ("LI", "ADDI", "ADD", "MOV", "BNZ", "HALT")
WRITES = ("LI", "ADDI", "ADD", "MOV")
INS_DIGITS = 5  # op: 2 digits, a: 1, b: 2
VAL_DIGITS = 2
SELECT_GAIN = 4  # the chosen token's out dim gets 4; a token's own id holds 1
STEPS_PER_PC = REGS * VALUES + 1


@dataclass(frozen=True)
class Ins:
    op: str
    a: int = 0  # destination register (BNZ: tested register)
    b: int = 0  # immediate, source register or branch target

    def encode(self) -> int:
        return OPS.index(self.op) + 16 * self.a + 64 * self.b

    def __str__(self) -> str:
        return {"LI": f"li r{self.a}, {self.b}", "ADDI": f"addi r{self.a}, {self.b}",
                "ADD": f"add r{self.a}, r{self.b}", "MOV": f"mov r{self.a}, r{self.b}",
                "BNZ": f"bnz r{self.a}, {self.b}", "HALT": "halt"}[self.op]


def all_instructions() -> list[Ins]:
    out = [Ins("LI", a, b) for a in range(REGS) for b in range(VALUES)]
    out += [Ins("ADDI", a, b) for a in range(REGS) for b in range(VALUES)]
    out += [Ins(op, a, b) for op in ("ADD", "MOV") for a in range(REGS) for b in range(REGS)]
    out += [Ins("BNZ", a, b) for a in range(REGS) for b in range(PCS)]
    return out + [Ins("HALT")]


def step_index(pc: int, reg: int | None, value: int = 0) -> int:
    """Index of STEP(pc, reg, value) among the selectable tokens (HALT is the last)."""
    return pc * STEPS_PER_PC + (REGS * VALUES if reg is None else reg * VALUES + value)


HALT_INDEX = PCS * STEPS_PER_PC


def load_name(pc: int, ins: Ins) -> str:
    return f"<|demo:load:{pc}:{ins.op}:{ins.a}:{ins.b}|>"


def step_name(pc: int, reg: int | None, value: int = 0) -> str:
    return f"<|demo:step:{pc}:{'-' if reg is None else reg}:{value}|>"


HALT_NAME = "<|demo:halt|>"


def reference(program: list[Ins], max_steps: int) -> tuple[list[str], list[int]]:
    """The tokens the model must generate and the final registers (a plain Python model)."""
    regs, pc, tokens = [0] * REGS, 0, []
    for _ in range(max_steps):
        ins = program[pc] if pc < len(program) else Ins("HALT")
        if ins.op == "HALT":
            tokens.append(HALT_NAME)
            break
        write = None
        if ins.op == "LI":
            write = ins.b
        elif ins.op == "ADDI":
            write = (regs[ins.a] + ins.b) % VALUES
        elif ins.op == "ADD":
            write = (regs[ins.a] + regs[ins.b]) % VALUES
        elif ins.op == "MOV":
            write = regs[ins.b]
        nxt = ins.b if ins.op == "BNZ" and regs[ins.a] else (pc + 1) % PCS
        if write is not None:
            regs[ins.a] = write
        tokens.append(step_name(nxt, ins.a if write is not None else None, write or 0))
        pc = nxt
    return tokens, regs


def prompt(program: list[Ins]) -> list[str]:
    """LOAD every instruction, then zero every register; the last of those STEP tokens also
    starts execution at pc 0 (the host feeds only what is known before the launch)."""
    if len(program) > PCS:
        raise ValueError(f"a demo program has at most {PCS} instructions")
    return [load_name(pc, ins) for pc, ins in enumerate(program)] + \
        [step_name(0, r, 0) for r in range(REGS)]


def random_program(rng: random.Random, length: int = PCS) -> list[Ins]:
    """A random program: mostly arithmetic, some backward branches, a HALT at the end."""
    prog = []
    for pc in range(length - 1):
        op = rng.choice(("LI", "ADDI", "ADDI", "ADD", "MOV", "BNZ"))
        if op == "BNZ":
            prog.append(Ins("BNZ", rng.randrange(REGS), rng.randrange(pc + 2)))
        elif op in ("ADD", "MOV"):
            prog.append(Ins(op, rng.randrange(REGS), rng.randrange(REGS)))
        else:
            prog.append(Ins(op, rng.randrange(REGS), rng.randrange(VALUES)))
    return prog + [Ins("HALT")]


def _digit(feature: str, k: int, d: int) -> tuple[tuple[str, int], int]:
    return ((feature, 4 * k + d), 1)


def _value(feature: str, v: int) -> tuple:
    return tuple(_digit(feature, k, (v >> (2 * k)) & 3) for k in range(VAL_DIGITS))


def _op(op: str) -> tuple:
    o = OPS.index(op)
    return (_digit("ins", 0, o % 4), _digit("ins", 1, o // 4))


def build_graph() -> Graph:
    g = Graph()
    g.feature("fetch", PCS, "onehot", token_input=True)
    g.feature("rom_waddr", PCS, "onehot", token_input=True)
    g.feature("rom_wval", 4 * INS_DIGITS, "word", token_input=True)
    g.feature("reg_waddr", REGS, "onehot", token_input=True)
    g.feature("reg_wval", 4 * VAL_DIGITS, "word", token_input=True)
    g.feature("out", HALT_INDEX + 1, "onehot", token_input=True, accumulate=True)
    g.feature("ins", 4 * INS_DIGITS, "word")
    g.feature("vs", 4 * VAL_DIGITS, "word")
    g.feature("vd", 4 * VAL_DIGITS, "word")
    for name, size in (("op", len(OPS)), ("a", REGS), ("b", VALUES), ("rs", REGS), ("rd", REGS),
                       ("res", VALUES), ("wreg", REGS), ("npc", PCS), ("halt", 1)):
        g.feature(name, size, "onehot")
    g.bank("rom", PCS)
    g.write("rom", "rom_waddr", "rom_wval")
    g.read("rom", "fetch", "ins")
    for bank, addr, out in (("regs_s", "rs", "vs"), ("regs_d", "rd", "vd")):
        g.bank(bank, REGS)
        g.write(bank, "reg_waddr", "reg_wval")
        g.read(bank, addr, out)

    decode = [Rule(_op(op), ((("op", i), 1),)) for i, op in enumerate(OPS)]
    decode += [Rule((_digit("ins", 2, a),), ((("a", a), 1),)) for a in range(REGS)]
    decode += [Rule((_digit("ins", 3, b % 4), _digit("ins", 4, b // 4)), ((("b", b), 1),))
               for b in range(VALUES)]
    for r in range(REGS):
        for op in ("ADD", "MOV"):  # source register = b
            decode.append(Rule(_op(op) + (_digit("ins", 3, r), _digit("ins", 4, 0)),
                               ((("rs", r), 1),)))
        decode.append(Rule(_op("BNZ") + (_digit("ins", 2, r),), ((("rs", r), 1),)))
        for op in ("ADDI", "ADD"):  # destination register read = a
            decode.append(Rule(_op(op) + (_digit("ins", 2, r),), ((("rd", r), 1),)))
    g.rule_group("decode", decode)

    ex = [Rule(((("op", OPS.index("LI")), 1), (("b", v), 1)), ((("res", v), 1),))
          for v in range(VALUES)]
    ex += [Rule(((("op", OPS.index("MOV")), 1),) + _value("vs", v), ((("res", v), 1),))
           for v in range(VALUES)]
    for x in range(VALUES):
        for y in range(VALUES):
            s = (x + y) % VALUES
            ex.append(Rule(((("op", OPS.index("ADDI")), 1), (("b", y), 1)) + _value("vd", x),
                           ((("res", s), 1),)))
            ex.append(Rule(((("op", OPS.index("ADD")), 1),) + _value("vd", x) + _value("vs", y),
                           ((("res", s), 1),)))
    for op in WRITES:
        ex += [Rule(((("op", OPS.index(op)), 1), (("a", r), 1)), ((("wreg", r), 1),))
               for r in range(REGS)]
        ex += [Rule(((("op", OPS.index(op)), 1), (("fetch", p), 1)),
                    ((("npc", (p + 1) % PCS), 1),)) for p in range(PCS)]
    bnz, zero = (("op", OPS.index("BNZ")), 1), _value("vs", 0)
    ex += [Rule((bnz, (("b", t), 1)), ((("npc", t), 1),)) for t in range(PCS)]
    ex += [Rule((bnz, (("b", t), 1)) + zero, ((("npc", t), -1),)) for t in range(PCS)]
    ex += [Rule((bnz, (("fetch", p), 1)) + zero, ((("npc", (p + 1) % PCS), 1),))
           for p in range(PCS)]
    ex.append(Rule(((("op", OPS.index("HALT")), 1),), ((("halt", 0), 1),)))
    g.rule_group("execute", ex)

    no_write = tuple((("wreg", r), 0) for r in range(REGS))
    sel = [Rule(((("npc", p), 1), (("wreg", r), 1), (("res", v), 1)),
                ((("out", step_index(p, r, v)), SELECT_GAIN),))
           for p in range(PCS) for r in range(REGS) for v in range(VALUES)]
    sel += [Rule(((("npc", p), 1),) + no_write, ((("out", step_index(p, None)), SELECT_GAIN),))
            for p in range(PCS)]
    sel.append(Rule(((("halt", 0), 1),), ((("out", HALT_INDEX), SELECT_GAIN),)))
    g.rule_group("select", sel)
    return g


def _word(value: int, digits: int) -> list[int]:
    w = [0] * (4 * digits)
    for d in word_dims(value, digits):
        w[d] = 1
    return w


def token_table() -> dict[str, dict[str, list[int]]]:
    """Every demo token and its input features."""
    table: dict[str, dict[str, list[int]]] = {}
    for pc in range(PCS):
        for ins in all_instructions():
            table[load_name(pc, ins)] = {
                "rom_waddr": [int(i == pc) for i in range(PCS)],
                "rom_wval": _word(ins.encode(), INS_DIGITS)}
    for pc in range(PCS):
        for reg in list(range(REGS)) + [None]:
            for value in range(VALUES) if reg is not None else [0]:
                feats = {"fetch": [int(i == pc) for i in range(PCS)],
                         "out": [int(i == step_index(pc, reg, value))
                                 for i in range(HALT_INDEX + 1)]}
                if reg is not None:
                    feats["reg_waddr"] = [int(i == reg) for i in range(REGS)]
                    feats["reg_wval"] = _word(value, VAL_DIGITS)
                table[step_name(pc, reg, value)] = feats
    table[HALT_NAME] = {"out": [int(i == HALT_INDEX) for i in range(HALT_INDEX + 1)]}
    return table


@dataclass
class DemoCircuit:
    """The compiled demo circuit for one layer shape and base width."""

    sched: Schedule
    k_dims: int
    hidden: int

    def weights(self) -> CircuitWeights:

        table = token_table()
        names = list(table)
        embeds = torch.stack([embed(self.sched, self.k_dims, self.hidden, table[n])
                              for n in names])
        final = torch.full((self.k_dims,), -1.0)  # everything but the selection is silenced
        final[self.sched.dims["out"]] = nx.SCALE  # (1 + w) undoes the norm's 2**-16
        return CircuitWeights(
            k_dims=self.k_dims, layers=emit(self.sched, self.k_dims), token_names=names,
            token_embeddings=embeds, final_norm=final,
            metadata={"circuit": "demo", "allocation": self.sched.allocation_map(),
                      "banks": {b: list(lh) for b, lh in self.sched.heads.items()}},
        )


def compile_demo(base_config: dict) -> DemoCircuit:
    """Schedule the demo for a base's layer shape; K is padded so the merged width is square."""
    g = build_graph()
    sched = schedule(g, LayerShape.from_config(base_config))
    d_base = base_config["hidden_size"]
    k = nx.pad_k(d_base, sched.k_used)
    return DemoCircuit(sched, k, d_base + k)


def read_registers(cache, banks: dict[str, list[int]]) -> list[int]:
    """Register values read from a register bank's recurrent state (host side: decoding only).

    Row r of the head's state is the stored word of register r: 0 or VALUE_SCALE in each dim,
    one set dim per digit group; anything else means the model's memory is not exact."""
    layer, head = banks["regs_d"]
    state = cache.get_recurrent_state(layer)[0, head]
    regs = []
    for r in range(REGS):
        row = state[r, :4 * VAL_DIGITS].tolist()
        value = 0
        for k in range(VAL_DIGITS):
            group = row[4 * k:4 * k + 4]
            hot = [d for d, v in enumerate(group) if v == nx.VALUE_SCALE]
            if len(hot) != 1 or any(v not in (0.0, nx.VALUE_SCALE) for v in group):
                raise ValueError(f"register r{r}: memory row is not an exact word: {row}")
            value |= hot[0] << (2 * k)
        regs.append(value)
    return regs


def run(model, tokenizer, banks: dict[str, list[int]], program: list[Ins], max_steps: int = 64) \
        -> tuple[list[str], list[int]]:
    """Run a program on a merged model with plain greedy ``generate``: returns the generated
    token names and the registers read from the model's state."""
    ids = tokenizer.convert_tokens_to_ids(prompt(program))
    input_ids = torch.tensor([ids])
    halt = tokenizer.convert_tokens_to_ids(HALT_NAME)
    out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                         max_new_tokens=max_steps, eos_token_id=halt, pad_token_id=halt,
                         return_dict_in_generate=True)
    generated = tokenizer.convert_ids_to_tokens(out.sequences[0, len(ids):].tolist())
    return generated, read_registers(out.past_key_values, banks)
