"""Memory and lanes: ld and st (global, shared, const; ld.param), vector and 8/16-bit accesses
split into the machine's aligned words (sub-word stores merge with a compare-and-swap loop),
pointer + 4*index addresses the machine computes exactly, cvta, atom and red, and shfl.sync.
Apart because the machine's memory is word-addressed and its addresses are small: the state
spaces, alignment and the address model are this family's concern alone.
"""

from __future__ import annotations

from collections.abc import Callable

from qgpu.machine import limits
from qgpu.machine.isa import INDEX_UNSIGNED, INDEXED, Atom, Cmp, Op, Shfl, Space, TermKind
from qgpu.toolchain.lower.ir import ZERO, VTerm
from qgpu.toolchain.lower.select.core import Kind, type_bits
from qgpu.toolchain.ptx.ast import Addr, Imm, Instr, Pair, Reg, Sym, Vec, type_width

ATOMS = {"add": Atom.ADD, "exch": Atom.EXCH, "cas": Atom.CAS, "and": Atom.AND, "or": Atom.OR,
         "xor": Atom.XOR, "inc": Atom.INC, "dec": Atom.DEC}
MEM_SPACES = ("global", "shared", "param", "local", "const", "tex", "surf")


class Memory:
    """Loads, stores, atomics and shuffles (a mixin of Selector)."""

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
        self.cas_loop(wa, mod, lambda old: self.tmp(Op.OR, self.tmp(Op.AND, old, keep), put),
                      "merge")

    def cas_loop(self, a: int, mod: int, update: Callable[[int], int], label: str) -> int:
        """Replace the word at a (Space `mod`) by update(word) atomically: read it, swap the
        update in where the word is still what was read, else retry with what was there.
        Lanes apply atomics in lane order, so each lane's swap sees the lanes before it.
        Returns the vreg holding the value the successful swap replaced."""
        old = self.new_vreg()
        self.emit(Op.LD, old, a, mod=mod)
        loop, check, done = (self.new_block(f"{label}_{n}") for n in ("loop", "check", "done"))
        self.set_term(VTerm(TermKind.JMP, loop))
        self.switch(loop)
        new = update(old)
        got = self.new_vreg()
        self.emit(Op.ATOMG if mod == Space.GLOBAL else Op.ATOMS, got, a, old, new, mod=Atom.CAS)
        self.set_term(VTerm(TermKind.JMP, check))  # an atomic's result is read a block later
        self.switch(check)
        retry = self.pred_tmp(Cmp.NE, got, old)
        self.emit(Op.ADD, old, got)
        self.set_term(VTerm(TermKind.BRA, loop, done, retry))
        self.switch(done)
        return old

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
