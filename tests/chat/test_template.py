"""The chat template renders Qwen3.5's official format exactly (../shared/notes/qwen35.md): the
expected strings below are written out by hand from the published format, not produced by
the template. Covers the tools system turn (with the user's own system text after the
instructions), XML tool calls (string values raw, others as JSON), tool responses merged into
one user turn, reasoning kept only after the last real user message, and the generation prompt
with thinking off and on."""

import json

import pytest
from jinja2.exceptions import TemplateError

from qgpu.chat.generate import render_template
from qgpu.chat.tools import CUDA_LAUNCH, GPU_CALC, TOOLS
from qgpu.model.tinybase import CHAT_TEMPLATE

TEMPLATE = CHAT_TEMPLATE.read_text()

INSTRUCTIONS = (
    "If you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
    "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
    "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
    "Reminder:\n- Function calls MUST follow the specified format: an inner "
    "<function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your "
    "function call in natural language BEFORE the function call, but NOT after\n- If there is "
    "no function call available, answer the question like normal with your current knowledge "
    "and do not tell the user about function calls\n</IMPORTANT>"
)


def render(messages, tools=None, thinking=False):
    return render_template(TEMPLATE, messages, tools, thinking)


def tool_json(tool: dict) -> str:
    """How the template's tojson writes a tool: json.dumps with its default separators."""
    return json.dumps(tool, ensure_ascii=False)


def test_tools_turn_calls_and_responses_in_the_official_format() -> None:
    messages = [
        {"role": "system", "content": "  Answer with the GPU's numbers.\n"},
        {"role": "user", "content": "Dot product of [1,2,3] and [4,5,6]? Then add 1."},
        {"role": "assistant", "content": "I'll compute it.", "reasoning_content": "Use gpu.",
         "tool_calls": [
             {"type": "function", "function": {"name": "gpu_calc", "arguments": {
                 "expression": "[1, 2, 3] @ [4, 5, 6]"}}},
             {"type": "function", "function": {"name": "cuda_launch", "arguments": {
                 "kernel": "k", "grid": [1], "args": [[1, 2], {"zeros": 1}, 2], "n": 3}}},
         ]},
        {"role": "tool", "content": '{"value": 32}'},
        {"role": "tool", "content": "  second  "},
    ]
    text = render(messages, [GPU_CALC, CUDA_LAUNCH])
    assert text == (
        "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
        + tool_json(GPU_CALC) + "\n" + tool_json(CUDA_LAUNCH) + "\n</tools>\n\n"
        + INSTRUCTIONS + "\n\nAnswer with the GPU's numbers.<|im_end|>\n"
        "<|im_start|>user\nDot product of [1,2,3] and [4,5,6]? Then add 1.<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nUse gpu.\n</think>\n\nI'll compute it.\n\n"
        "<tool_call>\n<function=gpu_calc>\n<parameter=expression>\n[1, 2, 3] @ [4, 5, 6]\n"
        "</parameter>\n</function>\n</tool_call>\n"
        "<tool_call>\n<function=cuda_launch>\n<parameter=kernel>\nk\n</parameter>\n"
        "<parameter=grid>\n[1]\n</parameter>\n<parameter=args>\n[[1, 2], {\"zeros\": 1}, 2]\n"
        "</parameter>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n{\"value\": 32}\n</tool_response>\n"
        "<tool_response>\nsecond\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


def test_tools_without_system_text_and_a_call_without_content() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "gpu_calc", "arguments": {"expression": "1 + 1"}}}]},
        {"role": "tool", "content": "2"},
    ]
    text = render(messages, [GPU_CALC], thinking=True)
    assert text == (
        "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
        + tool_json(GPU_CALC) + "\n</tools>\n\n" + INSTRUCTIONS + "<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n<function=gpu_calc>\n"
        "<parameter=expression>\n1 + 1\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n2\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\n"
    )


def test_plain_chat_drops_reasoning_before_the_last_question() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": " Hi "},
        {"role": "assistant", "content": "<think>\ngreet\n</think>\n\nHello."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nadd\n</think>\n\n4"},
    ]
    assert render(messages[:4]) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    assert render(messages).endswith(
        "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nadd\n</think>\n\n"
        "4<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


def test_a_user_turn_of_tool_responses_is_not_the_last_question() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": "r1"},
        {"role": "user", "content": "<tool_response>\nx\n</tool_response>"},
        {"role": "assistant", "content": "b", "reasoning_content": "r2"},
    ]
    text = render(messages)
    assert "<|im_start|>assistant\n<think>\nr1\n</think>\n\na<|im_end|>" in text
    assert "<|im_start|>assistant\n<think>\nr2\n</think>\n\nb<|im_end|>" in text


@pytest.mark.parametrize("messages, message", [
    ([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}], "first"),
    ([{"role": "system", "content": "b"}], "no user query"),
    ([{"role": "user", "content": [{"type": "image"}]}], "only text"),
])
def test_template_rejects_what_qwen35_rejects(messages, message) -> None:
    with pytest.raises(TemplateError, match=message):
        render(messages)


def test_the_modes_declare_their_tools() -> None:
    assert TOOLS == {"normal": [GPU_CALC], "advanced": [CUDA_LAUNCH]}
    assert render([{"role": "user", "content": "x"}], TOOLS["normal"]).count("<tools>") == 1
