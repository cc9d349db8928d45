"""C++ kernel names: namespaces, templates and kernels without extern "C" are found by their
plain names and shown demangled; one unsupported kernel fails only when it is launched."""

from __future__ import annotations

import pytest

from qgpu.errors import UsageError
from qgpu.toolchain.ptx.names import demangle, matches, plain_name

from ..both import error_both, module, needs_compiler, run_both


@pytest.mark.parametrize(("mangled", "shown", "plain"), [
    ("_Z6kernelPi", "kernel(int*)", "kernel"),
    ("_ZN2ns6kernelEPKiPii", "ns::kernel(const int*, int*, int)", "kernel"),
    ("_Z8reduce_tILi8EEvPKiPii", "reduce_t<8>(const int*, int*, int)", "reduce_t"),
    ("_ZN5image6detail5blurTILi3EEEvPKhPhii",
     "image::detail::blurT<3>(const unsigned char*, unsigned char*, int, int)", "blurT"),
    ("_Z3addIiEvPT_S1_S1_i", "add<int>(int*, int*, int*, int)", "add"),
    ("_ZN2ns3lutE", "ns::lut", "lut"),
    ("dot", "dot", "dot"),
])
def test_demangle(mangled, shown, plain):
    assert demangle(mangled) == shown and plain_name(mangled) == plain


def test_matching_names():
    assert matches("_ZN2ns6kernelEPKiPii", "kernel") and matches("_ZN2ns6kernelEPKiPii",
                                                                 "ns::kernel")
    assert matches("_Z8reduce_tILi8EEvPKiPii", "reduce_t<8>")
    assert not matches("_Z8reduce_tILi8EEvPKiPii", "reduce")


SRC = """
namespace ops {
__global__ void scale(int *a, int k) { a[threadIdx.x] *= k; }
}
template <int K> __global__ void addk(int *a) { a[threadIdx.x] += K; }
template __global__ void addk<3>(int *);
template __global__ void addk<5>(int *);
__global__ void warp_wide(int *a) { a[threadIdx.x] = __shfl_down_sync(0xffffffff, a[0], 1); }
"""


@needs_compiler
def test_kernels_found_by_their_cpp_names():
    r = run_both(SRC, "scale", [[1, 2, 3, 4], 3])
    assert r.args[0] == [3, 6, 9, 12] and r.kernel == "ops::scale"
    assert run_both(SRC, "addk<5>", [[1, 2, 3, 4]]).args[0] == [6, 7, 8, 9]
    assert sorted(module(SRC).kernel_names) == ["addk<3>", "addk<5>", "ops::scale", "warp_wide"]
    with pytest.raises(UsageError, match=r"ambiguous: addk<3>\(int\*\), addk<5>\(int\*\)"):
        module(SRC).kernel("addk")


@needs_compiler
def test_one_unsupported_kernel_fails_alone_and_when_launched():
    assert run_both(SRC, "addk<3>", [[0, 0, 0, 0]]).args[0] == [3, 3, 3, 3]
    for err in error_both(SRC, "warp_wide", [[1, 2, 3, 4]]):
        assert err.kind == "unsupported" and "32-lane segments" in err.message
