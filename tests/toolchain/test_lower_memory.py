"""Vector and 8/16-bit accesses on the word-addressed machine: exact on both interpreters,
including lanes of one instruction writing neighbouring bytes of one word."""

from __future__ import annotations

from .both import error_both, needs_compiler, run_both

pytestmark = needs_compiler

SRC = """
extern "C" __global__ void vec4(const int4 *in, int4 *out) {
    int4 v = in[threadIdx.x];
    out[threadIdx.x] = make_int4(v.w, v.z + 1, v.y * 2, v.x - v.w);
}
extern "C" __global__ void vec2_shared(const int *in, int *out) {
    __shared__ int2 buf[8];
    int i = threadIdx.x;
    buf[i] = make_int2(in[2 * i], in[2 * i + 1]);
    __syncthreads();
    int2 v = buf[7 - i];
    out[i] = v.x * 10 + v.y;
}
extern "C" __global__ void misaligned(const int *in, int *out) {
    int4 v = reinterpret_cast<const int4 *>(in + 1)[threadIdx.x];
    out[threadIdx.x] = v.x + v.y * 3 + v.z * 5 + v.w * 7;
}
extern "C" __global__ void upper(const unsigned char *in, unsigned char *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { unsigned char c = in[i]; out[i] = (c >= 'a' && c <= 'z') ? c - 32 : c; }
}
extern "C" __global__ void reverse_shorts(const short *in, short *out, int n) {
    int i = threadIdx.x;
    if (i < n) out[n - 1 - i] = in[i] * 3 - 1;
}
extern "C" __global__ void same_byte(unsigned char *out) { out[1] = threadIdx.x + 10; }
extern "C" __global__ void shared_bytes(const signed char *in, int *out) {
    __shared__ signed char s[16];
    s[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = s[15 - threadIdx.x] * 2;
}
extern "C" __global__ void odd_short(short *p) { p[0] = *(short *)((char *)p + 1); }
extern "C" __global__ void char4s(const uchar4 *in, uchar4 *out) {
    uchar4 c = in[threadIdx.x];
    out[threadIdx.x] = make_uchar4(c.w, c.z, c.y, c.x + 1);
}
"""


def test_int4_loads_and_stores():
    data = list(range(-4, 12))
    out = run_both(SRC, "vec4", [data, {"zeros": 16}], block=(4,)).args[1]
    for t in range(4):
        x, y, z, w = data[4 * t:4 * t + 4]
        assert out[4 * t:4 * t + 4] == [w, z + 1, y * 2, x - w]


def test_int2_in_shared_memory():
    data = list(range(1, 17))
    out = run_both(SRC, "vec2_shared", [data, {"zeros": 8}], block=(8,)).args[1]
    assert out == [data[2 * (7 - i)] * 10 + data[2 * (7 - i) + 1] for i in range(8)]


def test_a_misaligned_int4_faults_on_both():
    for err in error_both(SRC, "misaligned", [[1] * 8, {"zeros": 4}]):
        assert err.kind == "launch" and "misaligned" in err.message


def test_bytes_of_one_word_written_by_neighbouring_lanes():
    text = list(b"hello, World! zz")
    r = run_both(SRC, "upper", [{"u8": text}, {"u8": [0] * 16}, 16], grid=(2,), block=(8,))
    assert bytes(r.args[1]) == b"HELLO, WORLD! ZZ"


def test_halfwords_sign_extend_and_store_exactly():
    data = [1, -2, 300, -4000, 5, 32767, -32768]
    r = run_both(SRC, "reverse_shorts", [{"s16": data}, {"s16": [0] * 7}, 7], block=(8,))
    assert r.args[1] == [((v * 3 - 1 + 32768) % 65536) - 32768 for v in reversed(data)]


def test_one_byte_written_by_every_lane_keeps_the_last_lanes_value():
    r = run_both(SRC, "same_byte", [{"u8": [7, 7, 7, 7]}], block=(4,))
    assert r.args[0] == [7, 13, 7, 7]


