"""The selector's shared machinery: its state (virtual registers, blocks, where shared memory
and globals live), the 64-bit *kind* of every register under the address model, the operand and
emission helpers every family uses, and the walk over the kernel's body that hands each
instruction to the ``op_<opcode>`` method of its family (the other modules of this package;
``Selector`` in ``__init__`` combines them). Constants that several families use live here.
"""

from __future__ import annotations

from enum import Enum

from qgpu.errors import ResourceError, UnsupportedError
from qgpu.machine import limits
from qgpu.machine.isa import Cmp, Op, PredOp, TermKind
from qgpu.toolchain.lower.ir import ZERO, IRBlock, IRFunction, VInstr, VTerm
from qgpu.toolchain.ptx.ast import Imm, Instr, Kernel, Label, Module, Reg, Sym
from qgpu.toolchain.ptx.globals import global_layout
from qgpu.toolchain.ptx.names import qualified_name

FLOAT_OPCODES = frozenset({"add", "sub", "mul", "fma", "mad", "neg", "abs", "min", "max", "setp",
                           "set", "cvt", "testp", "copysign", "atom", "red", "div", "sqrt",
                           "rcp", "ex2", "lg2", "sin", "cos", "tanh", "rsqrt"})
"""Opcodes that ``floats`` selects when their type is f32."""
GUARDED_AS_REGION = frozenset({"div", "rem", "sqrt", "rcp", "ex2", "lg2", "sin", "cos", "tanh",
                               "rsqrt"})
"""Opcodes that a guard turns into a branch around their code rather than a guard on each
instruction: they span blocks (division loops, the float slow paths), or their temporaries
would keep their old values on the unguarded lanes, live from the kernel's start."""
F32_WORD_OPCODES = frozenset({"mov", "ld", "st", "selp", "shfl"})
"""Opcodes that move f32 values as 32-bit words, in their own families."""

MASK32 = 0xFFFFFFFF


class Kind(Enum):
    """What the high half of a 64-bit register is, given its low half (lo)."""

    PTR = "address"  # hi = 0 by the address model: pointers and pointer arithmetic
    ZX = "zero-extended"  # hi = 0: widened unsigned values
    SX = "sign-extended"  # hi = sign(lo): widened ints (C's no-overflow rule keeps them so)
    WIDE_S = "signed 64-bit product"
    WIDE_U = "unsigned 64-bit product"
    TOP = "unknown"


def _join(a: Kind | None, b: Kind) -> Kind:
    return b if a is None or a == b else Kind.TOP


SIGNED_CMP = {"eq": Cmp.EQ, "ne": Cmp.NE, "lt": Cmp.LT, "le": Cmp.LE, "gt": Cmp.GT, "ge": Cmp.GE}
UNSIGNED_CMP = {"eq": Cmp.EQ, "ne": Cmp.NE, "lt": Cmp.LO, "le": Cmp.LS, "gt": Cmp.HI,
                "ge": Cmp.HS, "lo": Cmp.LO, "ls": Cmp.LS, "hi": Cmp.HI, "hs": Cmp.HS}
# A 3-D launch runs as the 2-D launch (x, y*z) of blocks and of grids (docs/ISA.md, "3-D
# launches"): y' = y + z*Y. These hidden parameters follow the kernel's own: Y and
# ceil(2^16 / Y) for the block, the same for the grid (y' and Y are at most 16, so
# (y' * ceil(2^16 / Y)) >> 16 is exactly y' / Y).
HIDDEN_3D = ("ntid.y", "ntid.y magic", "nctaid.y", "nctaid.y magic")
NO_OPS = ("membar", "fence")
# 64-bit operations whose result depends on the operands' high halves.
NON_RING = frozenset({"setp", "min", "max", "shr", "div", "rem", "abs"})
# 64-bit definitions that pair arithmetic can compute both halves of.
RING_64 = frozenset({"mov", "cvta", "add", "sub", "mul", "and", "or", "xor", "not", "neg",
                     "selp", "shl", "shr", "min", "max", "cvt", "ld"})


def type_bits(t: str) -> int:
    return 1 if t == "pred" else int(t[1:])


def _s32(v: int) -> int:
    v &= MASK32
    return v - (1 << 32) if v >> 31 else v


