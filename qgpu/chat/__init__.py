"""Chat whose numbers come from the GPU inside the model (docs/CHAT.md).

Modules, one concept each: ``expression`` (the calculator's language), ``plan`` (an operation
-> a launch of a kernel from kernels/), ``calc`` (evaluation, launches on a backend),
``errors``, ``commands`` (``python -m qgpu calc`` and ``chat-eval``).
"""
