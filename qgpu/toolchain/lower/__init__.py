"""PTX -> machine program: selection, CFG clean-up, register allocation, ROM layout."""

from __future__ import annotations

from qgpu.machine.isa import Program
from qgpu.toolchain.lower.layout import layout, remove_dead_code, simplify_cfg
from qgpu.toolchain.lower.regalloc import allocate, insert_spill_code
from qgpu.toolchain.lower.select import select_kernel
from qgpu.toolchain.lower.undefined import zero_undefined
from qgpu.toolchain.ptx.ast import Kernel, Module


def lower_kernel(kernel: Kernel, module: Module, three_d: bool = False) -> Program:
    """Lower one parsed PTX kernel to a machine program (raises Unsupported/ResourceError).
    ``three_d``: the program for launches with a z extent, which run as 2-D machine launches
    (select.HIDDEN_3D)."""
    fn = select_kernel(kernel, module, three_d)
    simplify_cfg(fn)
    remove_dead_code(fn)
    zero_undefined(fn)
    alloc = allocate(fn)
    insert_spill_code(fn, alloc)
    blocks = layout(fn, alloc)
    return Program(
        name=fn.name,
        blocks=blocks,
        num_params=fn.num_params,
        static_shared_bytes=fn.static_shared_bytes,
        dynamic_shared_offset=fn.dynamic_shared_offset,
        local_words=len(alloc.spilled),
        param_is_pointer=fn.param_is_pointer,
    )
