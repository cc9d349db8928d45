"""The two tools the chat offers the model, and the host running a call like a CUDA driver
runs a launch: parse the arguments, compile, launch on the GPU inside the model, read the
result back, answer.

* ``gpu_calc(expression)`` (normal mode): calc.py evaluates the expression, one launch per
  operation. Response: ``{"expression": ..., "value": ...}``.
* ``cuda_launch(source, kernel, grid, block, args)`` (advanced mode): the model's own CUDA,
  compiled (NVRTC, else nvcc or clang), lowered and launched once. Response: ``{"kernel": ...,
  "args": [every argument's final value]}``.

Every failure — an unparsable call, an unknown tool, a missing or malformed parameter, a
compile error, an unsupported construct, a limit, a fault, an overflow — is answered with
``{"error": {"kind": ..., "message": ...}}``, the same kinds as the CLI's, so the model can
repair the call.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from qgpu.chat.calc import Launcher, LaunchRecord, calc
from qgpu.chat.errors import ToolCallError
from qgpu.chat.expression import format_expression, parse
from qgpu.chat.toolcalls import ToolCall
from qgpu.errors import QgpuError

MAX_ERROR_CHARS = 1500  # a compiler log can be long; the model needs its start

GPU_CALC = {
    "type": "function",
    "function": {
        "name": "gpu_calc",
        "description": (
            "Compute an exact integer result on the GPU inside this model. The expression "
            "uses integers (int32), vectors [1, 2, 3] and matrices [[1, 2], [3, 4]]; a @ b is "
            "the dot product, matrix-vector or matrix-matrix product; + - * // % work "
            "elementwise (a scalar on one side applies to every element; // and % floor like "
            "Python); unary -; functions sum, min, max, argmin, argmax, sort, cumsum, abs, "
            "transpose, norm2 (squared length); nest them, e.g. sum([1, 2, 3] * [4, 5, 6])."),
        "parameters": {
            "type": "object",
            "properties": {"expression": {
                "type": "string",
                "description": "the expression, e.g. [1, 2, 3] @ [4, 5, 6]"}},
            "required": ["expression"],
        },
    },
}

CUDA_LAUNCH = {
    "type": "function",
    "function": {
        "name": "cuda_launch",
        "description": (
            "Compile a CUDA kernel and launch it once on the GPU inside this model; returns "
            "the final value of every argument."),
        "parameters": {
            "type": "object",
            "properties": {
                "source": {"type": "string", "description": "CUDA C++ source with an "
                           "extern \"C\" __global__ kernel (int arithmetic only)"},
                "kernel": {"type": "string", "description": "the kernel's name"},
                "grid": {"type": "array", "items": {"type": "integer"},
                         "description": "thread blocks, [x] or [x, y]; x*y <= 16"},
                "block": {"type": "array", "items": {"type": "integer"},
                          "description": "threads per block, [x] or [x, y]; x*y <= 16"},
                "args": {"type": "array", "description": (
                    "one entry per kernel parameter: a list of ints is an input array, "
                    "{\"zeros\": n} an output array of n ints, an int a scalar")},
            },
            "required": ["source", "kernel", "grid", "block", "args"],
        },
    },
}

TOOLS = {"normal": [GPU_CALC], "advanced": [CUDA_LAUNCH]}
"""The tools each chat mode declares (a call to the other mode's tool still runs)."""

_PARAMS = {"gpu_calc": GPU_CALC, "cuda_launch": CUDA_LAUNCH}


@dataclass
class ToolResult:
    """A call the host ran: its title (for the page), the response the model reads, and what
    the GPU did. `value` is gpu_calc's value or cuda_launch's final arguments."""

    name: str
    arguments: dict[str, Any]
    title: str
    response: str
    ok: bool
    value: Any = None
    error: dict[str, str] | None = None
    launches: list[LaunchRecord] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def generated_tokens(self) -> int:
        return sum(x.generated_tokens for x in self.launches)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments, "title": self.title,
                "ok": self.ok, "value": self.value, "error": self.error,
                "response": self.response, "seconds": round(self.seconds, 3),
                "launches": [x.to_json(source=not x.suite) for x in self.launches]}


