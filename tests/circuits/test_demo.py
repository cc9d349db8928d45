"""The demo register machine runs exactly inside a merged model through plain `generate`.

Built end to end (`qgpu.model.build`, tiny base with the real Qwen3.5-2B layer shapes,
--circuit demo), in float32 and bfloat16; every generated token and the registers read back
from the model's
recurrent state equal the Python model. More programs: QGPU_DEMO_PROGRAMS=300 pytest tests/circuits.
"""

import json
import os
import random
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from qgpu.circuits import demo
from qgpu.model.build import build
from qgpu.model.merge import ALLOCATION_FILE, METADATA_FILE

pytestmark = pytest.mark.slow

PROGRAMS = int(os.environ.get("QGPU_DEMO_PROGRAMS", "12"))
DTYPES = ("float32", "bfloat16")


@pytest.fixture(scope="module", params=DTYPES)
def merged(request, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp(f"demo-{request.param}")
    cache = tmp_path_factory.getbasetemp() / "demo-cache"
    result = build("tiny", out, circuit="demo", dtype=request.param, cache_dir=cache)
    model = AutoModelForCausalLM.from_pretrained(result.merged, dtype=getattr(torch, request.param))
    tokenizer = AutoTokenizer.from_pretrained(result.merged)
    banks = json.loads((Path(result.merged) / METADATA_FILE).read_text())["circuit"]["banks"]
    return request.param, model.eval(), tokenizer, banks


def test_random_programs_are_exact(merged) -> None:
    dtype, model, tokenizer, banks = merged
    rng = random.Random(7)
    for n in range(PROGRAMS):
        program = demo.random_program(rng)
        want, regs = demo.reference(program, 40)
        got, got_regs = demo.run(model, tokenizer, banks, program, max_steps=40)
        listing = "; ".join(map(str, program))
        first = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                     min(len(got), len(want)))
        assert got == want, f"{dtype} program {n} ({listing}): first divergence at token {first}"
        if want[-1] == demo.HALT_NAME:
            assert got_regs == regs, f"{dtype} program {n} ({listing})"


def test_build_exports_the_allocation_map(merged) -> None:
    dtype, model, _, banks = merged
    path = Path(model.name_or_path)
    meta = json.loads((path / METADATA_FILE).read_text())["circuit"]["allocation"]
    table = (path / ALLOCATION_FILE).read_text()
    assert len(meta["layers"]) == 3 and meta["k_used"] > 0
    assert table.startswith(f"3 layers, {meta['k_used']} residual dims")
    assert "bank rom (8 rows)" in table and "rules decode" in table and " anchor" in table
    assert {r["what"] for r in meta["residual"]} >= {"anchor", "fetch", "ins", "out"}


def test_prefill_equals_token_by_token(merged) -> None:
    """Feeding prompt + generated tokens in one pass predicts the same tokens and leaves the same
    registers as generating them one at a time."""
    dtype, model, tokenizer, banks = merged
    program = [demo.Ins("LI", 0, 3), demo.Ins("ADDI", 1, 5), demo.Ins("ADD", 1, 0),
               demo.Ins("ADDI", 0, 15), demo.Ins("BNZ", 0, 2), demo.Ins("MOV", 2, 1),
               demo.Ins("HALT")]
    generated, regs = demo.run(model, tokenizer, banks, program, max_steps=40)
    want, want_regs = demo.reference(program, 40)
    assert generated == want and regs == want_regs == [0, 11, 11, 0]
    prompt_ids = tokenizer.convert_tokens_to_ids(demo.prompt(program))
    ids = torch.tensor([prompt_ids + tokenizer.convert_tokens_to_ids(generated[:-1])])
    with torch.no_grad():
        out = model(ids, use_cache=True)
    predicted = out.logits[0, len(prompt_ids) - 1:].argmax(-1).tolist()
    assert tokenizer.convert_ids_to_tokens(predicted) == generated
    assert demo.read_registers(out.past_key_values, banks) == want_regs
