"""Instruction selection: PTX kernel -> IR over virtual registers (docs/ISA.md, "Lowering").

Address model: pointers are small byte addresses, so 64-bit *ring* operations (add, sub, mul.lo,
shl, and/or/xor, truncation) are computed exactly on their low 32 bits. Every 64-bit register gets
a static *kind* (zero-extended, sign-extended, a wide product, or unknown) from all of its
definitions; non-ring 64-bit operations (shr, ordered compares, div) are lowered only when the
kinds make the 32-bit form exact, and rejected otherwise. 16-bit registers hold their value
zero-extended. Division and remainder become shift-subtract loops over the quotient's bits.
"""

from __future__ import annotations

from enum import Enum

from qgpu.errors import ResourceError, UnsupportedError
from qgpu.machine import limits
from qgpu.machine.isa import (
    INDEX_UNSIGNED,
    INDEXED,
    Atom,
    Cmp,
    Op,
    PredOp,
    Shfl,
    Space,
    SReg,
    TermKind,
)
from qgpu.toolchain.lower.ir import ZERO, IRBlock, IRFunction, VInstr, VTerm
from qgpu.toolchain.ptx.ast import (
    Addr,
    Imm,
    Instr,
    Kernel,
    Label,
    Module,
    Pair,
    Reg,
    SpecialReg,
    Sym,
    Vec,
    type_width,
)
from qgpu.toolchain.ptx.globals import global_layout
from qgpu.toolchain.ptx.names import qualified_name
from qgpu.toolchain.ptx.parser import warp_sync_group

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
BINARY = {"add": Op.ADD, "sub": Op.SUB, "and": Op.AND, "or": Op.OR, "xor": Op.XOR}
UNARY = {"neg": Op.NEG, "not": Op.NOT, "abs": Op.ABS, "popc": Op.POPC, "clz": Op.CLZ,
         "brev": Op.BREV}
ATOMS = {"add": Atom.ADD, "exch": Atom.EXCH, "cas": Atom.CAS, "and": Atom.AND, "or": Atom.OR,
         "xor": Atom.XOR, "inc": Atom.INC, "dec": Atom.DEC}
SREGS = {("%tid", "x"): SReg.TID_X, ("%tid", "y"): SReg.TID_Y, ("%ntid", "x"): SReg.NTID_X,
         ("%ntid", "y"): SReg.NTID_Y, ("%ctaid", "x"): SReg.CTAID_X,
         ("%ctaid", "y"): SReg.CTAID_Y, ("%nctaid", "x"): SReg.NCTAID_X,
         ("%nctaid", "y"): SReg.NCTAID_Y}
Z_CONSTANTS = {"%tid": 0, "%ntid": 1, "%ctaid": 0, "%nctaid": 1}
# A 3-D launch runs as the 2-D launch (x, y*z) of blocks and of grids (docs/ISA.md, "3-D
# launches"): y' = y + z*Y. These hidden parameters follow the kernel's own: Y and
# ceil(2^16 / Y) for the block, the same for the grid (y' and Y are at most 16, so
# (y' * ceil(2^16 / Y)) >> 16 is exactly y' / Y).
HIDDEN_3D = ("ntid.y", "ntid.y magic", "nctaid.y", "nctaid.y magic")
DIVIDE_SHIFT = 16
TYPES = ("pred", "b8", "s8", "u8", "b16", "s16", "u16", "b32", "s32", "u32", "b64", "s64", "u64")
NO_OPS = ("membar", "fence")
# 64-bit operations whose result depends on the operands' high halves.
NON_RING = frozenset({"setp", "min", "max", "shr", "div", "rem", "abs"})
# 64-bit definitions that pair arithmetic can compute both halves of.
RING_64 = frozenset({"mov", "cvta", "add", "sub", "mul", "and", "or", "xor", "not", "neg",
                     "selp", "shl", "shr", "min", "max", "cvt", "ld"})
MEM_SPACES = ("global", "shared", "param", "local", "const", "tex", "surf")
CACHE_MODS = ("ca", "cg", "cs", "lu", "cv", "nc", "volatile", "relaxed", "acquire", "release",
              "gpu", "cta", "sys", "weak", "wb", "wt", "uni", "sync", "aligned")


def type_bits(t: str) -> int:
    return 1 if t == "pred" else int(t[1:])