def test_a_shared_byte_array():
    data = [1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14, 15, -128]
    r = run_both(SRC, "shared_bytes", [{"s8": data}, {"zeros": 16}], block=(16,))
    assert r.args[1] == [2 * v for v in reversed(data)]


def test_an_odd_halfword_address_faults_on_both():
    for err in error_both(SRC, "odd_short", [{"s16": [1, 2, 3, 4]}], block=(1,)):
        assert err.kind == "launch" and "misaligned" in err.message


def test_uchar4_is_one_word():
    data = [1, 2, 3, 4, 5, 6, 7, 255]
    r = run_both(SRC, "char4s", [{"u8": data}, {"u8": [0] * 8}], block=(2,))
    assert r.args[1] == [4, 3, 2, 2, 255, 7, 6, 6]


PERMUTE = """
extern "C" __global__ void permute(const int *a, const int *b, int *out) {
    int i = threadIdx.x;
    out[4 * i] = __byte_perm(a[i], b[i], 0x3210);
    out[4 * i + 1] = __byte_perm(a[i], b[i], 0x4567);
    out[4 * i + 2] = __byte_perm(a[i], b[i], 0x0123);
    out[4 * i + 3] = __dp4a(a[i], b[i], 7) + (int)__dp4a((unsigned)a[i], (unsigned)b[i], 1u);
}
"""


def test_byte_permutes_and_byte_dot_products():
    a, b = [0x11223344, -0x7F6E5D4C, 0x00FF80FF], [0x55667788, 0x01020304, -1]
    out = run_both(PERMUTE, None, [a, b, {"zeros": 12}], block=(3,)).args[2]

    def by(v: int) -> list[int]:
        return [(v & 0xFFFFFFFF) >> 8 * k & 0xFF for k in range(4)]

    def word(bs: list[int]) -> int:
        v = sum(x << 8 * k for k, x in enumerate(bs))
        return v - (1 << 32) if v >> 31 else v

    for i in range(3):
        both = by(a[i]) + by(b[i])
        sa, sb = ([x - 256 if x > 127 else x for x in by(v)] for v in (a[i], b[i]))
        dot = 7 + sum(x * y for x, y in zip(sa, sb, strict=True))
        udot = 1 + sum(x * y for x, y in zip(by(a[i]), by(b[i]), strict=True))
        assert out[4 * i:4 * i + 4] == [word(both[0:4]), word([both[7], both[6], both[5],
                                        both[4]]), word([both[3], both[2], both[1], both[0]]),
                                        word(by((dot + udot) & 0xFFFFFFFF))]


PARAMS = """
extern "C" __global__ void param_parts(int *out, unsigned n, unsigned m, signed char c,
                                       unsigned char u, short s, unsigned short us, size_t big) {
    out[0] = (n >> 16) & 7u;
    out[1] = m >> 24;
    out[2] = c * 3 + s;
    out[3] = u + us;
    out[4] = (int)(big >> 32);
    out[5] = (int)(big >> 3);
}
"""


def test_parts_of_parameters_and_char_and_short_parameters():
    """NVRTC loads `n >> 16` as the upper halfword of the parameter, and char/short parameters
    as bytes and halfwords: each is the part of the parameter's word it names."""
    from .both import module

    loads = [line for line in module(PARAMS).ptx.splitlines() if "ld.param" in line]
    assert any("+2]" in x for x in loads) and any(".s8" in x for x in loads), loads
    for n, c, u, s, us, big in [(0x12345678, -3, 200, -300, 60000, 1000000),
                                (0xFFFFFFFF, -128, 255, -32768, 65535, 2**31 - 1),
                                (0, 127, 0, 32767, 0, 0)]:
        args = [{"zeros": 6}, n, n ^ 0x80000000, c, u, s, us, big]
        out = run_both(PARAMS, None, args, block=(1,)).args[0]
        assert out == [n >> 16 & 7, (n ^ 0x80000000) >> 24,
                       c * 3 + s, u + us, 0, big >> 3]