class Core:
    """The selector's state, kinds, helpers and walk; the families add the ``op_`` methods."""

    def __init__(self, kernel: Kernel, module: Module, three_d: bool = False) -> None:
        self.kernel = kernel
        self.reg_types = kernel.reg_types
        self.params = {p.name: i for i, p in enumerate(kernel.params)}
        self.three_d = three_d
        self.num_params = len(kernel.params) + (len(HIDDEN_3D) if three_d else 0)
        if self.num_params > limits.PARAM_WORDS:
            extra = f" (and {len(HIDDEN_3D)} hidden ones for a 3-D launch)" if three_d else ""
            raise ResourceError(f"{kernel.name} has {len(kernel.params)} parameters{extra}; the "
                                f"machine takes at most {limits.PARAM_WORDS}")
        self._place_shared(module)
        self.global_addr = global_layout(kernel, module).addresses
        self.vregs: dict[str, int] = {}
        self.vpreds: dict[str, int] = {}
        self.hi: dict[str, int] = {}
        self.n_vregs = 1
        self.n_vpreds = 0
        self.blocks: list[IRBlock] = []
        self.labels: dict[str, int] = {}
        self.defs: dict[str, list[Instr]] = {}
        for ins in kernel.instructions:
            for name in ins.dests:
                self.defs.setdefault(name, []).append(ins)
        self.kinds = self._kinds()
        self.pairs = self._demand_hi()
        self.read_preds = {
            op.name for item in kernel.body if isinstance(item, Instr)
            for i, op in enumerate(item.operands) if isinstance(op, Reg) and i > 0
        } | {item.guard[0] for item in kernel.body if isinstance(item, Instr) and item.guard}

    # --- resources ------------------------------------------------------------------------
    def _place_shared(self, module: Module) -> None:
        self.shared: dict[str, int] = {}
        offset = 0
        extern = None
        for decl in list(module.module_shared) + list(self.kernel.shared):
            if decl.extern:
                extern = decl
                continue
            offset = -(-offset // decl.align) * decl.align
            self.shared[decl.name] = offset
            offset += decl.size_bytes
        self.static_shared = offset
        self.dynamic_offset = -(-offset // 4) * 4
        if extern is not None:
            self.dynamic_offset = -(-offset // max(extern.align, 4)) * max(extern.align, 4)
            self.shared[extern.name] = self.dynamic_offset
        if offset > limits.SHARED_WORDS * 4:
            raise ResourceError(f"{self.kernel.name} declares {offset} bytes of shared memory; the "
                           f"machine has {limits.SHARED_WORDS * 4} per block")

    def width(self, reg: str) -> int:
        if reg not in self.reg_types:
            raise UnsupportedError(f"register {reg} is not declared")
        return type_bits(self.reg_types[reg])

    def vreg(self, name: str) -> int:
        if name not in self.vregs:
            self.vregs[name] = self.new_vreg()
        return self.vregs[name]

    def vpred(self, name: str) -> int:
        if name not in self.vpreds:
            self.vpreds[name] = self.new_vpred()
        return self.vpreds[name]

    def new_vreg(self) -> int:
        self.n_vregs += 1
        return self.n_vregs - 1

    def new_vpred(self) -> int:
        self.n_vpreds += 1
        return self.n_vpreds - 1

    # --- 64-bit kind analysis ------------------------------------------------------------
    def _kinds(self) -> dict[str, Kind]:
        kinds: dict[str, Kind] = {}
        for _ in range(8):
            changed = False
            for ins in self.kernel.body:
                if not isinstance(ins, Instr) or not ins.operands:
                    continue
                dst = ins.operands[0]
                if not isinstance(dst, Reg) or dst.name not in self.reg_types:
                    continue
                if self.width(dst.name) != 64:
                    continue
                k = _join(kinds.get(dst.name), self._def_kind(ins, kinds))
                if kinds.get(dst.name) != k:
                    kinds[dst.name] = k
                    changed = True
            if not changed:
                break
        return kinds

    def _operand_kind(self, op: object, kinds: dict[str, Kind]) -> Kind | None:
        if isinstance(op, Imm):
            v = op.value
            return Kind.ZX if 0 <= v < 1 << 31 else Kind.SX if -(1 << 31) <= v < 0 else Kind.TOP
        if isinstance(op, Reg):
            if self.width(op.name) == 64:
                return kinds.get(op.name)
            return Kind.ZX
        return Kind.PTR  # symbols: shared addresses

    def _def_kind(self, ins: Instr, kinds: dict[str, Kind]) -> Kind:
        """Kind of the value a 64-bit definition produces. Only what is proven counts: 64-bit
        sums and products of ints may really need 64 bits (long long arithmetic), so they are
        unknown unless a pointer is involved (then they are addresses, by the address model)."""
        o, m = ins.opcode, ins.mods
        srcs = [self._operand_kind(x, kinds) for x in ins.operands[1:]]
        known = [k for k in srcs if k is not None]
        same = known[0] if known and all(k == known[0] for k in known) else None
        if o == "ld":
            if "param" in m:
                return Kind.PTR  # a pointer, or a scalar the host keeps below 2^31
            return Kind.SX if m[-1].startswith("s") else Kind.ZX
        if o in ("mov", "cvta") and srcs:
            return srcs[0] or Kind.ZX
        if o == "cvt":
            src_t = m[-1]
            if type_bits(src_t) == 64:
                return srcs[0] or Kind.ZX
            return Kind.SX if src_t.startswith("s") else Kind.ZX
        if o == "mul" and "wide" in m:
            return Kind.WIDE_S if m[-1].startswith("s") else Kind.WIDE_U
        if o in ("add", "sub", "mad"):
            if o == "mad" and "wide" in m:
                known = known[2:]
            return Kind.PTR if Kind.PTR in known else Kind.TOP
        if o in ("min", "max", "selp") and same == Kind.PTR:
            return Kind.PTR
        if o in ("min", "max", "selp", "and", "or", "xor") and same in (Kind.ZX, Kind.SX):
            return same
        if o == "not" and same == Kind.SX:
            return Kind.SX
        if o == "rem" and same in (Kind.ZX, Kind.SX):
            return same
        if o == "div" and same == Kind.ZX and m[-1].startswith("u"):
            return Kind.ZX
        if o == "shr":
            amount = ins.operands[2]
            if isinstance(amount, Imm) and amount.value >= 32:
                return Kind.SX if m[-1] == "s64" else Kind.ZX
            src = known[0] if known else Kind.TOP
            if src in (Kind.PTR, Kind.ZX):
                return Kind.ZX
            if src == Kind.SX and m[-1] == "s64":
                return src
        return Kind.TOP

    def single_def(self, op: object) -> Instr | None:
        """The only instruction writing register op (None if op is not such a register)."""
        if not isinstance(op, Reg):
            return None
        defs = self.defs.get(op.name, [])
        return defs[0] if len(defs) == 1 and defs[0].guard is None else None

    def constant(self, op: object) -> int | None:
        """The value of an immediate, or of a register whose only definition moves one in."""
        if isinstance(op, Imm):
            return op.value
        d = self.single_def(op)
        if d is not None and d.opcode == "mov" and isinstance(d.operands[1], Imm):
            return d.operands[1].value
        return None

    def proven(self, op: object) -> bool:
        """True when op's high half follows from its low half (zero- or sign-extended)."""
        return isinstance(op, Imm) or self.kind(op) in (Kind.PTR, Kind.ZX, Kind.SX)

    def _demand_hi(self) -> set[str]:
        """64-bit registers whose high half must be computed: operands of non-ring operations
        that are not provably zero/sign-extended, and the 64-bit sources they are made from."""
        def wide_regs(ops: tuple) -> list[str]:
            return [o.name for o in ops if isinstance(o, Reg) and o.name in self.reg_types
                    and self.width(o.name) == 64 and not self.proven(o)]

        demanded: set[str] = set()
        for ins in self.kernel.instructions:
            if ins.opcode in NON_RING and ins.mods and type_bits(ins.mods[-1]) == 64:
                srcs = ins.operands[1:3]
                if ins.opcode in ("setp", "min", "max") and self.common_kind(*srcs):
                    continue
                if ins.opcode == "shr":
                    srcs = srcs[:1]
                demanded.update(wide_regs(srcs))
        changed = True
        while changed:
            changed = False
            for ins in self.kernel.instructions:
                if any(d in demanded for d in ins.dests) and ins.opcode in RING_64:
                    new = set(wide_regs(ins.operands[1:])) - demanded
                    if new:
                        demanded |= new
                        changed = True
        return demanded

    def common_kind(self, x: object, y: object) -> Kind | None:
        """ZX or SX when both operands provably have it (small non-negative immediates fit
        both), so a 64-bit comparison of them is exact on their low halves."""
        kinds = []
        for op in (x, y):
            if isinstance(op, Imm) and 0 <= op.value < 1 << 31:
                continue
            k = self._operand_kind(op, self.kinds)
            kinds.append(Kind.ZX if k == Kind.PTR else k)
        if not kinds:
            return Kind.ZX
        return kinds[0] if all(k == kinds[0] for k in kinds) and kinds[0] in (Kind.ZX, Kind.SX) \
            else None

    def narrow_table(self, kind: Kind, signed: bool) -> dict[str, Cmp]:
        """Comparison table for low halves of two values of one proven kind: zero-extended
        values are non-negative, so they always compare unsigned."""
        return SIGNED_CMP if signed and kind == Kind.SX else UNSIGNED_CMP

    def kind(self, op: object) -> Kind | None:
        return self._operand_kind(op, self.kinds)

    # --- emission helpers -----------------------------------------------------------------
    def emit(self, op: Op, d: int = ZERO, a: int = ZERO, b: int = ZERO, c: int = ZERO,
             imm: int = 0, bi: bool = False, mod: int = 0) -> VInstr:
        vi = VInstr(op, d, a, b, c, imm, bi, mod, None, self.line, self.comment)
        self.cur.instrs.append(vi)
        return vi

    def new_block(self, name: str) -> int:
        self.blocks.append(IRBlock(name))
        return len(self.blocks) - 1

    def set_term(self, term: VTerm) -> None:
        term.line = self.line
        self.cur.term = term

    def switch(self, index: int) -> None:
        self.cur = self.blocks[index]
        self.cur_index = index

    def fail(self, why: str) -> UnsupportedError:
        return UnsupportedError(f"line {self.line}: `{self.comment}`: {why}")

    def reg_in(self, op: object, bits: int = 32, signed: bool = False) -> int:
        """A vreg holding operand op (materialising immediates), extended from `bits`."""
        if isinstance(op, Imm):
            v = op.value & ((1 << bits) - 1) if bits < 32 else op.value & MASK32
            if signed and bits < 32 and v >> (bits - 1):
                v -= 1 << bits
            if v == 0:
                return ZERO
            t = self.new_vreg()
            self.emit(Op.ADD, t, ZERO, imm=_s32(v), bi=True)
            return t
        if isinstance(op, Sym) and op.name in self.shared:
            return self.reg_in(Imm(self.shared[op.name]))
        if isinstance(op, Sym) and op.name in self.global_addr:
            return self.reg_in(Imm(self.global_addr[op.name]))
        if isinstance(op, Reg):
            r = self.vreg(op.name)
            if signed and bits < 32:
                t = self.new_vreg()
                self.emit(Op.SHL, t, r, imm=32 - bits, bi=True)
                self.emit(Op.SRA, t, t, imm=32 - bits, bi=True)
                return t
            return r
        raise self.fail(f"operand {op} is not supported here")

    def b_operand(self, op: object, bits: int = 32, signed: bool = False) -> tuple[int, int, bool]:
        """(vreg, imm, bi) for an operand that may be an immediate."""
        if isinstance(op, Imm):
            v = op.value & ((1 << bits) - 1) if bits < 32 else op.value & MASK32
            if signed and bits < 32 and v >> (bits - 1):
                v -= 1 << bits
            return ZERO, _s32(v), True
        return self.reg_in(op, bits, signed), 0, False

    def dest(self, op: object) -> int:
        if not isinstance(op, Reg):
            raise self.fail("destination must be a register")
        return self.vreg(op.name)

    def narrow(self, d: int, bits: int) -> None:
        """Keep a sub-32-bit register zero-extended after an op that may overflow it."""
        if bits < 32:
            self.emit(Op.AND, d, d, imm=(1 << bits) - 1, bi=True)

    def tmp(self, op: Op, a: int = ZERO, b: int = ZERO, *, imm: int | None = None,
            c: int = ZERO, mod: int = 0) -> int:
        t = self.new_vreg()
        self.emit(op, t, a, b, c, imm=imm or 0, bi=imm is not None, mod=mod)
        return t

    def pred_tmp(self, cmp: Cmp, a: int, b: int = ZERO, imm: int | None = None) -> int:
        p = self.new_vpred()
        self.emit(Op.SETP, p, a, b, imm=imm or 0, bi=imm is not None, mod=cmp)
        return p

    # --- driver ----------------------------------------------------------------------------
    def run(self) -> IRFunction:
        entry = self.new_block("entry")
        for item in self.kernel.body:
            if isinstance(item, Label):
                self.labels[item.name] = self.new_block(item.name)
        self.switch(entry)
        self.line, self.comment = self.kernel.line, ""
        if self.kernel.zeroes_shared and self.static_shared:
            self.zero_shared()
        for item in self.kernel.body:
            if isinstance(item, Label):
                target = self.labels[item.name]
                if self.cur.term is None:
                    self.set_term(VTerm(TermKind.JMP, target))
                self.switch(target)
                continue
            self.line, self.comment = item.line, item.text
            if self.cur.term is not None:  # code after an unconditional transfer: unreachable
                self.switch(self.new_block("dead"))
            self.select(item)
        if self.cur.term is None:
            self.set_term(VTerm(TermKind.EXIT))
        return IRFunction(
            qualified_name(self.kernel.name), self.blocks, self.num_params, self.static_shared,
            self.dynamic_offset,
            tuple(type_bits(p.type) == 64 for p in self.kernel.params)
            + (False,) * (self.num_params - len(self.kernel.params)),
            self.n_vregs, self.n_vpreds,
        )

    def select(self, ins: Instr) -> None:
        o = ins.opcode
        if o in NO_OPS:
            return
        if o == "bra":
            self.branch(ins)
            return
        if o in ("ret", "exit"):
            if ins.guard is None:
                self.set_term(VTerm(TermKind.EXIT))
            else:
                done, cont = self.new_block("exit"), self.new_block("cont")
                self.set_term(VTerm(TermKind.BRA, done, cont, self.vpred(ins.guard[0]),
                                    ins.guard[1]))
                self.switch(done)
                self.set_term(VTerm(TermKind.EXIT))
                self.switch(cont)
            return
        if ins.mods == ("warp", "sync"):
            self.warp_sync(ins)
            return
        if o in ("bar", "barrier"):
            self.barrier(ins)
            return
        if ins.guard is not None and o in GUARDED_AS_REGION:
            self.guarded_region(ins)
            return
        start = len(self.cur.instrs)
        self.select_plain(ins)
        if ins.guard is not None:
            emitted = self.cur.instrs[start:]
            g = (self.vpred(ins.guard[0]), ins.guard[1])
            if len(emitted) > 1 and any(e.pred_def() is not None for e in emitted):
                t = self.new_vpred()
                copy = VInstr(Op.PLOP, t, g[0], g[0], mod=PredOp.AND, line=self.line,
                              comment=self.comment)
                self.cur.instrs.insert(start, copy)
                g = (t, ins.guard[1])
            for e in emitted:
                e.guard = g

    def select_plain(self, ins: Instr, pairs: bool = True) -> None:
        o, m = ins.opcode, ins.mods
        if pairs and any(d in self.pairs for d in ins.dests):
            self.pair_def(ins)
            return
        if "f32" in m and o in FLOAT_OPCODES:
            getattr(self, f"float_{o}")(ins)
            return
        if "f32" in m and o not in F32_WORD_OPCODES:
            raise self.fail(f"`{o}` on float32 is not supported by the machine yet")
        handler = getattr(self, f"op_{o}", None)
        if handler is None:
            raise self.fail(f"the PTX instruction `{o}` is not supported by the machine")
        if any(t in m for t in ("f16", "f64", "bf16")):
            raise self.fail("only float32 is supported (no f16, bf16 or f64)")
        handler(ins)
