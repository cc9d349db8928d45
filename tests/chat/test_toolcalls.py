"""Tool calls in assistant text: well-formed, several, malformed, unfinished, inside thinking,
the JSON and bare forms; the streaming stop rule; a call's typed arguments and its title."""

import pytest

from qgpu.chat.errors import ToolCallError
from qgpu.chat.toolcalls import parse_tool_calls, split_reasoning, stop_after_calls
from qgpu.chat.tools import arguments, title


def call(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def test_one_call_with_text_before_it() -> None:
    text = "Let me compute that.\n\n" + call("gpu_calc", expression="[1, 2, 3] @ [4, 5, 6]")
    (c,) = parse_tool_calls(text)
    assert (c.name, c.arguments, c.ok, c.in_thinking) == \
        ("gpu_calc", {"expression": "[1, 2, 3] @ [4, 5, 6]"}, True, False)
    assert text[c.start:c.end].startswith("<tool_call>") and c.end == len(text)
    assert c.message() == {"type": "function", "function": {
        "name": "gpu_calc", "arguments": {"expression": "[1, 2, 3] @ [4, 5, 6]"}}}


def test_several_calls_and_multiline_values() -> None:
    source = 'extern "C" __global__ void k(int* a)\n{\n    a[0] = 1;\n}'
    text = call("gpu_calc", expression="1 + 1") + "\n" + call(
        "cuda_launch", source=source, kernel="k", grid="[1]", block="[1]", args='[{"zeros": 1}]')
    first, second = parse_tool_calls(text)
    assert first.arguments == {"expression": "1 + 1"}
    assert second.arguments["source"] == source and second.arguments["grid"] == "[1]"
    assert first.end < second.start


@pytest.mark.parametrize("text, error", [
    ("<tool_call>\n<parameter=expression>\n1\n</parameter>\n</tool_call>", "no <function=NAME>"),
    ("<tool_call>\n<function=gpu_calc>\n<parameter=expression>\n1+2", "unfinished"),
    ("<tool_call>\n<function=>\n</function>\n</tool_call>", "names no function"),
    ("<tool_call>\n{\"name\": \"gpu_calc\", \"arguments\": \n</tool_call>", "does not parse"),
    ("<tool_call>\n{\"arguments\": {}}\n</tool_call>", "needs {\"name\""),
    ("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=a>\n2\n</parameter>"
     "\n</function>\n</tool_call>", "given twice"),
])
def test_malformed_calls_say_why(text: str, error: str) -> None:
    (c,) = parse_tool_calls(text)
    assert not c.ok and error in c.error


def test_a_call_reopened_before_closing_is_unfinished() -> None:
    text = "<tool_call>\n<function=gpu_calc>\n<parameter=expression>\n1\n" + \
        call("gpu_calc", expression="2")
    first, second = parse_tool_calls(text)
    assert not first.ok and second.ok and second.arguments == {"expression": "2"}


def test_lenient_where_the_intent_is_clear() -> None:
    # no </parameter>: the value ends at </function>; no </tool_call> after </function>
    (c,) = parse_tool_calls("<tool_call>\n<function=gpu_calc>\n<parameter=expression>\n1+2\n"
                            "</function>")
    assert c.ok and c.arguments == {"expression": "1+2"}
    (c,) = parse_tool_calls('<tool_call>\n{"name": "gpu_calc", "arguments": '
                            '{"expression": "1 + 2"}}\n</tool_call>')
    assert c.ok and c.arguments == {"expression": "1 + 2"}
    (c,) = parse_tool_calls('<function=gpu_calc>\n<parameter=expression>\n3\n</parameter>\n'
                            '</function>')
    assert c.ok and c.name == "gpu_calc"


def test_calls_inside_thinking_count() -> None:
    inner = call("gpu_calc", expression="2 * 21")
    (c,) = parse_tool_calls("I should use the GPU. " + inner, thinking_open=True)
    assert c.ok and c.in_thinking
    (c,) = parse_tool_calls("<think>\nhmm " + inner)
    assert c.ok and c.in_thinking
    (c,) = parse_tool_calls("plan\n</think>\n\n" + inner, thinking_open=True)
    assert c.ok and not c.in_thinking
    assert split_reasoning("plan\n</think>\n\nanswer", True) == ("plan", "answer")
    assert split_reasoning("<think>\nplan\n</think>\n\nanswer") == ("plan", "answer")
    assert split_reasoning("answer") == ("", "answer")


def test_no_calls() -> None:
    assert parse_tool_calls("The answer is 32.") == []
    assert parse_tool_calls("") == []


def test_stop_rule_cuts_what_follows_a_call() -> None:
    c = call("gpu_calc", expression="1")
    assert stop_after_calls("thinking") is None
    assert stop_after_calls("x " + c) is None
    assert stop_after_calls("x " + c + "\n\n") is None
    assert stop_after_calls("x " + c + "\n<tool") is None  # maybe another call
    assert stop_after_calls("x " + c + "\n" + c[:30]) is None  # another call, open
    assert stop_after_calls("x " + c + "\nThe result is 7") == len("x " + c)
    assert stop_after_calls("x " + c + "<tool_response>") == len("x " + c)


def test_arguments_are_typed_and_checked() -> None:
    (c,) = parse_tool_calls(call("cuda_launch", source="s", kernel="k", grid="[2, 1]",
                                 block="4", args='[[1, 2], {"zeros": 1}, 2]'))
    assert arguments(c) == {"source": "s", "kernel": "k", "grid": [2, 1], "block": 4,
                            "args": [[1, 2], {"zeros": 1}, 2]}
    for text, message in (
        (call("gpu_calc"), "needs the parameter 'expression'"),
        (call("gpu_calc", expression="1", extra="2"), "no parameter 'extra'"),
        (call("nope", x="1"), "there is no tool 'nope'"),
        (call("cuda_launch", source="s", kernel="k", grid="[1", block="[1]", args="[]"),
         "parameter 'grid' must be JSON"),
        ("<tool_call>\n<parameter=x>\n1\n</parameter>\n</tool_call>", "could not be read"),
    ):
        (c,) = parse_tool_calls(text)
        with pytest.raises(ToolCallError, match=message):
            arguments(c)


def test_titles() -> None:
    (c,) = parse_tool_calls(call("gpu_calc", expression="dot([1,2,3],[4,5,6])"))
    assert title(c) == "GPU: dot([1, 2, 3], [4, 5, 6])"
    (c,) = parse_tool_calls(call("gpu_calc", expression="1 +"))
    assert title(c) == "GPU: 1 +"
    (c,) = parse_tool_calls(call("cuda_launch", kernel="vadd", grid="[1]", block="[4]"))
    assert title(c) == "GPU: vadd<<<[1], [4]>>>"
