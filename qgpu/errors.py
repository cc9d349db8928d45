"""One error hierarchy for the whole toolchain.

Every failure a user can cause maps to one ``kind`` that the CLI reports verbatim in its JSON
(``{"error": {"kind": ..., "message": ...}}``): the kind says whose move it is (fix the source,
use a supported feature, shrink the kernel, fix the launch, fix the command line).
docs/ERRORS.md lists the kinds and the host's input limits.
"""

from __future__ import annotations


class QgpuError(Exception):
    """Base class: ``kind`` is one of compile, unsupported, resource, launch, usage (and
    internal: an unexpected failure inside qgpu, which the CLI reports the same way)."""

    kind = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CompileError(QgpuError):
    """The CUDA compiler rejected the source (message carries the compiler's log with lines)."""

    kind = "compile"


class UnsupportedError(QgpuError):
    """Valid PTX/CUDA that the machine does not support; names the instruction and line."""

    kind = "unsupported"


class ResourceError(QgpuError):
    """The kernel or launch does not fit the machine (ROM, registers, memory, threads)."""

    kind = "resource"


class LaunchError(QgpuError):
    """A fault while running: out-of-bounds access, step limit, divergent barrier, ...

    ``fault`` names the faults the model itself reports (``tokens.FAULTS``; None for the rest:
    the step limit, reads of undefined state); ``block`` is (thread block, ROM block, warp,
    active mask) of the block it happened in and ``trace`` the blocks that completed before it
    (both set by the reference interpreter)."""

    kind = "launch"

    def __init__(self, message: str, fault: str | None = None) -> None:
        super().__init__(message)
        self.fault = fault
        self.block: tuple[int, int, int, int] | None = None
        self.trace: list = []


class UsageError(QgpuError):
    """Bad command line or API arguments."""

    kind = "usage"


class ArgumentTypeError(UsageError, TypeError):
    """An API argument of the wrong type (``except TypeError`` catches it too); the message
    names the parameter."""
