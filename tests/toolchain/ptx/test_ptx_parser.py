"""The PTX parser on real NVRTC / nvcc / clang output, and the AST it builds."""

from __future__ import annotations

import pytest

from qgpu.errors import UnsupportedError
from qgpu.toolchain.ptx.ast import (
    Addr,
    Imm,
    Instr,
    Label,
    Pair,
    Param,
    Reg,
    RegDecl,
    SharedDecl,
    SpecialReg,
    Sym,
)
from qgpu.toolchain.ptx.interp import find_kernel
from qgpu.toolchain.ptx.parser import parse_module

from .helpers import entry, module, parse_kernel, sample


def instr(kernel, text: str) -> Instr:
    return next(i for i in kernel.instructions if i.text == text)


def test_header_params_and_registers():
    m = module("basics.ptx")
    assert (m.version, m.target, m.address_size) == ("9.0", "sm_75", 64)
    k = find_kernel(m, "vadd")
    assert k.params == (
        Param("vadd_param_0", "u64", 16), Param("vadd_param_1", "u64", 17),
        Param("vadd_param_2", "u64", 18), Param("vadd_param_3", "u32", 19),
    )
    assert k.regs == (RegDecl("pred", "%p", 2, 22), RegDecl("b32", "%r", 9, 23),
                      RegDecl("b64", "%rd", 11, 24))
    assert k.reg_types["%rd10"] == "b64" and "%rd11" not in k.reg_types


def test_instruction_shapes():
    k = find_kernel(module("basics.ptx"), "vadd")
    assert instr(k, "ld.param.u64 %rd1, [vadd_param_0]").operands == (
        Reg("%rd1"), Addr(Sym("vadd_param_0"), 0))
    mov = instr(k, "mov.u32 %r3, %ctaid.x")
    assert (mov.opcode, mov.mods, mov.type) == ("mov", ("u32",), "u32")
    assert mov.operands[1] == SpecialReg("%ctaid", "x")
    bra = instr(k, "@%p1 bra $L__BB0_2")
    assert bra.guard == ("%p1", False) and bra.operands == (Sym("$L__BB0_2"),)
    st = instr(k, "st.global.u32 [%rd10], %r8")
    assert st.space == "global" and st.dests == () and st.operands[0] == Addr(Reg("%rd10"), 0)
    assert Label("$L__BB0_2", 50) in k.body
    assert instr(k, "mad.lo.s32 %r1, %r3, %r4, %r5").dests == ("%r1",)


def test_negative_offsets_pairs_and_immediates():
    body = """
    .reg .pred %p<3>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    ld.global.u32 %r1, [%rd1+-4];
    ld.shared.u32 %r2, [128];
    setp.lt.s32 %p1|%p2, %r1, 0xFF;
    setp.eq.and.s32 %p1, %r1, -7, !%p2;
    mov.b32 %r3, 0x80000000U;
    @!%p1 add.s32 %r3, %r3, 017;
    """
    ins = parse_module(entry(body)).kernels[0].instructions
    assert ins[0].operands[1] == Addr(Reg("%rd1"), -4)
    assert ins[1].operands[1] == Addr(None, 128)
    assert ins[2].operands == (Pair(Reg("%p1"), Reg("%p2")), Reg("%r1"), Imm(255))
    assert ins[2].dests == ("%p1", "%p2")
    assert ins[3].mods == ("eq", "and", "s32")
    assert ins[3].operands[2:] == (Imm(-7), Reg("%p2", negated=True))
    assert ins[4].operands[1] == Imm(0x80000000)
    assert ins[5].guard == ("%p1", True) and ins[5].operands[2] == Imm(15)


def test_shared_declarations():
    m = module("shared.ptx")
    assert m.module_shared == (SharedDecl("dyn", 0, 16, 20, True),)
    two = find_kernel(m, "twoarrays")
    assert [(d.name, d.size_bytes, d.align, d.extern) for d in two.shared] == [
        ("_ZZ9twoarraysE1x", 16, 4, False), ("_ZZ9twoarraysE1y", 32, 4, False)]
    mov = instr(two, "mov.u32 %r4, _ZZ9twoarraysE1x")
    assert mov.operands[1] == Sym("_ZZ9twoarraysE1x")


def test_nvrtc_and_nvcc_give_the_same_kernels():
    nvcc, nvrtc = module("basics.ptx"), module("basics.nvrtc.ptx")
    assert nvrtc.version == "9.5" and nvcc.version == "9.0"
    assert [k.name for k in nvcc.kernels] == [k.name for k in nvrtc.kernels]
    for a, b in zip(nvcc.kernels, nvrtc.kernels, strict=True):
        if a.name != "restrict_nc":  # nvcc 13.0 emits __ldg as inline asm, NVRTC 13.5 does not
            assert [i.text for i in a.instructions] == [i.text for i in b.instructions]
    nc = [i.text for i in find_kernel(nvrtc, "restrict_nc").instructions if "nc" in i.mods]
    assert nc == ["ld.global.nc.u32 %r2, [%rd6]", "ld.global.nc.u32 %r3, [%rd4]"]


