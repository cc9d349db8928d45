"""Instruction selection: PTX kernel -> IR over virtual registers (docs/ISA.md, "Lowering").

Address model: pointers are small byte addresses, so 64-bit *ring* operations (add, sub, mul.lo,
shl, and/or/xor, truncation) are computed exactly on their low 32 bits. Every 64-bit register gets
a static *kind* (zero-extended, sign-extended, a wide product, or unknown) from all of its
definitions; non-ring 64-bit operations (shr, ordered compares, div) are lowered only when the
kinds make the 32-bit form exact, and rejected otherwise. 16-bit registers hold their value
zero-extended. Division and remainder become shift-subtract loops over the quotient's bits.

The selector is one class built from a module per instruction family: ``core`` (state, kinds,
helpers, the walk and dispatch), ``integer``, ``wide`` (64-bit pairs), ``memory``, ``divide``,
``control`` and ``floats`` (float32).
"""

from __future__ import annotations

from qgpu.toolchain.lower.ir import IRFunction
from qgpu.toolchain.lower.select.control import Control
from qgpu.toolchain.lower.select.core import HIDDEN_3D, Core, Kind, type_bits
from qgpu.toolchain.lower.select.divide import Divide
from qgpu.toolchain.lower.select.float_approx import FloatApprox
from qgpu.toolchain.lower.select.float_divide import FloatDivide
from qgpu.toolchain.lower.select.floats import Floats
from qgpu.toolchain.lower.select.integer import Integer
from qgpu.toolchain.lower.select.memory import Memory
from qgpu.toolchain.lower.select.wide import Wide
from qgpu.toolchain.ptx.ast import Kernel, Module

__all__ = ["HIDDEN_3D", "Kind", "Selector", "select_kernel", "type_bits"]


class Selector(Core, Integer, Wide, Memory, Divide, Control, Floats, FloatApprox,
               FloatDivide):
    """Walks a kernel's body once and builds its IR."""


def select_kernel(kernel: Kernel, module: Module, three_d: bool = False) -> IRFunction:
    """PTX kernel -> IR function (instruction selection); ``three_d``: for launches with a
    z extent (HIDDEN_3D parameters follow the kernel's own)."""
    return Selector(kernel, module, three_d).run()
