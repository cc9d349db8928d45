"""The base half of a merged checkpoint is bit for bit the base model: text KL exactly 0.

Stock `transformers` on the merged checkpoint (tests/model/test_merge.py) is the reference path,
whose bf16 drift comes from rounding the compensated norm weights; `load_text_model` is the path
a runtime uses for text, and these tests prove it is the base itself, in float32 and bfloat16.
"""

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from qgpu.circuits.null import null_circuit
from qgpu.errors import UsageError
from qgpu.model.merge import merge, read_text_config
from qgpu.model.split import load_text_model
from qgpu.model.tinybase import VOCAB_SIZE, write_tiny_base

pytestmark = pytest.mark.slow

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "我们今天下午去公园散步，然后回家吃晚饭。",
    "__global__ void add(int *a, int *b) { a[threadIdx.x] += b[threadIdx.x]; }",
)


def base_and_merged(root: Path, cache: Path, **base_options) -> tuple[Path, dict[str, Path]]:
    base = write_tiny_base(root / "base", seed=2, dtype="float32", cache_dir=cache,
                           **base_options)  # fmt: skip
    circuit = null_circuit(read_text_config(base))
    return base, {dt: merge(base, circuit, root / dt, dtype=dt) for dt in ("float32", "bfloat16")}


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory, cache: Path):
    return base_and_merged(tmp_path_factory.mktemp("official"), cache)


def batches(base: Path) -> list[torch.Tensor]:
    tokenizer = AutoTokenizer.from_pretrained(base)
    random = torch.randint(0, 248044, (2, 40), generator=torch.Generator().manual_seed(5))
    return [random] + [tokenizer(s, return_tensors="pt").input_ids for s in SENTENCES]


def assert_same_logits(base_model, text_model, ids: list[torch.Tensor]) -> None:
    with torch.no_grad():
        for x in ids:
            want, got = base_model(x).logits, text_model(x).logits
            assert got.shape[-1] == VOCAB_SIZE
            assert torch.equal(got, want), (got - want).abs().max()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_text_half_is_bitwise_the_base(official, dtype: str) -> None:
    base, merged = official
    want = AutoModelForCausalLM.from_pretrained(base, dtype=getattr(torch, dtype)).eval()
    model = load_text_model(merged[dtype], dtype)
    assert not any(t.is_meta for t in [*model.parameters(), *model.buffers()])
    assert {t.dtype for t in model.parameters()} == {getattr(torch, dtype)}
    assert_same_logits(want, model, batches(base))
    prompt = batches(base)[1]
    with torch.no_grad():
        a = want.generate(prompt, max_new_tokens=12, do_sample=False)
        b = model.generate(prompt, max_new_tokens=12, do_sample=False)
    assert torch.equal(a, b)


def test_untied_head_is_sliced_too(tmp_path: Path, cache: Path) -> None:
    base, merged = base_and_merged(tmp_path, cache, text_only=True, tied=False)
    want = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    model = load_text_model(merged["float32"], "float32")
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()
    assert_same_logits(want, model, batches(base)[:1])


def test_plain_checkpoints_are_refused(official) -> None:
    base, _ = official
    with pytest.raises(UsageError, match="not a qgpu merged checkpoint"):
        load_text_model(base)
