"""Every construct outside the integer subset is rejected with its line and a clear reason.

The cases come from real nvcc output (tests/ptx_samples/unsupported.cu); ``isolate`` keeps one
kernel (and the module-level lines it needs) at its original line numbers. A kernel is rejected
when it is asked for (``find_kernel``), so the rest of its module still runs.
"""

from __future__ import annotations

import pytest

from qgpu.errors import UnsupportedError
from qgpu.toolchain.ptx.interp import find_kernel
from qgpu.toolchain.ptx.parser import parse_module

from .helpers import entry, isolate, line_of, parse_kernel, sample

UNSUPPORTED = sample("unsupported.ptx")

ALL = ("*",)  # keep the whole module (a called function's declaration spans lines)
# kernel, extra module-level lines to keep, fragment of the offending line, words in the message
CASES = [
    ("k_call", ALL, "_Z6helperi,",
     "`.func _Z6helperi` (a device function that was not inlined)"),
    ("k_call", (), ".param .b32 param0;", "`.param` inside a kernel body (a function call"),
    ("k_callvoid", (), "call.uni", "`call.uni` (function calls)"),
    ("k_printf", ALL, "vprintf,", "`printf`"),
    ("k_local", (), ".local .align 16", "`.local` (per-thread local memory"),
    ("k_ll", (), "st.global.u64", "64-bit memory access"),
    ("k_vote", (), "vote.sync.ballot", "(warp vote)"),
    ("k_activemask", (), "activemask.b32", "__activemask()"),
    ("k_match", (), "match.any.sync", "(warp match)"),
    ("k_cvta_shared", (), "cvta.shared.u64", "generic pointer to shared memory"),
    ("k_atom64", (), "atom.global.add.u64", "64-bit atomic"),
    ("k_trap", (), "trap;", "__trap()"),
    ("k_brkpt", (), "brkpt;", "__brkpt()"),
    ("k_barcount", (), "bar.red.popc", "only __syncthreads() (bar.sync 0)"),
    ("k_syncwarp", (), "bar.warp.sync", "__syncwarp or a tile's sync() over 32 threads"),
    ("k_lanemask", (), "%lanemask_lt;", "special register `%lanemask_lt`"),
    ("k_clock", (), "%clock64", "special register `%clock64`"),
    ("k_warpsize", (), "WARP_SZ", "`warpSize` (WARP_SZ)"),
    ("k_shfl32", (), "shfl.sync.down.b32 \t%r6|%p1", "over 32-lane segments"),
    ("k_shflwidth", (), "shfl.sync.down.b32 \t%r10|%p1", "not a compile-time constant"),
    ("k_tex", (), "tex.1d.v4.s32.s32", "(texture fetch)"),
    ("k_structparam", (), ".param .align 8 .b8 k_structparam_param_0", "struct/array kernel"),
]


@pytest.mark.parametrize(("kernel", "keep", "fragment", "words"), CASES,
                         ids=[f"{c[0]}-{c[2][:12]}" for c in CASES])
def test_rejected_construct(kernel, keep, fragment, words):
    text = UNSUPPORTED if keep == ALL else isolate(UNSUPPORTED, kernel, *keep)
    with pytest.raises(UnsupportedError) as err:
        parse_kernel(text, kernel)
    msg = err.value.message
    assert err.value.kind == "unsupported"
    start = line_of(text, f".entry {kernel}(")
    line = start + line_of("\n".join(text.split("\n")[start:]), fragment)
    assert msg.startswith(f"line {line}: "), msg
    assert words in msg and "is not supported" in msg


def test_call_message_gives_the_fix():
    with pytest.raises(UnsupportedError) as err:
        parse_kernel(isolate(UNSUPPORTED, "k_callvoid"))
    assert "mark the device function __forceinline__" in err.value.message


def test_shuffle_message_says_to_pass_width_4():
    with pytest.raises(UnsupportedError) as err:
        parse_kernel(isolate(UNSUPPORTED, "k_shfl32"))
    assert "__shfl_down_sync(0xffffffff, v, 1, 4)" in err.value.message


def test_each_kernel_is_rejected_on_its_own():
    m = parse_module(UNSUPPORTED)  # every kernel of the file at once: nothing raises yet
    assert {k.name for k in m.kernels} >= {"k_const", "k_gvar", "k_char", "k_vec", "k_laneid"}
    for name in ("k_printf", "k_ll", "k_shfl32"):
        with pytest.raises(UnsupportedError) as err:
            find_kernel(m, name)
        assert "is not supported" in err.value.message


REGS = "    .reg .pred %p<3>;\n    .reg .b32 %r<8>;\n    .reg .b64 %rd<4>;\n"


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("add.s32 %r1, %r2, 0f3F800000;", "float literal `0f3F800000` in an integer"),
        ("add.f64 %rd1, %rd2, %rd3;", "double precision (`add.f64`)"),
        ("bar.sync 1;", "named barrier or thread count"),
        ("bar.sync 0, 32;", "named barrier or thread count"),
        ("barrier.sync.aligned 0, 64;", "named barrier or thread count"),
        ("bar.arrive 0, 32;", "only __syncthreads()"),
        ("shfl.down.b32 %r1, %r2, 1, 7199;", "shfl without .sync"),
        ("redux.sync.add.s32 %r1, %r2, -1;", "warp reduction"),
        ("add.cc.u32 %r1, %r2, %r3;", "carry/saturating"),
        ("mul24.lo.s32 %r1, %r2, %r3;", "24-bit multiply"),
        ("mul.wide.u64 %rd1, %rd2, %rd3;", "128-bit product"),
        ("atom.global.min.f32 %r1, [%rd1], %r2;", "atomic type .f32"),
        ("atom.global.inc.s32 %r1, [%rd1], %r2;", "atomic type .s32"),
        ("ld.local.u32 %r1, [%rd1];", "(.local per-thread memory)"),
        ("st.param.b32 [%rd1], %r1;", "function call sequence"),
        ("ld.param.u32 %r1, [k_param_0+8];", "not an aligned part of the 8-byte parameter"),
        ("ld.param.u32 %r1, [k_param_0+2];", "4-byte load at offset 2 is not an aligned part"),
        ("mov.u64 %rd1, k_param_0;", "not a shared or global variable"),
        ("prmt.b32.f4e %r1, %r2, %r3, %r4;", "modifier .f4e"),
        ("setp.lt.pred %p1, %p2, %p0;", "ordered compare of predicates"),
        ("mov.b64 %rd1, {%r1, %r2};", "vector operand"),
        ("mov.u32 %r1, %tid;", "vector special register"),
        ("ex2.approx.f16 %r1, %r2;", "half precision"),
        ("isspacep.shared %p1, %rd1;", "`isspacep.shared`"),
    ],
)
def test_rejected_instruction(line, words):
    with pytest.raises(UnsupportedError) as err:
        parse_kernel(entry(REGS + "    " + line))
    assert err.value.message.startswith("line 10: ") and words in err.value.message


def test_rejected_module_directives():
    for decl, words in [(".local .align 4 .b8 depot[16];", "`.local`"),
                        (".shared .align 8 .f64 fs[4];", "double precision"),
                        (".address_size 32", "`.address_size 32`")]:
        with pytest.raises(UnsupportedError, match=words):
            parse_module(entry("ret;", decls=decl))
