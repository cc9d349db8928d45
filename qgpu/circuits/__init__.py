"""Circuits expressed in the compiler's graph, and the registry the build picks one from.

Each entry takes the base's text config and returns the circuit's ``CircuitWeights`` for its
layer shapes; the imports are lazy so that naming a circuit does not compile the others' code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qgpu.compiler.weights import CircuitWeights


def gpu_circuit(base_config: dict) -> CircuitWeights:
    """The SIMT machine (qgpu/circuits/gpu/, docs/ISA.md), compiled for the base's layer shapes."""
    from qgpu.circuits.gpu.compiled import compile_gpu

    return compile_gpu(base_config)


def demo_circuit(base_config: dict) -> CircuitWeights:
    """The 4-register demo machine (qgpu/circuits/demo.py)."""
    from qgpu.circuits.demo import compile_demo

    return compile_demo(base_config).weights()


def null_circuit(base_config: dict) -> CircuitWeights:
    """Random weights on circuit dims only (qgpu/circuits/null.py): the merge's isolation tests."""
    from qgpu.circuits.null import null_circuit as compile_null

    return compile_null(base_config)


CIRCUITS: dict[str, Callable[[dict], CircuitWeights]] = {"gpu": gpu_circuit, "null": null_circuit,
                                                        "demo": demo_circuit}
"""Circuit name -> compiler entry point, called with the base's text config."""
