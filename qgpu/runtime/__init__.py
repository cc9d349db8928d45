"""The driver of the GPU inside the model: load a merged checkpoint (checkpoint.py), run launches
on it — the model writes every generated token — (launch.py), and check them against the
reference machine and the circuit's reference semantics (check.py)."""

from qgpu.runtime.check import Divergence
from qgpu.runtime.checkpoint import GpuModel, MachineState
from qgpu.runtime.launch import (
    DEFAULT_TOKEN_LIMIT,
    ModelRun,
    run_batch,
    run_checked,
    run_checked_batch,
    run_launch,
)

__all__ = ["DEFAULT_TOKEN_LIMIT", "Divergence", "GpuModel", "MachineState", "ModelRun",
           "run_batch", "run_checked", "run_checked_batch", "run_launch"]
