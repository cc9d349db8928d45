"""The calculator's and the chat's errors, as kinds the CLI and the tool responses name.

Each is a ``QgpuError`` (qgpu/errors.py), so ``python -m qgpu calc --json`` reports it as
``{"error": {"kind", "message"}}`` like every other command; a tool call that fails goes back
to the model as a ``<tool_response>`` with the same kind and message, so it can repair the call.
The machine's own kinds pass through unchanged: ``resource`` (too large for the machine:
the message names the limit), ``launch`` (a fault), ``compile``, ``unsupported``, ``usage``.
"""

from __future__ import annotations

from qgpu.errors import QgpuError


class ParseError(QgpuError):
    """The expression is not in the calculator's language; the message points at the place."""

    kind = "parse"


class ShapeError(QgpuError):
    """The operands' shapes do not fit the operation (lengths differ, a matrix where a vector
    is needed, ...); found before any launch."""

    kind = "shape"


class ArithmeticFault(QgpuError):
    """A launch reported, in its flag words, a result that leaves int32 (``overflow``) or a
    division by zero (``division_by_zero``): detected on the machine, never wrapped."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class ToolCallError(QgpuError):
    """A tool call that cannot be run: unparsable, an unknown function, missing or malformed
    parameters."""

    kind = "tool_call"
