"""The CUDA tab's examples picker: suite kernels with a launch and arguments each (readable
inputs, small enough that a launch takes seconds on a CPU), plus a fault and a runaway loop.

A suite example takes its launch shape from the suite's manifest (``qgpu.suite.manifest``)
unless it states a smaller one; its arguments are written out (the suite's random inputs,
``make_args(k, seed)``, are exact but not readable). tests/app/test_examples.py runs every
example on the reference interpreter and compares the suite's intent model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from qgpu.suite.manifest import by_name, source_path


def dims(shape: tuple[int, int]) -> str:
    """A launch shape as the page and the CLI write it: "4" or "2,2"."""
    return str(shape[0]) if shape[1] == 1 else f"{shape[0]},{shape[1]}"


FAULT_SOURCE = """\
// Off-by-one: thread i reads a[i + 1], so the last thread reads one word past the end of a.
// The model stops the launch with a fault (the word after an array is never allocated).
extern "C" __global__ void shift_left(const int* a, int* b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        b[i] = a[i + 1];
    }
}
"""

RUNAWAY_SOURCE = """\
// A loop that never ends: nothing ever sets flag[0]. The launch is stopped by the token limit
// (or by the Stop button).
extern "C" __global__ void spin(const unsigned int* flag, unsigned int* count)
{
    #pragma unroll 1
    while (flag[0] == 0) {
        count[threadIdx.x] += 1;
    }
}
"""


@dataclass(frozen=True)
class Example:
    """One entry of the picker: a kernel with everything its launch needs."""

    label: str
    kernel: str
    args: list[Any]
    grid: tuple[int, int] | None = None  # None: the suite's launch shape
    block: tuple[int, int] | None = None
    dynamic_shared: int | None = None
    source_text: str | None = None  # None: the suite kernel's CUDA file
    suite: bool = True
    expect: str = "result"  # "result", "fault" or "runaway"

    @cached_property
    def _suite(self):
        return by_name(self.kernel) if self.suite else None

    @property
    def source(self) -> str:
        if self.source_text is not None:
            return self.source_text
        return source_path(self._suite).read_text(encoding="utf-8")

    @property
    def launch_grid(self) -> tuple[int, int]:
        return self.grid or self._suite.grid

    @property
    def launch_block(self) -> tuple[int, int]:
        return self.block or self._suite.block

    @property
    def launch_dynamic_shared(self) -> int:
        if self.dynamic_shared is not None:
            return self.dynamic_shared
        return self._suite.dynamic_shared if self._suite else 0

    @property
    def args_json(self) -> str:
        return json.dumps(self.args)

    def fields(self) -> dict[str, Any]:
        """The page's fields for this example."""
        return {"source": self.source, "kernel": self.kernel, "grid": dims(self.launch_grid),
                "block": dims(self.launch_block), "args": self.args_json,
                "dynamic_shared": self.launch_dynamic_shared}


EXAMPLES: tuple[Example, ...] = (
    Example("Dot product [1,2,3]·[4,5,6] (atomicAdd)", "dot",
            [[1, 2, 3], [4, 5, 6], {"zeros": 1}, 3]),
    Example("Vector add over a grid of 2 thread blocks", "vec_add",
            [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [10, 20, 30, 40, 50, 60, 70, 80, 90, 100],
             {"zeros": 10}, 10], block=(8, 1)),
    Example("Grid-stride copy: 3 blocks, lanes that diverge", "copy",
            [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14], {"zeros": 10}, 10]),
    Example("Matrix multiply: a 2-D grid of 2-D blocks", "matmul",
            [[1, 2, 3, 4, 5, 6], [1, 0, 2, 1, 0, 1, 1, 2, 3, 1, 0, 1], {"zeros": 8}, 2, 3, 4],
            grid=(2, 1), block=(2, 2)),
    Example("Histogram: shared and global atomicAdd", "histogram",
            [[0, 1, 1, 3, 2, 1, 0, 3, 3, 3], {"zeros": 4}, 10, 4], grid=(1, 1), block=(8, 1)),
    Example("Sum: a shared-memory tree with __syncthreads()", "reduce_sum",
            [list(range(1, 17)), {"zeros": 1}, 16]),
    Example("Scan: warp shuffles, then shared memory", "scan_warp",
            [[3, 1, 4, 1, 5, 9, 2, 6], {"zeros": 8}, 8], block=(8, 1)),
    Example("Sort: odd-even transposition in shared memory", "odd_even_sort",
            [[5, 2, 7, 1, 8, 3], 6], block=(4, 1)),
    Example("Warp shuffle: __shfl_down_sync sums per warp", "warp_sum_down",
            [[1, 2, 3, 4, 10, 20, 30, 40], {"zeros": 2}, 8], grid=(1, 1), block=(8, 1)),
    Example("Divergent if/else inside a warp", "divergent_if_else",
            [[3, 8, 5, 6, 7, 10, 1, 4], {"zeros": 8}, 8], grid=(1, 1), block=(8, 1)),
    Example("Euclid's gcd: a data-dependent loop with %", "gcd",
            [[12, 35, 81, 17], [18, 14, 27, 5], {"zeros": 4}, 4], grid=(1, 1), block=(4, 1)),
    Example("Lock-free atomicCAS loops (sum and max)", "atomic_cas",
            [[4, 9, 2, 7], {"zeros": 2}, 4], block=(4, 1)),
    Example("Reverse through dynamic shared memory", "reverse_dyn",
            [[1, 2, 3, 4, 5, 6, 7, 8], 8], block=(8, 1), dynamic_shared=32),
    Example("Fault: one word past the end of an array", "shift_left",
            [[1, 2, 3, 4], {"zeros": 4}, 4], grid=(1, 1), block=(4, 1),
            source_text=FAULT_SOURCE, suite=False, expect="fault"),
    Example("Runaway: a loop that never ends (token limit)", "spin",
            [[0], {"zeros": 2}], grid=(1, 1), block=(2, 1), source_text=RUNAWAY_SOURCE,
            suite=False, expect="runaway"),
)

DEFAULT = EXAMPLES[0]


def by_label(label: str) -> Example:
    """The example the picker shows as `label` (KeyError names it)."""
    for e in EXAMPLES:
        if e.label == label:
            return e
    raise KeyError(f"no example called {label!r}")
