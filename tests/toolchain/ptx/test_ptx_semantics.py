"""Instruction semantics, checked on real NVVM kernels against Python models of the C source and
on hand-written PTX against the PTX ISA definitions (and the machine's documented choices)."""

from __future__ import annotations

import pytest

from qgpu.errors import LaunchError
from qgpu.toolchain.ptx.parser import parse_module

from .helpers import INT_MAX, INT_MIN, Memory, alu, entry, launch, read, s32

M32 = 0xFFFFFFFF
EDGE = [0, 1, -1, 7, -7, 9, 10, -10, -11, 99, 12345, -12345, INT_MAX, INT_MIN, INT_MIN + 1,
        1000000007]


def u32(x: int) -> int:
    return x & M32


def cdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def crem(a: int, b: int) -> int:
    return a - cdiv(a, b) * b


def run1(kernel: str, inputs: list[list[int]], out_words: int, *extra: int,
         file: str = "arith.ptx") -> list[int]:
    """Launch a fixture kernel with one thread per input element; return the output array."""
    mem = Memory()
    ptrs = [mem.array(v) for v in inputs]
    out = mem.array(out_words)
    run = launch(file, kernel, [*ptrs, out, *extra], mem, block=(len(inputs[0]), 1))
    return read(run, out, out_words)


