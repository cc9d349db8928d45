"""Module variables: file-scope const/constexpr, __constant__ tables and __device__ counters
live in global memory; the host sets and reads them (symbols=)."""

from __future__ import annotations

import pytest

from qgpu.errors import ResourceError, UsageError

from ..both import error_both, module, needs_compiler, run_both

pytestmark = needs_compiler

TABLES = """
const int N = 6;
constexpr int BINS = 7;
__constant__ int lut[4] = {3, 1, 4, 1};
__constant__ int scale;
__device__ int counter;
__device__ short halves[3] = {-1, 2, 3};
__constant__ unsigned char bytes[5] = {1, 2, 3, 4, 250};
extern "C" __global__ void k(const int *in, int *out) {
    int i = threadIdx.x;
    if (i < N) out[i] = in[i] % BINS + lut[i & 3] * scale + halves[i % 3] + bytes[i % 5];
    atomicAdd(&counter, 1);
}
"""


def expected(data: list[int], lut: list[int], scale: int) -> list[int]:
    halves, raw = [-1, 2, 3], [1, 2, 3, 4, 250]
    return [data[i] % 7 + lut[i & 3] * scale + halves[i % 3] + raw[i % 5] if i < 6 else 0
            for i in range(len(data))]


def test_initialised_variables_and_a_counter_across_blocks():
    data = [5, 9, 13, 2, 0, 21, 8, 1]
    r = run_both(TABLES, None, [data, {"zeros": 8}], grid=(2,), block=(8,),
                 symbols={"scale": 2})
    assert r.args[1] == expected(data, [3, 1, 4, 1], 2)
    assert r.symbols["counter"] == 16 and r.symbols["lut"] == [3, 1, 4, 1]
    assert r.symbols["halves"] == [-1, 2, 3] and r.symbols["bytes"] == [1, 2, 3, 4, 250]


def test_the_host_sets_a_constant_table():
    data = [1, 2, 3, 4, 5, 6, 7, 8]
    r = run_both(TABLES, None, [data, {"zeros": 8}], block=(8,),
                 symbols={"lut": [10, 20, 30, 40], "scale": -3})
    assert r.args[1] == expected(data, [10, 20, 30, 40], -3)


@pytest.mark.parametrize(("symbols", "words"), [
    ({"nope": 1}, "uses no __device__/__constant__ variable 'nope'"),
    ({"lut": [1, 2, 3, 4, 5]}, "holds 4 32-bit elements, 5 were given"),
    ({"bytes": [256]}, "expected a 8-bit integer"),
])
def test_bad_symbols_are_usage_errors(symbols, words):
    with pytest.raises(UsageError, match=words):
        module(TABLES).kernel().launch(grid=(1,), block=(4,), args=[[1], {"zeros": 1}],
                                       symbols=symbols)


def test_variables_and_arrays_share_the_127_words():
    src = """
__device__ int big[100];
extern "C" __global__ void k(int *a) { big[threadIdx.x] = a[threadIdx.x]; }
"""
    run_both(src, None, [[1] * 20], block=(4,))
    for err in error_both(src, None, [[1] * 30], block=(4,)):
        assert isinstance(err, ResourceError) and "127 words" in err.message


def test_unused_variables_take_no_memory():
    src = """
__device__ int unused[120];
extern "C" __global__ void k(int *a) { a[threadIdx.x] += 1; }
"""
    assert run_both(src, None, [[1] * 100], block=(4,)).args[0][:5] == [2, 2, 2, 2, 1]


def test_a_variable_holding_an_address_rejects_only_its_kernel():
    src = """
__device__ int target;
__device__ int *where = &target;
extern "C" __global__ void uses(int *a) { *where = a[0]; }
extern "C" __global__ void plain(int *a) { a[threadIdx.x] *= 2; }
"""
    assert run_both(src, "plain", [[1, 2, 3, 4]]).args == [[2, 4, 6, 8]]
    for err in error_both(src, "uses", [[1]]):
        assert err.kind == "unsupported" and "64-bit memory access" in err.message
