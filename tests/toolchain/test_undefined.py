"""Values CUDA leaves undefined: the lowering's marked 0 for registers read before any write on
some path, and both interpreters letting such a value flow until it would reach memory."""

from __future__ import annotations

from qgpu.machine.isa import Cmp, Op, TermKind
from qgpu.toolchain.lower.ir import ZERO, IRBlock, IRFunction, VInstr, VTerm
from qgpu.toolchain.lower.undefined import zero_undefined

from .both import error_both, module, needs_compiler, run_both

# The fuzzer's program (seed 13, program 700), minimised: NVRTC unrolls the inner loop by 4
# with a remainder loop; a register written only in the unrolled body reaches a `selp` that
# takes it only when the trip count is a multiple of 4.
UNROLLED = """
extern "C" __global__ void unrolled(const unsigned char* in, unsigned* out) {
  unsigned t = threadIdx.x;
  unsigned trips = blockIdx.x == 0 ? 5u : (t | 1u);
  #pragma unroll 1
  for (unsigned i = 0; i < 2; ++i) {
    for (unsigned j = 0; j < min(trips, 8u); ++j) {
      out[2 * (t + 4 * blockIdx.x) + 1] = (unsigned)((int)gridDim.x >> j) + j;
      out[2 * (t + 4 * blockIdx.x)] = i;
    }
    if (in[0]) break;
  }
}
"""

# a real bug: `where` is never written when no element is nonzero
UNINITIALISED = """
extern "C" __global__ void last_nonzero(const int* in, int* out, int n) {
  int where;
  for (int i = 0; i < n; ++i)
    if (in[i]) where = i;
  out[threadIdx.x] = where;
}
"""


@needs_compiler
def test_a_value_that_cannot_matter_is_no_error_on_either_interpreter():
    program = module(UNROLLED).kernel("unrolled").program
    inits = [ins for blk in program.blocks for ins in blk.instrs if ins.undefined]
    assert len(inits) == 1 and inits[0].op == Op.ADD and inits[0].imm == 0
    out = run_both(UNROLLED, None, [[0], {"zeros": 16}], grid=(2,), block=(4,)).args[1]
    last = [(2 >> j) + j for j in (4, 0, 0, 2, 2)]  # the last j: 5 trips, then 1, 1, 3, 3
    assert out == [1, last[0]] * 4 + [x for j in last[1:] for x in (1, j)]


@needs_compiler
def test_a_value_that_reaches_memory_is_an_error_on_both_naming_the_store():
    for err in error_both(UNINITIALISED, None, [[0, 0], {"zeros": 1}, 2], block=(1,)):
        assert err.kind == "launch" and "before any write in this thread block" in err.message
        assert "st.global.u32" in err.message, err.message
    assert run_both(UNINITIALISED, None, [[0, 5], {"zeros": 1}, 2], block=(1,)).args[1] == [1]


def test_registers_read_before_any_write_on_some_path_get_a_marked_zero():
    # B0: v1 = 1; p0 = v1 == 0; bra p0 ? B1 : B2.  B1: v2 = 5 and p1 = v2 == 5 (only here);
    # v3 = 7 guarded.  B2: v4 = v2 + v3 + v1; v4 = p1 ? v4 : 0
    fn = IRFunction("k", [
        IRBlock("entry", [VInstr(Op.ADD, 1, ZERO, imm=1, bi=True),
                          VInstr(Op.SETP, 0, 1, imm=0, bi=True, mod=Cmp.EQ)],
                VTerm(TermKind.BRA, 1, 2, pred=0)),
        IRBlock("then", [VInstr(Op.ADD, 2, ZERO, imm=5, bi=True),
                         VInstr(Op.SETP, 1, 2, imm=5, bi=True, mod=Cmp.EQ),
                         VInstr(Op.ADD, 3, ZERO, imm=7, bi=True, guard=(0, False))],
                VTerm(TermKind.JMP, 2)),
        IRBlock("join", [VInstr(Op.ADD, 4, 2, 3), VInstr(Op.ADD, 4, 4, 1),
                         VInstr(Op.SEL, 4, 4, imm=0, bi=True, c=1)],
                VTerm(TermKind.EXIT)),
    ], num_params=0, static_shared_bytes=0, dynamic_shared_offset=0, param_is_pointer=(),
        num_vregs=5, num_vpreds=2)
    assert zero_undefined(fn) == ([2, 3], [1])  # v1 and p0 are written first on every path
    entry = fn.blocks[0].instrs
    assert [(i.op, i.d, i.imm, i.undefined) for i in entry[:3]] == [
        (Op.ADD, 2, 0, True), (Op.ADD, 3, 0, True), (Op.SETP, 1, 0, True)]
    assert zero_undefined(fn) == ([], [])  # now every register is written first
