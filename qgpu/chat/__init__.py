"""Chat whose numbers come from the GPU inside the model (docs/CHAT.md).

One concept per module: ``expression`` (the calculator's language), ``plan`` (an operation ->
a launch of a kernel from kernels/), ``calc`` (evaluation on a backend, ``Launcher``),
``toolcalls`` (Qwen3.5's tool calls in assistant text), ``tools`` (gpu_calc and cuda_launch,
the host running a call), ``prompts`` (the modes' system prompts), ``generate`` (streamed text
from the merged checkpoint's text path; a scripted stand-in), ``grammar`` (constrained decoding
of gpu_calc's expression), ``session`` (the tool loop: one chat turn as events), ``evaluate``
(question sets and chat-eval), ``commands`` (``python -m qgpu calc`` and ``chat-eval``),
``errors``.

The API a page needs (qgpu/app): ``Chat.load(build)``, then ``Chat.turn(history, text,
ChatOptions(mode=...))`` yields ``TextEvent``, ``CallEvent``, ``ProgressEvent``,
``LaunchEvent``, ``ResultEvent`` and finally a ``DoneEvent`` whose ``messages`` extend the
history.
"""

from qgpu.chat.calc import CalcResult, Launcher, LaunchRecord, calc
from qgpu.chat.session import (
    CallEvent,
    Chat,
    ChatOptions,
    DoneEvent,
    LaunchEvent,
    ProgressEvent,
    ResultEvent,
    TextEvent,
)
from qgpu.chat.tools import ToolResult

__all__ = [
    "CalcResult", "CallEvent", "Chat", "ChatOptions", "DoneEvent", "LaunchEvent", "LaunchRecord",
    "Launcher", "ProgressEvent", "ResultEvent", "TextEvent", "ToolResult", "calc",
]
