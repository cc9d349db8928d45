"""The chat on the tiny merged model (the session's build_dir fixture): calculations launched on
the model equal Python and are exact against the machine, scripted turns through the tool loop
with real model launches, the text path generates over the base vocabulary only, grammar-
constrained decoding keeps a real tokenizer's output a valid expression, and the merged
tokenizer reads chat markup as the base does."""

import pytest

from qgpu.chat.calc import Launcher, calc
from qgpu.chat.errors import ArithmeticFault
from qgpu.chat.generate import Sampling, ScriptedModel, TextModel
from qgpu.chat.grammar import ExpressionGrammar, state_of
from qgpu.chat.session import Chat, ChatOptions
from qgpu.errors import LaunchError, UsageError

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def text(build_dir) -> TextModel:
    return TextModel.load(build_dir)


@pytest.fixture(scope="module")
def on_model(gpu) -> Launcher:
    return Launcher("model", gpu, check=True)


@pytest.mark.parametrize("expression, value", [
    ("sum([1, 2, 3] * [4, 5, 6])", 32),
    ("[[1, 2], [3, 4]] @ [5, 6]", [17, 39]),
    ("[7, -7] // 2", [3, -4]),
])
def test_calc_on_the_model_equals_python(on_model, expression, value) -> None:
    result = calc(expression, on_model)
    reference = calc(expression)
    assert result.value == value == reference.value
    assert [x.kernel for x in result.launches] == [x.kernel for x in reference.launches]
    for mine, ref in zip(result.launches, reference.launches, strict=True):
        assert mine.backend == "model" and mine.exact is True
        assert mine.result == ref.result
        assert (mine.prompt_tokens, mine.generated_tokens) == \
            (ref.prompt_tokens, ref.generated_tokens)


def test_overflow_is_flagged_by_the_model(on_model) -> None:
    with pytest.raises(ArithmeticFault) as info:
        calc("65536 * 65536", on_model)
    assert info.value.kind == "overflow"


def test_a_fault_the_model_reports_says_where(on_model) -> None:
    """The model's fault token names the kind and thread block; the error the chat sends back
    adds where the reference interpreter places it (instruction, thread, address)."""
    from qgpu.driver import compile_source

    kernel = compile_source("""
extern "C" __global__ void past_end(int *out) { out[threadIdx.x + 100000] = 1; }
""", filename="kernel.cu").kernel("past_end")
    with pytest.raises(LaunchError) as info:
        on_model.launch(kernel, (1, 1), (2, 1), [{"zeros": 2}], "past_end<<<1, 2>>>")
    message = info.value.message
    assert info.value.fault and message.startswith("the model reported")
    where = message.split(". Where: the reference interpreter: ")[1]
    assert "outside memory" in where and "past_end" in where and "threadIdx=(0,0)" in where, message


def test_scripted_turn_with_real_launches(gpu) -> None:
    call = ("<tool_call>\n<function=gpu_calc>\n<parameter=expression>\n[1, 2, 3] @ [4, 5, 6]\n"
            "</parameter>\n</function>\n</tool_call>")
    chat = Chat(ScriptedModel(["I'll use the GPU.\n" + call, "The dot product is 32."]),
                Launcher("model", gpu, check=True))
    events = list(chat.turn([], "What is the dot product of [1,2,3] and [4,5,6]?"))
    done = events[-1]
    (result,) = done.results
    assert result.ok and result.value == 32 and done.answer == "The dot product is 32."
    (launch,) = result.launches
    assert launch.backend == "model" and launch.exact and launch.kernel == "calc_dot"
    progress = [e for e in events if e.kind == "progress"]
    assert progress and progress[-1].total == launch.generated_tokens
    assert [e.tokens for e in progress] == list(range(1, len(progress) + 1))
    assert [e.kind for e in events if e.kind not in ("text", "progress")] == \
        ["call", "launch", "result", "done"]


def test_text_path_generates_base_tokens_only(text, build_dir) -> None:
    assert text.vocab == 248320
    tok = text.tokenizer
    assert {tok.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>",
                                                   "<|im_start|>")} == text.stop_ids
    assert text.stop_ids == {248044, 248045, 248046}
    prompt = text.render([{"role": "user", "content": "Hi"}], None, False)
    greedy = Sampling(greedy=True, max_new_tokens=6, presence_penalty=0.0)
    first = "".join(text.stream(prompt, greedy))
    assert first == "".join(text.stream(prompt, greedy)) and first
    ids = tok(first, add_special_tokens=False)["input_ids"]
    assert all(i < text.vocab for i in ids)
    with pytest.raises(UsageError, match="circuit token"):
        text.encode("<|gpu:end|>")
    number = tok("[[19, 22], [-43, 50]]", add_special_tokens=False)["input_ids"]
    assert set(number) <= text.numeric and not set(tok("abc")["input_ids"]) & text.numeric


def test_merged_tokenizer_reads_chat_markup_as_the_base_does(text, build_dir) -> None:
    from transformers import AutoTokenizer

    base = AutoTokenizer.from_pretrained(build_dir / "base")
    sample = ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
              "<tool_call>\n<function=gpu_calc>\n</tool_call><tool_response></tool_response>")
    assert text.tokenizer(sample)["input_ids"] == base(sample)["input_ids"]
    assert text.tokenizer("<|im_end|>")["input_ids"] == [248046]


def test_grammar_keeps_generated_expressions_valid(text) -> None:
    grammar = ExpressionGrammar(text.tokenizer, text.vocab)
    prompt = text.render([{"role": "user", "content": "dot of [1,2] and [3,4]?"}], None, False)
    head = "<tool_call>\n<function=gpu_calc>\n<parameter=expression>\n"
    for seed in range(2):
        sampling = Sampling(max_new_tokens=12, seed=seed)
        out = "".join(text.stream(prompt + head, sampling,
                                  constrain=lambda t: grammar(head + t)))
        assert out and state_of("\n" + out.split("</parameter>")[0]) is not None, out


def test_chat_load_and_a_generated_turn(build_dir) -> None:
    chat = Chat.load(build_dir)
    done = chat.ask([], "Hello", ChatOptions(greedy=True, max_new_tokens=8))
    assert done.kind == "done" and done.messages[0] == {"role": "user", "content": "Hello"}
    assert done.messages[-1]["role"] == "assistant"
