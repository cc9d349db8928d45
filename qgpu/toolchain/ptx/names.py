"""C++ kernel names: demangling NVVM's Itanium names so that kernels in namespaces, templates or
without ``extern "C"`` are found by their plain names and reported as the user wrote them.

Only the part of the Itanium ABI that kernel and variable names use is read (namespaces,
template arguments that are types or integer literals, parameter types); a name outside it is
shown mangled, never guessed.
"""

from __future__ import annotations

import functools
import re

_BUILTIN = {
    "v": "void", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char",
    "s": "short", "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long",
    "m": "unsigned long", "x": "long long", "y": "unsigned long long", "f": "float",
    "d": "double", "n": "__int128", "o": "unsigned __int128", "w": "wchar_t", "z": "...",
}  # fmt: skip
_STD = {"St": "std", "Sa": "std::allocator", "Ss": "std::string"}


class _Fail(Exception):
    pass


class _Reader:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.subs: list[str] = []
        self.template_args: list[str] = []

    def peek(self, n: int = 1) -> str:
        return self.s[self.i:self.i + n]

    def take(self, n: int = 1) -> str:
        if self.i + n > len(self.s):
            raise _Fail
        out = self.s[self.i:self.i + n]
        self.i += n
        return out

    def number(self) -> int:
        m = re.match(r"n?\d+", self.s[self.i:])
        if m is None:
            raise _Fail
        self.i += m.end()
        text = m.group()
        return -int(text[1:]) if text[0] == "n" else int(text)

    def source_name(self) -> str:
        n = self.number()
        name = self.take(n)
        return "(anonymous namespace)" if name.startswith("_GLOBAL__N") else name

    def seq_id(self) -> str:
        """S_ / S<base36>_ substitution."""
        self.take()  # S
        code = ""
        while self.peek() != "_":
            code += self.take()
        self.take()
        index = int(code, 36) + 1 if code else 0
        if index >= len(self.subs):
            raise _Fail
        return self.subs[index]

    def template_param(self) -> str:
        self.take()  # T
        code = ""
        while self.peek() != "_":
            code += self.take()
        self.take()
        index = int(code, 36) + 1 if code else 0
        if index >= len(self.template_args):
            raise _Fail
        return self.template_args[index]

    def template_arg_list(self) -> list[str]:
        self.take()  # I
        args = []
        while self.peek() != "E":
            if self.peek() == "L":
                self.take()
                ty = self.type()
                value = self.number()
                self.take()  # E
                args.append(("true" if value else "false") if ty == "bool" else
                            f"{value}{'u' if ty.startswith('unsigned') else ''}")
            else:
                args.append(self.type())
        self.take()
        return args

    def name(self) -> tuple[list[str], list[str]]:
        """(qualified components, template args of the last one)."""
        targs: list[str] = []
        if self.peek() == "N":
            self.take()
            while self.peek() in ("K", "V", "r"):
                self.take()
            parts: list[str] = []
            while self.peek() != "E":
                if self.peek() == "I":
                    targs = self.template_arg_list()
                    parts[-1] += f"<{', '.join(targs)}>"
                elif self.peek() == "S":
                    parts += self.substitution().split("::")
                    targs = []
                else:
                    parts.append(self.source_name())
                    targs = []
                self.subs.append("::".join(parts))
            self.take()
            if targs:
                self.subs.pop()
            return parts, targs
        if self.peek(2) in _STD:
            parts = [_STD[self.take(2)], self.source_name()]
        else:
            parts = [self.source_name()]
        if self.peek() == "I":
            self.subs.append("::".join(parts))
            targs = self.template_arg_list()
            parts[-1] += f"<{', '.join(targs)}>"
        return parts, targs

    def substitution(self) -> str:
        if self.peek(2) in _STD:
            return _STD[self.take(2)]
        return self.seq_id()

    def type(self) -> str:
        c = self.peek()
        if c in _BUILTIN:
            self.take()
            return _BUILTIN[c]
        if c in ("P", "R", "O", "K", "V", "r"):
            self.take()
            inner = self.type()
            out = {"P": f"{inner}*", "R": f"{inner}&", "O": f"{inner}&&", "K": f"{inner} const",
                   "V": f"{inner} volatile", "r": f"{inner} __restrict__"}[c]
            if c in "KVr" and not inner.endswith(("*", "&")):
                out = {"K": "const ", "V": "volatile ", "r": ""}[c] + inner
            self.subs.append(out)
            return out
        if c == "S":
            out = self.substitution()
            if self.peek() == "I":
                out += f"<{', '.join(self.template_arg_list())}>"
                self.subs.append(out)
            return out
        if c == "T":
            out = self.template_param()
            self.subs.append(out)
            return out
        if c == "N" or c.isdigit():
            parts, _ = self.name()
            out = "::".join(parts)
            if c.isdigit():
                self.subs.append(out)
            return out
        raise _Fail


@functools.cache
def demangle(name: str) -> str:
    """``_ZN2ns6kernelEPi`` -> ``ns::kernel(int*)``; names that are not mangled, or that use
    what this reader does not know, come back unchanged."""
    if not name.startswith("_Z"):
        return name
    r = _Reader(name[2:])
    try:
        parts, targs = r.name()
        qualified = "::".join(parts)
        if r.i == len(r.s):  # a variable: no parameter list
            return qualified
        r.template_args = targs
        if targs:
            r.type()  # a template function's encoding starts with its return type
        params = []
        while r.i < len(r.s):
            params.append(r.type())
    except (_Fail, ValueError):
        return name
    if params == ["void"]:
        params = []
    return f"{qualified}({', '.join(params)})"


def qualified_name(name: str) -> str:
    """The demangled name without its parameter list: ``ns::reduce<8>``."""
    full = demangle(name)
    if full == name:
        return name
    depth = 0
    for i in range(len(full) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(full[i], 0)
        if depth == 0 and full[i] == "(":
            return full[:i]
    return full


def plain_name(name: str) -> str:
    """The last component without namespaces and template arguments: ``reduce``."""
    q = qualified_name(name)
    depth, cut = 0, len(q)
    for i in range(len(q) - 1, -1, -1):
        depth += {">": 1, "<": -1}.get(q[i], 0)
        if depth == 0 and q[i] == "<":
            cut = i
    q = q[:cut]
    return q.rsplit("::", 1)[-1]


def matches(symbol: str, wanted: str) -> bool:
    """Whether a user's name picks this PTX symbol: the symbol itself, its demangled form with or
    without parameters, or any ``::``-suffix of it (``kernel``, ``ns::kernel``,
    ``reduce<8>``) — template arguments may be left out (``reduce``)."""
    if wanted in (symbol, demangle(symbol)):
        return True
    q = qualified_name(symbol)
    if q == symbol:
        return False
    stripped = re.sub(r"<[^<>]*>", "", q)
    while stripped != (again := re.sub(r"<[^<>]*>", "", stripped)):
        stripped = again
    return any(form == wanted or form.endswith(f"::{wanted}") for form in (q, stripped))
