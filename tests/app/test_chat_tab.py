"""The chat tab's event functions called directly. The tiny base's text is random, so the
assistant's turns are scripted (``generate.ScriptedModel``); the tool loop and the launches are
real, on the tiny model: a gpu_calc call's message goes from pending to done with the GPU's
result, every launch is recorded token by token and opens in the CUDA tab's views (equal to the
CUDA tab's own run of it), advanced mode shows the model's CUDA in a ``c`` fence, a fault and a
compile error are messages. Without the model (a stand-in host): streaming text, thinking,
errors never as tracebacks, Stop, New chat, the fence rewrite."""

from __future__ import annotations

import copy
import json
import threading
from types import SimpleNamespace

import gradio as gr
import pytest

from qgpu.app import chat_tab as C
from qgpu.app.chat_tab import ChatSession, ChatTab
from qgpu.app.cuda_tab import CudaTab
from qgpu.chat.generate import ScriptedModel

from .conftest import DOT_TURNS, run_to_end, tool_call

VIEW, SESSION, PICKER, INPUT = range(4)
# open_launch: the tabs, the editor (example, source, kernel, grid, block, args, shared), then
# the CUDA tab's launch outputs (result, tokens, prompt, json, slider, caption, 6 views, ...)
TABS, EXAMPLE, SOURCE, KERNEL, GRID, BLOCK, ARGS, SHARED = range(8)
RESULT, JSON, SLIDER, CAPTION, REC = 8, 11, 12, 13, 20


def chat(host, turns) -> ChatTab:
    return ChatTab(host, CudaTab(host), ScriptedModel(turns))


def calls(view: list[dict]) -> list[dict]:
    return [m for m in view if m.get("metadata", {}).get("title", "").startswith("GPU:")]


def send(tab: ChatTab, text: str, session=None, mode="normal", thinking=False) -> list[tuple]:
    return list(tab.send(text, session, mode, thinking, False))


@pytest.fixture(scope="module")
def dot_chat(host) -> tuple[ChatTab, list[tuple]]:
    """"dot of [1,2,3] and [4,5,6]" answered with a scripted gpu_calc call, launched on the
    model."""
    tab = chat(host, DOT_TURNS)
    return tab, send(tab, "What is the dot product of [1,2,3] and [4,5,6]?")


def test_a_gpu_calc_call_appears_with_the_gpus_result(dot_chat) -> None:
    _, outs = dot_chat
    assert outs[0][INPUT] == ""  # the input box is cleared at once
    # the call's message is pending while the model writes the launch, then done
    pending = [c for o in outs for c in calls(o[VIEW]) if c["metadata"]["status"] == "pending"]
    assert pending and pending[0]["metadata"]["title"] == "GPU: dot([1, 2, 3], [4, 5, 6])"
    assert any("/ 76 tokens" in c["metadata"]["log"] for c in pending)  # progress
    view, session, picker = outs[-1][VIEW], outs[-1][SESSION], outs[-1][PICKER]
    (box,) = calls(view)
    meta = box["metadata"]
    assert meta["status"] == "done" and meta["log"] == "= 32 · 1 launch, 76 generated tokens"
    assert meta["duration"] > 0
    assert "**Result:** `32`" in box["content"] and "exact ✓" in box["content"]
    assert "**launch 1** `calc_dot<<<1, 1>>>`" in box["content"]
    assert [m["role"] for m in view] == ["user", "assistant", "assistant", "assistant"]
    assert view[1]["content"] == "I'll compute it on the GPU."  # the call's markup is not text
    assert view[-1]["content"] == DOT_TURNS[1]
    assert view[-1]["options"] == [{"value": "launch-1",
                                    "label": "Open launch 1 (calc_dot) in the views"}]
    assert "Traceback" not in json.dumps(view)
    # the model's history: the user, the call, the tool's response, the answer
    assert [m["role"] for m in session.history] == ["user", "assistant", "tool", "assistant"]
    assert json.loads(session.history[2]["content"])["value"] == 32
    assert picker["value"] == "1"
    assert picker["choices"] == [("1 · calc_dot: dot([1, 2, 3], [4, 5, 6]) (76 tokens, exact)",
                                  "1")]


