"""float32 instructions: add/sub/mul/fma/mad, neg/abs, min/max, setp/set, cvt, testp, copysign
and float atomics, onto the machine's float unit (FADD FSUB FMUL FFMA FMIN FMAX FSETP I2F F2I
FRND) and a few integer instructions. Loads, stores, moves, selp and shuffles of f32 values are
32-bit word operations and stay in their own families; the walk sends an instruction here when
its type is f32 and its opcode is arithmetic (``core.FLOAT_OPCODES``).

The semantics are qgpu/machine/float32.py's (the PTX interpreter computes through it too): an
instruction without a rounding modifier rounds to nearest even, as `.rn` does."""

from __future__ import annotations

from qgpu.machine.float32 import CANONICAL_NAN, EXPONENT, MAGNITUDE, SIGN, FCmp, Round
from qgpu.machine.isa import (
    F2I_FTZ,
    F2I_SIGNED,
    FTZ,
    I2F_SIGNED,
    SAT,
    Cmp,
    Op,
    PredOp,
    Space,
)
from qgpu.toolchain.lower.select.core import Kind, _s32, type_bits
from qgpu.toolchain.ptx.ast import Imm, Instr, Pair

ROUNDING = {"rn": Round.RN, "rz": Round.RZ, "rm": Round.RM, "rp": Round.RP}
INTEGER_ROUNDING = {"rni": Round.RN, "rzi": Round.RZ, "rmi": Round.RM, "rpi": Round.RP}
FLOAT_CMP = {c.name.lower(): c for c in FCmp}
MINUS_ONE = 0xBF80_0000
MINUS_ZERO = SIGN
MIN_NORMAL = 0x0080_0000


