"""Integer arithmetic and data movement on 8- to 32-bit values (and the low halves of 64-bit
ones): add, sub, and, or, xor, not (predicates too), neg, abs, popc, clz, brev, min, max, mul
and mad (.lo/.hi/.wide), shl, shr, shf (funnel shift), bfind, bfe, bfi, dp4a, prmt, setp, selp,
cvt between integer types, and mov (immediates, special registers, packing). Each maps to one or
a few machine ALU ops; what needs a 64-bit register's high half goes to the pairs (wide.py).
"""

from __future__ import annotations

from qgpu.machine.isa import Cmp, Op, PredOp, SReg
from qgpu.toolchain.lower.ir import ZERO
from qgpu.toolchain.lower.select.core import (
    MASK32,
    SIGNED_CMP,
    UNSIGNED_CMP,
    Kind,
    _s32,
    type_bits,
)
from qgpu.toolchain.ptx.ast import Imm, Instr, Pair, Reg, SpecialReg, Sym, Vec

SREGS = {("%tid", "x"): SReg.TID_X, ("%tid", "y"): SReg.TID_Y, ("%ntid", "x"): SReg.NTID_X,
         ("%ntid", "y"): SReg.NTID_Y, ("%ctaid", "x"): SReg.CTAID_X,
         ("%ctaid", "y"): SReg.CTAID_Y, ("%nctaid", "x"): SReg.NCTAID_X,
         ("%nctaid", "y"): SReg.NCTAID_Y}
Z_CONSTANTS = {"%tid": 0, "%ntid": 1, "%ctaid": 0, "%nctaid": 1}
TYPES = ("pred", "b8", "s8", "u8", "b16", "s16", "u16", "b32", "s32", "u32", "b64", "s64", "u64")


class Integer:
    """The integer ALU instructions (a mixin of Selector)."""

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
            lo, _ = self.shift64_by("shr", arith, *self.pair_of(src), self.reg_in(amt))
        else:
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