# -- real kernels ------------------------------------------------------------------------------
def test_division_by_constants_uses_exact_magic_multiplies():
    out = run1("divconst", [EDGE], 64)
    for t, x in enumerate(EDGE):
        assert out[4 * t : 4 * t + 4] == [cdiv(x, 10), crem(x, 7), u32(x) // 10, cdiv(x, 3)], x


def test_division_by_variables_with_the_machine_rule_for_zero_and_overflow():
    a = [7, -7, 7, -7, 5, -5, 0, INT_MIN, INT_MIN, INT_MAX, 100, -1]
    b = [2, 2, -2, -2, 0, 0, 0, -1, 1, -1, 7, 0]
    out = run1("divvar", [a, b], 48)
    for t, (x, d) in enumerate(zip(a, b, strict=True)):
        if d == 0:
            signed = [-1 if x >= 0 else 1, x]
            unsigned = [-1, x]  # 0xFFFFFFFF and x
        elif x == INT_MIN and d == -1:
            signed, unsigned = [INT_MIN, 0], [0, s32(x)]
        else:
            signed = [cdiv(x, d), crem(x, d)]
            unsigned = [s32(u32(x) // u32(d)), s32(u32(x) % u32(d))]
        assert out[4 * t : 4 * t + 4] == signed + unsigned, (x, d)


def test_bit_intrinsics():
    xs = [0, 1, -1, 0x80000000, 0x12345678, 6, 0x00F0, INT_MAX]
    out = run1("bits", [xs], 64)
    for t, x in enumerate(xs):
        u = u32(x)
        sx = s32(x)
        clz = 32 - u.bit_length()
        expect = [
            bin(u).count("1"), clz, s32(int(f"{u:032b}"[::-1], 2)),
            (u & -u).bit_length(), s32((sx * 12345) >> 32), s32((u * 0x9E3779B9) >> 32),
            s32(((u << 5) | (u >> 27)) & M32), 31 - clz,
        ]
        assert out[8 * t : 8 * t + 8] == expect, x


def test_min_max_abs_neg():
    a, b = [3, -3, INT_MIN, 0, -1], [-4, 5, INT_MAX, 0, 1]
    out = run1("minmax", [a, b], 25)
    for t, (x, y) in enumerate(zip(a, b, strict=True)):
        assert out[5 * t : 5 * t + 5] == [min(x, y), max(x, y), s32(abs(x)),
                                          s32(min(u32(x), u32(y))), s32(-x)]


def test_bool_to_int_paths_bfi_and_16_bit_selp():
    a, b = [1, 2, 3, -5, 0, 7], [2, 2, 9, -9, 0, 7]
    out = run1("booltoint", [a, b], 6)
    assert out == [(x < y) + (x == y) * 2 + (4 if x > 0 and y > 0 else 0) if x != 3 else 0
                   for x, y in zip(a, b, strict=True)]
    xs = [5, 0, -5, INT_MIN]
    assert run1("boolshift", [xs], 4) == [((x > 0) << 1) | (x < 0) for x in xs]


def test_shift_amounts_of_32_or_more_clamp():
    a = [-8, -8, -8, -8, 5, 5, INT_MIN, 0x40000000]
    b = [1, 31, 32, 1000, 32, -1, 33, 1]
    out = run1("shifts", [a, b], 24)
    for t, (x, n) in enumerate(zip(a, b, strict=True)):
        n = u32(n)
        expect = [s32(x << n) if n < 32 else 0, x >> min(n, 31), u32(x) >> n if n < 32 else 0]
        assert out[3 * t : 3 * t + 3] == expect, (x, n)


def test_mul_wide_and_64_bit_shifts():
    xs = [1, -1, INT_MAX, INT_MIN, 123456789, -987654321]
    out = run1("mulwide", [xs], 6)
    assert out == [s32(((x * 1000003) >> 20) + ((u32(x) * 3) >> 32)) for x in xs]


def test_sad_prmt_funnel_shifts_cvt_narrow_and_a_counted_loop():
    xs = [0x12345678, -2, 300, -129, 65535, 0x7FFF8001, 5, 0]
    n = 3
    out = run1("misc", [xs], 64, n)
    for t, x in enumerate(xs):
        u, joined = u32(x), (n << 32) | u32(x)
        sel = (0x3210 + n) & 0x7777
        perm = sum(((joined >> (8 * ((sel >> (4 * i)) & 7))) & 0xFF) << (8 * i) for i in range(4))
        expect = [
            abs(x - n) + 3, s32(perm), s32(joined >> min(t, 32)),
            ((u & 0xFF) ^ 0x80) - 0x80, ((u & 0xFFFF) ^ 0x8000) - 0x8000,
            s32(abs(u - n) + 1), s32(sum(xs[i] * i for i in range(t))),
            s32((joined << (t & 31)) >> 32),
        ]
        assert out[8 * t : 8 * t + 8] == expect, x


def test_64_bit_division_and_sign_extending_param_load():
    mem = Memory()
    out = mem.array(16)
    run = launch("arith.ptx", "sizediv", [out, 5], mem)
    assert read(run, out, 16) == [i // 5 + (5 % (i + 1)) * 100 for i in range(16)]


def test_64_bit_min_max_and_store_of_a_64_bit_register():
    for v, base in [(3, 3), (100000, 70000)]:
        mem = Memory()
        out = mem.array(16)
        run = launch("arith.ptx", "clamp64", [out, v], mem)
        assert read(run, out, 16) == [base + t for t in range(16)]


# -- hand-written PTX --------------------------------------------------------------------------
def test_shifts_at_16_and_64_bits():
    rows = alu("""
    cvt.u16.u32 %rs1, %r2;
    shl.b16 %rs2, %rs1, %r3;
    cvt.u32.u16 %r10, %rs2;
    shr.s16 %rs3, %rs1, %r3;
    cvt.s32.s16 %r11, %rs3;
    cvt.s64.s32 %rd11, %r2;
    shr.s64 %rd12, %rd11, %r3;
    cvt.u32.u64 %r12, %rd12;
    shl.b64 %rd13, %rd11, %r3;
    shr.u64 %rd14, %rd13, 32;
    cvt.u32.u64 %r13, %rd14;
    """, [-3, -3, -3, 0x4001], [2, 16, 64, 15])
    assert rows == [(0xFFF4, -1, -1, -1), (0, -1, -1, -1), (0, -1, -1, 0), (0x8000, 0, 0, 0)]


def test_mul_hi_lo_wide_and_mad():
    a, b, c = [INT_MIN, -1, 0x10000, 123456], [INT_MIN, -1, 0x10000, -654321], [5, 5, 5, 5]
    rows = alu("""
    mul.hi.s32 %r10, %r2, %r3;
    mul.hi.u32 %r11, %r2, %r3;
    mad.lo.s32 %r12, %r2, %r3, %r4;
    mad.hi.u32 %r13, %r2, %r3, %r4;
    """, a, b, c)
    for (x, y, z), row in zip(zip(a, b, c, strict=True), rows, strict=True):
        assert row == (s32((x * y) >> 32), s32((u32(x) * u32(y)) >> 32), s32(x * y + z),
                       s32(((u32(x) * u32(y)) >> 32) + z))
    rows = alu("""
    mul.wide.s32 %rd11, %r2, %r3;
    mad.wide.u32 %rd12, %r2, %r3, %rd11;
    cvt.u32.u64 %r10, %rd11;
    shr.u64 %rd13, %rd11, 32;
    cvt.u32.u64 %r11, %rd13;
    shr.u64 %rd14, %rd12, 32;
    cvt.u32.u64 %r12, %rd14;
    mul.lo.s64 %rd15, %rd11, %rd11;
    cvt.u32.u64 %r13, %rd15;
    """, a, b)
    for (x, y), row in zip(zip(a, b, strict=True), rows, strict=True):
        wide = (x * y) & (2**64 - 1)
        acc = (u32(x) * u32(y) + wide) & (2**64 - 1)
        assert row == (s32(wide), s32(wide >> 32), s32(acc >> 32), s32(wide * wide))


def test_division_rule_at_16_and_64_bits():
    rows = alu("""
    cvt.u16.u32 %rs1, %r2;
    cvt.u16.u32 %rs2, %r3;
    div.s16 %rs3, %rs1, %rs2;
    cvt.s32.s16 %r10, %rs3;
    rem.u16 %rs4, %rs1, %rs2;
    cvt.u32.u16 %r11, %rs4;
    cvt.s64.s32 %rd11, %r2;
    cvt.s64.s32 %rd12, %r3;
    div.s64 %rd13, %rd11, %rd12;
    cvt.u32.u64 %r12, %rd13;
    rem.s64 %rd14, %rd11, %rd12;
    cvt.u32.u64 %r13, %rd14;
    """, [-32768, 7, -7, 9], [-1, 0, 0, -2])
    assert rows == [(-32768, 32768, 32768, 0), (-1, 7, -1, 7), (1, 0xFFF9, 1, -7), (-4, 9, -4, 1)]


def test_setp_combiners_pairs_and_predicate_logic():
    rows = alu("""
    setp.lt.s32 %p1|%p2, %r2, %r3;
    selp.u32 %r10, 1, 0, %p1;
    selp.u32 %r11, 1, 0, %p2;
    setp.ne.s32 %p3, %r4, 0;
    setp.lo.u32.and %p4|%p5, %r2, %r3, !%p3;
    selp.b32 %r12, 1, 0, %p4;
    setp.ge.or.s32 %p6|%p7, %r2, %r3, %p3;
    setp.eq.xor.u32 %p1, %r2, %r3, %p7;
    and.pred %p2, %p5, %p6;
    or.pred %p3, %p1, %p2;
    not.pred %p4, %p3;
    xor.pred %p5, %p4, %p7;
    selp.s32 %r13, 2, 4, %p5;
    """.replace("setp.lo.u32.and", "setp.lo.and.u32"), [1, -1, 5, 5], [2, 1, 5, 5], [0, 0, 0, 1])
    for (a, b, c), row in zip([(1, 2, 0), (-1, 1, 0), (5, 5, 0), (5, 5, 1)], rows, strict=True):
        p3 = c != 0
        lt = a < b
        p4, p5 = (u32(a) < u32(b)) and not p3, (u32(a) >= u32(b)) and not p3
        p6, p7 = (a >= b) or p3, (a < b) or p3
        p1 = (a == b) != p7
        p2 = p5 and p6
        q3 = p1 or p2
        assert row == (int(lt), int(not lt), int(p4), 2 if (not q3) != p7 else 4), (a, b, c)


def test_setp_on_16_and_64_bit_and_predicates():
    rows = alu("""
    cvt.u16.u32 %rs1, %r2;
    cvt.u16.u32 %rs2, %r3;
    setp.gt.s16 %p1, %rs1, %rs2;
    selp.u32 %r10, 1, 0, %p1;
    setp.hi.u16 %p2, %rs1, %rs2;
    selp.u32 %r11, 1, 0, %p2;
    cvt.s64.s32 %rd11, %r2;
    cvt.u64.u32 %rd12, %r3;
    setp.lt.s64 %p3, %rd11, %rd12;
    selp.u32 %r12, 1, 0, %p3;
    setp.ne.pred %p4, %p1, %p2;
    selp.u32 %r13, 1, 0, %p4;
    """, [-1, 3, 0x10000], [1, 2, 1])
    assert rows == [(0, 1, 1, 1), (1, 1, 0, 0), (0, 0, 0, 0)]


def test_cvt_extend_truncate_and_saturate():
    rows = alu("""
    cvt.s64.s32 %rd11, %r2;
    shr.u64 %rd12, %rd11, 32;
    cvt.u32.u64 %r10, %rd12;
    cvt.sat.s16.s32 %rs1, %r2;
    cvt.s32.s16 %r11, %rs1;
    cvt.sat.u8.s32 %r12, %r2;
    cvt.u32.u8 %r13, %r2;
    """, [-1, 70000, -70000, 200, 0x1FF])
    assert rows == [(-1, -1, 0, 0xFF), (0, 32767, 255, 0x70), (-1, -32768, 0, 0x90),
                    (0, 200, 200, 200), (0, 0x1FF, 255, 0xFF)]


def test_bit_field_and_bit_count_instructions():
    rows = alu("""
    bfe.u32 %r10, %r2, 4, 8;
    bfe.s32 %r11, %r2, %r3, 4;
    bfi.b32 %r12, %r3, %r2, 8, 4;
    bfind.s32 %r13, %r2;
    """, [0x00000F80, -1, 0x12345678, 0], [7, 30, 3, 0])
    assert rows == [(0xF8, -1, 0x780, 11), (0xFF, -1, s32(0xFFFFFEFF), -1),
                    (0x67, -1, 0x12345378, 28), (0, 0, 0, -1)]
    rows = alu("""
    cvt.u64.u32 %rd11, %r2;
    shl.b64 %rd12, %rd11, 20;
    popc.b64 %r10, %rd12;
    clz.b64 %r11, %rd12;
    brev.b64 %rd13, %rd12;
    shr.u64 %rd14, %rd13, 32;
    cvt.u32.u64 %r12, %rd14;
    bfind.shiftamt.u32 %r13, %r2;
    """, [1, 0xF0000000, 0])
    assert rows == [(1, 43, 0x800, 31), (4, 12, 0, 0), (0, 64, 0, -1)]


def test_neg_abs_not_cnot_slct_sad_prmt_shf():
    rows = alu("""
    neg.s32 %r10, %r2;
    abs.s32 %r11, %r2;
    cnot.b32 %r12, %r2;
    not.b32 %r13, %r2;
    """, [INT_MIN, 0, 5])
    assert rows == [(INT_MIN, INT_MIN, 0, INT_MAX), (0, 0, 1, -1), (-5, 5, 0, -6)]
    rows = alu("""
    slct.u32.s32 %r10, %r2, %r3, %r4;
    sad.u32 %r11, %r2, %r3, 1;
    prmt.b32 %r12, %r2, %r3, 0x8F40;
    shf.l.clamp.b32 %r13, %r2, %r3, %r4;
    """, [0x80, 0x80000001], [7, 2], [0, -1])
    # prmt selectors 0, 4, F (byte 7, sign-replicated), 8 (byte 0, sign-replicated)
    assert rows == [(0x80, 0x7A, s32(0xFF000780), 7),
                    (2, s32(0x80000000), 0x00000201, s32(0x80000001))]


def test_mov_of_predicates_immediates_and_registers():
    rows = alu("""
    mov.pred %p1, 1;
    mov.pred %p2, %p1;
    selp.b32 %r10, 7, 8, %p2;
    mov.b32 %r11, 0xFFFFFFFF;
    mov.u64 %rd11, -2;
    cvt.u32.u64 %r12, %rd11;
    mov.u32 %r13, %ntid.x;
    """, [0, 0])
    assert rows == [(7, -1, -2, 2)] * 2


# -- atomics -----------------------------------------------------------------------------------
def test_every_atomic_in_lane_order():
    mem = Memory()
    g = mem.array([0, 0, 0, 0, 0, 0, 0xFF, 0x100, 0x55])
    u = mem.array([100, 0, 0, 0])
    out = mem.array(80)
    run = launch("atomics.ptx", "atoms", [g, u, out], mem)
    r = read(run, out, 80)
    assert r[:16] == [t * (t - 1) // 2 for t in range(16)]
    assert r[16:32] == [0, *range(15)]
    assert r[32:48] == [0] + [100] * 15
    assert r[48:64] == [0, 1, 2, 3, 4, 5] * 2 + [0, 1, 2, 3]
    assert r[64:80] == [0, 5, 4, 3, 2, 1] * 2 + [0, 5, 4, 3]
    assert read(run, g, 9) == [120, -120, -15, 15, 15, 100, 0xF0, 0x10F, 0x55]
    assert read(run, u, 4) == [0, 15, 4, 2]


def test_inc_dec_edge_cases():
    rows = alu("""
    add.s64 %rd11, %rd1, %rd5;
    atom.global.inc.u32 %r10, [%rd11], %r3;
    ld.global.u32 %r11, [%rd11];
    add.s64 %rd12, %rd2, %rd5;
    atom.global.dec.u32 %r12, [%rd12], %r4;
    ld.global.u32 %r13, [%rd12];
    """, [0, 5, 6, -1], [5, 5, 5, -1], [3, 0, 7, 3])
    # inc: old >= b ? 0 : old + 1 on word a[t]; dec: old == 0 || old > b ? b : old - 1 on b[t]
    assert rows == [(0, 1, 5, 3), (5, 0, 5, 0), (6, 0, 5, 4), (-1, 0, -1, 3)]


def test_red_exch_cas_on_shared_memory():
    body = """
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b8 s[8];
    ld.param.u64 %rd1, [k_param_0];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, s;
    st.shared.u32 [s], 0;
    st.shared.u32 [s+4], 0;
    bar.sync 0;
    red.shared.add.u32 [%r2], %r1;
    atom.shared.exch.b32 %r3, [s+4], %r1;
    atom.shared.cas.b32 %r4, [%r2+4], %r1, 100;
    bar.sync 0;
    ld.shared.u32 %r5, [s];
    ld.shared.u32 %r6, [s+4];
    mul.wide.u32 %rd2, %r1, 16;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    st.global.u32 [%rd3+4], %r4;
    st.global.u32 [%rd3+8], %r5;
    st.global.u32 [%rd3+12], %r6;
    """
    mem = Memory()
    out = mem.array(32)
    run = launch(parse_module(entry(body)), None, [out], mem, block=(8, 1))
    words = read(run, out, 32)
    # warp 0 runs to the barrier first: exchanges leave 3, and lane 3's cas (3 == 3) stores 100;
    # warp 1's first exchange then returns that 100
    assert words[0::4] == [0, 0, 1, 2, 100, 4, 5, 6]
    assert words[1::4] == [3, 3, 3, 3, 7, 7, 7, 7]
    assert words[2::4] == [28] * 8 and words[3::4] == [100] * 8


# -- shuffles ----------------------------------------------------------------------------------
def test_shuffles_width_4_all_modes():
    a = [10 * t + 1 for t in range(16)]
    out = run1("shfl4", [a], 64, file="shuffles.ptx")
    for t in range(16):
        base, lane = t & ~3, t & 3
        expect = [a[t + 1] if lane < 3 else a[t], a[t - 1] if lane > 0 else a[t],
                  a[t ^ 2], a[base + 3]]
        assert out[4 * t : 4 * t + 4] == expect


def test_warp_sum_and_shuffle_in_a_branch():
    a = [t * t - 7 for t in range(16)]
    assert run1("warpsum", [a], 4, file="shuffles.ptx") == [sum(a[4 * g : 4 * g + 4])
                                                             for g in range(4)]
    out = run1("shflpartial", [a], 16, file="shuffles.ptx")
    assert out == [a[t + 2] if t & 3 == 1 else a[t] for t in range(16)]


SHFL = """
    mov.u32 %r5, {c};
    shfl.sync.{mode}.b32 %r10|%p1, %r2, %r3, %r5, -1;
    selp.u32 %r11, 1, 0, %p1;
"""


@pytest.mark.parametrize(
    ("mode", "c", "b", "expect"),
    [
        # lanes 0..7 hold 100+t; (value, valid) per thread
        ("up", 0x1C00, 1, [(100, 0), (100, 1), (101, 1), (102, 1)]),
        ("up", 0x1C02, 1, [(100, 0), (101, 0), (102, 0), (102, 1)]),  # maxLane = base | 2
        ("down", 0x1C1F, 2, [(102, 1), (103, 1), (102, 0), (103, 0)]),
        ("down", 0x1C01, 1, [(101, 1), (101, 0), (102, 0), (103, 0)]),  # maxLane = base | 1
        ("bfly", 0x1C1F, 3, [(103, 1), (102, 1), (101, 1), (100, 1)]),
        ("idx", 0x1C1F, 6, [(102, 1), (102, 1), (102, 1), (102, 1)]),  # 6 & 3 = 2
        ("idx", 0x1C01, 3, [(100, 0), (101, 0), (102, 0), (103, 0)]),  # lane 3 > maxLane
        ("idx", 0x1E1F, 3, [(101, 1), (101, 1), (103, 1), (103, 1)]),  # 2-lane segments
    ],
)
def test_shuffle_pseudocode(mode, c, b, expect):
    rows = alu(SHFL.format(mode=mode, c=c), [100 + t for t in range(8)], [b] * 8)
    assert [(v, ok) for v, ok, *_ in rows[:4]] == expect
    # the second warp does the same 4 lanes up
    assert [(v - 4, ok) for v, ok, *_ in rows[4:]] == expect


def test_shuffle_source_outside_the_4_lane_warp_is_a_launch_error():
    with pytest.raises(LaunchError, match="source lane 0 lies outside this thread's 4-lane warp"):
        alu(SHFL.format(mode="bfly", c=0x1C1F), list(range(8)), [4] * 8)


def test_shuffle_from_an_inactive_lane_is_a_launch_error():
    lines = """
    and.b32 %r6, %r1, 1;
    setp.eq.s32 %p2, %r6, 1;
    @%p2 bra $L_skip;
    mov.u32 %r5, 7199;
    shfl.sync.down.b32 %r10, %r2, 1, %r5, -1;
$L_skip:
    """
    with pytest.raises(LaunchError, match=r"source lane 1 is inactive.*tid=\(0,0\)"):
        alu(lines, list(range(4)))


def test_shuffle_outside_membermask_is_a_launch_error():
    with pytest.raises(LaunchError, match="not in membermask 0x5"):
        alu("shfl.sync.idx.b32 %r10, %r2, 0, 0x1C1F, 5;", list(range(4)))