class Floats:
    """The float32 family (mixed into ``Selector``)."""

    def float_mod(self, ins: Instr, sat_ok: bool = True) -> int:
        """A float op's mod: its rounding (default .rn), ftz, sat."""
        m = ins.mods
        rounding = [ROUNDING[x] for x in m if x in ROUNDING]
        mod = rounding[0] if rounding else Round.RN
        mod |= FTZ if "ftz" in m else 0
        if "sat" in m:
            if not sat_ok:
                raise self.fail(f"`.sat` is not defined for `{ins.opcode}.f32`")
            mod |= SAT
        return mod

    def float_binary(self, ins: Instr, op: Op) -> None:
        d = self.dest(ins.operands[0])
        a = self.reg_in(ins.operands[1])
        b, imm, bi = self.b_operand(ins.operands[2])
        self.emit(op, d, a, b, imm=imm, bi=bi, mod=self.float_mod(ins))

    def float_add(self, ins: Instr) -> None:
        self.float_binary(ins, Op.FADD)

    def float_sub(self, ins: Instr) -> None:
        self.float_binary(ins, Op.FSUB)

    def float_mul(self, ins: Instr) -> None:
        self.float_binary(ins, Op.FMUL)

    def float_fma(self, ins: Instr) -> None:
        d = self.dest(ins.operands[0])
        a = self.reg_in(ins.operands[1])
        b, imm, bi = self.b_operand(ins.operands[2])
        c = self.reg_in(ins.operands[3])
        self.emit(Op.FFMA, d, a, b, c, imm=imm, bi=bi, mod=self.float_mod(ins))

    float_mad = float_fma  # mad.rnd.f32 is fma (PTX requires the rounding for sm_20 and up)

    def float_neg(self, ins: Instr) -> None:
        """-x as x · -1: exact, a NaN becomes the canonical NaN (the GPU's FADD/FMUL with a
        negated operand), ftz flushes."""
        d = self.dest(ins.operands[0])
        mod = Round.RN | (FTZ if "ftz" in ins.mods else 0)
        self.emit(Op.FMUL, d, self.reg_in(ins.operands[1]), imm=_s32(MINUS_ONE), bi=True, mod=mod)

    def float_abs(self, ins: Instr) -> None:
        """|x|: the sign cleared, then + -0 (exact: canonical NaN, ftz flushes, +0 stays)."""
        d = self.dest(ins.operands[0])
        t = self.tmp(Op.AND, self.reg_in(ins.operands[1]), imm=MAGNITUDE)
        mod = Round.RN | (FTZ if "ftz" in ins.mods else 0)
        self.emit(Op.FADD, d, t, imm=_s32(MINUS_ZERO), bi=True, mod=mod)

    def float_minmax(self, ins: Instr, op: Op) -> None:
        unsupported = [x for x in ins.mods if x not in ("ftz", "NaN", "f32")]
        if unsupported:
            raise self.fail(f"`.{unsupported[0]}` of {ins.opcode}.f32 is not supported")
        mod = FTZ if "ftz" in ins.mods else 0
        d = self.dest(ins.operands[0])
        a = self.reg_in(ins.operands[1])
        b, imm, bi = self.b_operand(ins.operands[2])
        if "NaN" not in ins.mods:
            self.emit(op, d, a, b, imm=imm, bi=bi, mod=mod)
            return
        # .NaN: the canonical NaN when either operand is NaN
        t = self.tmp(op, a, b, imm=imm if bi else None, mod=mod)
        p = self.new_vpred()
        self.emit(Op.FSETP, p, a, b, imm=imm, bi=bi, mod=FCmp.NAN)
        nan = self.reg_in(Imm(CANONICAL_NAN))
        self.emit(Op.SEL, d, nan, t, c=p)

    def float_min(self, ins: Instr) -> None:
        self.float_minmax(ins, Op.FMIN)

    def float_max(self, ins: Instr) -> None:
        self.float_minmax(ins, Op.FMAX)

    def float_compare(self, ins: Instr, cmp_name: str) -> tuple[int, int, int, bool, int]:
        """(FCmp, a, b, bi, imm) of a float comparison."""
        if cmp_name not in FLOAT_CMP:
            raise self.fail(f"comparison `{cmp_name}` is not supported on .f32")
        a = self.reg_in(ins.operands[1])
        b, imm, bi = self.b_operand(ins.operands[2])
        return FLOAT_CMP[cmp_name], a, b, bi, imm

    def float_setp(self, ins: Instr) -> None:
        m = [x for x in ins.mods if x != "ftz"]
        cmp_name, boolop = m[0], (m[1] if len(m) == 3 else None)
        ftz = int("ftz" in ins.mods)
        cmp, a, b, bi, imm = self.float_compare(ins, cmp_name)
        dst = ins.operands[0]
        p_name, q_name = (dst.first.name, dst.second.name) if isinstance(dst, Pair) else \
            (dst.name, None)
        p = self.vpred(p_name)
        if boolop is None:
            self.emit(Op.FSETP, p, a, b, ftz, imm=imm, bi=bi, mod=cmp)
            if q_name is not None:
                self.emit(Op.PLOP, self.vpred(q_name), p, p, mod=PredOp.AND | 4 | 8)
            return
        c_op = ins.operands[3]
        negated = 8 if getattr(c_op, "negated", False) else 0
        c = self.vpred(c_op.name)
        bop = {"and": PredOp.AND, "or": PredOp.OR, "xor": PredOp.XOR}[boolop]
        res = self.new_vpred()
        self.emit(Op.FSETP, res, a, b, ftz, imm=imm, bi=bi, mod=cmp)
        self.emit(Op.PLOP, p, res, c, mod=bop | negated)
        if q_name is not None:
            self.emit(Op.PLOP, self.vpred(q_name), res, c, mod=bop | 4 | negated)

    def float_set(self, ins: Instr) -> None:
        """``set.cmp.dtype.f32``: all ones (an integer type) or 1.0 (f32) where it holds."""
        m = [x for x in ins.mods if x != "ftz"]
        if len(m) != 3:
            raise self.fail("`set` with a predicate combination is not supported")
        cmp, a, b, bi, imm = self.float_compare(ins, m[0])
        p = self.new_vpred()
        self.emit(Op.FSETP, p, a, b, int("ftz" in ins.mods), imm=imm, bi=bi, mod=cmp)
        true = 0x3F80_0000 if m[1] == "f32" else 0xFFFF_FFFF
        self.emit(Op.SEL, self.dest(ins.operands[0]), self.reg_in(Imm(true)), imm=0, bi=True,
                  c=p)

    def float_cvt(self, ins: Instr) -> None:
        m = ins.mods
        dt, st = m[-2], m[-1]
        ftz = "ftz" in m
        d = self.dest(ins.operands[0])
        src = ins.operands[1]
        if dt == "f32" and st == "f32":
            rounding = [INTEGER_ROUNDING[x] for x in m if x in INTEGER_ROUNDING]
            a = self.reg_in(src)
            if rounding:
                self.emit(Op.FRND, d, a, mod=rounding[0] | (FTZ if ftz else 0))
                a = d
            if "sat" in m or not rounding:
                # + -0 is exact: it flushes (ftz), clamps (sat), makes a NaN canonical
                mod = Round.RN | (FTZ if ftz else 0) | (SAT if "sat" in m else 0)
                self.emit(Op.FADD, d, a, imm=_s32(MINUS_ZERO), bi=True, mod=mod)
            return
        if dt == "f32":  # from an integer
            bits, signed = type_bits(st), st.startswith("s")
            rounding = [ROUNDING[x] for x in m if x in ROUNDING]
            mod = (rounding[0] if rounding else Round.RN) | (I2F_SIGNED if signed else 0)
            if bits == 64:
                kind = self.kind(src)
                if kind not in (Kind.ZX, Kind.SX, Kind.PTR):
                    raise self.fail(f"converting a 64-bit integer (.{st}) whose value may need "
                                    f"more than 32 bits to float is not supported")
                mod = (mod & 3) | (I2F_SIGNED if kind == Kind.SX else 0)
            a = self.reg_in(src, min(bits, 32), signed)
            self.emit(Op.I2F, d, a, mod=mod)
            if "sat" in m:
                self.emit(Op.FADD, d, d, imm=_s32(MINUS_ZERO), bi=True, mod=Round.RN | SAT)
            return
        if st != "f32":
            raise self.fail(f"conversion .{dt}.{st} is not supported")
        bits, signed = type_bits(dt), dt.startswith("s")
        if bits == 64:
            raise self.fail(f"converting float to a 64-bit integer (.{dt}) is not supported")
        rounding = [INTEGER_ROUNDING[x] for x in m if x in INTEGER_ROUNDING]
        if not rounding:
            raise self.fail("a float-to-integer conversion needs .rni, .rzi, .rmi or .rpi")
        mod = rounding[0] | (F2I_SIGNED if signed else 0) | (F2I_FTZ if ftz else 0)
        self.emit(Op.F2I, d, self.reg_in(src), mod=mod)
        if bits < 32:  # saturate to the narrow type; a narrow register holds it zero-extended
            if signed:
                self.emit(Op.MAX, d, d, imm=-(1 << (bits - 1)), bi=True)
                self.emit(Op.MIN, d, d, imm=(1 << (bits - 1)) - 1, bi=True)
            else:
                self.emit(Op.MINU, d, d, imm=(1 << bits) - 1, bi=True)
            if self.width(ins.operands[0].name) < 32:
                self.narrow(d, bits)

    def float_testp(self, ins: Instr) -> None:
        """The class tests, on the word's bits."""
        test = ins.mods[0]
        p = self.vpred(ins.operands[0].name)
        x = self.reg_in(ins.operands[1])
        if test == "finite":
            e = self.tmp(Op.AND, x, imm=EXPONENT)
            self.emit(Op.SETP, p, e, imm=_s32(EXPONENT), bi=True, mod=Cmp.NE)
            return
        mag = self.tmp(Op.AND, x, imm=MAGNITUDE)
        if test in ("infinite", "number", "notanumber"):
            cmp = {"infinite": Cmp.EQ, "number": Cmp.LS, "notanumber": Cmp.HI}[test]
            self.emit(Op.SETP, p, mag, imm=_s32(EXPONENT), bi=True, mod=cmp)
        elif test == "normal":  # exponent field 1..254
            t = self.tmp(Op.SUB, mag, imm=MIN_NORMAL)
            self.emit(Op.SETP, p, t, imm=_s32(EXPONENT - MIN_NORMAL), bi=True, mod=Cmp.LO)
        elif test == "subnormal":  # 1 .. 0x7FFFFF
            t = self.tmp(Op.SUB, mag, imm=1)
            self.emit(Op.SETP, p, t, imm=MIN_NORMAL - 1, bi=True, mod=Cmp.LO)
        else:
            raise self.fail(f"`testp.{test}` is not supported")

    def float_copysign(self, ins: Instr) -> None:
        """``copysign.f32 d, a, b``: b's magnitude with a's sign (PTX's operand order)."""
        d = self.dest(ins.operands[0])
        sign = self.tmp(Op.AND, self.reg_in(ins.operands[1]), imm=_s32(SIGN))
        mag = self.tmp(Op.AND, self.reg_in(ins.operands[2]), imm=MAGNITUDE)
        self.emit(Op.OR, d, sign, mag)

    def float_atom(self, ins: Instr) -> None:
        self.float_atomic(ins, ins.operands[0])

    def float_red(self, ins: Instr) -> None:
        self.float_atomic(ins, None)

    def float_atomic(self, ins: Instr, dst: object) -> None:
        """``atom.add.f32`` (and ``red``): a compare-and-swap loop (``cas_loop``) adding to
        nearest with subnormals flushed, as PTX defines it; ``atom`` returns the value the
        successful swap replaced."""
        if "add" not in ins.mods:
            raise self.fail(f"`{ins.opcode}` on .f32 supports only add")
        space = self.space(ins)
        ops = ins.operands[1:] if dst is not None else ins.operands
        base, off = self.address(ops[0])
        a = self.tmp(Op.ADD, base, imm=off)
        v = self.reg_in(ops[1])
        mod = Space.GLOBAL if space == "global" else Space.SHARED
        # `old` is a fresh vreg, not the destination: that may be the value's own register
        old = self.cas_loop(a, mod, lambda w: self.tmp(Op.FADD, w, v, mod=Round.RN | FTZ),
                            "fatom")
        if dst is not None:
            self.emit(Op.ADD, self.dest(dst), old)
