"""Graphs that more than one compiler test runs, with the tokens that drive them."""

from __future__ import annotations

from qgpu.compiler.graph import Graph, Part, Rule, copy_bits
from tests.compiler.helpers import bits, onehot

ROWS = 128  # rows of frame_graph's register file


def waiting_graph() -> Graph:
    """A 32-bit input read at once and again after a chain of nine 64-bit copies that ends in
    4 bits (holding it whole adds 32 dims to the chain's 64; packed, 8)."""
    g = Graph()
    g.feature("a", 32, "bits", token_input=True)
    g.feature("s", 1, "bits", token_input=True)
    for k in range(11):
        g.feature(f"c{k}", 64 if k < 10 else 4)
    g.rule_group("c0", [Rule(((("s", 0), 1), (("a", i % 32), 1)), ((("c0", i), 1),))
                        for i in range(64)])
    for k in range(1, 11):
        g.rule_group(f"c{k}", [Rule((((f"c{k - 1}", i), 1),), (((f"c{k}", i), 1),))
                               for i in range(g.features[f"c{k}"].size)])
    g.feature("late", 4)
    g.rule_group("late", [Rule(((("c10", i), 1), (("a", 31 - i), 1)), ((("late", i), 1),))
                          for i in range(4)])
    return g


def frame_graph() -> Graph:
    """A 32-bit register file written by frames ``d3 d2 d1 header``: byte 0 in the header, byte k
    in the data token k places before it (absent data tokens are zero bytes)."""
    g = Graph()
    g.feature("waddr", ROWS, "onehot", token_input=True)
    g.feature("b0", 8, token_input=True)
    for k in (1, 2, 3):
        g.feature(f"d{k}", 8, token_input=True)
    g.feature("raddr", ROWS, "onehot", token_input=True)
    g.feature("r", 32)
    g.feature("r2", 32)
    g.bank("regs", ROWS, "bits")
    g.write("regs", "waddr", parts=[Part("b0")] + [Part(f"d{k}", k, 8 * k) for k in (1, 2, 3)])
    g.read("regs", "raddr", "r")
    copy_bits(g, "cp", "r", "r2")  # a rule reading the carrier dims of the read
    return g


def frame(row: int, value: int, read: int | None = None) -> list[dict]:
    """The protocol's frame for one write (leading zero bytes left out)."""
    data = value.to_bytes(4, "little")
    n = max(1, len(data.rstrip(b"\0")))
    out = [{f"d{k}": bits(data[k], 8)} for k in range(n - 1, 0, -1)]
    header = {"waddr": onehot(ROWS, row), "b0": bits(data[0], 8)}
    if read is not None:
        header["raddr"] = onehot(ROWS, read)
    return out + [header]


def read(row: int) -> dict:
    """The token that reads one row of frame_graph's register file."""
    return {"raddr": onehot(ROWS, row)}
