"""Division and remainder lowering (docs/ISA.md, "Division and remainder"): exact results on the
machine interpreter, edge cases and the cases C leaves undefined included, from hand-written PTX
(no CUDA compiler needed)."""

from __future__ import annotations

import itertools
import random

import pytest

from qgpu.driver import load_ptx
from qgpu.machine.interp import s32

M32 = 0xFFFFFFFF
LANES = 16  # four warps: lanes of one warp take different paths through the division

HEADER = """
.version 7.0
.target sm_75
.address_size 64
"""

# q[i] = a[i] / b[i] and r[i] = a[i] % b[i], unsigned and signed.
DIVMOD = HEADER + """
.visible .entry divmod(.param .u64 pa, .param .u64 pb, .param .u64 puq, .param .u64 pur,
                       .param .u64 psq, .param .u64 psr)
{
    .reg .b32 %r<10>;
    .reg .b64 %rd<16>;
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pb];
    ld.param.u64 %rd3, [puq];
    ld.param.u64 %rd4, [pur];
    ld.param.u64 %rd5, [psq];
    ld.param.u64 %rd6, [psr];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd7, %r1, 4;
    add.s64 %rd8, %rd1, %rd7;
    ld.global.u32 %r2, [%rd8];
    add.s64 %rd9, %rd2, %rd7;
    ld.global.u32 %r3, [%rd9];
    div.u32 %r4, %r2, %r3;
    rem.u32 %r5, %r2, %r3;
    div.s32 %r6, %r2, %r3;
    rem.s32 %r7, %r2, %r3;
    add.s64 %rd10, %rd3, %rd7;
    st.global.u32 [%rd10], %r4;
    add.s64 %rd11, %rd4, %rd7;
    st.global.u32 [%rd11], %r5;
    add.s64 %rd12, %rd5, %rd7;
    st.global.u32 [%rd12], %r6;
    add.s64 %rd13, %rd6, %rd7;
    st.global.u32 [%rd13], %r7;
    ret;
}
"""

# The result register is also an operand; immediate divisors; 16-bit division.
FORMS = HEADER + """
.visible .entry forms(.param .u64 pa, .param .u64 pb, .param .u64 po)
{
    .reg .b16 %rs<6>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pb];
    ld.param.u64 %rd3, [po];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.u32 %r2, [%rd5];
    add.s64 %rd6, %rd2, %rd4;
    ld.global.u32 %r3, [%rd6];
    mov.u32 %r5, %r2;
    div.s32 %r2, %r2, %r3;
    rem.u32 %r3, %r5, %r3;
    div.u32 %r6, %r5, 10;
    rem.s32 %r7, %r5, -7;
    cvt.u16.u32 %rs1, %r5;
    ld.global.u32 %r8, [%rd6];
    cvt.u16.u32 %rs2, %r8;
    div.u16 %rs3, %rs1, %rs2;
    rem.s16 %rs4, %rs1, %rs2;
    cvt.u32.u16 %r9, %rs3;
    cvt.s32.s16 %r10, %rs4;
    mul.wide.u32 %rd4, %r1, 24;
    add.s64 %rd7, %rd3, %rd4;
    st.global.u32 [%rd7], %r2;
    st.global.u32 [%rd7+4], %r3;
    st.global.u32 [%rd7+8], %r6;
    st.global.u32 [%rd7+12], %r7;
    st.global.u32 [%rd7+16], %r9;
    st.global.u32 [%rd7+20], %r10;
    ret;
}
"""


