"""Text generation for the chat, streamed: the merged checkpoint's text path and a scripted
stand-in for tests.

``TextModel`` is the base half of a merged checkpoint (``qgpu.model.split.load_text_model``:
bit for bit the base model, over the base vocabulary, so no circuit token can ever be chosen)
with the merged checkpoint's tokenizer and chat template. It samples one token at a time with
a cache, with the model card's settings by default (``Sampling.default``) or greedily, and
yields text as it grows. A ``stop(text)`` callback may cut the text (toolcalls.
stop_after_calls); a ``constrain(text)`` callback may restrict the next token
(grammar.ExpressionGrammar: only tokens that continue a valid expression).

``ScriptedModel`` plays given assistant texts instead of generating (tests, demos): the tool
loop, the launches and everything after them run for real.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from qgpu.errors import UsageError

STOP_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|im_start|>")
"""Tokens that end an assistant turn (the last is never a turn's text: a turn that starts
another is over)."""

NUMERIC = set("0123456789-[](), \n")
"""Characters of the tokens the presence penalty spares (a number restated from a tool)."""

Stop = Callable[[str], "int | None"]
"""stop(text so far) -> where to cut it and stop, or None to go on."""

Constrain = Callable[[str], "Sequence[int] | None"]
"""constrain(text so far) -> the token ids allowed next, or None for any."""


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen. Defaults: Qwen3.5's model card for non-thinking text
    (temperature 1.0, top_p 1.0, top_k 20, presence penalty 2.0); `default(thinking=True)`
    gives its thinking settings (1.0, 0.95, 20, 1.5). The presence penalty lowers every token
    this turn already generated (the prompt is not counted), as serving stacks do — except
    tokens of digits, minus signs, brackets, commas and spaces (`numbers_exempt`): restating a
    tool's number such as [[19, 22], [43, 50]] repeats them, and must not be pushed away."""

    greedy: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 20
    presence_penalty: float = 2.0
    max_new_tokens: int = 1024
    seed: int | None = None
    numbers_exempt: bool = True  # the penalty spares digits, signs, brackets and commas

    @classmethod
    def default(cls, thinking: bool = False, **changes) -> Sampling:
        base = cls(top_p=0.95, presence_penalty=1.5) if thinking else cls()
        return replace(base, **changes)


class Generator(Protocol):
    """What the tool loop needs from a language model."""

    def render(self, messages: list[dict], tools: list[dict] | None, thinking: bool) -> str:
        """The prompt for the next assistant turn (the chat template, generation prompt)."""
        ...

    def stream(self, prompt: str, sampling: Sampling, stop: Stop | None = None,
               constrain: Constrain | None = None) -> Iterator[str]:
        """The assistant's text, piece by piece, until a stop token, `stop` or the limit."""
        ...