def test_the_text_streams(dot_chat) -> None:
    _, outs = dot_chat
    texts = [o[VIEW][1]["content"] for o in outs if len(o[VIEW]) > 1]
    assert texts[0] != texts[-1] and "I'll compute it on the GPU.".startswith(texts[0])


def test_a_chat_launch_opens_in_the_cuda_tabs_views(dot_chat, host) -> None:
    tab, outs = dot_chat
    session = outs[-1][SESSION]
    x = session.launches[1]
    rec = x.recording
    assert (len(rec), rec.outcome, rec.unread) == (76, "end", {75})
    word = next(p.array[0] for p in rec.params if p.name == "out")
    assert rec.states[-1].gmem[word] == 32  # the model's state after the last token it read
    opened = tab.open_launch("1", session)
    assert isinstance(opened[TABS], gr.Tabs) and opened[TABS].selected == "cuda"
    assert opened[EXAMPLE]["value"] is None and "calc_dot" in opened[SOURCE]
    assert opened[KERNEL]["value"] == "calc_dot"
    assert opened[GRID:SHARED + 1] == ("1", "1", '[[1, 2, 3], [4, 5, 6], {"zeros": 1}, '
                                                 '{"zeros": 1}, 3]', 0)
    assert "From the chat: launch 1" in opened[RESULT] and "<td>32</td>" in opened[RESULT]
    assert "✓ exact" in opened[RESULT] and "Traceback" not in opened[RESULT]
    assert opened[JSON]["args"][2] == [32] and opened[JSON]["exact"] is True
    assert opened[SLIDER]["maximum"] == 75 and opened[CAPTION].startswith("token 75 of 76")
    assert opened[REC] is rec and len(opened) == 8 + 14
    # the option under the answer opens it the same way
    picked = tab.pick_option(session, gr.SelectData(None, {"index": 3, "value": "launch-1"}))
    assert picked[RESULT] == opened[RESULT] and picked[REC] is rec
    with pytest.warns(UserWarning, match="Pick a launch"):  # no such launch: nothing changes
        assert tab.open_launch("9", session)[TABS] == gr.skip()
    # the CUDA tab running those fields on the model gives the very same tokens and states
    fields = dict(zip(("source", "kernel", "grid", "block", "args", "dynamic_shared"),
                      (opened[SOURCE], "calc_dot", *opened[GRID:SHARED + 1]), strict=True))
    again = run_to_end(tab.cuda, fields)[-1][-3]
    assert again.tokens == rec.tokens and again.prompt == rec.prompt
    for a, b in zip(again.states, rec.states, strict=True):
        assert (a.regs == b.regs).all() and (a.gmem == b.gmem).all() and (a.pcs == b.pcs).all()


def test_a_second_turn_numbers_its_launches_on(host, dot_chat) -> None:
    _, outs = dot_chat
    session = outs[-1][SESSION]
    tab = chat(host, [tool_call(expression="sum([1, 2] * [3, 4])"), "It is 11."])
    session = ChatSession(list(session.history), copy.deepcopy(session.view),
                          dict(session.launches))
    view, session, picker, _ = send(tab, "sum of [1,2]*[3,4]", session)[-1]
    assert [x.kernel for x in session.launches.values()] == ["calc_dot", "calc_mul", "calc_sum"]
    (box,) = calls(view[-3:])
    assert "**launch 2**" in box["content"] and "**launch 3**" in box["content"]
    assert box["metadata"]["log"] == "= 11 · 2 launches, 74 generated tokens"
    assert picker["value"] == "3" and len(picker["choices"]) == 3
    assert "options" not in view[3] and len(view[-1]["options"]) == 2  # the newest turn's
    assert len(session.history) == 8


