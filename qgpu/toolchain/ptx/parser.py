"""Parser for the subset of PTX emitted by NVRTC 13.5, nvcc 13.0 and clang: integers and float32.

Strict by design: anything outside the subset that the machine implements (docs/ISA.md §7)
raises ``UnsupportedError`` naming the construct and its line, with a hint at the CUDA-level
fix when there is one. Malformed text is reported the same way.
Harmless directives are skipped: ``.loc``, ``.file``, ``.section`` (debug info), ``.pragma``,
and the launch-bound hints ``.maxntid``/``.reqntid``/``.minnctapersm``/``.maxnreg``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from qgpu.errors import UnsupportedError
from qgpu.machine import limits
from qgpu.toolchain.ptx.ast import (
    TYPE_WIDTH,
    Addr,
    GlobalVar,
    Imm,
    Instr,
    Kernel,
    Label,
    Module,
    Operand,
    Pair,
    Param,
    Reg,
    RegDecl,
    RejectedKernel,
    SharedDecl,
    SpecialReg,
    Sym,
    Vec,
    type_width,
)

_TOKEN = re.compile(
    r"""
    (?P<nl>\n) | (?P<ws>[ \t\r\f\v]+) | (?P<lcomment>//[^\n]*) | (?P<bcomment>/\*.*?\*/)
    | (?P<str>"[^"\n]*")
    | (?P<float>0[fF][0-9a-fA-F]{8}\b | 0[dD][0-9a-fA-F]{16}\b
                | \d+\.\d*(?:[eE][+-]?\d+)? | \d+[eE][+-]?\d+)
    | (?P<int>0[xX][0-9a-fA-F]+U? | 0[bB][01]+U? | \d+U?)
    | (?P<word>[.%$A-Za-z_][A-Za-z0-9_$]*(?:\.[A-Za-z0-9_$]+)*)
    | (?P<punct>[,;:{}()\[\]<>|!@+\-=])
    """,
    re.VERBOSE | re.DOTALL,
)

INT_TYPES = frozenset({"b16", "u16", "s16", "b32", "u32", "s32", "b64", "u64", "s64"})
_SU_TYPES = frozenset(t for t in INT_TYPES if t[0] in "su")
_SU8_TYPES = _SU_TYPES | {"u8", "s8"}
_BIT_TYPES = frozenset({"b16", "b32", "b64"})
_WORD_TYPES = frozenset({"u32", "s32", "b32"})
_MEMORY_TYPES = _WORD_TYPES | {"u8", "s8", "b8", "u16", "s16", "b16", "f32"}
_FLOAT_TYPES = frozenset(
    {"f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "tf32", "e4m3", "e5m2", "e4m3x2", "e5m2x2"}
)
_CMP = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"})
_BOOL_OPS = frozenset({"and", "or", "xor"})
# float32 (docs/ISA.md): every modifier NVRTC writes, with and without -use_fast_math.
_F32 = frozenset({"f32"})
_RND = frozenset({"rn", "rz", "rm", "rp"})
_IRND = frozenset({"rni", "rzi", "rmi", "rpi"})
_FTZ = frozenset({"ftz"})
_SAT = frozenset({"sat"})
_APPROX = frozenset({"approx"})
_APPROX_DIV = frozenset({"approx", "full"})
_FCMP = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu",
                   "num", "nan"})
_TESTP = frozenset({"finite", "infinite", "number", "notanumber", "normal", "subnormal"})
_CVT_INT = frozenset({"u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64"})
_F32_SLOTS: dict[str, list[tuple[frozenset[str], bool]]] = {
    "mov": [(_F32, True)],
    "selp": [(_F32, True)],
    "add": [(_RND, False), (_FTZ, False), (_SAT, False), (_F32, True)],
    "sub": [(_RND, False), (_FTZ, False), (_SAT, False), (_F32, True)],
    "mul": [(_RND, False), (_FTZ, False), (_SAT, False), (_F32, True)],
    "fma": [(_RND, True), (_FTZ, False), (_SAT, False), (_F32, True)],
    "mad": [(_RND, True), (_FTZ, False), (_SAT, False), (_F32, True)],
    "neg": [(_FTZ, False), (_F32, True)],
    "abs": [(_FTZ, False), (_F32, True)],
    "min": [(_FTZ, False), (frozenset({"NaN"}), False), (_F32, True)],
    "max": [(_FTZ, False), (frozenset({"NaN"}), False), (_F32, True)],
    "setp": [(_FCMP, True), (_BOOL_OPS, False), (_FTZ, False), (_F32, True)],
    "set": [(_FCMP, True), (_BOOL_OPS, False), (_FTZ, False),
            (frozenset({"u32", "s32", "f32"}), True), (_F32, True)],
    "testp": [(_TESTP, True), (_F32, True)],
    "copysign": [(_F32, True)],
    "div": [(_RND | _APPROX_DIV, True), (_FTZ, False), (_F32, True)],
    "sqrt": [(_RND | _APPROX, True), (_FTZ, False), (_F32, True)],
    "rcp": [(_RND | _APPROX, True), (_FTZ, False), (_F32, True)],
    # the approximate functions: one fixed algorithm each (qgpu/machine/approx.py)
    "rsqrt": [(_APPROX, True), (_FTZ, False), (_F32, True)],
    "ex2": [(_APPROX, True), (_FTZ, False), (_F32, True)],
    "lg2": [(_APPROX, True), (_FTZ, False), (_F32, True)],
    "sin": [(_APPROX, True), (_FTZ, False), (_F32, True)],
    "cos": [(_APPROX, True), (_FTZ, False), (_F32, True)],
    "tanh": [(_APPROX, True), (_F32, True)],
}
_DOUBLE_HINT = ("the machine computes in float32; a double usually comes from a literal without "
                "`f` (`x * 0.5` → `x * 0.5f`) or a double function (`exp` → `expf`)")
_CACHE_OPS = frozenset({"ca", "cg", "cs", "lu", "cv", "wb", "wt"})
_MEM_ORDER = frozenset({"volatile", "weak", "relaxed", "acquire", "release", "acq_rel"})
_SCOPES = frozenset({"cta", "gpu", "sys"})
_ATOM_TYPES = {
    "add": {"u32", "s32", "f32"},
    "min": {"u32", "s32"},
    "max": {"u32", "s32"},
    "inc": {"u32"},
    "dec": {"u32"},
    "exch": {"b32"},
    "cas": {"b32"},
    "and": {"b32"},
    "or": {"b32"},
    "xor": {"b32"},
}
_GEOMETRY = frozenset({"%tid", "%ntid", "%ctaid", "%nctaid"})
_SPECIAL_PREFIXES = (
    "%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid", "%gridid", "%lanemask", "%clock",
    "%globaltimer", "%pm", "%envreg", "%dynamic_smem_size", "%total_smem_size",
    "%aggr_smem_size", "%reserved_smem", "%cluster", "%is_explicit_cluster", "%current_graph_exec",
)
_WARP_HINT = "this machine's warps have 4 lanes, so the result would differ from a 32-lane GPU"
_INLINE_HINT = "mark the device function __forceinline__"
# Functions of CUDA's device runtime that NVVM calls rather than inlines: (what, hint).
_LIBRARY_CALLS = {
    "vprintf": ("`printf` (device-side printf)", "remove it"),
    "__assertfail": ("`assert` (a failed assertion traps)",
                     "remove it, or compile with -DNDEBUG (#define NDEBUG before the includes)"),
    "malloc": ("`malloc` (the device heap)", "the machine has no heap: pass an array instead"),
    "free": ("`free` (the device heap)", "the machine has no heap: pass an array instead"),
}

# Operand counts of the ALU-style instructions (destination included).
_ARITY = {
    "mov": 2, "add": 3, "sub": 3, "mul": 3, "mad": 4, "sad": 4, "div": 3, "rem": 3,
    "neg": 2, "abs": 2, "min": 3, "max": 3, "and": 3, "or": 3, "xor": 3, "not": 2, "cnot": 2,
    "shl": 3, "shr": 3, "shf": 4, "popc": 2, "clz": 2, "brev": 2, "bfind": 2, "bfe": 4,
    "bfi": 5, "prmt": 4, "selp": 4, "slct": 4, "cvt": 2, "cvta": 2, "dp4a": 4,
    "fma": 4, "testp": 2, "copysign": 3, "sqrt": 2, "rcp": 2, "rsqrt": 2, "ex2": 2, "lg2": 2,
    "sin": 2, "cos": 2, "tanh": 2,
}

# Modifier grammar of the ALU-style instructions: slots matched in order, (allowed, required).
_MUL_MODES = frozenset({"lo", "hi", "wide"})
_SLOTS: dict[str, list[tuple[frozenset[str], bool]]] = {
    "mov": [(INT_TYPES | {"pred"}, True)],
    "add": [(INT_TYPES, True)],
    "sub": [(INT_TYPES, True)],
    "mul": [(_MUL_MODES, True), (_SU_TYPES, True)],
    "mad": [(_MUL_MODES, True), (_SU_TYPES, True)],
    "sad": [(_SU_TYPES, True)],
    "div": [(_SU_TYPES, True)],
    "rem": [(_SU_TYPES, True)],
    "neg": [(frozenset({"s16", "s32", "s64"}), True)],
    "abs": [(frozenset({"s16", "s32", "s64"}), True)],
    "min": [(_SU_TYPES, True)],
    "max": [(_SU_TYPES, True)],
    "and": [(_BIT_TYPES | {"pred"}, True)],
    "or": [(_BIT_TYPES | {"pred"}, True)],
    "xor": [(_BIT_TYPES | {"pred"}, True)],
    "not": [(_BIT_TYPES | {"pred"}, True)],
    "cnot": [(_BIT_TYPES, True)],
    "shl": [(_BIT_TYPES, True)],
    "shr": [(INT_TYPES, True)],
    "shf": [(frozenset({"l", "r"}), True), (frozenset({"wrap", "clamp"}), True),
            (frozenset({"b32"}), True)],
    "popc": [(frozenset({"b32", "b64"}), True)],
    "clz": [(frozenset({"b32", "b64"}), True)],
    "brev": [(frozenset({"b32", "b64"}), True)],
    "bfind": [(frozenset({"shiftamt"}), False), (frozenset({"u32", "s32", "u64", "s64"}), True)],
    "bfe": [(frozenset({"u32", "s32", "u64", "s64"}), True)],
    "bfi": [(frozenset({"b32", "b64"}), True)],
    "prmt": [(frozenset({"b32"}), True)],
    "dp4a": [(frozenset({"u32", "s32"}), True), (frozenset({"u32", "s32"}), True)],
    "setp": [(_CMP, True), (_BOOL_OPS, False), (INT_TYPES | {"pred"}, True)],
    "selp": [(INT_TYPES, True)],
    "slct": [(INT_TYPES, True), (frozenset({"s32"}), True)],
    "cvt": [(frozenset({"sat"}), False), (_SU8_TYPES, True), (_SU8_TYPES, True)],
    "cvta": [(frozenset({"to"}), False), (frozenset({"global"}), True),
             (frozenset({"u32", "u64"}), True)],
    "bra": [(frozenset({"uni"}), False)],
    "ret": [(frozenset({"uni"}), False)],
    "exit": [],
    "membar": [(frozenset({"cta", "gl", "sys"}), True)],
    "fence": [(frozenset({"sc", "acq_rel"}), True), (_SCOPES, True)],
}

# Opcodes rejected outright: (what it is, hint).
_REJECT = {
    "call": ("function calls", _INLINE_HINT),
    "vote": ("warp vote", _WARP_HINT),
    "activemask": ("__activemask()", _WARP_HINT),
    "match": ("warp match", _WARP_HINT),
    "redux": ("warp reduction", _WARP_HINT),
    "elect": ("warp elect", _WARP_HINT),
    "trap": ("__trap()", "remove the trap or report the error through memory"),
    "brkpt": ("__brkpt()", "remove the breakpoint"),
    "tex": ("texture fetch", "read the data from a global array"),
    "tld4": ("texture gather", "read the data from a global array"),
    "txq": ("texture query", "read the data from a global array"),
    "suld": ("surface load", "use a global array"),
    "sust": ("surface store", "use a global array"),
    "sured": ("surface reduction", "use a global array"),
    "suq": ("surface query", "use a global array"),
    "mul24": ("24-bit multiply", "use a plain 32-bit multiply"),
    "mad24": ("24-bit multiply-add", "use a plain 32-bit multiply"),
    "addc": ("add with carry (64-bit arithmetic)", "use 32-bit int arithmetic"),
    "subc": ("subtract with borrow (64-bit arithmetic)", "use 32-bit int arithmetic"),
    "madc": ("multiply-add with carry (64-bit arithmetic)", "use 32-bit int arithmetic"),
    "nanosleep": ("__nanosleep()", "remove it"),
    "prefetch": ("prefetch", "remove it"),
    "prefetchu": ("prefetch", "remove it"),
}


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    line: int
    start: int
    end: int


def _tokenize(text: str) -> list[_Tok]:
    """Split PTX into tokens with line numbers; comments vanish, newlines only count lines."""
    toks: list[_Tok] = []
    line = 1
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise UnsupportedError(
                f"line {line}: cannot parse PTX: unexpected character {text[pos]!r}"
            )
        kind = m.lastgroup or ""
        if kind not in ("nl", "ws", "lcomment", "bcomment"):
            toks.append(_Tok(kind, m.group(), line, m.start(), m.end()))
        line += m.group().count("\n")
        pos = m.end()
    return toks


def _unsupported(line: int, what: str, hint: str = "") -> UnsupportedError:
    tail = f" — {hint}" if hint else ""
    return UnsupportedError(f"line {line}: {what} is not supported{tail}")


def _parse_int(tok: _Tok) -> int:
    s = tok.text.rstrip("U")
    if len(s) > 66:  # 0b and 64 binary digits; longer is no 64-bit literal (and int() may refuse)
        raise UnsupportedError(f"line {tok.line}: cannot parse PTX: an integer literal of "
                               f"{len(s)} characters (PTX integers have 64 bits)")
    if s[:2].lower() in ("0x", "0b"):
        return int(s, 0)
    if len(s) > 1 and s[0] == "0":
        if not set(s) <= set("01234567"):
            raise UnsupportedError(f"line {tok.line}: cannot parse PTX: bad octal literal {s}")
        return int(s, 8)
    return int(s)


def _float_name(ty: str) -> str:
    """What a float format other than float32 is called in messages."""
    return {"f64": "double precision", "f16": "half precision", "f16x2": "half precision",
            "bf16": "bfloat16", "bf16x2": "bfloat16"}.get(ty, f"the float format .{ty}")


def _float_type(line: int, ty: str, what: str, hint: str = "") -> UnsupportedError:
    """A float format other than float32 (``ty``, without the dot), named by ``what``."""
    default = _DOUBLE_HINT if ty == "f64" else "the machine computes in float32: use float"
    return _unsupported(line, f"{_float_name(ty)} ({what})", hint or default)


def _match_slots(opcode: str, mods: tuple[str, ...], line: int, full: str,
                 slots: list[tuple[frozenset[str], bool]] | None = None) -> None:
    """Check modifiers against the opcode's slot grammar; name the offending modifier."""
    i = 0
    for allowed, required in _SLOTS[opcode] if slots is None else slots:
        if i < len(mods) and mods[i] in allowed:
            i += 1
        elif required:
            break
    else:
        if i == len(mods):
            return
    what = f"modifier .{mods[i]}" if i < len(mods) else "missing type"
    raise _unsupported(line, f"`{full}` ({what})")


def _check_opcode(opcode: str, mods: tuple[str, ...], line: int) -> None:
    """Reject any opcode/modifier combination outside the subset, before reading operands."""
    full = ".".join((opcode, *mods))
    if opcode in _REJECT:
        what, hint = _REJECT[opcode]
        raise _unsupported(line, f"`{full}` ({what})", hint)
    others = [m for m in mods if m in _FLOAT_TYPES and m != "f32"]
    if others:
        raise _float_type(line, others[0], f"`{full}`")
    if "f32" in mods and opcode not in ("ld", "st", "atom", "red"):
        _check_f32(opcode, mods, line, full)
    elif opcode in ("ld", "st"):
        _check_ld_st(opcode, mods, line, full)
    elif opcode in ("atom", "red"):
        _check_atom(mods, line, full)
    elif opcode == "shfl":
        if "sync" not in mods:
            raise _unsupported(line, f"`{full}` (shfl without .sync)", "use __shfl_*_sync")
        if len(mods) != 3 or mods[1] not in ("up", "down", "bfly", "idx") or mods[2] != "b32":
            raise _unsupported(line, f"`{full}`", "only shfl.sync.{up,down,bfly,idx}.b32")
    elif opcode in ("bar", "barrier"):
        _check_barrier(opcode, mods, line, full)
    elif opcode == "cvta" and "shared" in mods:
        raise _unsupported(
            line, f"`{full}` (a generic pointer to shared memory)",
            "index the __shared__ array directly instead of passing its address around",
        )
    elif opcode != "cvt" and ("cc" in mods or "sat" in mods):
        raise _unsupported(line, f"`{full}` (carry/saturating arithmetic)",
                           "use plain int arithmetic")
    elif opcode in _SLOTS:
        _match_slots(opcode, mods, line, full)
        if opcode in ("mul", "mad") and mods[0] == "wide" and mods[1][1:] == "64":
            raise _unsupported(line, f"`{full}` (128-bit product)")
        if opcode == "setp" and mods[-1] == "pred" and mods[0] not in ("eq", "ne"):
            raise _unsupported(line, f"`{full}` (ordered compare of predicates)")
    else:
        raise _unsupported(line, f"`{full}`", "outside the integer PTX subset qgpu implements")


def _check_f32(opcode: str, mods: tuple[str, ...], line: int, full: str) -> None:
    """A float32 instruction: the forms of _F32_SLOTS (the approximate functions included) and
    cvt."""
    if opcode == "cvt":
        _check_cvt_f32(mods, line, full)
    elif opcode in _F32_SLOTS:
        _match_slots(opcode, mods, line, full, _F32_SLOTS[opcode])
    else:
        raise _unsupported(line, f"`{full}`", "outside the float32 PTX subset qgpu implements")


def _check_cvt_f32(mods: tuple[str, ...], line: int, full: str) -> None:
    """``cvt{.irnd}{.ftz}{.sat}.f32.f32``, ``cvt.frnd{.sat}.f32.int`` and
    ``cvt.irnd{.ftz}{.sat}.int.f32`` (PTX requires the rounding modifier of the last two)."""
    if len(mods) < 2:
        raise _unsupported(line, f"`{full}` (missing type)")
    dtype, atype = mods[-2:]
    rounding = None
    if dtype == atype == "f32":
        slots = [(_IRND, False), (_FTZ, False), (_SAT, False)]
    elif dtype == "f32" and atype in _CVT_INT:
        rounding, slots = _RND, [(_RND, True), (_SAT, False)]
    elif atype == "f32" and dtype in _CVT_INT:
        rounding, slots = _IRND, [(_IRND, True), (_FTZ, False), (_SAT, False)]
    else:
        raise _unsupported(line, f"`{full}`", "float32 converts to and from 8- to 64-bit "
                           "integers and itself")
    if rounding is not None and not (_RND | _IRND) & set(mods):
        raise _unsupported(line, f"`{full}` (a conversion without its rounding modifier)",
                           f"PTX requires one of {', '.join(f'.{r}' for r in sorted(rounding))}")
    _match_slots("cvt", mods, line, full, [*slots, (frozenset({dtype}), True),
                                            (frozenset({atype}), True)])


def _check_ld_st(opcode: str, mods: tuple[str, ...], line: int, full: str) -> None:
    vectors = [m for m in mods if m in ("v2", "v4", "v8")]
    if vectors and vectors[0] == "v8":
        raise _unsupported(line, f"`{full}` (8-element vector access)",
                           "access at most 4 elements at a time")
    # No state space = a generic address, which is a global one here: cvta to and from shared
    # is rejected, so a shared address can never become generic.
    space = next((m for m in mods if m in ("global", "shared", "param", "local", "const")), None)
    if space == "local":
        raise _unsupported(line, f"`{full}` (.local per-thread memory)",
                           "avoid per-thread arrays indexed at run time")
    if space == "param" and opcode == "st":
        raise _unsupported(line, f"`{full}` (function call sequence)", _INLINE_HINT)
    if space == "param" and vectors:
        raise _unsupported(line, f"`{full}` (vector parameter load)", "pass scalars and pointers")
    allowed = ({space} | _CACHE_OPS | _MEM_ORDER | _SCOPES | set(vectors)
               | ({"nc"} if space in ("global", None) else set()))
    extra = [m for m in mods[:-1] if m not in allowed]
    if extra:
        raise _unsupported(line, f"`{full}` (modifier .{extra[0]})")
    ty = mods[-1]
    if space == "param":
        if ty not in TYPE_WIDTH or ty == "pred":
            raise _unsupported(line, f"`{full}` (parameter type .{ty})")
    elif ty not in _MEMORY_TYPES:
        width = TYPE_WIDTH.get(ty)
        what = f"{width}-bit memory access" if width else f"memory type .{ty}"
        raise _unsupported(line, f"`{full}` ({what})", "only 8-, 16- and 32-bit integers and "
                           "floats can be loaded and stored (no long long/pointer arrays)")


def _check_atom(mods: tuple[str, ...], line: int, full: str) -> None:
    space = next((m for m in mods if m in ("global", "shared")), None)  # None: generic = global
    rest = [m for m in mods if m != space and m not in _MEM_ORDER and m not in _SCOPES]
    if len(rest) != 2 or rest[0] not in _ATOM_TYPES:
        raise _unsupported(line, f"`{full}`", "atomics: add/min/max/inc/dec/exch/cas/and/or/xor")
    op, ty = rest
    if ty not in _ATOM_TYPES[op]:
        width = TYPE_WIDTH.get(ty)
        what = f"{width}-bit atomic" if width and width != 32 else f"atomic type .{ty}"
        raise _unsupported(line, f"`{full}` ({what})", "atomics work on 32-bit words only")


def _check_barrier(opcode: str, mods: tuple[str, ...], line: int, full: str) -> None:
    if mods == ("warp", "sync"):
        return  # the member mask is checked kernel-wide (_check_warp_sync)
    plain = [m for m in mods if m not in ("cta", "aligned")]
    if plain != ["sync"] or (opcode == "bar" and "aligned" in mods):
        raise _unsupported(line, f"`{full}`", "only __syncthreads() (bar.sync 0) is supported")


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokenize(text)
        self.text = text
        self.pos = 0
        self.funcs: dict[str, tuple[str, str]] = {}  # .func name -> (what it is, hint)

    # -- token helpers --------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> _Tok | None:
        i = self.pos + ahead
        return self.toks[i] if i < len(self.toks) else None

    def line(self) -> int:
        tok = self.peek()
        return tok.line if tok else (self.toks[-1].line if self.toks else 1)

    def next(self) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise UnsupportedError(f"line {self.line()}: cannot parse PTX: unexpected end of file")
        self.pos += 1
        return tok

    def error(self, msg: str, tok: _Tok | None = None) -> UnsupportedError:
        tok = tok or self.peek()
        found = f", found `{tok.text}`" if tok else ", found end of file"
        return UnsupportedError(f"line {tok.line if tok else self.line()}: cannot parse PTX: "
                                f"{msg}{found}")

    def expect(self, text: str) -> _Tok:
        tok = self.peek()
        if tok is None or tok.text != text:
            raise self.error(f"expected `{text}`")
        return self.next()

    def accept(self, text: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.text == text:
            self.pos += 1
            return True
        return False

    def int_tok(self) -> int:
        tok = self.peek()
        if tok is None or tok.kind != "int":
            raise self.error("expected an integer")
        return _parse_int(self.next())

    def word(self) -> _Tok:
        tok = self.peek()
        if tok is None or tok.kind != "word":
            raise self.error("expected a name")
        return self.next()

    def skip_line(self, line: int) -> None:
        while (tok := self.peek()) is not None and tok.line == line:
            self.pos += 1

    def skip_statement(self) -> None:
        while self.next().text != ";":
            pass

    def skip_braces(self) -> None:
        depth = 0
        while True:
            tok = self.next()
            depth += {"{": 1, "}": -1}.get(tok.text, 0)
            if depth == 0 and tok.text == "}":
                return

    # -- module ---------------------------------------------------------------------------
    def module(self) -> Module:
        version, target, address_size = "", "", 64
        kernels: list[Kernel] = []
        rejected: list[RejectedKernel] = []
        globals_: list[GlobalVar] = []
        shared: list[SharedDecl] = []
        linkage: list[str] = []
        while (tok := self.peek()) is not None:
            d = tok.text
            if d == ".version":
                self.next()
                version = self.next().text
            elif d == ".target":
                self.next()
                target = self.word().text
                self.skip_line(tok.line)
            elif d == ".address_size":
                self.next()
                address_size = self.int_tok()
                if address_size != 64:
                    raise _unsupported(tok.line, f"`.address_size {address_size}`", "use 64")
            elif d in (".visible", ".weak", ".extern", ".common"):
                self.next()
                linkage.append(d)
                continue
            elif d == ".entry":
                self.entry(shared, globals_, kernels, rejected)
            elif d == ".func":
                self.func()
            elif d == ".shared":
                shared.append(self.shared_decl(".extern" in linkage))
            elif d in (".global", ".const"):
                globals_.append(self.global_decl(".extern" in linkage))
            elif d in (".tex", ".texref", ".surfref", ".samplerref"):
                raise _unsupported(tok.line, f"`{d}` (textures/surfaces)", "use a global array")
            elif d == ".local":
                raise _unsupported(tok.line, "`.local` (per-thread local memory)")
            elif d == ".section":
                self.skip_braces()
            elif d in (".file", ".loc"):
                self.skip_line(tok.line)
            elif d == ".pragma":
                self.skip_statement()
            else:
                raise self.error("expected a module-level directive")
            linkage = []
        return Module(version, target, address_size, tuple(kernels), tuple(shared),
                      tuple(globals_), tuple(rejected))

    def entry(self, shared: list[SharedDecl], globals_: list[GlobalVar], kernels: list[Kernel],
              rejected: list[RejectedKernel]) -> None:
        """Parse one ``.entry``; a kernel outside the subset is kept as a RejectedKernel (its
        error raised only when it is launched) so that the module's other kernels still run."""
        start = self.pos
        line = self.peek().line
        name_tok = self.peek(1)
        name = name_tok.text if name_tok is not None else "?"
        end = self.body_end(start)
        try:
            kernels.append(self.kernel(shared, {g.name for g in globals_}))
        except UnsupportedError as err:
            if end is None:
                raise
            reason = err
            try:  # a call of printf or of a non-inlined function is the reason to give
                _BodyParser(self, name, [], [], set()).reject_call(start)
            except UnsupportedError as call:
                reason = call
            rejected.append(RejectedKernel(name, line, reason))
            self.pos = end

    def body_end(self, start: int) -> int | None:
        """Token index just past the ``}`` closing the body that follows ``start`` (None when
        the text has no balanced body)."""
        depth = 0
        for i in range(start, len(self.toks)):
            text = self.toks[i].text
            if text == "{":
                depth += 1
            elif text == "}":
                depth -= 1
                if depth == 0:
                    return i + 1
            elif text == ";" and depth == 0 and i > start and self.toks[start].text == ".func":
                return i + 1  # a declaration without a body
        return None

    def func(self) -> None:
        """A ``.func`` that NVVM did not inline: remembered, so that a kernel calling it is
        rejected naming it (printf is vprintf)."""
        tok = self.next()
        end = self.body_end(self.pos - 1)
        if self.peek() and self.peek().text == "(":
            while self.next().text != ")":
                pass
        name = self.word().text
        if name in _LIBRARY_CALLS:
            self.funcs[name] = _LIBRARY_CALLS[name]
        else:
            self.funcs[name] = (f"`.func {name}` (a device function that was not inlined)",
                                _INLINE_HINT)
        if end is None:
            raise self.error("expected the body of a .func", tok)
        self.pos = end

    def global_decl(self, extern: bool) -> GlobalVar:
        """A module-scope ``.global``/``.const`` variable with its initial bytes; what the
        machine cannot hold becomes the variable's ``error`` (reported by kernels using it)."""
        tok = self.next()
        space = tok.text[1:]
        line = tok.line
        align, ty, error = 0, "", None
        while (m := self.peek()) is not None and m.text.startswith("."):
            self.next()
            if m.text == ".align":
                align = self.int_tok()
            elif m.text[1:] in TYPE_WIDTH and m.text != ".pred":
                ty = m.text[1:]
            elif m.text[1:] in _FLOAT_TYPES:  # f32 is in TYPE_WIDTH: another float format
                ty = ty or "b32"
                error = f"{_float_name(m.text[1:])} `{m.text}`: the machine computes in float32"
            elif m.text in (".v2", ".v4"):
                error = f"vector-typed variable (`{m.text}`)"
            else:
                ty = ty or "b32"
                error = f"variable of type `{m.text}`"
        name = self.word().text
        if not ty:
            raise self.error(f"expected the type of the .{space} variable `{name}`")
        elem = max(TYPE_WIDTH[ty] // 8, 1)
        count = 1
        while self.accept("["):
            if self.accept("]"):
                error = error or "an array without a size"
                continue
            count *= self.int_tok()
            self.expect("]")
        # initial bytes past global memory are never used (global_layout rejects the variable),
        # and a declared size of gigabytes must not be allocated here
        init = bytearray(min(elem * count, limits.GLOBAL_WORDS * limits.WORD_BYTES))
        if self.accept("="):
            values: list[int] = []
            problem = self.initialiser(values)
            error = error or problem
            if len(values) > count:
                raise self.error(f"too many initialisers for `{name}`")
            for i, v in enumerate(values):
                init[i * elem:(i + 1) * elem] = (v & ((1 << (8 * elem)) - 1)).to_bytes(
                    elem, "little")
        self.expect(";")
        if extern and error is None:
            error = "an `extern` variable defined in another file"
        return GlobalVar(name, space, ty, elem * count, align or elem, bytes(init), line, error)

    def initialiser(self, values: list[int]) -> str | None:
        """Read ``6`` or ``{1, 2, {3}}`` into ``values``; a value that is not an integer
        (an address, a float) is skipped and named in the returned problem."""
        problem = None
        depth = 0
        while True:
            tok = self.peek()
            if tok is None:
                raise self.error("expected an initialiser")
            if tok.text == "{":
                self.next()
                depth += 1
            elif tok.text == "}":
                self.next()
                depth -= 1
            elif tok.text == ",":
                self.next()
            elif tok.text == "-" or tok.kind == "int":
                neg = self.accept("-")
                value = self.int_tok()
                values.append(-value if neg else value)
            elif tok.kind == "float" and tok.text[:2] in ("0f", "0F"):
                values.append(int(self.next().text[2:], 16))  # a float32 as its word
            elif tok.kind == "float":
                self.next()
                kind = "double precision" if tok.text[:2] in ("0d", "0D") else "decimal"
                problem = problem or f"{kind} floating-point initialiser `{tok.text}`"
                values.append(0)
            else:  # generic(sym), sym, sym+4: an address the host would have to relocate
                self.next()
                if self.accept("("):
                    self.skip_parens()
                while self.accept("+"):
                    self.next()
                problem = problem or f"initialiser holding the address of `{tok.text}`"
                values.append(0)
            if depth == 0:
                return problem

    def skip_parens(self) -> None:
        depth = 1
        while depth:
            depth += {"(": 1, ")": -1}.get(self.next().text, 0)

    def shared_decl(self, extern: bool) -> SharedDecl:
        line = self.expect(".shared").line
        align = 0
        ty = ""
        while (tok := self.peek()) is not None and tok.text.startswith("."):
            self.next()
            if tok.text == ".align":
                align = self.int_tok()
            elif tok.text[1:] in TYPE_WIDTH and tok.text != ".pred":
                ty = tok.text[1:]
            elif tok.text[1:] in _FLOAT_TYPES:
                raise _float_type(line, tok.text[1:], f"a `.shared {tok.text}` variable")
            else:
                raise self.error("unexpected modifier in a .shared declaration", tok)
        if not ty:
            raise self.error("expected the element type of a .shared declaration")
        name = self.word().text
        elem = max(TYPE_WIDTH[ty] // 8, 1)
        count = 1
        dynamic = False
        while self.accept("["):
            if self.accept("]"):
                dynamic = True
                continue
            count *= self.int_tok()
            self.expect("]")
        if self.peek() is not None and self.peek().text == "=":
            raise _unsupported(line, f"initialised .shared variable `{name}`")
        self.expect(";")
        if dynamic and not extern:
            raise self.error("a .shared array without a size must be .extern")
        return SharedDecl(name, 0 if extern else elem * count, align or elem, line, extern)

    # -- kernels --------------------------------------------------------------------------
    def kernel(self, module_shared: list[SharedDecl], module_globals: set[str]) -> Kernel:
        line = self.expect(".entry").line
        name = self.word().text
        params: list[Param] = []
        if self.accept("("):
            while not self.accept(")"):
                params.append(self.param())
                if not self.accept(","):
                    self.expect(")")
                    break
        while (tok := self.peek()) is not None and tok.text != "{":
            if tok.text in (".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg",
                            ".noreturn", ".maxclusterrank", ".reqnctapercluster",
                            ".explicitcluster"):
                self.next()
                self.skip_line(tok.line)
            elif tok.text == ".pragma":
                self.skip_statement()
            else:
                raise self.error("expected `{` to open the kernel body")
        body = _BodyParser(self, name, params, module_shared, module_globals)
        return body.parse(line)

    def param(self) -> Param:
        tok = self.expect(".param")
        ty = ""
        while (m := self.peek()) is not None and m.text.startswith("."):
            self.next()
            if m.text == ".align":
                self.int_tok()
            elif m.text in (".ptr", ".global", ".shared", ".const", ".local"):
                continue
            elif m.text[1:] in TYPE_WIDTH and m.text != ".pred":
                ty = m.text[1:]
            elif m.text[1:] in _FLOAT_TYPES:
                raise _float_type(m.line, m.text[1:], f"kernel parameter type `{m.text}`",
                                  "the machine computes in float32: pass a float"
                                  if m.text == ".f64" else "")
            else:
                raise _unsupported(m.line, f"parameter modifier `{m.text}`")
        name = self.word().text
        if self.peek() is not None and self.peek().text == "[":
            raise _unsupported(tok.line, f"struct/array kernel parameter `{name}`",
                               "pass scalars and pointers only")
        if not ty:
            raise self.error("expected a parameter type")
        return Param(name, ty, tok.line)


class _BodyParser:
    """Parses one kernel body; nested ``{ }`` scopes get their registers renamed if shadowing."""

    def __init__(self, p: _Parser, name: str, params: list[Param],
                 module_shared: list[SharedDecl], module_globals: set[str]):
        self.p = p
        self.name = name
        self.params = params
        self.param_names = {prm.name for prm in params}
        self.module_shared = {d.name: d for d in module_shared}
        self.module_globals = module_globals
        self.regs: list[RegDecl] = []
        self.shared: list[SharedDecl] = []
        self.body: list[Instr | Label] = []
        self.scopes: list[dict[str, str]] = []
        self.reg_type: dict[str, str] = {}
        self.prefixes: dict[str, tuple[str, int]] = {}  # "%r" -> (type, count)
        # registers of another float format (.f64, .f16): the first instruction using one names
        # the kernel's problem better than the declaration; rejected at the end otherwise
        self.other_floats: list[tuple[int, str]] = []
        self.float_literals: list[_Tok] = []  # 0f literals of the instruction being parsed

    def parse(self, line: int) -> Kernel:
        p = self.p
        p.expect("{")
        self.scopes.append({})
        while self.scopes:
            tok = p.peek()
            if tok is None:
                raise p.error("expected `}` to close the kernel body")
            if tok.text == "}":
                p.next()
                self.scopes.pop()
            elif tok.text == "{":
                p.next()
                self.scopes.append({})
            elif tok.text.startswith(".") and tok.kind == "word":
                self.directive(tok)
            elif (tok.kind == "word" and "." not in tok.text
                  and (nxt := p.peek(1)) is not None and nxt.text == ":"):
                p.pos += 2
                self.body.append(Label(tok.text, tok.line))
            else:
                self.body.append(self.instruction())
        if self.other_floats:
            decl_line, ty = self.other_floats[0]
            raise _float_type(decl_line, ty, f"`.reg .{ty}` registers")
        kernel = Kernel(self.name, tuple(self.params), tuple(self.regs), tuple(self.shared),
                        tuple(self.body), line)
        _validate(kernel)
        return kernel

    def directive(self, tok: _Tok) -> None:
        p = self.p
        d = tok.text
        if d == ".reg":
            self.reg_decl()
        elif d == ".shared":
            self.shared.append(p.shared_decl(extern=False))
        elif d == ".extern" and (nxt := p.peek(1)) is not None and nxt.text == ".shared":
            p.next()
            self.shared.append(p.shared_decl(extern=True))
        elif d in (".loc", ".file"):
            p.skip_line(tok.line)
        elif d == ".pragma":
            p.skip_statement()
        elif d == ".local":
            raise _unsupported(tok.line, "`.local` (per-thread local memory: a local array, or "
                               "registers spilled by the compiler)",
                               "avoid per-thread arrays indexed at run time")
        elif d == ".param":
            self.reject_call(p.pos)
            raise _unsupported(tok.line, "`.param` inside a kernel body (a function call "
                               "sequence)", _INLINE_HINT)
        elif d == ".const":
            raise _unsupported(tok.line, "`.const` (__constant__ memory) declared inside a kernel")
        else:
            raise p.error("unexpected directive in a kernel body", tok)

    def reg_decl(self) -> None:
        p = self.p
        line = p.expect(".reg").line
        tok = p.word()
        ty = tok.text[1:]
        if ty in _FLOAT_TYPES and ty != "f32":
            self.other_floats.append((line, ty))
        elif ty not in INT_TYPES and ty not in ("pred", "f32"):
            raise _unsupported(line, f"register type `{tok.text}`")
        while True:
            name = p.word().text
            if p.accept("<"):
                count = p.int_tok()
                p.expect(">")
                if count > 1 << 16:  # names are made per register: 10^9 would fill the memory
                    raise _unsupported(line, f"a range of {count:,} registers `{name}<{count}>`",
                                       "at most 65,536")
                self.declare(RegDecl(ty, name, count, line))
            else:
                self.declare(RegDecl(ty, name, None, line))
            if not p.accept(","):
                break
        p.expect(";")

    def declare(self, decl: RegDecl) -> None:
        scope = self.scopes[-1]
        names = decl.names()
        if any(self.lookup(n) is not None for n in names) or decl.prefix in self.prefixes:
            if decl.count is not None:
                raise _unsupported(decl.line, f"redeclared register range `{decl.prefix}<>`")
            renamed = f"{decl.prefix}${len(self.regs)}"
            scope[decl.prefix] = renamed
            decl = RegDecl(decl.type, renamed, None, decl.line)
        elif decl.count is None:
            scope[decl.prefix] = decl.prefix
        else:
            self.prefixes[decl.prefix] = (decl.type, decl.count)
        self.regs.append(decl)
        for n in decl.names():
            self.reg_type[n] = decl.type

    def lookup(self, name: str) -> str | None:
        """Resolve a register name (scoped names first, then ``%r<N>`` ranges)."""
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        # %r<9> declares %r0..%r8 (no leading zeros: %r01 would be a different name)
        for i in range(1, len(name)):
            prefix, index = name[:i], name[i:]
            if (prefix in self.prefixes and re.fullmatch(r"0|[1-9][0-9]*", index)
                    and int(index) < self.prefixes[prefix][1]):
                return name
        return None

    # -- instructions ---------------------------------------------------------------------
    def instruction(self) -> Instr:
        p = self.p
        first = p.peek()
        guard = None
        if p.accept("@"):
            neg = p.accept("!")
            reg = self.reg(p.word())
            if self.reg_type[reg.name] != "pred":
                raise _unsupported(first.line, f"guard `{reg.name}` that is not a predicate")
            guard = (reg.name, neg)
        op_tok = p.word()
        opcode, *rest = op_tok.text.split(".")
        mods = tuple(rest)
        if opcode == "call":
            self.reject_call(p.pos - 1)
        _check_opcode(opcode, mods, op_tok.line)
        operands: list[Operand] = []
        self.float_literals = []
        if not p.accept(";"):
            while True:
                operands.append(self.operand())
                if p.accept(";"):
                    break
                p.expect(",")
        last = p.toks[p.pos - 2]  # the token before `;`
        text = " ".join(p.text[first.start : last.end].split())
        ins = Instr(first.line, text, guard, opcode, mods, tuple(operands))
        if self.float_literals and not {"f32", "b32"} & set(mods):
            raise _unsupported(first.line, f"`{text}` (the float literal "
                               f"`{self.float_literals[0].text}` in an integer instruction)",
                               "only .f32 and .b32 instructions take one")
        self.check_operands(ins)
        return ins

    def reject_call(self, start: int) -> None:
        """At a call sequence: if the next ``call`` names a module ``.func``, reject the kernel
        naming that function (and printf as printf) at the call's line."""
        toks = self.p.toks
        i = start
        while i < len(toks) and not toks[i].text.startswith("call"):
            if toks[i].text == ".entry" and i > start:
                return
            i += 1
        if i == len(toks):
            return
        j = i + 1
        while j < len(toks) and toks[j].text != ";":
            if toks[j].text in self.p.funcs:  # named on the line of the function's name
                what, hint = self.p.funcs[toks[j].text]
                raise _unsupported(toks[j].line, what, hint)
            j += 1

    def reg(self, tok: _Tok) -> Reg:
        name = self.lookup(tok.text)
        if name is None:
            raise UnsupportedError(f"line {tok.line}: cannot parse PTX: register `{tok.text}` "
                                   "is not declared")
        return Reg(name)

    def operand(self) -> Operand:
        p = self.p
        tok = p.peek()
        if tok is None:
            raise p.error("expected an operand")
        if tok.text == "[":
            return self.address()
        if tok.text == "{":
            return self.vector()
        if tok.text == "!":
            p.next()
            return Reg(self.reg(p.word()).name, negated=True)
        if tok.kind == "float":
            return Imm(self.float_word())
        if tok.text == "-" or tok.kind == "int":
            return Imm(self.signed_int())
        if tok.kind != "word":
            raise p.error("expected an operand")
        p.next()
        base, _, comp = tok.text.partition(".")
        if base in _GEOMETRY:
            if comp not in ("x", "y", "z"):
                raise _unsupported(tok.line, f"vector special register `{tok.text}`")
            return SpecialReg(base, comp)
        if tok.text == "%laneid":  # thread rank % 32: a block (<= 16 threads) is in one warp
            return SpecialReg("%laneid")
        if base.startswith(_SPECIAL_PREFIXES):
            raise _unsupported(tok.line, f"special register `{tok.text}`",
                               _WARP_HINT if base.startswith(("%lane", "%warp")) else "")
        if tok.text.startswith("%") or self.lookup(tok.text) is not None:
            first = self.reg(tok)
            if p.accept("|"):
                return Pair(first, self.reg(p.word()))
            return first
        if tok.text == "WARP_SZ":
            raise _unsupported(tok.line, "`warpSize` (WARP_SZ)",
                               "warps here have 4 lanes, not 32; use a literal width")
        return Sym(tok.text)

    def vector(self) -> Vec:
        """``{%r1, _, %r3}``: the register list of a vector load or store."""
        p = self.p
        p.expect("{")
        items: list[Reg | Imm | None] = []
        while True:
            tok = p.peek()
            if tok is not None and tok.text == "_":
                p.next()
                items.append(None)
            elif tok is not None and tok.kind == "float":
                items.append(Imm(self.float_word()))
            elif tok is not None and (tok.kind == "int" or tok.text == "-"):
                items.append(Imm(self.signed_int()))
            else:
                items.append(self.reg(p.word()))
            if p.accept("}"):
                return Vec(tuple(items))
            p.expect(",")

    def signed_int(self) -> int:
        p = self.p
        neg = p.accept("-")
        tok = p.peek()
        if tok is not None and tok.kind == "float":
            raise UnsupportedError(f"line {tok.line}: cannot parse PTX: a floating-point literal "
                                   f"`{'-' if neg else ''}{tok.text}` where an integer belongs")
        value = p.int_tok()
        return -value if neg else value

    def float_word(self) -> int:
        """A float32 literal ``0fXXXXXXXX`` as its word; doubles and decimals are rejected."""
        tok = self.p.next()
        text = tok.text
        if text[:2] in ("0f", "0F"):
            self.float_literals.append(tok)
            return int(text[2:], 16)
        if text[:2] in ("0d", "0D"):
            raise _float_type(tok.line, "f64", f"the literal `{text}`")
        raise _unsupported(tok.line, f"the decimal floating-point literal `{text}`",
                           "write a float32 as 0fXXXXXXXX (its hexadecimal word), as NVVM does")

    def address(self) -> Addr:
        p = self.p
        p.expect("[")
        tok = p.peek()
        base: Reg | Sym | None = None
        offset = 0
        if tok is not None and tok.kind == "word":
            p.next()
            if tok.text.startswith("%"):
                base = self.reg(tok)
            else:
                base = Sym(tok.text)
            if p.accept("+") or (p.peek() is not None and p.peek().text == "-"):
                offset = self.signed_int()
        else:
            offset = self.signed_int()
        p.expect("]")
        return Addr(base, offset)

    def check_operands(self, ins: Instr) -> None:
        """Check operand count and kinds; symbols must name this kernel's params/shared/labels."""
        op, ops, line = ins.opcode, ins.operands, ins.line

        def bad(msg: str) -> UnsupportedError:
            return UnsupportedError(f"line {line}: `{ins.text}`: {msg}")

        def value(o: Operand) -> bool:
            return isinstance(o, Imm) or (isinstance(o, Reg) and not o.negated)

        if op in ("bra",):
            if len(ops) != 1 or not isinstance(ops[0], Sym):
                raise bad("expected one label operand")
            return
        if op in ("ret", "exit", "membar", "fence"):
            if ops:
                raise bad("expected no operands")
            return
        vec = next((o for o in ops if isinstance(o, Vec)), None)
        packs = op == "mov" and ins.mods in (("b32",), ("b16",)) and len(ops) == 2 and \
            vec is not None and all(isinstance(x, Reg) for x in vec.items)
        if vec is not None and not packs and \
                (op not in ("ld", "st") or not set(ins.mods) & {"v2", "v4"}):
            raise _unsupported(line, f"`{ins.text}` (vector operand `{{...}}`)",
                               "use scalar 32-bit values")
        if ins.mods == ("warp", "sync"):
            if len(ops) != 1 or not value(ops[0]):
                raise bad("expected one member-mask operand")
            return
        if op in ("bar", "barrier"):
            if len(ops) != 1 or ops[0] != Imm(0):
                raise _unsupported(line, f"`{ins.text}` (named barrier or thread count)",
                                   "only __syncthreads() (bar.sync 0) is supported")
            return
        if op in ("ld", "st", "atom", "red"):
            self.check_memory(ins, bad)
            return
        if op == "shfl":
            dst_ok = isinstance(ops[0], Pair) or (isinstance(ops[0], Reg) and value(ops[0]))
            if len(ops) != 5 or not dst_ok or not all(value(o) for o in ops[1:]):
                raise bad("expected d[|p], a, b, c, membermask")
            return
        if op == "set":  # set.cmp[.bool][.ftz].dtype.f32 d, a, b[, [!]c]
            want = 4 if set(ins.mods) & _BOOL_OPS else 3
            if len(ops) != want or not isinstance(ops[0], Reg) or not value(ops[0]) \
                    or not all(value(o) for o in ops[1:3]):
                raise bad(f"expected {want} operands: d, a, b{', [!]c' if want == 4 else ''}")
            if want == 4 and not self.is_pred(ops[3]):
                raise bad("the combining operand must be a predicate register")
            return
        if op == "setp":
            want = 4 if set(ins.mods) & _BOOL_OPS else 3
            dst_ok = isinstance(ops[0], Pair) or (isinstance(ops[0], Reg) and value(ops[0]))
            if len(ops) != want or not dst_ok or not all(value(o) for o in ops[1:3]):
                raise bad(f"expected {want} operands: p[|q], a, b{', [!]c' if want == 4 else ''}")
            if want == 4 and not self.is_pred(ops[3]):
                raise bad("the combining operand must be a predicate register")
            for r in (ops[0].first, ops[0].second) if isinstance(ops[0], Pair) else (ops[0],):
                if self.reg_type[r.name] != "pred":
                    raise bad(f"destination `{r.name}` is not a predicate")
            return
        if packs:  # mov.b32 %r, {%rs1, %rs2} packs halves; mov.b32 {%rs1, %rs2}, %r splits
            return
        if len(ops) != _ARITY[op]:
            raise bad(f"expected {_ARITY[op]} operands")
        if not (isinstance(ops[0], Reg) and not ops[0].negated):
            raise bad("the destination must be a register")
        for o in ops[1:]:
            if value(o):
                continue
            if op == "mov" and isinstance(o, SpecialReg):
                continue
            if op in ("mov", "cvta") and isinstance(o, Sym):
                if o.name not in self.shared_names() | self.module_globals:
                    raise bad(f"`{o.name}` is not a shared or global variable (taking the "
                              "address of a parameter or label is not supported)")
                continue
            raise bad(f"unexpected operand {o}")
        if op == "selp" and not self.is_pred(ops[3]):
            raise bad("the selector must be a predicate register")
        if op == "testp" and not self.is_pred(ops[0]):
            raise bad(f"destination `{ops[0].name}` is not a predicate")

    def is_pred(self, o: Operand) -> bool:
        return isinstance(o, Reg) and self.reg_type[o.name] == "pred"

    def shared_names(self) -> set[str]:
        return {d.name for d in self.shared} | set(self.module_shared)

    def check_memory(self, ins: Instr, bad: Callable[[str], UnsupportedError]) -> None:
        ops = ins.operands
        addr_at = 0 if ins.opcode in ("st", "red") else 1
        want = {"ld": 2, "st": 2, "red": 2, "atom": 4 if "cas" in ins.mods else 3}[ins.opcode]
        if len(ops) != want or not isinstance(ops[addr_at], Addr):
            raise bad(f"expected {want} operands with the address at position {addr_at + 1}")
        others = [o for i, o in enumerate(ops) if i != addr_at]
        lanes = 2 if "v2" in ins.mods else 4 if "v4" in ins.mods else 0
        if lanes:
            data = ops[1 - addr_at]
            if not isinstance(data, Vec) or len(data.items) != lanes:
                raise bad(f"expected a {{...}} list of {lanes} registers")
            if addr_at == 1 and any(isinstance(x, Imm) for x in data.items):
                raise bad("a vector load needs registers to load into")
            others = [x for x in data.items if x is not None]
        elif addr_at == 1 and not isinstance(ops[0], Reg):
            raise bad("the destination must be a register")
        if not all(isinstance(o, Imm) or (isinstance(o, Reg) and not o.negated) for o in others):
            raise bad("expected register or immediate data operands")
        addr = ops[addr_at]
        assert isinstance(addr, Addr)
        space = ins.space
        if space == "param":
            if not isinstance(addr.base, Sym) or addr.base.name not in self.param_names:
                raise bad("ld.param must name one of this kernel's parameters")
            param = next(prm for prm in self.params if prm.name == addr.base.name)
            size = type_width(ins.type) // 8
            if addr.offset % size or not 0 <= addr.offset <= type_width(param.type) // 8 - size:
                raise bad(f"a {size}-byte load at offset {addr.offset} is not an aligned part of "
                          f"the {type_width(param.type) // 8}-byte parameter `{param.name}`")
        elif isinstance(addr.base, Sym):
            names = self.shared_names() if space == "shared" else self.module_globals
            if addr.base.name not in names:
                kind = "shared" if space == "shared" else "global or constant"
                raise bad(f"`{addr.base.name}` is not a {kind} variable of this module")


def _validate(kernel: Kernel) -> None:
    """Kernel-wide checks: labels exist and are unique, shfl segment operands are constants."""
    labels: dict[str, int] = {}
    for item in kernel.body:
        if isinstance(item, Label):
            if item.name in labels:
                raise UnsupportedError(f"line {item.line}: cannot parse PTX: label `{item.name}` "
                                       f"already defined on line {labels[item.name]}")
            labels[item.name] = item.line
    instrs = kernel.instructions
    for ins in instrs:
        if ins.opcode == "bra" and ins.operands[0].name not in labels:  # type: ignore[union-attr]
            raise UnsupportedError(f"line {ins.line}: `{ins.text}`: unknown label")
        if ins.opcode == "shfl":
            _check_shfl_segment(ins, instrs)
        if ins.mods == ("warp", "sync"):
            warp_sync_group(ins, instrs)


_LANE_OPS: dict[str, Callable[..., int]] = {
    "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "not": lambda a: ~a,
    "shl": lambda a, b: a << b if b < 32 else 0, "shr": lambda a, b: a >> b if b < 32 else 0,
    "mov": lambda a: a,
}


def _lane_value(op: Operand, instrs: tuple[Instr, ...], lane: int, depth: int = 0) -> int | None:
    """The value of a 32-bit operand computed only from constants and ``%laneid`` (= lane),
    through unguarded single definitions; None when it depends on anything else."""
    if isinstance(op, Imm):
        return op.value & 0xFFFFFFFF
    if op == SpecialReg("%laneid"):
        return lane
    if not isinstance(op, Reg) or depth > 16:
        return None
    defs = [d for d in instrs if op.name in d.dests]
    if len(defs) != 1 or defs[0].guard is not None or defs[0].opcode not in _LANE_OPS:
        return None
    args = [_lane_value(o, instrs, lane, depth + 1) for o in defs[0].operands[1:]]
    if any(a is None for a in args):
        return None
    return _LANE_OPS[defs[0].opcode](*args) & 0xFFFFFFFF


def warp_sync_group(ins: Instr, instrs: tuple[Instr, ...]) -> int:
    """Lanes per group that ``bar.warp.sync mask`` synchronises: 1, 2 or 4 when, for every
    thread, the mask is exactly the aligned group of that size around it (cooperative groups'
    tiles of 1, 2 or 4 threads) — the group then lies inside one 4-lane warp of this machine.
    Anything else (``__syncwarp()`` over 32 lanes, tiles of 8 or more, masks computed from
    data) is rejected naming the 4-lane warp."""
    masks = [_lane_value(ins.operands[0], instrs, lane) for lane in range(limits.MAX_THREADS)]
    for size in (1, 2, 4):
        if all(m == ((1 << size) - 1) << (lane & -size) for lane, m in enumerate(masks)):
            return size
    known = masks[0] is not None and all(m is not None for m in masks)
    widest = max(m.bit_count() for m in masks) if known else 0  # type: ignore[union-attr]
    what = f"over {widest} threads" if known else "with a member mask computed at run time"
    raise _unsupported(
        ins.line, f"`{ins.text}` (__syncwarp or a tile's sync() {what})",
        f"{_WARP_HINT}; synchronise tiles of at most 4 threads "
        "(cg::tiled_partition<4>) or the whole block (__syncthreads())")


def _check_shfl_segment(ins: Instr, instrs: tuple[Instr, ...]) -> None:
    """The c operand (segment mask and clamp) must be a constant selecting <= 4-lane segments."""
    c = ins.operands[3]
    value: int | None = None
    if isinstance(c, Imm):
        value = c.value
    elif isinstance(c, Reg):
        defs = [d for d in instrs if c.name in d.dests]
        if defs and all(d.opcode == "mov" and d.guard is None and isinstance(d.operands[1], Imm)
                        for d in defs):
            values = {d.operands[1].value & 0xFFFFFFFF for d in defs}  # type: ignore[union-attr]
            if len(values) == 1:
                value = values.pop()
    hint = ("pass width 4, e.g. __shfl_down_sync(0xffffffff, v, 1, 4): this machine's warps "
            "have 4 lanes")
    if value is None:
        raise _unsupported(ins.line, f"`{ins.text}` with a segment width that is not a "
                           "compile-time constant", hint)
    if (value >> 8) & 0x1C != 0x1C:
        width = 32 - ((value >> 8) & 0x1F)
        raise _unsupported(ins.line, f"`{ins.text}` over {width}-lane segments", hint)


def parse_module(text: str) -> Module:
    """Parse PTX text into a ``Module``; raises UnsupportedError (with a line) on anything else."""
    return _Parser(text).module()
