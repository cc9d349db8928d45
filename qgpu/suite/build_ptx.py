"""Regenerate the committed PTX of the kernel suite: ``python -m qgpu.suite.build_ptx [--check]``.

The PTX under ``kernels/ptx/`` lets tests and hosted demos run with no CUDA compiler. It comes
from one pinned toolchain (NVRTC from ``qgpu.toolchain.cuda.NVRTC_WHEEL``) because PTX text
differs between compilers and versions; ``--check`` (and tests/toolchain/test_cuda.py) verify
it is up to date.
"""

from __future__ import annotations

import argparse
import sys

from qgpu.driver import SUITE_DIR
from qgpu.errors import CompileError
from qgpu.toolchain.cuda import NVRTC_WHEEL, compile_cuda

KERNELS = SUITE_DIR
PTX_DIR = KERNELS / "ptx"
PINNED_NVRTC = NVRTC_WHEEL.partition("==")[2]


def expected_ptx() -> dict[str, bytes]:
    """PTX file name -> bytes for every ``kernels/*.cu``, compiled by the pinned NVRTC."""
    out: dict[str, bytes] = {}
    for source in sorted(KERNELS.glob("*.cu")):
        result = compile_cuda(
            source.read_text(encoding="utf-8"),
            filename=f"kernels/{source.name}",
            compiler="nvrtc",
        )
        if result.version != PINNED_NVRTC:
            raise CompileError(
                f"NVRTC {result.version} found; the committed PTX is pinned to {PINNED_NVRTC}: "
                f"pip install {NVRTC_WHEEL}"
            )
        out[f"{source.stem}.ptx"] = result.ptx.encode()
    return out


def differences(expected: dict[str, bytes]) -> list[str]:
    """Names under kernels/ptx/ that are missing, different or have no .cu source any more."""
    present = {path.name for path in PTX_DIR.glob("*.ptx")}
    changed = [
        name
        for name, ptx in expected.items()
        if name not in present or (PTX_DIR / name).read_bytes() != ptx
    ]
    return sorted(changed + [name for name in present if name not in expected])


def write(expected: dict[str, bytes]) -> list[str]:
    """Bring kernels/ptx/ in line with ``expected``; returns the names written or removed."""
    changed = differences(expected)
    PTX_DIR.mkdir(exist_ok=True)
    for name in changed:
        if name in expected:
            (PTX_DIR / name).write_bytes(expected[name])  # bytes: LF endings on every OS
        else:
            (PTX_DIR / name).unlink()
    return changed


def main(argv: list[str] | None = None) -> int:
    """Exit 0 when the PTX is (now) current, 1 when --check finds differences, 2 on errors."""
    parser = argparse.ArgumentParser(prog="python -m qgpu.suite.build_ptx", description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="compare with kernels/ptx/ instead of writing"
    )
    args = parser.parse_args(argv)
    try:
        expected = expected_ptx()
    except CompileError as exc:
        print(exc.message, file=sys.stderr)
        return 2
    if args.check:
        stale = differences(expected)
        for name in stale:
            why = "is out of date" if name in expected else "has no .cu source"
            print(f"kernels/ptx/{name} {why}", file=sys.stderr)
        if stale:
            print("run: python -m qgpu.suite.build_ptx", file=sys.stderr)
        return 1 if stale else 0
    changed = write(expected)
    print(f"{len(expected)} kernels; updated {len(changed)} PTX files {' '.join(changed)}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