def test_advanced_mode_shows_the_models_cuda_and_its_faults(host) -> None:
    good = ('extern "C" __global__ void vadd(const int* a, const int* b, int* c, int n)\n{\n'
            "    int i = threadIdx.x;\n    if (i < n) {\n        c[i] = a[i] + b[i];\n    }\n}")
    launch = dict(kernel="vadd", grid="[1]", block="[4]",
                  args='[[1, 2, 3], [4, 5, 6], {"zeros": 3}, 3]')
    tab = chat(host, [
        tool_call("cuda_launch", source=good.replace("if (i < n)", "if (i < n + 8)"),
                  **launch),
        tool_call("cuda_launch", source=good.replace("a[i] + b[i]", "a[i] +"), **launch),
        tool_call("cuda_launch", source=good, **launch),
        "Here:\n```cpp\nc[i] = a[i] + b[i];\n```\nThe sum is [5, 7, 9].",
    ])
    view, session, picker, _ = send(tab, "add them", mode="advanced")[-1]
    fault, compile_error, ok = calls(view)
    assert all(b["metadata"]["title"] == "GPU: vadd<<<[1], [4]>>>" for b in (fault, ok))
    assert "```c\nextern \"C\" __global__ void vadd" in ok["content"]
    assert "```cpp" not in json.dumps(view) and "```c\nc[i] = a[i] + b[i];" in view[-1]["content"]
    assert "global_bounds fault" in fault["content"] and "sent back to the model" in \
        fault["content"]
    assert fault["metadata"]["log"].startswith("launch error · 1 launch")
    assert "expected an expression" in compile_error["content"]
    assert compile_error["metadata"]["log"].startswith("compile error · 0 launches")
    assert ok["metadata"]["log"].startswith("= [[1, 2, 3], [4, 5, 6], [5, 7, 9], 3] · 1 launch")
    first, second = session.launches[1], session.launches[2]
    assert first.recording.outcome == "fault:global_bounds" and first.error["kind"] == "launch"
    assert first.recording.tokens[-1] == "fault:global_bounds" and first.record is None
    assert [p.name for p in second.recording.params] == ["a", "b", "c", "n"]  # its CUDA names
    opened = tab.open_launch("1", session)
    assert "Launch stopped" in opened[RESULT] and "global_bounds" in opened[RESULT]
    assert opened[SOURCE] == good.replace("if (i < n)", "if (i < n + 8)")
    assert "`fault:global_bounds`" in opened[CAPTION]
    assert picker["choices"][1][0] == f"1 · vadd ({len(first.recording)} tokens, launch error)"


# --- without the model ----------------------------------------------------------------------


@pytest.fixture()
def textonly():
    """A chat tab over a stand-in host: turns without calls never touch the model."""
    host = SimpleNamespace(gm=SimpleNamespace(engine="sparse"), token_limit=100,
                           slots=threading.BoundedSemaphore(8), max_concurrent=8, tiny=True)
    return lambda turns: ChatTab(host, CudaTab(host), ScriptedModel(turns))


def test_thinking_folds_into_its_own_message(textonly) -> None:
    tab = textonly(["Two and two.\n</think>\n\nIt is 4."])
    outs = send(tab, "2+2?", thinking=True)
    thinking = [o[VIEW][1] for o in outs if len(o[VIEW]) > 1]
    assert thinking[0]["metadata"] == {"title": "Thinking", "status": "pending"}
    view = outs[-1][VIEW]
    assert view[1] == {"role": "assistant", "content": "Two and two.",
                       "metadata": {"title": "Thinking", "status": "done"}}
    assert view[2]["content"] == "It is 4." and "options" not in view[2]
    assert outs[-1][SESSION].history[-1]["reasoning_content"] == "Two and two."
    assert outs[-1][PICKER]["choices"] == [] and outs[-1][PICKER]["interactive"] is False