def test_clang_dialect():
    m = module("clang.ptx")
    assert m.version == "6.4" and [k.name for k in m.kernels] == [
        "vadd", "reduce16", "warpsum", "collatz"]
    warpsum = find_kernel(m, "warpsum")
    shfl = next(i for i in warpsum.instructions if i.opcode == "shfl")
    assert shfl.operands[0] == Reg("%r5") and shfl.operands[2:] == (Imm(2), Imm(7199), Imm(-1))
    assert any(isinstance(x, Label) and x.name == "LBB2_2" for x in warpsum.body)
    reduce = find_kernel(m, "reduce16")
    assert instr(reduce, "mov.u64 %rd9, _ZZ8reduce16E1s").operands[1] == Sym("_ZZ8reduce16E1s")


def test_every_fixture_kernel_parses():
    names = {f: [k.name for k in module(f).kernels]
             for f in ("arith.ptx", "atomics.ptx", "shuffles.ptx", "shared.ptx")}
    assert "boolshift" in names["arith.ptx"] and "warpsum" in names["shuffles.ptx"]
    misc = find_kernel(module("arith.ptx"), "misc")
    ops = {i.opcode + "." + ".".join(i.mods) for i in misc.instructions}
    assert {"sad.s32", "prmt.b32", "shf.r.clamp.b32", "cvt.s32.s8", "cvt.s32.s16"} <= ops
    boolshift = find_kernel(module("arith.ptx"), "boolshift")
    assert {"selp.u16", "mul.wide.u16"} <= {f"{i.opcode}.{'.'.join(i.mods)}"
                                            for i in boolshift.instructions}
    assert boolshift.reg_types["%rs1"] == "b16"


def test_debug_directives_are_skipped():
    # nvcc -lineinfo style .loc/.file and clang -g style .section blocks
    body = """
    .reg .b32 %r<3>;
    .loc 1 3 5
    mov.u32 %r1, 1;
Ltmp0:
    .loc 2 66 3
    .pragma "nounroll";
    add.s32 %r2, %r1, %r1;
    ret;
Lfunc_end0:
    """
    text = entry(body) + '\t.section\t.debug_loc\t{\t}\n\t.file\t1 "/tmp/k.cu"\n'
    k = parse_module(text).kernels[0]
    assert [i.opcode for i in k.instructions] == ["mov", "add", "ret"]


def test_kernel_performance_directives_and_param_attributes():
    params = ".param .u64 .ptr .global .align 4 k_param_0, .param .s8 k_param_1"
    text = entry(".reg .b32 %r1_<3>;\n.extern .shared .align 8 .b8 dyn[];\nmov.u32 %r1_2, dyn;",
                 params).replace(")\n{", ")\n.maxntid 16, 1, 1\n.minnctapersm 2\n{")
    k = parse_module(text).kernels[0]
    assert [(p.name, p.type) for p in k.params] == [("k_param_0", "u64"), ("k_param_1", "s8")]
    assert k.shared == (SharedDecl("dyn", 0, 8, 10, True),)
    assert k.instructions[0].operands == (Reg("%r1_2"), Sym("dyn"))


def test_nested_scope_registers_are_renamed():
    body = """
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    setp.eq.s32 %p1, %r1, 0;
    {
    .reg .pred %p1;
    .reg .b64 %tmp;
    setp.ne.s32 %p1, %r1, 5;
    selp.u32 %r2, 1, 0, %p1;
    }
    @%p1 bra $L_end;
$L_end:
    ret;
    """
    k = parse_module(entry(body)).kernels[0]
    inner = k.instructions[1]
    assert inner.dests != ("%p1",) and k.reg_types[inner.dests[0]] == "pred"
    assert k.instructions[2].operands[3] == inner.operands[0]
    assert k.instructions[3].guard == ("%p1", False)


@pytest.mark.parametrize(
    ("body", "line", "words"),
    [
        ("    .reg .b32 %r<2>;\n    mov.u32 %r1, 1\n    ret;", 9, "expected `,`"),
        ("    .reg .b32 %r<2>;\n    mov.u32 %r5, 1;", 8, "`%r5` is not declared"),
        ("    .reg .b32 %r<2>;\n    bra.uni $L_nowhere;", 8, "unknown label"),
        ("$L1:\n$L1:\n    ret;", 8, "already defined on line 7"),
        ("    .reg .b32 %r<2>;\n    mov.u32 %r1, 1 # 2;", 8, "unexpected character"),
        ("    .reg .b32 %r<2>;\n    add.s32 %r1, %r1;", 8, "expected 3 operands"),
        ("    ld.global.u32 %r1, [x];", 7, "not declared"),
    ],
)
def test_malformed_ptx_names_the_line(body, line, words):
    with pytest.raises(UnsupportedError) as err:
        parse_kernel(entry(body))
    assert err.value.kind == "unsupported"
    assert err.value.message.startswith(f"line {line}:") and words in err.value.message


def test_unterminated_kernel():
    with pytest.raises(UnsupportedError, match="end of file"):
        parse_module(entry("ret;")[:-3])


def test_fixture_text_is_real_compiler_output():
    assert "Cuda compilation tools, release 13.0" in sample("basics.ptx")
    assert "release 13.5, V13.5.37" in sample("basics.nvrtc.ptx")
    assert "LLVM NVPTX Back-End" in sample("clang.ptx")