def render_template(template: str, messages: list[dict], tools: list[dict] | None,
                    thinking: bool) -> str:
    """A chat template rendered for the next assistant turn."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(conversations=[messages], tools=tools or None,
                                        chat_template=template, add_generation_prompt=True,
                                        enable_thinking=thinking)
    return rendered[0]


class TextModel:
    """The text half of a merged checkpoint with its tokenizer (see the module docstring)."""

    def __init__(self, model, tokenizer, device: str = "cpu") -> None:
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.vocab = int(model.config.vocab_size)
        self.stop_ids = {tokenizer.convert_tokens_to_ids(t) for t in STOP_TOKENS}
        self.template = tokenizer.chat_template
        self._numeric: set[int] | None = None

    @property
    def numeric(self) -> set[int]:
        """Tokens made of digits, signs, brackets, commas and spaces only."""
        if self._numeric is None:
            from qgpu.chat.grammar import token_texts

            self._numeric = set(token_texts(self.tokenizer, self.vocab, NUMERIC))
        return self._numeric

    @classmethod
    def load(cls, build: str | Path, dtype: str | None = None, device: str = "cpu") \
            -> TextModel:
        """BUILD/merged (or a merged checkpoint itself): its base half in `dtype` (default:
        as built) and its tokenizer."""
        import json

        from transformers import AutoTokenizer

        from qgpu.model.merge import METADATA_FILE
        from qgpu.model.split import load_text_model

        path = Path(build)
        path = path / "merged" if (path / "merged" / METADATA_FILE).is_file() else path
        if not (path / METADATA_FILE).is_file():
            raise UsageError(f"{build}: not a qgpu build or merged checkpoint")
        dtype = dtype or json.loads((path / METADATA_FILE).read_text())["dtype"]
        model = load_text_model(path, dtype).to(device)
        return cls(model, AutoTokenizer.from_pretrained(path), device)

    def render(self, messages: list[dict], tools: list[dict] | None, thinking: bool) -> str:
        return render_template(self.template, messages, tools, thinking)

    def encode(self, text: str) -> list[int]:
        """Token ids of a prompt; every one must be a base-vocabulary token (a circuit token's
        name typed into a chat would otherwise reach the text model)."""
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        bad = [i for i in ids if i >= self.vocab]
        if bad:
            raise UsageError(f"the chat text holds {self.tokenizer.convert_ids_to_tokens(bad[0])}"
                             f", a circuit token; chat text never contains circuit tokens")
        return ids

    def stream(self, prompt: str, sampling: Sampling, stop: Stop | None = None,
               constrain: Constrain | None = None) -> Iterator[str]:
        import torch

        ids = self.encode(prompt)
        gen = torch.Generator().manual_seed(sampling.seed) if sampling.seed is not None \
            else None
        out: list[int] = []
        text = ""
        cache = None
        feed = torch.tensor([ids], device=self.device)
        with torch.inference_mode():
            for _ in range(sampling.max_new_tokens):
                result = self.model(input_ids=feed, past_key_values=cache, use_cache=True)
                cache = result.past_key_values
                logits = result.logits[0, -1].float().cpu()
                allowed = None if constrain is None else constrain(text)
                if allowed is not None and not allowed:
                    allowed = None  # nothing continues the grammar: let the model choose
                seen = [t for t in out if t not in self.numeric] \
                    if sampling.numbers_exempt else out
                token = choose(logits, sampling, seen, allowed, gen)
                if token in self.stop_ids:
                    return
                out.append(token)
                new = self.tokenizer.decode(out, skip_special_tokens=False)
                if new.endswith("\ufffd"):  # a character split across tokens: wait for it
                    feed = torch.tensor([[token]], device=self.device)
                    continue
                cut = None if stop is None else stop(new)
                if cut is not None:
                    if cut > len(text):
                        yield new[len(text):cut]
                    return
                if new.startswith(text):
                    yield new[len(text):]
                text = new
                feed = torch.tensor([[token]], device=self.device)


def choose(logits, sampling: Sampling, generated: list[int], allowed: Sequence[int] | None,
           gen) -> int:
    """The next token: the presence penalty on the `generated` tokens, the allowed set, then
    greedy or top-k / top-p sampling (on the k best only: the vocabulary is 248k tokens)."""
    import torch

    if generated and sampling.presence_penalty:
        logits = logits.clone()
        logits[torch.tensor(sorted(set(generated)))] -= sampling.presence_penalty
    if allowed is not None:
        index = torch.tensor(list(allowed), dtype=torch.long)
        values = logits[index]
    else:
        index, values = None, logits
    if sampling.greedy or sampling.temperature <= 0:
        best = int(torch.argmax(values))
        return best if index is None else int(index[best])
    k = values.numel() if sampling.top_k <= 0 else min(sampling.top_k, values.numel())
    top, order = torch.topk(values, k)
    probs = torch.softmax(top / sampling.temperature, dim=-1)
    if sampling.top_p < 1.0:
        keep = torch.cumsum(probs, 0) - probs < sampling.top_p
        probs = probs * keep
    pick = int(order[int(torch.multinomial(probs, 1, generator=gen))])
    return pick if index is None else int(index[pick])


class ScriptedModel:
    """Plays the given assistant texts, one per call of ``stream``, in small pieces, obeying
    `stop` as a model would (a scripted text that goes on after its tool call is cut there);
    renders prompts with the tiny base's template (or `template`). `prompts` records every
    prompt it was given, `samplings` the settings of each call."""

    def __init__(self, turns: Sequence[str], template: str | None = None,
                 piece: int = 7) -> None:
        from qgpu.model.tinybase import CHAT_TEMPLATE

        self.turns = list(turns)
        self.template = template or CHAT_TEMPLATE.read_text()
        self.piece = piece
        self.prompts: list[str] = []
        self.samplings: list[Sampling] = []

    def render(self, messages: list[dict], tools: list[dict] | None, thinking: bool) -> str:
        return render_template(self.template, messages, tools, thinking)

    def stream(self, prompt: str, sampling: Sampling, stop: Stop | None = None,
               constrain: Constrain | None = None) -> Iterator[str]:
        self.prompts.append(prompt)
        self.samplings.append(sampling)
        if not self.turns:
            raise UsageError("the scripted model has no assistant turn left")
        script = self.turns.pop(0)
        text = ""
        for i in range(0, len(script), self.piece):
            new = script[:i + self.piece]
            cut = None if stop is None else stop(new)
            if cut is not None:
                if cut > len(text):
                    yield new[len(text):cut]
                return
            yield new[len(text):]
            text = new
