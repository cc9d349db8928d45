"""How long compiling a small kernel (kernels/dot.cu) takes: warm (the 2nd and later compiles in
one process), the first compile in a fresh process (NVRTC's start included) and
``python -m qgpu ptx`` end to end.

    python bench/compile_speed.py [--root CHECKOUT] [--repeat N]

``--root`` measures another checkout of qgpu (its package, this interpreter), so two versions
can be compared on the same machine and load; run them alternately and compare the minimums
(a shared machine's load inflates the medians).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

FIRST = """
import time
from qgpu.toolchain.cuda import compile_cuda
source = open("kernels/dot.cu").read()
t0 = time.perf_counter()
compile_cuda(source, filename="dot.cu")
print(time.perf_counter() - t0)
"""
WARM = """
import time
from qgpu.toolchain.cuda import compile_cuda
source = open("kernels/dot.cu").read()
compile_cuda(source, filename="dot.cu")
for _ in range({n}):
    t0 = time.perf_counter()
    compile_cuda(source, filename="dot.cu")
    print(time.perf_counter() - t0)
"""


def python(root: Path, code: str) -> list[float]:
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                          check=True, env={"PYTHONPATH": str(root), "PATH": ""})
    return [float(line) for line in done.stdout.split()]


def cli(root: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "qgpu", "ptx", "kernels/dot.cu"], cwd=root,
                   capture_output=True, check=True, env={"PYTHONPATH": str(root), "PATH": ""})
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--repeat", type=int, default=15)
    ns = parser.parse_args()
    warm = python(ns.root, WARM.format(n=2 * ns.repeat))
    first = [python(ns.root, FIRST)[0] for _ in range(ns.repeat)]
    end_to_end = [cli(ns.root) for _ in range(ns.repeat)]
    for name, xs in (("warm compile", warm), ("first compile in a process", first),
                     ("python -m qgpu ptx", end_to_end)):
        print(f"{name:28} min {1000 * min(xs):6.1f} ms  "
              f"median {1000 * statistics.median(xs):6.1f} ms")


if __name__ == "__main__":
    main()
