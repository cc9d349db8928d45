"""64-bit pairs: the (low, high) halves of registers whose high half matters. Most 64-bit values
are exact on their low 32 bits (the address model, core.Kind); a register that a non-ring
operation (an ordered compare, shr, min/max, div) reads without a proven kind gets a high-half
register too, and its definitions (add/sub with carry, mul.lo, mul.wide, logic, neg, selp,
min/max, constant shifts, cvt, ld) compute both halves. Apart from the integer family because
it is a second lowering of the same opcodes, chosen per register.
"""

from __future__ import annotations

from qgpu.machine.isa import Cmp, Op, PredOp
from qgpu.toolchain.lower.ir import ZERO
from qgpu.toolchain.lower.select.core import (
    RING_64,
    SIGNED_CMP,
    UNSIGNED_CMP,
    Kind,
    _s32,
    type_bits,
)
from qgpu.toolchain.ptx.ast import Imm, Instr, Reg

BINARY = {"add": Op.ADD, "sub": Op.SUB, "and": Op.AND, "or": Op.OR, "xor": Op.XOR}


class Wide:
    """Both halves of 64-bit registers (a mixin of Selector)."""

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
        if o == "bfi" and type_bits(t) == 64:
            lo, hi = self.insert64(ins)
            dlo, dhi = self.pair_of(dst)
            self.emit(Op.ADD, dlo, lo)
            self.emit(Op.ADD, dhi, hi)
            return
        if o not in RING_64 or (o == "mul" and not {"lo", "hi"} & set(m)) \
                or o == "cvt" and type_bits(t) != 64:
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
        elif o == "mul" and "hi" in m:
            lo, hi = self.mul_high64(t.startswith("s"), self.pair_of(ops[1]),
                                     self.pair_of(ops[2]))
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
            alo, ahi = self.pair_of(ops[1])
            if k is None:
                lo, hi = self.shift64_by(o, t.startswith("s"), alo, ahi, self.reg_in(ops[2]))
            else:
                lo, hi = self.shift64(o, t.startswith("s"), alo, ahi, k & 0xFFFFFFFF)
        dlo, dhi = self.pair_of(dst)
        self.emit(Op.ADD, dlo, lo)
        self.emit(Op.ADD, dhi, hi)

    def insert64(self, ins: Instr) -> tuple[int, int]:
        """``bfi.b64 d, a, b, pos, len`` with constant pos and len (how NVRTC joins two words
        into a long long): b with bits pos..pos+len-1 taken from a's low bits."""
        pos, length = self.constant(ins.operands[3]), self.constant(ins.operands[4])
        if pos is None or length is None:
            raise self.fail("64-bit `bfi` with a variable field is not supported")
        pos, length = pos & 0xFF, length & 0xFF  # PTX reads the low 8 bits
        mask = ((1 << min(length, 64)) - 1) << pos & ((1 << 64) - 1) if pos < 64 else 0
        (alo, ahi), (blo, bhi) = self.pair_of(ins.operands[1]), self.pair_of(ins.operands[2])
        slo, shi = self.shift64("shl", False, alo, ahi, min(pos, 64))
        halves = []
        for s, b, part in ((slo, blo, mask & 0xFFFF_FFFF), (shi, bhi, mask >> 32)):
            if part == 0:
                halves.append(b)
            elif part == 0xFFFF_FFFF:
                halves.append(s)
            else:
                keep = self.tmp(Op.AND, b, imm=_s32(~part & 0xFFFF_FFFF))
                halves.append(self.tmp(Op.OR, keep, self.tmp(Op.AND, s, imm=_s32(part))))
        return halves[0], halves[1]

    def add_counting(self, x: int, y: int, carries: int) -> int:
        """x + y (32 bits); the register `carries` counts the carry out."""
        s = self.tmp(Op.ADD, x, y)
        carry = self.pred_tmp(Cmp.LO, s, x)
        self.emit(Op.ADD, carries, carries, imm=1, bi=True).guard = (carry, False)
        return s

    def mul_high64(self, signed: bool, a: tuple[int, int], b: tuple[int, int]) \
            -> tuple[int, int]:
        """The high 64 bits of the 128-bit product a * b (``mul.hi.u64/.s64``, what division
        of a 64-bit value by a constant becomes): the four 32-bit partial products summed by
        columns with their carries counted; signed, a * b's high half is the unsigned one minus
        b where a < 0 and minus a where b < 0 (mod 2^64)."""
        (alo, ahi), (blo, bhi) = a, b
        c1 = self.tmp(Op.ADD, ZERO, imm=0)  # carries out of column 1 (bits 32..63)
        col1 = self.add_counting(self.tmp(Op.MULHIU, alo, blo), self.tmp(Op.MUL, alo, bhi), c1)
        self.add_counting(col1, self.tmp(Op.MUL, ahi, blo), c1)
        c2 = self.tmp(Op.ADD, ZERO, imm=0)  # carries out of column 2 (bits 64..95)
        lo = self.add_counting(self.tmp(Op.MULHIU, alo, bhi), c1, c2)
        lo = self.add_counting(lo, self.tmp(Op.MULHIU, ahi, blo), c2)
        lo = self.add_counting(lo, self.tmp(Op.MUL, ahi, bhi), c2)
        hi = self.tmp(Op.ADD, self.tmp(Op.MULHIU, ahi, bhi), c2)  # the product is < 2^128
        if signed:
            for (_, xhi), (ylo, yhi) in ((a, b), (b, a)):
                negative = self.pred_tmp(Cmp.LT, xhi, imm=0)
                mlo = self.tmp(Op.SEL, ylo, ZERO, c=negative)
                mhi = self.tmp(Op.SEL, yhi, ZERO, c=negative)
                borrow = self.pred_tmp(Cmp.LO, lo, mlo)
                lo = self.tmp(Op.SUB, lo, mlo)
                hi = self.tmp(Op.SUB, hi, mhi)
                self.emit(Op.SUB, hi, hi, imm=1, bi=True).guard = (borrow, False)
        return lo, hi

    def shift64_by(self, o: str, arith: bool, lo: int, hi: int, k: int) -> tuple[int, int]:
        """Both halves of a 64-bit shift by register k: the within-a-word and the across-words
        results chosen by k < 32. The machine's shifts clamp amounts of 32 and more as PTX's
        do (to 0, or the sign), which makes k = 0 and k >= 64 come out right too."""
        small = self.pred_tmp(Cmp.LO, k, imm=32)
        rest = self.tmp(Op.SUB, self.tmp(Op.ADD, ZERO, imm=32), k)  # 32 - k
        beyond = self.tmp(Op.ADD, k, imm=-32)  # k - 32
        if o == "shl":
            near_hi = self.tmp(Op.OR, self.tmp(Op.SHL, hi, k), self.tmp(Op.SHR, lo, rest))
            new_hi = self.tmp(Op.SEL, near_hi, self.tmp(Op.SHL, lo, beyond), c=small)
            return self.tmp(Op.SHL, lo, k), new_hi  # SHL clamps: 0 from k = 32
        down = Op.SRA if arith else Op.SHR
        fill = self.tmp(Op.SRA, hi, imm=31) if arith else ZERO
        near_lo = self.tmp(Op.OR, self.tmp(Op.SHR, lo, k), self.tmp(Op.SHL, hi, rest))
        new_lo = self.tmp(Op.SEL, near_lo, self.tmp(down, hi, beyond), c=small)
        return new_lo, self.tmp(Op.SEL, self.tmp(down, hi, k), fill, c=small)

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
