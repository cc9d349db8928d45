"""Hugging Face Spaces: the GPU decorator of ZeroGPU where the ``spaces`` package is importable
(a Space), a no-op everywhere else; and whether the app runs on a Space (docs/SPACE.md)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


def on_gpu(duration: int = 120) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``spaces.GPU(duration=duration)`` when ``import spaces`` works, else the function as it
    is. Only the function that runs the model is decorated (ZeroGPU lends a GPU for its call)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        try:
            import spaces  # type: ignore[import-not-found]
        except ImportError:
            return fn
        return spaces.GPU(duration=duration)(fn)

    return wrap


def on_space() -> bool:
    """Whether this process runs on a Hugging Face Space (it sets SPACE_ID)."""
    return bool(os.environ.get("SPACE_ID"))
