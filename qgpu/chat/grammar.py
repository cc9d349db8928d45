"""Grammar-constrained decoding of ``gpu_calc``'s expression: inside
``<parameter=expression>`` the model may only choose tokens that continue a valid expression
(or, once it is complete, whitespace and ``</parameter>``), so normal-mode calls always parse.

``Prefix`` is a character-level pushdown recogniser of the calculator's language
(expression.py): the open brackets (vector, group, call with its arguments still to come),
whether an operand or an operator comes next, and a partial number, function name or ``//``.
It accepts exactly the prefixes of expressions the parser accepts (less a trailing comma in a
bracket; literals beyond int32 and shape mistakes are left to the parser and the planner,
whose errors go back to the model). ``ExpressionGrammar`` walks a trie of the tokenizer's
tokens that use only the language's characters, pruning at the first character the
recogniser rejects, and remembers the allowed set per recogniser state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from qgpu.chat.expression import FUNCTIONS

TAG = "<parameter=expression>"
CLOSE = "</parameter>"
_DIGITS = set("0123456789")
_NAME_START = set("abcdefghijklmnopqrstuvwxyz_")
_SPACE = set(" \t\n")
_OPS = set("+-*%@")
MAX_SPACES = 4
CHARSET = _DIGITS | _SPACE | _OPS | set("/[](),") | set("".join(FUNCTIONS)) | set(CLOSE)
"""Every character an expression region can hold."""


@dataclass(frozen=True)
class Prefix:
    """A state of the recogniser. `stack`: open brackets, "[" a vector, "(" a group, a digit
    d a call that still takes d more commas; `expect`: what comes next — "operand",
    "operator", "name" (a function name is being spelled: `partial`), "call" (the whole name
    `partial` was written: "(" follows) or "slash" (half of //); `digits` of the number being
    written; `close`: characters of ``</parameter>`` matched (-1: not closing); `done`:
    closed; `spaces`: whitespace characters in a row (at most MAX_SPACES, so a sampled model
    cannot pad an expression forever)."""

    stack: str = ""
    expect: str = "operand"
    partial: str = ""
    digits: int = 0
    close: int = -1
    done: bool = False
    spaces: int = 0

    @property
    def complete(self) -> bool:
        """The text so far is a whole expression (it may still go on)."""
        return not self.stack and self.expect == "operator" and not self.partial

    def feed(self, ch: str) -> Prefix | None:
        """The state after one more character, or None if no expression continues so."""
        if self.done:
            return self
        if self.close >= 0:
            if ch == CLOSE[self.close]:
                n = self.close + 1
                return Prefix(close=n, done=n == len(CLOSE), expect="operator")
            return None
        if self.expect == "call":  # after a whole function name: only "(" (or space)
            if ch in _SPACE:
                return None if self.spaces >= MAX_SPACES else \
                    Prefix(self.stack, "call", self.partial, spaces=self.spaces + 1)
            if ch == "(":
                return Prefix(self.stack + str(FUNCTIONS[self.partial] - 1), "operand")
            return None
        if self.expect == "slash":
            return Prefix(self.stack, "operand") if ch == "/" else None
        if self.expect == "name":
            if ch.isalnum() or ch == "_":
                name = self.partial + ch
                return Prefix(self.stack, "name", name) if _spells(name) else None
            if self.partial not in FUNCTIONS:
                return None
            return Prefix(self.stack, "call", self.partial).feed(ch)
        if ch in _SPACE:
            if self.spaces >= MAX_SPACES:
                return None
            return Prefix(self.stack, self.expect, spaces=self.spaces + 1)
        if self.expect == "operand":
            if ch in _DIGITS:
                return Prefix(self.stack, "operator", digits=1)
            if ch in _NAME_START:
                return Prefix(self.stack, "name", ch) if _spells(ch) else None
            if ch == "-":
                return self
            if ch in "[(":
                return Prefix(self.stack + ch, "operand")
            return None
        # an operator (or the end of a bracket, or the close tag) comes next
        if ch in _DIGITS and self.digits:
            return Prefix(self.stack, "operator", digits=self.digits + 1) \
                if self.digits < 10 else None
        if ch in _OPS:
            return Prefix(self.stack, "operand")
        if ch == "/":
            return Prefix(self.stack, "slash")
        top = self.stack[-1:] or " "
        if ch == "]" and top == "[" or ch == ")" and top in "(0":
            return Prefix(self.stack[:-1], "operator")
        if ch == ",":
            if top == "[":
                return Prefix(self.stack, "operand")
            if top.isdigit() and top != "0":
                return Prefix(self.stack[:-1] + str(int(top) - 1), "operand")
            return None
        if ch == "<" and not self.stack:
            return Prefix(close=1, expect="operator")
        return None


def _spells(prefix: str) -> bool:
    return any(f.startswith(prefix) for f in FUNCTIONS)


def region(text: str) -> str | None:
    """The expression written so far when the text is inside gpu_calc's expression parameter,
    else None."""
    start = text.rfind(TAG)
    if start < 0:
        return None
    call = text.rfind("<tool_call>", 0, start)
    fn = text.rfind("<function=", 0, start)
    if fn < 0 or not text.startswith("<function=gpu_calc>", fn) or (call >= 0 and fn < call):
        return None
    inner = text[start + len(TAG):]
    return None if CLOSE in inner else inner


@lru_cache(maxsize=4096)
def state_of(text: str) -> Prefix | None:
    state: Prefix | None = Prefix()
    for ch in text:
        state = state.feed(ch) if state is not None else None
        if state is None:
            return None
    return state


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: the character a BPE token shows for each byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


def token_texts(tokenizer, vocab: int, charset: set[str] = CHARSET) -> dict[int, str]:
    """The text of every base-vocabulary token made only of `charset`'s characters (default:
    the expression's)."""
    decoder = _byte_decoder()
    added = set(tokenizer.added_tokens_decoder)
    out = {}
    for i, piece in enumerate(tokenizer.convert_ids_to_tokens(list(range(vocab)))):
        if piece is None or i in added:
            continue
        try:
            text = bytes(decoder[c] for c in piece).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            continue
        if text and set(text) <= charset:
            out[i] = text
    return out


class ExpressionGrammar:
    """``constrain(text)`` for generate.TextModel: None outside gpu_calc's expression
    parameter, else the token ids that keep the parameter a valid expression prefix."""

    def __init__(self, tokenizer=None, vocab: int = 0, texts: dict[int, str] | None = None) \
            -> None:
        texts = texts if texts is not None else token_texts(tokenizer, vocab)
        self.trie: dict = {}
        for i, text in texts.items():
            node = self.trie
            for ch in text:
                node = node.setdefault(ch, {})
            node.setdefault(None, []).append(i)
        self._allowed: dict[Prefix, list[int]] = {}

    def __call__(self, text: str) -> Sequence[int] | None:
        inner = region(text)
        if inner is None:
            return None
        state = state_of(inner)
        if state is None:  # the text left the language (cannot happen while constrained)
            return None
        if state not in self._allowed:
            if len(self._allowed) > 20_000:
                self._allowed.clear()
            self._allowed[state] = self._walk(self.trie, state)
        return self._allowed[state]

    def _walk(self, node: dict, state: Prefix) -> list[int]:
        out = list(node.get(None, [])) if node is not self.trie else []
        for ch, child in node.items():
            if ch is None:
                continue
            nxt = state.feed(ch)
            if nxt is not None:
                out += self._walk(child, nxt)
        return out