def udivmod(a: int, b: int, m: int = M32) -> tuple[int, int]:
    """The machine's unsigned rule: a / 0 = all ones, a % 0 = a."""
    a, b = a & m, b & m
    return (a // b, a % b) if b else (m, a)


def sdivmod(a: int, b: int, bits: int = 32) -> tuple[int, int]:
    """C semantics (truncation, remainder with the dividend's sign) and the machine's rule for
    what C leaves undefined: INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0, a / 0 = -1 (a >= 0) or
    1 (a < 0), a % 0 = a. Results as bits-wide patterns."""
    m = (1 << bits) - 1

    def sx(v: int) -> int:
        v &= m
        return v - (1 << bits) if v >> (bits - 1) else v

    a, b = sx(a), sx(b)
    if b == 0:
        q, r = (-1 if a >= 0 else 1), a
    else:
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        r = a - b * q
    return q & m, r & m


@pytest.fixture(scope="module")
def divmod_kernel():
    return load_ptx(DIVMOD).kernel("divmod")


@pytest.fixture(scope="module")
def forms_kernel():
    return load_ptx(FORMS).kernel("forms")


def run_divmod(kernel, a: list[int], b: list[int], backend: str = "interp"):
    return kernel.launch(grid=(1, 1), block=(len(a), 1),
                         args=[[s32(v) for v in a], [s32(v) for v in b]]
                         + [{"zeros": len(a)} for _ in range(4)], backend=backend)


def check_divmod(kernel, a: list[int], b: list[int]) -> dict:
    res = run_divmod(kernel, a, b)
    uq, ur, sq, sr = res.args[2:]
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        want = [*udivmod(x, y), *sdivmod(x, y)]
        got = [uq[i] & M32, ur[i] & M32, sq[i] & M32, sr[i] & M32]
        assert got == want, f"a={x:#x} b={y:#x}: got {[hex(v) for v in got]}, " \
                            f"want {[hex(v) for v in want]} (u/, u%, s/, s%)"
    return res.stats


EDGES = [0, 1, 2, 3, 5, 7, 10, 255, 0x7FFF, 0x10000, (1 << 28) + 3, (1 << 29) - 1, 1 << 29,
         (1 << 30) + 1, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFE, M32, -7 & M32,
         -10 & M32, -(1 << 20) & M32]


def lane_batches(pairs: list[tuple[int, int]], lanes: int = LANES):
    for k in range(0, len(pairs), lanes):
        chunk = pairs[k:k + lanes]
        yield [p[0] for p in chunk], [p[1] for p in chunk]


def test_edge_values_every_pair(divmod_kernel) -> None:
    """0, 1, powers of two, the fast/slow boundary near 2**29, INT_MIN, -1, UINT_MAX ... as
    dividend and divisor: division by 0, INT_MIN / -1, divisor above dividend included."""
    for a, b in lane_batches(list(itertools.product(EDGES, EDGES))):
        check_divmod(divmod_kernel, a, b)


def random_word(rng: random.Random) -> int:
    kind = rng.randrange(4)
    if kind == 0:
        return rng.randrange(0, 1000)
    if kind == 1:
        return rng.getrandbits(rng.randrange(1, 33))  # every magnitude
    if kind == 2:
        return -rng.randrange(1, 1 << rng.randrange(1, 32)) & M32
    return rng.getrandbits(32)


@pytest.mark.parametrize("seed", range(4))
def test_random_values_match_python(divmod_kernel, seed: int) -> None:
    rng = random.Random(seed)
    pairs = [(random_word(rng), random_word(rng)) for _ in range(8 * LANES)]
    for a, b in lane_batches(pairs):
        check_divmod(divmod_kernel, a, b)


def test_both_interpreters_agree_on_undefined_cases(divmod_kernel) -> None:
    a = [0, 5, 0x7FFFFFFF, -7 & M32, 0x80000000, 0x80000000, 1 << 30, M32]
    b = [0, 0, 0, 0, 0, M32, 0, 0]
    machine = run_divmod(divmod_kernel, a, b).args[2:]
    oracle = run_divmod(divmod_kernel, a, b, backend="ptx").args[2:]
    assert machine == oracle
    check_divmod(divmod_kernel, a, b)


def test_operand_forms(forms_kernel) -> None:
    """Destination equal to an operand, immediate divisors, 16-bit unsigned and signed."""
    rng = random.Random(7)
    vals = EDGES + [random_word(rng) for _ in range(42)]
    pairs = list(zip(vals, reversed(vals), strict=True))
    for a, b in lane_batches(pairs, 12):  # six outputs per lane: 12 lanes fit in memory
        res = forms_kernel.launch(grid=(1, 1), block=(len(a), 1),
                                  args=[[s32(v) for v in a], [s32(v) for v in b],
                                        {"zeros": 6 * len(a)}])
        out = res.args[2]
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            r16 = sdivmod(x, y, 16)[1]
            want = [sdivmod(x, y)[0], udivmod(x, y)[1], udivmod(x, 10)[0], sdivmod(x, -7)[1],
                    udivmod(x, y, 0xFFFF)[0], (r16 | -(r16 >> 15) << 16) & M32]
            got = [v & M32 for v in out[6 * i:6 * i + 6]]
            assert got == want, f"a={x:#x} b={y:#x}: got {got}, want {want}"


def test_short_quotients_cost_few_blocks(divmod_kernel) -> None:
    """One warp, small operands: the quotient loop runs two quotient bits per two ROM blocks
    and the remainder loop one bit per block, so 1000 / 7 (8 quotient bits) stays far below
    the old one-bit-per-three-blocks loop over every dividend bit."""
    stats = check_divmod(divmod_kernel, [1000, 999, 1001, 998], [7, 7, 7, 7])
    assert stats["blocks_executed"] <= 60, stats["blocks_executed"]