def test_a_too_long_message_is_refused_before_the_model_reads_it(textonly) -> None:
    outs = send(textonly(["never written"]), "1+" * 4_001 + "1")
    assert outs[-1][VIEW][-1]["content"] == ("⚠️ **usage error** — the message has 8,003 "
                                              "characters; at most 8,000")
    assert outs[-1][SESSION].history == []


def test_errors_are_messages_never_tracebacks(textonly, monkeypatch) -> None:
    view = send(textonly([]), "hello")[-1][VIEW]  # the model has nothing to say: its error
    assert view[-1]["content"].startswith("⚠️ **usage error** — the scripted model has no")
    session = send(textonly([]), "hello")[-1][SESSION]
    assert session.history == [] and len(session.view) == 2  # the failed turn is not history

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(C.Chat, "turn", broken)
    view = send(textonly(["x"]), "hello")[-1][VIEW]
    assert view[-1]["content"] == "⚠️ **Internal error** — `RuntimeError: boom`"
    assert "Traceback" not in json.dumps(view)
    empty = send(textonly([]), "   ")
    assert len(empty) == 1 and empty[0][VIEW] == []


def test_the_max_tokens_control_bounds_each_reply(textonly) -> None:
    tab = textonly(["It is 4.", "It is 5."])
    list(tab.send("2+2?", None, "normal", False, False, 128))
    list(tab.send("2+3?", None, "normal", False, False))
    first, second = tab.language_model()[0].samplings
    assert first.max_new_tokens == 128 and second.max_new_tokens == C.ChatOptions.max_new_tokens


def test_stop_and_new_chat(textonly) -> None:
    tab = textonly(["a long answer " * 20])
    gen = tab.send("talk", None, "normal", False, False)
    next(gen)
    tab.stop()
    view, session, *_ = list(gen)[-1]
    assert view[-1]["content"] == "*(stopped)*" and session.history == []
    assert view[1]["content"].startswith("a long") and len(view[1]["content"]) < 280
    cleared = tab.clear()
    assert cleared[0] == [] and cleared[1].launches == {} and cleared[3] == ""


def test_cuda_fences_and_what_text_shows() -> None:
    assert C.c_fences("x\n```cpp\nint a;\n```\n```cuda \nb\n```") == \
        "x\n```c\nint a;\n```\n```c \nb\n```"
    assert C.c_fences("```c\na\n```\n```csharp\nb\n```") == "```c\na\n```\n```csharp\nb\n```"
    assert C.code_block("a ``` b") == "````c\na ``` b\n````"
    assert C._before_calls("Let me compute.\n<tool_call>\n<function=gpu_calc>") == \
        "Let me compute."
    assert C._before_calls("Let me compute. <tool_ca") == "Let me compute."
    assert C._before_calls("plain text") == "plain text"


def test_the_page_has_the_chat_tab(host) -> None:
    from qgpu.app.page import create_app

    demo = create_app(host, chat_generator=ScriptedModel([]))
    ids = {getattr(b, "elem_id", None) for b in demo.blocks.values()}
    assert {"tab-chat", "chat-mode", "chat-input", "chatbot", "chat-thinking", "chat-greedy",
            "chat-max-tokens", "chat-launch", "chat-open", "chat-stop"} <= ids
    by_name = {fn.name: fn for fn in demo.fns.values()}
    # turns one at a time (one language model writes); their launches take turns on the model
    # with the CUDA tab's, up to the host's slots at once
    assert (by_name["send"].concurrency_id, by_name["send"].concurrency_limit) == ("chat", 1)
    assert by_name["run"].concurrency_id == "gpu"
    assert by_name["run"].concurrency_limit == host.max_concurrent
    mode = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "chat-mode")
    assert mode.value == "normal"
    thinking = next(b for b in demo.blocks.values()
                    if getattr(b, "elem_id", None) == "chat-thinking")
    assert thinking.value is False