def _typed(name: str, param: str, raw: Any) -> Any:
    """A parameter's value as the tool's schema types it: strings raw, the rest JSON."""
    spec = _PARAMS[name]["function"]["parameters"]["properties"][param]
    if spec["type"] == "string":
        return raw if isinstance(raw, str) else json.dumps(raw)
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw.strip())
    except json.JSONDecodeError as e:
        raise ToolCallError(f"parameter {param!r} must be JSON ({spec['description']}); "
                            f"{e.msg} in {raw.strip()[:80]!r}") from None


def arguments(call: ToolCall) -> dict[str, Any]:
    """A parsed call's arguments, typed, every required one present (else ToolCallError)."""
    if call.error:
        raise ToolCallError(f"the tool call could not be read: {call.error}")
    if call.name not in _PARAMS:
        raise ToolCallError(f"there is no tool {call.name!r}; the tools are "
                            f"{', '.join(_PARAMS)}")
    params = _PARAMS[call.name]["function"]["parameters"]
    unknown = sorted(set(call.arguments) - set(params["properties"]))
    if unknown:
        raise ToolCallError(f"{call.name} has no parameter {unknown[0]!r}; its parameters are "
                            f"{', '.join(params['properties'])}")
    missing = [p for p in params["required"] if p not in call.arguments]
    if missing:
        raise ToolCallError(f"{call.name} needs the parameter {missing[0]!r}")
    return {p: _typed(call.name, p, v) for p, v in call.arguments.items()}


def title(call: ToolCall) -> str:
    """What a call does, for the page: ``GPU: [1, 2, 3] @ [4, 5, 6]``."""
    if call.name == "gpu_calc" and isinstance(call.arguments.get("expression"), str):
        text = call.arguments["expression"].strip()
        try:
            text = format_expression(parse(text))
        except QgpuError:
            pass
        return f"GPU: {text}"
    if call.name == "cuda_launch":
        kernel = str(call.arguments.get("kernel", "?")).strip()
        grid = str(call.arguments.get("grid", "?")).strip()
        block = str(call.arguments.get("block", "?")).strip()
        return f"GPU: {kernel}<<<{grid}, {block}>>>"
    return f"GPU: {call.name or 'tool call'}"


def _dims(value: Any, what: str) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    ok = isinstance(value, list) and 1 <= len(value) <= 2 and \
        all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if not ok:
        raise ToolCallError(f"{what} must be [x] or [x, y] with integers, not {value!r}")
    return (value[0], value[1] if len(value) == 2 else 1)


class ToolRunner:
    """Runs tool calls on a Launcher's backend; `on_launch(record)` hears about every launch
    as it finishes (the page's pending call box)."""

    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher

    def run(self, call: ToolCall, on_launch=None) -> ToolResult:
        t0 = time.perf_counter()
        launches: list[LaunchRecord] = []

        def heard(record: LaunchRecord) -> None:
            launches.append(record)
            if on_launch is not None:
                on_launch(record)

        name = call.name or ""
        try:
            args = arguments(call)
            if name == "gpu_calc":
                result = calc(args["expression"], self.launcher, on_launch=heard)
                value = result.value
                response = {"expression": args["expression"].strip(), "value": value}
            else:
                value = self._cuda(args, heard)
                response = {"kernel": args["kernel"], "args": value}
            ok, error = True, None
        except QgpuError as e:
            message = e.message if len(e.message) <= MAX_ERROR_CHARS else \
                e.message[:MAX_ERROR_CHARS] + " [...]"
            ok, value, error = False, None, {"kind": e.kind, "message": message}
            response = {"error": error}
        return ToolResult(name, dict(call.arguments), title(call), json.dumps(response), ok,
                          value, error, launches, time.perf_counter() - t0)

    def _cuda(self, args: dict[str, Any], heard) -> list[Any]:
        from qgpu.driver import compile_source

        source, name = args["source"], str(args["kernel"]).strip()
        grid, block = _dims(args["grid"], "grid"), _dims(args["block"], "block")
        if not isinstance(args["args"], list):
            raise ToolCallError("args must be a JSON list with one entry per kernel parameter")
        module = compile_source(source, filename="kernel.cu", untrusted=True)
        kernel = module.kernel(name)
        record = self.launcher.launch(kernel, grid, block, args["args"],
                                      f"{name}<<<{list(grid)}, {list(block)}>>>")
        record.cuda = source
        heard(record)
        return record.result
