"""The GPU circuit's first stages: the prompt fills ROM, parameter and launch-shape banks through
conv1d frames, and an EXEC token fetches and decodes its block (weight-free evaluator)."""

import pytest

from qgpu import protocol as T
from qgpu.circuits.gpu import banks, encoding, machine
from qgpu.compiler.evaluate import Evaluator
from qgpu.driver import SUITE_DIR, compile_file, place_arguments
from qgpu.machine import rom
from qgpu.machine.isa import decode_instr
from tests.circuits.helpers import value
from tests.compiler.helpers import MODES, assert_exact


def dot_prompt() -> tuple[T.Launch, list[str]]:
    kernel = compile_file(SUITE_DIR / "dot.cu").kernel()
    args = [[1, 2, 3], [4, 5, 6], {"zeros": 1}, 3]
    place = place_arguments(kernel.ptx.params, args)
    launch = T.Launch.checked(kernel.program, (1, 1), (4, 1), place)
    return launch, T.prompt_tokens(launch)


def hot(v: list[int]) -> int | None:
    return v.index(1) if 1 in v else None


def test_every_token_has_one_hot_dim_per_selection_field() -> None:
    for token in T.vocabulary()[::37]:
        feats = encoding.features(token)
        for f in encoding.FIELDS:
            got = [feats.get(n) for n in f.features()]
            if got[0] is None:
                continue
            if f.code == "rails":
                assert all(a + b == 1 for a, b in zip(*got, strict=True)), (token, f.name)
            elif f.code == "onehot":
                assert sum(got[0]) == 1, (token, f.name)


def test_prompt_loads_rom_and_exec_fetches_every_slot() -> None:
    launch, prompt = dot_prompt()
    g = machine.build(execute=False)
    ev = Evaluator(g)
    for token in prompt:
        ev.step(encoding.features(token))
    rows = rom.rows(launch.program)
    for b in range(len(launch.program.blocks)):
        vals = ev.step(encoding.features(T.name(f"exec:{b}:w0:m15")))
        for s, p, bits in banks.rom_parts():
            want = rows.get((b, s), 0) >> (rom.PART_BITS * p) & ((1 << bits) - 1)
            assert value(vals[f"ins{s}.{p}"]) == want, (b, s, p)
        for s in range(4):
            ins = decode_instr(rows.get((b, s), 0))
            for field in ("op", "mod", "guard", "d", "a", "b", "c", "bi", "imm"):
                got = value([vals[f][i] for f, i in banks.instr_bits(s, field)])
                want = int(getattr(ins, field)) & 0xFFFFFFFF
                assert got == want, (b, s, field)


def test_parameters_and_shape_are_loaded() -> None:
    launch, prompt = dot_prompt()
    ev = Evaluator(machine.build(execute=False))
    for token in prompt:
        ev.step(encoding.features(token))
    assert {r: value(v[:32]) for r, v in ev.memory["param"].items()} == \
        dict(enumerate(launch.params))
    assert value(ev.memory["cfg.block"][0][:10]) == (4 - 1) | (1 - 1) << 5
    assert ev.memory["cfg.shared"][0] == [0] * 126


@pytest.mark.parametrize("dtype,step", MODES)
def test_compiled_layers_match_the_evaluator(dtype: str, step: bool) -> None:
    """The same prompt and EXEC tokens through the compiled 2B-shaped layers."""
    launch, prompt = dot_prompt()
    tokens = prompt + [T.name(f"exec:{b}:w0:m15") for b in range(len(launch.program.blocks))]
    g = machine.build(execute=False)
    assert_exact(g, [encoding.features(t) for t in tokens], dtype, step)