class Selector:
    """Walks a kernel's body once and builds its IR."""

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

    def scaled_index(self, op: object) -> tuple[int, bool] | None:
        """(index vreg, unsigned) when op is 4 times a widened 32-bit register."""
        d = self.single_def(op)
        if d is None:
            return None
        if d.opcode == "mul" and "wide" in d.mods and d.mods[-1] in ("s32", "u32"):
            x, y = d.operands[1], d.operands[2]
            i = x if y == Imm(4) else y if x == Imm(4) else None
            if self.single_def(i) is not None:
                return self.vreg(i.name), d.mods[-1] == "u32"
        if d.opcode == "shl" and d.mods[-1] == "b64" and d.operands[2] == Imm(2):
            w = self.single_def(d.operands[1])
            if w is not None and w.opcode == "cvt" and w.mods[-2:] in (("s64", "s32"),
                                                                      ("u64", "u32")):
                if self.single_def(w.operands[1]) is not None:
                    return self.vreg(w.operands[1].name), w.mods[-1] == "u32"
        return None

    def indexed(self, addr: object) -> tuple[int, int, bool] | None:
        """(pointer vreg, index vreg, unsigned) when a global address is pointer + 4*index of
        single-definition registers: the machine then computes it exactly, so an index that a
        real GPU would send outside memory faults instead of wrapping at 32 bits."""
        if not isinstance(addr, Addr):
            return None
        r = self.single_def(addr.base)
        if r is None or r.opcode != "add" or r.mods[-1] not in ("s64", "u64"):
            return None
        x, y = r.operands[1], r.operands[2]
        for p, o in ((x, y), (y, x)):
            if self.single_def(p) is not None and self.kinds.get(p.name) == Kind.PTR:
                idx = self.scaled_index(o)
                if idx is not None:
                    return self.vreg(p.name), idx[0], idx[1]
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

    def zero_shared(self) -> None:
        """Prologue of a kernel that stores bytes or halfwords to shared memory: thread 0 zeroes
        the static shared words and a barrier waits for it, so the read-merge-write of a
        sub-word store never reads a word no thread wrote (Kernel.zeroes_shared)."""
        self.comment = "zero the static shared words (sub-word stores merge into them)"
        t = self.linear_tid()
        not_first = self.pred_tmp(Cmp.NE, t, imm=0)
        zero, join = self.new_block("zero_shared"), self.new_block("zeroed")
        self.set_term(VTerm(TermKind.BRA, join, zero, not_first))
        self.switch(zero)
        for offset in range(0, self.static_shared, 4):
            self.emit(Op.ST, ZERO, ZERO, ZERO, imm=offset, mod=Space.SHARED)
        self.set_term(VTerm(TermKind.JMP, join))
        self.switch(join)
        after = self.new_block("after_zero")
        self.set_term(VTerm(TermKind.BAR, after))
        self.switch(after)

    def linear_tid(self) -> int:
        """The thread's rank in its block, tid.x + tid.y * ntid.x (3-D: y' = y + z * Y)."""
        t = self.tmp(Op.S2R, mod=SReg.TID_X)
        self.emit(Op.MAD, t, self.tmp(Op.S2R, mod=SReg.TID_Y),
                  self.tmp(Op.S2R, mod=SReg.NTID_X), t)
        return t

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
        if ins.guard is not None and o in ("div", "rem"):
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

    def guarded_region(self, ins: Instr) -> None:
        body, join = self.new_block("guarded"), self.new_block("join")
        self.set_term(VTerm(TermKind.BRA, body, join, self.vpred(ins.guard[0]), ins.guard[1]))
        self.switch(body)
        self.select_plain(ins)
        self.set_term(VTerm(TermKind.JMP, join))
        self.switch(join)

    def branch(self, ins: Instr) -> None:
        target = ins.operands[0]
        if not isinstance(target, Sym) or target.name not in self.labels:
            raise self.fail("branch target must be a label of this kernel")
        dest = self.labels[target.name]
        if ins.guard is None:
            self.set_term(VTerm(TermKind.JMP, dest))
            return
        cont = self.new_block("fall")
        self.set_term(VTerm(TermKind.BRA, dest, cont, self.vpred(ins.guard[0]), ins.guard[1]))
        self.switch(cont)

    def warp_sync(self, ins: Instr) -> None:
        """``bar.warp.sync`` of a tile of 1, 2 or 4 threads (parser.warp_sync_group): the tile
        is inside one machine warp, whose lanes run in lockstep, so only its threads' presence
        needs checking — a butterfly shuffle from each partner faults if one is elsewhere or
        has exited (what a GPU leaves undefined)."""
        group = warp_sync_group(ins, self.kernel.instructions)
        for distance in (1, 2)[:group.bit_length() - 1]:
            self.emit(Op.SHFL, ZERO, ZERO, imm=distance, bi=True, c=3, mod=Shfl.BFLY)

    def barrier(self, ins: Instr) -> None:
        ops = ins.operands
        if ins.guard is not None or not ops or ops[0] != Imm(0) or len(ops) > 1:
            raise self.fail("only an unconditional `bar.sync 0` (__syncthreads) is supported")
        nxt = self.new_block("after_bar")
        self.set_term(VTerm(TermKind.BAR, nxt))
        self.switch(nxt)

    # --- the instruction families -------------------------------------------------------------
    def select_plain(self, ins: Instr, pairs: bool = True) -> None:
        o, m = ins.opcode, ins.mods
        if pairs and any(d in self.pairs for d in ins.dests):
            self.pair_def(ins)
            return
        handler = getattr(self, f"op_{o}", None)
        if handler is None:
            raise self.fail(f"the PTX instruction `{o}` is not supported by the machine")
        if any(t in m for t in ("f16", "f32", "f64", "bf16")):
            raise self.fail("floating point is not supported (the machine is integer-only)")
        handler(ins)

    def op_mov(self, ins: Instr) -> None:
        dst, src = ins.operands[0], ins.operands[1]
        if isinstance(src, Vec) or isinstance(dst, Vec):
            self.pack(ins)
            return
        if ins.mods[-1] == "pred":
            p = self.vpred(dst.name)
            if isinstance(src, Reg):
                q = self.vpred(src.name)
                self.emit(Op.PLOP, p, q, q, mod=PredOp.AND)
            elif isinstance(src, Imm):
                self.emit(Op.SETP, p, ZERO, imm=0, bi=True, mod=Cmp.EQ if src.value else Cmp.NE)
            else:
                raise self.fail("unsupported predicate move")
            return
        d = self.dest(dst)
        if isinstance(src, SpecialReg):
            if src.name == "%laneid":  # rank % 32: a block (<= 16 threads) is one real warp
                self.emit(Op.ADD, d, self.linear_tid())
                return
            if self.three_d and src.comp in ("y", "z"):
                self.emit(Op.ADD, d, self.decode_3d(src.name, src.comp))
                return
            if src.comp == "z" and src.name in Z_CONSTANTS:
                self.emit(Op.ADD, d, ZERO, imm=Z_CONSTANTS[src.name], bi=True)
                return
            if (src.name, src.comp) not in SREGS:
                raise self.fail(f"special register {src.name}{'.' + src.comp if src.comp else ''}"
                                f" is not supported (4-lane warps differ from a real GPU's)")
            self.emit(Op.S2R, d, mod=SREGS[(src.name, src.comp)])
            return
        if isinstance(src, Sym) and src.name not in self.shared and \
                src.name not in self.global_addr:
            raise self.fail(f"taking the address of `{src.name}` is not supported")
        r, imm, bi = self.b_operand(src, type_bits(ins.mods[-1]))
        self.emit(Op.ADD, d, ZERO, r, imm=imm, bi=bi)

    def pack(self, ins: Instr) -> None:
        """``mov.b32 d, {a, b}``: the parts side by side, element 0 lowest; ``mov.b32 {a, b},
        s``: the parts of s (sub-word registers hold their value zero-extended)."""
        dst, src = ins.operands[0], ins.operands[1]
        width = type_bits(ins.mods[-1])
        if isinstance(src, Vec):
            part = width // len(src.items)
            packed = self.pack_values([self.reg_in(x) for x in src.items], part)
            self.emit(Op.ADD, self.dest(dst), packed)
            return
        part = width // len(dst.items)
        s = self.reg_in(src)
        for k, item in enumerate(dst.items):
            if item is None:
                continue
            d = self.dest(item)
            self.emit(Op.SHR, d, s, imm=k * part, bi=True)
            self.emit(Op.AND, d, d, imm=(1 << part) - 1, bi=True)

    def decode_3d(self, name: str, comp: str) -> int:
        """y or z of tid/ntid/ctaid/nctaid in a 3-D launch from the machine's 2-D y' = y + z*Y
        (HIDDEN_3D: Y and its magic divisor are hidden parameters)."""
        block = name in ("%tid", "%ntid")
        first = len(self.kernel.params) + (0 if block else 2)
        size, magic = self.new_vreg(), self.new_vreg()
        self.emit(Op.LD, size, ZERO, imm=4 * first, mod=Space.PARAM)
        if name in ("%ntid", "%nctaid") and comp == "y":
            return size
        machine = {"%tid": SReg.TID_Y, "%ntid": SReg.NTID_Y, "%ctaid": SReg.CTAID_Y,
                   "%nctaid": SReg.NCTAID_Y}[name]
        y2 = self.tmp(Op.S2R, mod=machine)
        self.emit(Op.LD, magic, ZERO, imm=4 * (first + 1), mod=Space.PARAM)
        z = self.tmp(Op.SHR, self.tmp(Op.MUL, y2, magic), imm=DIVIDE_SHIFT)
        if comp == "z":
            return z
        return self.tmp(Op.SUB, y2, self.tmp(Op.MUL, z, size))

    # --- 64-bit pairs: (low, high) halves of registers whose high half matters ---------------
    def pair_of(self, op: object) -> tuple[int, int]:
        """(low vreg, high vreg) of a 64-bit operand."""
        if isinstance(op, Imm):
            v = op.value & ((1 << 64) - 1)
            return self.reg_in(Imm(_s32(v))), self.reg_in(Imm(_s32(v >> 32)))
        if not isinstance(op, Reg):
            raise self.fail("unsupported 64-bit operand")
        lo = self.vreg(op.name)
        if op.name in self.pairs:
            if op.name not in self.hi:
                self.hi[op.name] = self.new_vreg()
            return lo, self.hi[op.name]
        kind = self.kind(op)
        if kind in (Kind.PTR, Kind.ZX):
            return lo, ZERO
        if kind == Kind.SX:
            hi = self.new_vreg()
            self.emit(Op.SRA, hi, lo, imm=31, bi=True)
            return lo, hi
        raise self.fail("the high half of this 64-bit value is not known")

    def tmp(self, op: Op, a: int = ZERO, b: int = ZERO, *, imm: int | None = None,
            c: int = ZERO, mod: int = 0) -> int:
        t = self.new_vreg()
        self.emit(op, t, a, b, c, imm=imm or 0, bi=imm is not None, mod=mod)
        return t

    def pred_tmp(self, cmp: Cmp, a: int, b: int = ZERO, imm: int | None = None) -> int:
        p = self.new_vpred()
        self.emit(Op.SETP, p, a, b, imm=imm or 0, bi=imm is not None, mod=cmp)
        return p

    def compare64(self, name: str, signed: bool, x: object, y: object) -> int:
        """A predicate holding the 64-bit comparison x <name> y."""
        (alo, ahi), (blo, bhi) = self.pair_of(x), self.pair_of(y)
        hi_eq = self.pred_tmp(Cmp.EQ, ahi, bhi)
        if name in ("eq", "ne"):
            lo_eq = self.pred_tmp(Cmp.EQ, alo, blo)
            p = self.new_vpred()
            mod = PredOp.AND if name == "eq" else PredOp.OR | 4 | 8
            self.emit(Op.PLOP, p, hi_eq, lo_eq, mod=mod)
            return p
        strict = {"lt": "lt", "le": "lt", "gt": "gt", "ge": "gt", "lo": "lt", "ls": "lt",
                  "hi": "gt", "hs": "gt"}[name]
        table = SIGNED_CMP if signed else UNSIGNED_CMP
        hi_cmp = self.pred_tmp(table[strict], ahi, bhi)
        lo_cmp = self.pred_tmp(UNSIGNED_CMP[name], alo, blo)
        both = self.new_vpred()
        self.emit(Op.PLOP, both, hi_eq, lo_cmp, mod=PredOp.AND)
        p = self.new_vpred()
        self.emit(Op.PLOP, p, hi_cmp, both, mod=PredOp.OR)
        return p

    def pair_def(self, ins: Instr) -> None:
        """Define both halves of a 64-bit register whose high half is read later."""
        o, m, ops = ins.opcode, ins.mods, ins.operands
        dst = ops[0]
        t = m[-1] if m else ""
        if o == "ld" or (o == "cvt" and type_bits(t) < 64) or (o == "mul" and "wide" in m):
            self.select_plain(ins, pairs=False)  # the low half, from 32-bit sources
            lo = self.vreg(dst.name)
            signed = t.startswith("s") if o != "cvt" else m[-1].startswith("s")
            if o == "mul":
                a = self.reg_in(ops[1], type_bits(t), signed)
                b, imm, bi = self.b_operand(ops[2], type_bits(t), signed)
                hi = self.new_vreg()
                self.emit(Op.MULHI if signed else Op.MULHIU, hi, a, b, imm=imm, bi=bi)
            else:
                hi = self.tmp(Op.SRA, lo, imm=31) if signed else ZERO
            self.emit(Op.ADD, self.pair_of(dst)[1], hi)
            return
        if o not in RING_64 or (o == "mul" and "lo" not in m) or o == "cvt" and type_bits(t) != 64:
            raise self.fail(f"64-bit `{o}` whose high half is needed later is not supported")
        if o in ("mov", "cvta", "cvt"):
            lo, hi = self.pair_of(ops[1])
        elif o in ("add", "sub"):
            (alo, ahi), (blo, bhi) = self.pair_of(ops[1]), self.pair_of(ops[2])
            op = Op.ADD if o == "add" else Op.SUB
            lo = self.tmp(op, alo, blo)
            carry = self.pred_tmp(Cmp.LO, lo, alo) if o == "add" else \
                self.pred_tmp(Cmp.LO, alo, blo)
            hi = self.tmp(op, ahi, bhi)
            self.emit(op, hi, hi, imm=1, bi=True).guard = (carry, False)
        elif o == "mul":
            (alo, ahi), (blo, bhi) = self.pair_of(ops[1]), self.pair_of(ops[2])
            lo = self.tmp(Op.MUL, alo, blo)
            hi = self.tmp(Op.MULHIU, alo, blo)
            self.emit(Op.MAD, hi, alo, bhi, hi)
            self.emit(Op.MAD, hi, ahi, blo, hi)
        elif o in ("and", "or", "xor"):
            (alo, ahi), (blo, bhi) = self.pair_of(ops[1]), self.pair_of(ops[2])
            op = BINARY[o]
            lo, hi = self.tmp(op, alo, blo), self.tmp(op, ahi, bhi)
        elif o == "not":
            alo, ahi = self.pair_of(ops[1])
            lo, hi = self.tmp(Op.NOT, alo), self.tmp(Op.NOT, ahi)
        elif o == "neg":
            alo, ahi = self.pair_of(ops[1])
            lo, hi = self.tmp(Op.NEG, alo), self.tmp(Op.NOT, ahi)
            zero = self.pred_tmp(Cmp.EQ, alo, imm=0)
            self.emit(Op.ADD, hi, hi, imm=1, bi=True).guard = (zero, False)
        elif o == "selp":
            (alo, ahi), (blo, bhi) = self.pair_of(ops[1]), self.pair_of(ops[2])
            p = self.vpred(ops[3].name)
            lo, hi = self.tmp(Op.SEL, alo, blo, c=p), self.tmp(Op.SEL, ahi, bhi, c=p)
        elif o in ("min", "max"):
            signed = t.startswith("s")
            take_a = self.compare64("lt" if o == "min" else "gt", signed, ops[1], ops[2])
            (alo, ahi), (blo, bhi) = self.pair_of(ops[1]), self.pair_of(ops[2])
            lo = self.tmp(Op.SEL, alo, blo, c=take_a)
            hi = self.tmp(Op.SEL, ahi, bhi, c=take_a)
        else:  # shl / shr by a constant
            k = self.constant(ops[2])
            if k is None:
                raise self.fail("64-bit shift by a variable amount whose result's high half is "
                                "needed is not supported")
            alo, ahi = self.pair_of(ops[1])
            lo, hi = self.shift64(o, t.startswith("s"), alo, ahi, k & 0xFFFFFFFF)
        dlo, dhi = self.pair_of(dst)
        self.emit(Op.ADD, dlo, lo)
        self.emit(Op.ADD, dhi, hi)

    def shift64(self, o: str, arith: bool, lo: int, hi: int, k: int) -> tuple[int, int]:
        """Both halves of a 64-bit constant shift (amounts >= 64 clamp, as in PTX)."""
        k = min(k, 64)
        if o == "shl":
            if k >= 32:
                return ZERO, self.tmp(Op.SHL, lo, imm=k - 32) if k < 64 else ZERO
            if k == 0:
                return lo, hi
            new_hi = self.tmp(Op.OR, self.tmp(Op.SHL, hi, imm=k), self.tmp(Op.SHR, lo, imm=32 - k))
            return self.tmp(Op.SHL, lo, imm=k), new_hi
        fill = self.tmp(Op.SRA, hi, imm=31) if arith else ZERO
        if k >= 32:
            if k == 64:
                return fill, fill
            return self.tmp(Op.SRA if arith else Op.SHR, hi, imm=k - 32), fill
        if k == 0:
            return lo, hi
        new_lo = self.tmp(Op.OR, self.tmp(Op.SHR, lo, imm=k), self.tmp(Op.SHL, hi, imm=32 - k))
        return new_lo, self.tmp(Op.SRA if arith else Op.SHR, hi, imm=k)

    def arith(self, ins: Instr, op: Op) -> None:
        t = ins.mods[-1]
        bits = type_bits(t)
        bits_eff = min(bits, 32)
        d = self.dest(ins.operands[0])
        a = self.reg_in(ins.operands[1], bits_eff)
        b, imm, bi = self.b_operand(ins.operands[2], bits_eff)
        self.emit(op, d, a, b, imm=imm, bi=bi)
        if bits == 16 and op in (Op.ADD, Op.SUB, Op.MUL):
            self.narrow(d, 16)

    def op_add(self, ins: Instr) -> None:
        self.arith(ins, Op.ADD)

    def op_sub(self, ins: Instr) -> None:
        self.arith(ins, Op.SUB)

    def op_and(self, ins: Instr) -> None:
        self.logic(ins, Op.AND)

    def op_or(self, ins: Instr) -> None:
        self.logic(ins, Op.OR)

    def op_xor(self, ins: Instr) -> None:
        self.logic(ins, Op.XOR)

    def logic(self, ins: Instr, op: Op) -> None:
        if ins.mods[-1] == "pred":
            d = self.vpred(ins.operands[0].name)
            a, b = (self.pred_operand(x) for x in ins.operands[1:3])
            mod = {Op.AND: PredOp.AND, Op.OR: PredOp.OR, Op.XOR: PredOp.XOR}[op]
            self.emit(Op.PLOP, d, a[0], b[0], mod=mod | a[1] << 2 | b[1] << 3)
            return
        self.arith(ins, op)

    def pred_operand(self, op: object) -> tuple[int, int]:
        if isinstance(op, Reg):
            return self.vpred(op.name), 0
        if isinstance(op, Imm):
            t = self.new_vpred()
            self.emit(Op.SETP, t, ZERO, imm=0, bi=True, mod=Cmp.EQ if op.value else Cmp.NE)
            return t, 0
        raise self.fail("bad predicate operand")

    def op_not(self, ins: Instr) -> None:
        if ins.mods[-1] == "pred":
            d = self.vpred(ins.operands[0].name)
            a = self.vpred(ins.operands[1].name)
            self.emit(Op.PLOP, d, a, a, mod=PredOp.AND | 4 | 8)
            return
        self.unary(ins, Op.NOT)

    def unary(self, ins: Instr, op: Op) -> None:
        t = ins.mods[-1]
        bits = type_bits(t)
        if bits == 64 and op in (Op.POPC, Op.CLZ, Op.BREV):
            raise self.fail("64-bit bit counting is not supported")
        if bits == 64 and op == Op.ABS and self.kind(ins.operands[1]) != Kind.SX:
            raise self.fail("abs of a 64-bit value is supported only for sign-extended ints")
        d = self.dest(ins.operands[0])
        a = self.reg_in(ins.operands[1], min(bits, 32), signed=t.startswith("s"))
        self.emit(op, d, a)
        if bits == 16:
            self.narrow(d, 16)

    def op_neg(self, ins: Instr) -> None:
        self.unary(ins, Op.NEG)

    def op_abs(self, ins: Instr) -> None:
        self.unary(ins, Op.ABS)

    def op_popc(self, ins: Instr) -> None:
        self.unary(ins, Op.POPC)

    def op_clz(self, ins: Instr) -> None:
        self.unary(ins, Op.CLZ)

    def op_brev(self, ins: Instr) -> None:
        self.unary(ins, Op.BREV)

    def kind(self, op: object) -> Kind | None:
        return self._operand_kind(op, self.kinds)

    def op_min(self, ins: Instr) -> None:
        self.minmax(ins, Op.MIN, Op.MINU)

    def op_max(self, ins: Instr) -> None:
        self.minmax(ins, Op.MAX, Op.MAXU)

    def minmax(self, ins: Instr, signed_op: Op, unsigned_op: Op) -> None:
        t = ins.mods[-1]
        bits = type_bits(t)
        signed = t.startswith("s")
        if bits == 64:
            kind = self.common_kind(*ins.operands[1:3])
            if kind is None:  # full 64-bit comparison; only the low half is kept
                take_a = self.compare64("lt" if signed_op == Op.MIN else "gt", signed,
                                        *ins.operands[1:3])
                (alo, _), (blo, _) = (self.pair_of(x) for x in ins.operands[1:3])
                self.emit(Op.SEL, self.dest(ins.operands[0]), alo, blo, c=take_a)
                return
            signed = signed and kind == Kind.SX
        d = self.dest(ins.operands[0])
        a = self.reg_in(ins.operands[1], min(bits, 32), signed)
        b, imm, bi = self.b_operand(ins.operands[2], min(bits, 32), signed)
        self.emit(signed_op if signed else unsigned_op, d, a, b, imm=imm, bi=bi)
        if bits == 16:
            self.narrow(d, 16)

    def op_mul(self, ins: Instr) -> None:
        m = ins.mods
        t = m[-1]
        bits = type_bits(t)
        signed = t.startswith("s")
        dst = ins.operands[0]
        if "wide" in m:
            d = self.dest(dst)
            a = self.reg_in(ins.operands[1], bits, signed)
            b, imm, bi = self.b_operand(ins.operands[2], bits, signed)
            self.emit(Op.MUL, d, a, b, imm=imm, bi=bi)
            return
        if "hi" in m:
            if bits == 64:
                raise self.fail("64-bit mul.hi is not supported")
            d = self.dest(dst)
            if bits == 16:
                a = self.reg_in(ins.operands[1], 16, signed)
                b, imm, bi = self.b_operand(ins.operands[2], 16, signed)
                self.emit(Op.MUL, d, a, b, imm=imm, bi=bi)
                self.emit(Op.SRA if signed else Op.SHR, d, d, imm=16, bi=True)
                self.narrow(d, 16)
                return
            a = self.reg_in(ins.operands[1])
            b, imm, bi = self.b_operand(ins.operands[2])
            self.emit(Op.MULHI if signed else Op.MULHIU, d, a, b, imm=imm, bi=bi)
            return
        self.arith(ins, Op.MUL)

    def op_mad(self, ins: Instr) -> None:
        m = ins.mods
        t = m[-1]
        bits = type_bits(t)
        signed = t.startswith("s")
        d = self.dest(ins.operands[0])
        if "hi" in m:
            if bits != 32:
                raise self.fail("mad.hi is supported on 32-bit values only")
            a = self.reg_in(ins.operands[1])
            b, imm, bi = self.b_operand(ins.operands[2])
            c, cimm, cbi = self.b_operand(ins.operands[3])
            tmp = self.new_vreg()
            self.emit(Op.MULHI if signed else Op.MULHIU, tmp, a, b, imm=imm, bi=bi)
            self.emit(Op.ADD, d, tmp, c, imm=cimm, bi=cbi)
            return
        src_bits = bits if "wide" in m else min(bits, 32)
        a = self.reg_in(ins.operands[1], src_bits, signed)
        b, imm, bi = self.b_operand(ins.operands[2], src_bits, signed)
        c = self.reg_in(ins.operands[3])
        self.emit(Op.MAD, d, a, b, c, imm=imm, bi=bi)
        if bits == 16 and "wide" not in m:
            self.narrow(d, 16)

    def op_shl(self, ins: Instr) -> None:
        bits = type_bits(ins.mods[-1])
        d = self.dest(ins.operands[0])
        a = self.reg_in(ins.operands[1])
        b, imm, bi = self.b_operand(ins.operands[2])
        if bi and bits == 64 and imm >= 32:
            self.emit(Op.ADD, d, ZERO, imm=0, bi=True)
            return
        self.emit(Op.SHL, d, a, b, imm=imm, bi=bi)
        if bits == 16:
            self.narrow(d, 16)

    def op_shr(self, ins: Instr) -> None:
        t = ins.mods[-1]
        bits = type_bits(t)
        arith = t.startswith("s")
        dst, src, amt = ins.operands[:3]
        d = self.dest(dst)
        if bits < 64:
            a = self.reg_in(src, bits, arith)
            b, imm, bi = self.b_operand(amt)
            self.emit(Op.SRA if arith else Op.SHR, d, a, b, imm=imm, bi=bi)
            self.narrow(d, bits)
            return
        kind = Kind.ZX if self.kind(src) == Kind.PTR else self.kind(src)
        if kind == Kind.ZX or (kind == Kind.SX and arith):
            b, imm, bi = self.b_operand(amt)
            self.emit(Op.SHR if kind == Kind.ZX else Op.SRA, d, self.reg_in(src), b, imm=imm,
                      bi=bi)
            return
        k = self.constant(amt)
        if k is None:
            raise self.fail("64-bit shift of a value with an unknown high half by a variable "
                            "amount is not supported")
        lo, _ = self.shift64("shr", arith, *self.pair_of(src), k & MASK32)
        self.emit(Op.ADD, d, lo)

    def op_shf(self, ins: Instr) -> None:
        m = ins.mods
        left = "l" in m
        clamp = "clamp" in m
        d = self.dest(ins.operands[0])
        a = self.reg_in(ins.operands[1])
        b = self.reg_in(ins.operands[2])
        n = self.new_vreg()
        c, imm, bi = self.b_operand(ins.operands[3])
        if bi:
            self.emit(Op.ADD, n, ZERO, imm=min(imm & MASK32, 32) if clamp else imm & 31, bi=True)
        elif clamp:
            self.emit(Op.MINU, n, c, imm=32, bi=True)
        else:
            self.emit(Op.AND, n, c, imm=31, bi=True)
        rest = self.new_vreg()
        self.emit(Op.NEG, rest, n)
        self.emit(Op.ADD, rest, rest, imm=32, bi=True)
        t1, t2 = self.new_vreg(), self.new_vreg()
        if left:  # high word of {b:a} << n
            self.emit(Op.SHL, t1, b, n)
            self.emit(Op.SHR, t2, a, rest)
        else:  # low word of {b:a} >> n
            self.emit(Op.SHR, t1, a, n)
            self.emit(Op.SHL, t2, b, rest)
        self.emit(Op.OR, d, t1, t2)

    def op_dp4a(self, ins: Instr) -> None:
        """d = c + the dot product of the four bytes of a and b (each signed per its type)."""
        a_signed, b_signed = (t.startswith("s") for t in ins.mods[:2])
        a, b = self.reg_in(ins.operands[1]), self.reg_in(ins.operands[2])
        acc = self.tmp(Op.ADD, self.reg_in(ins.operands[3]))
        for k in range(4):
            x, y = (self.byte_of(v, k, sign) for v, sign in ((a, a_signed), (b, b_signed)))
            self.emit(Op.MAD, acc, x, y, acc)
        self.emit(Op.ADD, self.dest(ins.operands[0]), acc)

    def op_prmt(self, ins: Instr) -> None:
        """Byte permute with a constant selector: result byte i is byte (sel_i & 7) of {b, a},
        or that byte's sign replicated when sel_i & 8."""
        sel = self.constant(ins.operands[3])
        if sel is None or len(ins.mods) != 1:
            raise self.fail("prmt is supported with a constant selector in the default mode")
        a, b = self.reg_in(ins.operands[1]), self.reg_in(ins.operands[2])
        out = self.tmp(Op.ADD, ZERO, imm=0)
        for i in range(4):
            pick = sel >> 4 * i & 0xF
            src, k = (a, pick & 3) if pick & 7 < 4 else (b, pick & 3)
            if pick & 8:
                byte = self.tmp(Op.SRA, self.tmp(Op.SHL, src, imm=24 - 8 * k), imm=31)
                byte = self.tmp(Op.AND, byte, imm=0xFF)
            else:
                byte = self.byte_of(src, k, False)
            self.emit(Op.OR, out, out, self.tmp(Op.SHL, byte, imm=8 * i) if i else byte)
        self.emit(Op.ADD, self.dest(ins.operands[0]), out)

    def byte_of(self, v: int, k: int, signed: bool) -> int:
        if signed:
            return self.tmp(Op.SRA, self.tmp(Op.SHL, v, imm=24 - 8 * k), imm=24)
        return self.tmp(Op.AND, self.tmp(Op.SHR, v, imm=8 * k), imm=0xFF)

    def op_bfind(self, ins: Instr) -> None:
        t = ins.mods[-1]
        if t not in ("u32", "s32"):
            raise self.fail("bfind is supported on 32-bit values only")
        d = self.dest(ins.operands[0])
        x = self.reg_in(ins.operands[1])
        if t == "s32":
            sign = self.new_vreg()
            self.emit(Op.SRA, sign, x, imm=31, bi=True)
            y = self.new_vreg()
            self.emit(Op.XOR, y, x, sign)
            x = y
        lz = self.new_vreg()
        self.emit(Op.CLZ, lz, x)
        if "shiftamt" in ins.mods:
            p = self.new_vpred()
            self.emit(Op.SETP, p, x, imm=0, bi=True, mod=Cmp.EQ)
            self.emit(Op.SEL, d, lz, imm=-1, bi=True, c=p, mod=1)
        else:  # 31 - clz: -1 when no bit is set
            self.emit(Op.NEG, d, lz)
            self.emit(Op.ADD, d, d, imm=31, bi=True)

    def op_bfe(self, ins: Instr) -> None:
        t = ins.mods[-1]
        pos, length = ins.operands[2], ins.operands[3]
        if t not in ("u32", "s32") or not isinstance(pos, Imm) or not isinstance(length, Imm):
            raise self.fail("bfe is supported on 32-bit values with constant position and length")
        p, n = pos.value & 255, length.value & 255
        d = self.dest(ins.operands[0])
        a = self.reg_in(ins.operands[1])
        if n == 0:
            self.emit(Op.ADD, d, ZERO, imm=0, bi=True)
        elif t == "u32":
            self.emit(Op.SHR, d, a, imm=min(p, 32), bi=True)
            if p + n < 32:
                self.emit(Op.AND, d, d, imm=_s32((1 << n) - 1), bi=True)
        else:
            top = min(p + n, 32)  # the sign bit is bit top-1 (PTX: msb of the field, clamped)
            self.emit(Op.SHL, d, a, imm=32 - top, bi=True)
            self.emit(Op.SRA, d, d, imm=min(32 - top + min(p, top - 1) if p < 32 else 31, 31),
                      bi=True)

    def op_bfi(self, ins: Instr) -> None:
        pos, length = ins.operands[3], ins.operands[4]
        if ins.mods[-1] != "b32" or not isinstance(pos, Imm) or not isinstance(length, Imm):
            raise self.fail("bfi is supported on 32-bit values with constant position and length")
        p, n = pos.value & 255, length.value & 255
        d = self.dest(ins.operands[0])
        f = self.reg_in(ins.operands[1])
        b = self.reg_in(ins.operands[2])
        if n == 0 or p >= 32:
            self.emit(Op.ADD, d, b)
            return
        mask = ((1 << min(n, 32 - p)) - 1) << p
        t1, t2 = self.new_vreg(), self.new_vreg()
        self.emit(Op.SHL, t1, f, imm=p, bi=True)
        self.emit(Op.AND, t1, t1, imm=_s32(mask), bi=True)
        self.emit(Op.AND, t2, b, imm=_s32(~mask & MASK32), bi=True)
        self.emit(Op.OR, d, t1, t2)

    def op_setp(self, ins: Instr) -> None:
        m = ins.mods
        cmp_name, t = m[0], m[-1]
        boolop = m[1] if len(m) == 3 else None
        bits = type_bits(t)
        signed = t.startswith("s")
        table = SIGNED_CMP if signed else UNSIGNED_CMP
        if cmp_name not in table:
            raise self.fail(f"comparison `{cmp_name}` is not supported on .{t}")
        dst = ins.operands[0]
        p_name, q_name = (dst.first.name, dst.second.name) if isinstance(dst, Pair) else \
            (dst.name, None)
        x, y = ins.operands[1], ins.operands[2]
        res = None
        if bits == 64:
            kind = self.common_kind(x, y)
            if kind is None:
                res = self.compare64(cmp_name, signed, x, y)
            else:
                table = self.narrow_table(kind, signed)
        if res is None:
            a = self.reg_in(x, min(bits, 32), signed)
            b, imm, bi = self.b_operand(y, min(bits, 32), signed)
        p = self.vpred(p_name)
        if boolop is None:
            if res is None:
                self.emit(Op.SETP, p, a, b, imm=imm, bi=bi, mod=table[cmp_name])
            else:
                self.emit(Op.PLOP, p, res, res, mod=PredOp.AND)
            if q_name is not None:
                q = self.vpred(q_name)
                self.emit(Op.PLOP, q, p, p, mod=PredOp.AND | 4 | 8)
            return
        c_op = ins.operands[3]
        negated = getattr(c_op, "negated", False)
        c = self.vpred(c_op.name)
        bop = {"and": PredOp.AND, "or": PredOp.OR, "xor": PredOp.XOR}[boolop]
        if res is None:
            res = self.new_vpred()
            self.emit(Op.SETP, res, a, b, imm=imm, bi=bi, mod=table[cmp_name])
        self.emit(Op.PLOP, p, res, c, mod=bop | (8 if negated else 0))
        if q_name is not None:
            self.emit(Op.PLOP, self.vpred(q_name), res, c, mod=bop | 4 | (8 if negated else 0))

    def op_selp(self, ins: Instr) -> None:
        bits = type_bits(ins.mods[-1])
        d = self.dest(ins.operands[0])
        x, y, c_op = ins.operands[1:4]
        p = self.vpred(c_op.name)
        if isinstance(x, Imm) and not isinstance(y, Imm):
            x, y, neg = y, x, 1
        elif isinstance(x, Imm) and isinstance(y, Imm) and x.value & ((1 << min(bits, 32)) - 1) \
                == 0:
            x, y, neg = x, y, 0
        else:
            neg = 0
        if isinstance(x, Imm) and isinstance(y, Imm) and y.value == 0 and x.value != 0:
            x, y, neg = y, x, 1
        a = self.reg_in(x, min(bits, 32))
        b, imm, bi = self.b_operand(y, min(bits, 32))
        self.emit(Op.SEL, d, a, b, c=p, imm=imm, bi=bi, mod=neg)

    def op_cvt(self, ins: Instr) -> None:
        m = [x for x in ins.mods if x not in ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi")]
        if "sat" in m:
            raise self.fail("saturating conversions are not supported")
        dt, st = m[-2], m[-1]
        if dt not in TYPES or st not in TYPES:
            raise self.fail("only integer conversions are supported")
        db, sb = type_bits(dt), type_bits(st)
        d = self.dest(ins.operands[0])
        src = ins.operands[1]
        a = self.reg_in(src, min(sb, 32), signed=st.startswith("s") and db > sb)
        if sb < 32 and not st.startswith("s") and sb < 16:
            t = self.new_vreg()
            self.emit(Op.AND, t, a, imm=(1 << sb) - 1, bi=True)
            a = t
        self.emit(Op.ADD, d, a)
        if db < 32:
            self.narrow(d, db)

    def op_cvta(self, ins: Instr) -> None:
        if "shared" in ins.mods or "global" not in ins.mods:
            raise self.fail("only cvta.to.global and cvta.global are supported (a generic "
                            "address is a global one here)")
        d = self.dest(ins.operands[0])
        self.emit(Op.ADD, d, self.reg_in(ins.operands[1]))

    def address(self, op: object) -> tuple[int, int]:
        """(base vreg, byte offset) of a memory operand."""
        if not isinstance(op, Addr):
            raise self.fail("expected a memory operand")
        if op.base is None:
            return ZERO, op.offset
        if isinstance(op.base, Sym):
            if op.base.name in self.global_addr:
                return ZERO, self.global_addr[op.base.name] + op.offset
            if op.base.name not in self.shared:
                raise self.fail(f"`{op.base.name}` is not a shared-memory symbol")
            return ZERO, self.shared[op.base.name] + op.offset
        return self.vreg(op.base.name), op.offset

    def space(self, ins: Instr) -> str:
        spaces = [s for s in ins.mods if s in MEM_SPACES]
        if not spaces:
            # Shared addresses never become generic (cvta to/from shared is rejected), so a
            # generic address is a global one.
            return "global"
        if spaces[0] == "const":
            return "global"  # __constant__ data lives in global memory here
        if spaces[0] in ("local", "tex", "surf"):
            raise self.fail(f"the .{spaces[0]} state space is not supported")
        return spaces[0]

    def check_word(self, ins: Instr) -> None:
        t = ins.mods[-1]
        if type_bits(t) != 32 and not (ins.opcode == "ld" and "param" in ins.mods):
            raise self.fail(f"{type_bits(t)}-bit atomic: atomics work on 32-bit words only")

    def fold_offset(self, ptr: int, index: int, unsigned: bool, offset: int) \
            -> tuple[int, int, int]:
        """(base, index, mod bits) of an indexed access, which has no immediate: a PTX offset
        (`[%rd5+-8]`) joins the index as a signed word count — ptr + 4*index + offset exactly,
        where adding it to the pointer could wrap below 0 — or, not a whole word, the pointer
        (the access is misaligned either way)."""
        if offset % 4:
            return self.tmp(Op.ADD, ptr, imm=offset), index, INDEXED | (
                INDEX_UNSIGNED if unsigned else 0)
        if offset:
            return ptr, self.tmp(Op.ADD, index, imm=offset // 4), INDEXED
        return ptr, index, INDEXED | (INDEX_UNSIGNED if unsigned else 0)

    def op_ld(self, ins: Instr) -> None:
        space = self.space(ins)
        addr = ins.operands[1]
        if space == "param":
            self.load_param(ins)
            return
        mod = Space.GLOBAL if space == "global" else Space.SHARED
        bits = type_width(ins.mods[-1])
        if isinstance(ins.operands[0], Vec) or bits < 32:
            self.load_elements(ins, mod, bits)
            return
        d = self.dest(ins.operands[0])
        fused = self.indexed(addr) if space == "global" else None
        if fused is not None:
            ptr, index, mode = self.fold_offset(*fused, addr.offset)
            self.emit(Op.LD, d, ptr, index, mod=Space.GLOBAL | mode)
            return
        base, off = self.address(addr)
        self.emit(Op.LD, d, base, imm=off, mod=mod)

    def op_st(self, ins: Instr) -> None:
        space = self.space(ins)
        if space == "param":
            raise self.fail("stores to parameters are not supported")
        mod = Space.GLOBAL if space == "global" else Space.SHARED
        bits = type_width(ins.mods[-1])
        if isinstance(ins.operands[1], Vec) or bits < 32:
            self.store_elements(ins, mod, bits)
            return
        v = self.reg_in(ins.operands[1])
        fused = self.indexed(ins.operands[0]) if space == "global" else None
        if fused is not None:
            ptr, index, mode = self.fold_offset(*fused, ins.operands[0].offset)
            self.emit(Op.ST, ZERO, ptr, index, v, mod=Space.GLOBAL | mode)
            return
        base, off = self.address(ins.operands[0])
        self.emit(Op.ST, ZERO, base, v, imm=off, mod=mod)

    # --- vector and sub-word accesses: split into the machine's aligned words ----------------
    def access_base(self, addr: object, span: int) -> int:
        """A register holding the access's byte address; for a vector wider than a word, made
        odd (so the first word access faults as misaligned) unless it is a multiple of the
        vector's size, as a GPU requires."""
        base, off = self.address(addr)
        a = self.tmp(Op.ADD, base, imm=off) if off or base == ZERO else base
        if span > 4:
            bad = self.tmp(Op.MINU, self.tmp(Op.AND, a, imm=span - 1), imm=1)
            a = self.tmp(Op.OR, a, bad)
        return a

    def unit_address(self, a: int, size: int) -> int:
        """The word holding a `size`-byte unit at byte address a: a & -4, except that a
        halfword at an odd address stays odd, so its access faults as misaligned."""
        if size == 1:
            return self.tmp(Op.AND, a, imm=-4)
        return self.tmp(Op.SUB, a, self.tmp(Op.AND, a, imm=2))

    def load_elements(self, ins: Instr, mod: int, bits: int) -> None:
        """ld.v2/.v4 and 8/16-bit loads: each aligned word the access covers is loaded once and
        the elements are shifted out of it (sign- or zero-extended to the register)."""
        dst = ins.operands[0]
        items = list(dst.items) if isinstance(dst, Vec) else [dst]
        size = bits // 8
        span = size * len(items)
        signed = ins.mods[-1].startswith("s")
        a = self.access_base(ins.operands[1], span)
        if span < 4:  # one byte, one halfword or a char2: a part of one word
            word = self.new_vreg()
            self.emit(Op.LD, word, self.unit_address(a, span), mod=mod)
            shift = self.tmp(Op.SHL, self.tmp(Op.AND, a, imm=3), imm=3)
            unit = self.tmp(Op.SHR, word, shift)
            parts = [(unit, k * bits) for k in range(len(items))]
        else:
            direct = bits == 32 and a not in {self.vreg(x.name) for x in items if x is not None}
            words = []
            for k in range(span // 4):
                item = items[k] if direct else None
                w = self.dest(item) if item is not None else self.new_vreg()
                self.emit(Op.LD, w, a, imm=4 * k, mod=mod)
                words.append(w)
            if direct:
                return
            parts = [(words[k * size // 4], k * bits % 32) for k in range(len(items))]
        self.extend_elements(items, parts, bits, signed)

    def load_param(self, ins: Instr) -> None:
        """ld.param: the parameter's word, or a part of it (NVRTC loads `n >> 16` as the upper
        halfword of `n`, a char parameter as a byte). The machine passes one word a parameter;
        a 64-bit one holds 0..2^31-1 (a pointer, a 32-bit address), so its upper word is 0."""
        addr = ins.operands[1]
        if not isinstance(addr, Addr) or not isinstance(addr.base, Sym) \
                or addr.base.name not in self.params:
            raise self.fail("parameter loads must name a parameter")
        bits = type_width(ins.mods[-1])
        d = self.dest(ins.operands[0])
        if addr.offset >= 4:
            self.emit(Op.ADD, d, ZERO, imm=0, bi=True)
            return
        word = d if bits >= 32 else self.new_vreg()
        self.emit(Op.LD, word, ZERO, imm=4 * self.params[addr.base.name], mod=Space.PARAM)
        if bits < 32:
            self.extend_elements([ins.operands[0]], [(word, 8 * addr.offset)], bits,
                                 ins.mods[-1].startswith("s"))

    def extend_elements(self, items: list[Reg | None], parts: list[tuple[int, int]], bits: int,
                        signed: bool) -> None:
        """Each item's register gets its element: ``bits`` bits at bit ``at`` of ``word``, sign-
        or zero-extended (a 16-bit register is kept zero-extended)."""
        for item, (word, at) in zip(items, parts, strict=True):
            if item is None:
                continue
            d = self.dest(item)
            if bits == 32:
                self.emit(Op.ADD, d, word)
            elif signed:
                self.emit(Op.SHL, d, word, imm=32 - bits - at, bi=True)
                self.emit(Op.SRA, d, d, imm=32 - bits, bi=True)
                if self.width(item.name) == 16:
                    self.narrow(d, 16)
            else:
                self.emit(Op.SHR, d, word, imm=at, bi=True) if at else self.emit(Op.ADD, d, word)
                self.emit(Op.AND, d, d, imm=(1 << bits) - 1, bi=True)

    def store_elements(self, ins: Instr, mod: int, bits: int) -> None:
        """st.v2/.v4 and 8/16-bit stores. Whole words are stored as words (a char4 is one
        word); a unit smaller than a word is merged into its word with a compare-and-swap
        loop, since the machine's memory is word-addressed: lanes apply atomics in lane order,
        so lanes writing neighbouring bytes of one word in one instruction each keep their
        byte (a lane whose CAS saw another lane's write retries), and two lanes writing one
        byte leave the higher lane's value, as a word store does."""
        src = ins.operands[1]
        items = list(src.items) if isinstance(src, Vec) else [src]
        size = bits // 8
        span = size * len(items)
        a = self.access_base(ins.operands[0], span)
        values = [self.reg_in(x) for x in items]
        if span < 4:
            unit = values[0] if bits == 32 else self.pack_values(values, bits)
            self.merge_store(a, unit, span, mod)
            return
        per_word = 4 // size
        for k in range(span // 4):
            chunk = values[k * per_word:(k + 1) * per_word]
            word = chunk[0] if bits == 32 else self.pack_values(chunk, bits)
            self.emit(Op.ST, ZERO, a, word, imm=4 * k, mod=mod)

    def pack_values(self, values: list[int], bits: int) -> int:
        """The elements' low bits side by side, element 0 lowest."""
        out = self.tmp(Op.AND, values[0], imm=(1 << bits) - 1)
        for k, v in enumerate(values[1:], start=1):
            part = self.tmp(Op.SHL, self.tmp(Op.AND, v, imm=(1 << bits) - 1), imm=k * bits)
            self.emit(Op.OR, out, out, part)
        return out

    def merge_store(self, a: int, value: int, size: int, mod: int) -> None:
        """Store the low `size` bytes of `value` at byte address a: a CAS loop on its word."""
        wa = self.unit_address(a, size)
        shift = self.tmp(Op.SHL, self.tmp(Op.AND, a, imm=3), imm=3)
        ones = self.tmp(Op.ADD, ZERO, imm=(1 << 8 * size) - 1)
        keep = self.tmp(Op.NOT, self.tmp(Op.SHL, ones, shift))
        put = self.tmp(Op.SHL, self.tmp(Op.AND, value, ones), shift)
        old = self.new_vreg()
        self.emit(Op.LD, old, wa, mod=mod)
        loop, check, done = (self.new_block(f"merge_{n}") for n in ("loop", "check", "done"))
        self.set_term(VTerm(TermKind.JMP, loop))
        self.switch(loop)
        new = self.tmp(Op.OR, self.tmp(Op.AND, old, keep), put)
        got = self.new_vreg()
        self.emit(Op.ATOMG if mod == Space.GLOBAL else Op.ATOMS, got, wa, old, new, mod=Atom.CAS)
        self.set_term(VTerm(TermKind.JMP, check))  # an atomic's result is read a block later
        self.switch(check)
        retry = self.pred_tmp(Cmp.NE, got, old)
        self.emit(Op.ADD, old, got)
        self.set_term(VTerm(TermKind.BRA, loop, done, retry))
        self.switch(done)

    def op_atom(self, ins: Instr) -> None:
        self.atomic(ins, ins.operands[0], ins.operands[1:])

    def op_red(self, ins: Instr) -> None:
        self.atomic(ins, None, ins.operands)

    def atomic(self, ins: Instr, dst: object, ops: tuple) -> None:
        space = self.space(ins)
        self.check_word(ins)
        t = ins.mods[-1]
        names = [x for x in ins.mods if x in ATOMS or x in ("min", "max")]
        if not names:
            raise self.fail("unsupported atomic operation")
        name = names[0]
        if name in ("min", "max"):
            kind = {("min", True): Atom.MIN, ("max", True): Atom.MAX, ("min", False): Atom.MINU,
                    ("max", False): Atom.MAXU}[(name, t.startswith("s"))]
        else:
            kind = ATOMS[name]
        base, off = self.address(ops[0])
        if kind == Atom.CAS and off:  # CAS has no immediate (docs/ISA.md §4)
            base, off = self.tmp(Op.ADD, base, imm=off), 0
        b = self.reg_in(ops[1])
        c = self.reg_in(ops[2]) if kind == Atom.CAS else ZERO
        d = self.dest(dst) if dst is not None else ZERO
        self.emit(Op.ATOMG if space == "global" else Op.ATOMS, d, base, b, c, imm=off, mod=kind)

    def op_shfl(self, ins: Instr) -> None:
        modes = {"up": Shfl.UP, "down": Shfl.DOWN, "bfly": Shfl.BFLY, "idx": Shfl.IDX}
        mode = [modes[x] for x in ins.mods if x in modes]
        if "sync" not in ins.mods or not mode:
            raise self.fail("only shfl.sync.{up,down,bfly,idx}.b32 is supported")
        dst, a_op, b_op, c_op = ins.operands[:4]
        if isinstance(dst, Pair):
            if dst.second.name in self.read_preds:
                raise self.fail("the in-range predicate output of shfl is not supported")
            dst = dst.first
        c_val = self.constant(c_op)
        if c_val is None:
            raise self.fail("the shuffle width operand must be a constant")
        segmask = (c_val >> 8) & 31
        if segmask & 0x1C != 0x1C:
            raise self.fail(f"shuffle segment of {32 - segmask} lanes: a warp has "
                            f"{limits.WARP_LANES} lanes here — pass width 4 (or 2, 1), e.g. "
                            f"__shfl_down_sync(0xffffffff, v, 1, 4)")
        packed = (segmask & 3) << 2 | (c_val & 3)
        d = self.dest(dst)
        a = self.reg_in(a_op)
        b, imm, bi = self.b_operand(b_op)
        self.emit(Op.SHFL, d, a, b, c=packed, imm=imm, bi=bi, mod=mode[0])

    # --- division -------------------------------------------------------------------------
    def op_div(self, ins: Instr) -> None:
        self.divide(ins, want_quotient=True)

    def op_rem(self, ins: Instr) -> None:
        self.divide(ins, want_quotient=False)

    def divide(self, ins: Instr, want_quotient: bool) -> None:
        """div/rem on magnitudes (docs/ISA.md, "Division and remainder"): the loops are in
        `quotient` and `remainder`; signs are applied afterwards (C truncation)."""
        ty = ins.mods[-1]
        bits = type_bits(ty)
        signed = ty.startswith("s")
        if bits == 64:
            kind = self.common_kind(*ins.operands[1:3])
            if kind is None or (kind == Kind.SX and not signed):
                raise self.fail("64-bit division is supported only for two sign-extended ints "
                                "(signed) or two zero-extended values")
            signed = kind == Kind.SX
        d = self.dest(ins.operands[0])
        x = self.reg_in(ins.operands[1], min(bits, 32), signed)
        y = self.reg_in(ins.operands[2], min(bits, 32), signed)
        # The working register ends as the result: d itself unless d is also an operand.
        n = d if d not in (x, y) else self.new_vreg()
        if signed:  # the quotient is negative when the signs differ, the remainder when x < 0
            neg = self.pred_tmp(Cmp.LT, self.tmp(Op.XOR, x, y) if want_quotient else x, imm=0)
            self.emit(Op.ABS, n, x)
            dv = self.tmp(Op.ABS, y)
        else:
            self.emit(Op.ADD, n, x)
            dv = y
        (self.quotient if want_quotient else self.remainder)(n, dv)
        if signed:
            self.emit(Op.NEG, n, n).guard = (neg, False)
        if n != d:
            self.emit(Op.ADD, d, n)
        if bits < 32:
            self.narrow(d, bits)

    def remainder(self, n: int, dv: int) -> None:
        """n = n mod dv (unsigned; n mod 0 = n). The divisor is shifted up to the dividend's
        top bit; each pass of a one-ROM-block loop subtracts it where it fits
        (``n = minu(n, n - top)``) and halves it, and the loop ends as soon as n < dv (after
        the pass at bit 0 at the latest): at most one pass per quotient bit, each writing back
        n and the shifted divisor."""
        top = self.tmp(Op.SHL, dv, self.tmp(Op.SUB, self.tmp(Op.CLZ, dv), self.tmp(Op.CLZ, n)))
        # (a dividend shorter than the divisor gives a shift >= 32, so top = 0: one pass that
        # changes nothing; n > dv - 1 rather than n >= dv ends it for a zero divisor too)
        dm1 = self.tmp(Op.SUB, dv, imm=1)
        loop, done = self.new_block("rem_loop"), self.new_block("rem_done")
        self.set_term(VTerm(TermKind.JMP, loop))
        self.switch(loop)
        self.emit(Op.MINU, n, n, self.tmp(Op.SUB, n, top))
        self.emit(Op.SHR, top, top, imm=1, bi=True)
        self.set_term(VTerm(TermKind.BRA, loop, done, self.pred_tmp(Cmp.HI, n, dm1)))
        self.switch(done)

    def quotient(self, w: int, dv: int) -> None:
        """w = w / dv (unsigned; w / 0 = 0xFFFFFFFF).

        Fast path (the dividend and divisor fit in 29 bits, roughly): one register W holds the
        partial remainder above bit t and, below it, the dividend bits not used yet followed
        by the quotient bits made so far. Each step is ``W = 2W; if W >= D: W = W - D + 1``
        with D = divisor << t, written without a branch as ``W = minu(2W, 2W - (D - 1))``;
        after t steps W = remainder << t | quotient. t is the number of quotient bits rounded
        up to an even number, so the loop body is two steps plus a counter that is the same on
        every lane: two ROM blocks that write back only W (and once the counter, one frame).
        Slow path (larger operands, divisor 0): restoring steps with a shifting divisor, two
        ROM blocks per quotient bit.
        """
        a = self.tmp(Op.CLZ, dv)
        self.emit(Op.AND, a, a, imm=31, bi=True)  # a zero divisor takes the slow path
        b = self.tmp(Op.CLZ, self.tmp(Op.OR, w, dv))
        t = self.new_vreg()  # (a - b + 1) quotient bits at most, rounded up to even: >= 2
        self.emit(Op.SUB, t, a, b)
        self.emit(Op.ADD, t, t, imm=2, bi=True)
        self.emit(Op.AND, t, t, imm=-2, bi=True)
        fast = self.pred_tmp(Cmp.LO, t, a)  # D = dv << t below 2**31: 2W never overflows
        dm1 = self.new_vreg()  # D - 1
        self.emit(Op.SUB, dm1, self.tmp(Op.SHL, dv, t), imm=1, bi=True)
        c = self.new_vreg()  # steps done
        self.emit(Op.ADD, c, ZERO, imm=0, bi=True)
        loop, slow, done = (self.new_block(f"div_{n}") for n in ("loop", "slow", "done"))
        # (slow is the taken side: the fast loop is laid out first, right after this block)
        self.set_term(VTerm(TermKind.BRA, slow, loop, fast, negated=True))

        self.switch(loop)
        u = self.new_vreg()
        for k in range(2):
            self.emit(Op.SHL, w, w, imm=1, bi=True)
            self.emit(Op.SUB, u, w, dm1)
            self.emit(Op.MINU, w, w, u)
            if k == 0:
                self.emit(Op.ADD, c, c, imm=2, bi=True)
        self.set_term(VTerm(TermKind.BRA, loop, done, self.pred_tmp(Cmp.LO, c, t)))

        # Slow path: the divisor shifted to the top quotient bit is subtracted where it fits
        # and halved, down to bit 0; the quotient bits go to W, and t = 32 leaves it as it is.
        self.switch(slow)
        rem = self.tmp(Op.ADD, w)
        top = self.tmp(Op.SHL, dv, self.tmp(Op.SUB, self.tmp(Op.CLZ, dv), self.tmp(
            Op.CLZ, self.tmp(Op.OR, w, dv))))
        self.emit(Op.ADD, t, ZERO, imm=32, bi=True)
        # x / 0: every step subtracts 0 and sets a quotient bit, so start from all ones
        self.emit(Op.SEL, w, ZERO, imm=-1, bi=True, c=self.pred_tmp(Cmp.NE, dv, imm=0))
        step = self.new_block("div_step")
        self.set_term(VTerm(TermKind.JMP, step))
        self.switch(step)
        ge = self.pred_tmp(Cmp.HS, rem, top)
        self.emit(Op.SUB, rem, rem, top).guard = (ge, False)
        self.emit(Op.ADD, w, w, w)
        self.emit(Op.ADD, w, w, imm=1, bi=True).guard = (ge, False)
        more = self.pred_tmp(Cmp.HI, top, dv)
        self.emit(Op.SHR, top, top, imm=1, bi=True)
        self.set_term(VTerm(TermKind.BRA, step, done, more))

        # The quotient: W without its bits from t up.
        self.switch(done)
        self.emit(Op.SUB, w, w, self.tmp(Op.SHL, self.tmp(Op.SHR, w, t), t))


def _s32(v: int) -> int:
    v &= MASK32
    return v - (1 << 32) if v >> 31 else v


def select_kernel(kernel: Kernel, module: Module, three_d: bool = False) -> IRFunction:
    """PTX kernel -> IR function (instruction selection); ``three_d``: for launches with a
    z extent (HIDDEN_3D parameters follow the kernel's own)."""
    return Selector(kernel, module, three_d).run()
