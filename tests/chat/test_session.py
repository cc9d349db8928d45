"""The host's tool loop with scripted assistant turns (the text is given, the launches are real,
on the reference machine here; tests/chat/test_chat_model.py runs them on the model): calls,
responses, repairs, several calls, calls inside thinking, the round limit, advanced mode, the
event stream; the evaluation's scoring and the question sets' answers."""

import json

import pytest

from qgpu.chat.calc import Launcher, calc
from qgpu.chat.evaluate import evaluate, holds, load_set, numbers, score
from qgpu.chat.generate import STOP_TOKENS, Sampling, ScriptedModel
from qgpu.chat.prompts import SYSTEM
from qgpu.chat.session import Chat, ChatOptions, DoneEvent
from qgpu.chat.toolcalls import parse_tool_calls
from qgpu.chat.tools import ToolRunner
from qgpu.driver import compile_source


def call(name: str = "gpu_calc", **params) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def run(turns, user="question", history=(), **options):
    model = ScriptedModel(turns)
    events = list(Chat(model, Launcher()).turn(list(history), user, ChatOptions(**options)))
    return model, events, events[-1]


def test_a_call_its_response_and_the_answer() -> None:
    model, events, done = run([
        "Let me compute.\n\n" + call(expression="[1, 2, 3] @ [4, 5, 6]") + "\nIt is 99.",
        "The dot product is 32.",
    ], "What is the dot product of [1,2,3] and [4,5,6]?")
    assert [e.kind for e in events if e.kind != "text"] == ["call", "launch", "result", "done"]
    text = "".join(e.text for e in events if e.kind == "text" and e.round == 0)
    assert text.endswith("</tool_call>")  # what the model wrote after its call was cut
    assert isinstance(done, DoneEvent) and done.answer == "The dot product is 32."
    assert done.rounds == 1 and not done.limit_reached
    (result,) = done.results
    assert result.ok and result.value == 32 and result.title == "GPU: [1, 2, 3] @ [4, 5, 6]"
    assert json.loads(result.response) == {"expression": "[1, 2, 3] @ [4, 5, 6]", "value": 32}
    assert [x.kernel for x in result.launches] == ["calc_dot"]
    assert [m["role"] for m in done.messages] == ["user", "assistant", "tool", "assistant"]
    assert done.messages[1]["tool_calls"][0]["function"]["arguments"] == \
        {"expression": "[1, 2, 3] @ [4, 5, 6]"}
    first, second = model.prompts
    assert first.startswith("<|im_start|>system\n# Tools\n") and SYSTEM["normal"] in first
    assert first.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert second.endswith(
        "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n"
        '{"expression": "[1, 2, 3] @ [4, 5, 6]", "value": 32}\n</tool_response><|im_end|>\n'
        "<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_the_history_carries_over() -> None:
    _, _, done = run([call(expression="2 + 2"), "4."], "2+2?")
    model, _, again = run(["No call needed: 4."], "And again?", history=done.messages)
    assert "<tool_response>\n" in model.prompts[0] and again.answer == "No call needed: 4."
    assert model.prompts[0].count("<|im_start|>system") == 1


@pytest.mark.parametrize("bad, kind", [
    (call(expression="[1, 2, 3] @ [4, 5]"), "shape"),
    (call(expression="[1, 2, 3] @"), "parse"),
    (call(expression="65536 * 65536"), "overflow"),
    (call(expression="1 // 0"), "division_by_zero"),
    (call(expression="sort([" + ", ".join(["1"] * 17) + "])"), "resource"),
    (call("gpu_calc"), "tool_call"),
    (call("no_such_tool", x=1), "tool_call"),
    ("<tool_call>\n<parameter=expression>\n1\n</parameter>\n</tool_call>", "tool_call"),
    ("<tool_call>\n<function=gpu_calc>\n<parameter=expression>\n1", "tool_call"),
])
def test_every_failure_goes_back_as_a_response_and_can_be_repaired(bad: str, kind: str) -> None:
    model, events, done = run([bad, call(expression="[1, 2, 3] @ [4, 5, 6]"), "It is 32."])
    failed, fixed = done.results
    assert not failed.ok and failed.error["kind"] == kind and failed.value is None
    assert json.loads(failed.response) == {"error": failed.error}
    assert f'"kind": "{kind}"' in model.prompts[1]
    assert fixed.ok and fixed.value == 32 and done.answer == "It is 32."
    assert sum(e.kind == "result" for e in events) == 2


def test_several_calls_in_one_round() -> None:
    turn = "Two things.\n" + call(expression="sum([1, 2])") + "\n" + call(expression="3 * 4")
    model, events, done = run([turn, "3 and 12."])
    assert [r.value for r in done.results] == [3, 12]
    assert [e.call for e in events if e.kind == "call"] == [0, 1]
    assert done.messages[1]["content"] == "Two things."
    assert len(done.messages[1]["tool_calls"]) == 2
    assert model.prompts[1].count("<tool_response>") == 2


def test_a_call_opened_inside_thinking_counts() -> None:
    model, events, done = run([
        "The user wants a sum, I'll use the GPU. " + call(expression="sum([5, 6])") + " more",
        "Done thinking.\n</think>\n\nThe sum is 11.",
    ], thinking=True)
    assert done.results[0].value == 11 and done.answer == "The sum is 11."
    assert model.prompts[0].endswith("<|im_start|>assistant\n<think>\n")
    assert done.messages[1]["reasoning_content"] == "The user wants a sum, I'll use the GPU."
    assert done.messages[1]["content"] == "" and done.messages[-1]["reasoning_content"] == \
        "Done thinking."
    assert all(e.thinking for e in events if e.kind == "text" and e.round == 0)
    assert "<think>\nThe user wants a sum, I'll use the GPU.\n</think>\n\n<tool_call>" in \
        model.prompts[1]


def test_rounds_are_bounded() -> None:
    turns = [call(expression=f"{i} + 1") for i in range(5)]
    model, events, done = run(turns, max_rounds=4)
    assert len(done.results) == 4 and done.limit_reached and done.rounds == 4
    assert [r.value for r in done.results] == [1, 2, 3, 4]
    assert len(model.prompts) == 5


def test_advanced_mode_compiles_launches_and_repairs() -> None:
    good = ('extern "C" __global__ void vadd(const int* a, const int* b, int* c, int n)\n{\n'
            "    int i = threadIdx.x;\n    if (i < n) {\n        c[i] = a[i] + b[i];\n    }\n}")
    launch = dict(kernel="vadd", grid="[1]", block="[4]", args='[[1, 2, 3], [4, 5, 6], '
                  '{"zeros": 3}, 3]')
    model, events, done = run([
        call("cuda_launch", source=good.replace("a[i] + b[i]", "a[i] + b[i] +"), **launch),
        call("cuda_launch", source=good, **{**launch, "block": "[32]"}),
        call("cuda_launch", source=good.replace("threadIdx.x;", "threadIdx.x + 8;"), **launch),
        call("cuda_launch", source=good, **launch),
        "The sum is [5, 7, 9].",
    ], mode="advanced", max_rounds=4)
    kinds = [r.error["kind"] if r.error else "ok" for r in done.results]
    assert kinds == ["compile", "resource", "ok", "ok"]
    assert "16 per block" in done.results[1].error["message"]
    assert done.results[2].value[2] == [0, 0, 0]  # ran, but computed nothing: the model retries
    assert done.results[-1].value == [[1, 2, 3], [4, 5, 6], [5, 7, 9], 3]
    assert done.results[-1].launches[0].cuda == good
    assert "cuda_launch" in model.prompts[0] and SYSTEM["advanced"] in model.prompts[0]
    assert done.answer == "The sum is [5, 7, 9]."


def test_the_system_prompt_example_runs() -> None:
    (example,) = parse_tool_calls(SYSTEM["advanced"])
    result = ToolRunner(Launcher()).run(example)
    assert result.ok and result.value == [[1, 2, 3], [4, 5, 6], [5, 7, 9], 3]
    assert json.dumps({"kernel": "vadd", "args": result.value}) in SYSTEM["advanced"]


def test_scripted_model_obeys_stop_and_sampling_defaults() -> None:
    model = ScriptedModel(["abc " + call(expression="1") + " tail"], piece=3)
    from qgpu.chat.toolcalls import stop_after_calls

    text = "".join(model.stream("p", Sampling(), stop_after_calls))
    assert text.rstrip().endswith("</tool_call>") and "t" not in text[-3:]
    assert Sampling.default() == Sampling(False, 1.0, 1.0, 20, 2.0, numbers_exempt=True)
    assert Sampling.default(True).top_p == 0.95 and Sampling.default(True).presence_penalty == 1.5
    assert STOP_TOKENS[0] == "<|im_end|>"


def test_numbers_in_answers() -> None:
    assert numbers("It is 32. Not 3.5, but -7 and x2.") == [32, -7]
    assert holds("The product is [[19, 22], [43, 50]].", [[19, 22], [43, 50]])
    assert not holds("19, 22, 43", [[19, 22], [43, 50]])
    assert holds("index 0", 0) and not holds("nothing", 0)


@pytest.mark.parametrize("name", ["normal", "advanced"])
def test_question_sets_have_exact_answers(name: str) -> None:
    items = load_set(name)
    assert len(items) >= (30 if name == "normal" else 10)
    assert len({i["id"] for i in items}) == len(items)
    for item in items:
        if name == "normal":
            if "error" in item:
                with pytest.raises(Exception) as info:
                    calc(item["expression"])
                assert getattr(info.value, "kind", None) == item["error"]
            else:
                assert calc(item["expression"]).value == item["answer"], item["id"]
            continue
        ref = item["reference"]
        grid, block = tuple(ref["grid"]) + (1,) * (2 - len(ref["grid"])), \
            tuple(ref["block"]) + (1,) * (2 - len(ref["block"]))
        kernel = compile_source(ref["source"]).kernel(ref["kernel"])
        record = Launcher().launch(kernel, grid, block, ref["args"], item["id"])
        want = item["answer"] if isinstance(item["answer"], list) else [item["answer"]]
        assert want in record.result, item["id"]


def test_normal_set_covers_every_operation() -> None:
    from qgpu.chat.expression import FUNCTIONS, parse
    from qgpu.chat.plan import children

    seen = set()

    def walk(node):
        seen.add(getattr(node, "op", None) or getattr(node, "name", None) or type(node).__name__)
        for c in children(node):
            walk(c)

    for item in load_set("normal"):
        walk(parse(item["expression"]))
    want = {"+", "-", "*", "//", "%", "@", "Neg"} | set(FUNCTIONS) - {"dot", "matmul"}
    assert want <= seen, want - seen


def test_scoring_with_a_scripted_model() -> None:
    items = [i for i in load_set("normal") if i["id"] in ("n01-dot", "n05-matmul", "n41-overflow")]
    turns = [call(expression=items[0]["expression"]), "The dot product is 32.",
             call(expression=items[1]["expression"]), "It is [[19, 22], [43, 50]].",
             call(expression=items[2]["expression"]), "That overflows 32-bit integers."]
    report = evaluate(Chat(ScriptedModel(turns), Launcher()), "normal", items, ChatOptions())
    assert [o.correct for o in report.outcomes] == [True, True, True]
    assert report.counts()["answered (GPU value in the text)"] == 3
    assert "| n01-dot | yes |" in report.markdown()
    wrong = evaluate(Chat(ScriptedModel(["It is 32."]), Launcher()), "normal", items[:1],
                     ChatOptions())
    (o,) = wrong.outcomes
    assert not o.called and o.in_text and not o.correct  # a number the GPU did not compute


def test_scoring_advanced_first_try_and_repair() -> None:
    item = next(i for i in load_set("advanced") if i["id"] == "a04-vecadd")
    ref = item["reference"]
    args = json.dumps(ref["args"])
    bad = call("cuda_launch", source=ref["source"].replace("a[i] + b[i]", "a[i] - b[i]"),
               kernel=ref["kernel"], grid="[1]", block="[5]", args=args)
    good = bad.replace("a[i] - b[i]", "a[i] + b[i]")
    chat = Chat(ScriptedModel([bad, good, "[11, 22, 33, 44, 55]"]), Launcher())
    done = chat.ask([], item["question"], ChatOptions(mode="advanced"))
    o = score(item, done, "advanced")
    assert o.called and not o.first_try and o.gpu_value and o.in_text and o.correct
