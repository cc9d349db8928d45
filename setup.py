"""Package discovery, which pyproject.toml alone cannot combine with a folder mapping: every
``qgpu*`` package, plus the kernel suite from the top-level ``kernels/`` (where the checkout's
CLI and tests read it) installed as ``qgpu/kernels`` (where ``qgpu.driver`` looks first)."""

from setuptools import find_namespace_packages, setup

setup(
    packages=[*find_namespace_packages(include=["qgpu*"], exclude=["*.__pycache__"]),
              "qgpu.kernels"],
    package_dir={"qgpu.kernels": "kernels"},
)
