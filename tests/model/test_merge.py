"""Isolation proofs for the widened-residual merge, on a tiny base with the "null" circuit.

(a) base layers add exactly 0 to circuit tokens; (b) circuit layers add exactly 0 to text tokens
and circuit-token logits are exactly 0 at text positions; (c) text next-token KL(base || merged)
on the base vocabulary, with the circuit-token probability mass beside it. Plus the checkpoint
itself: stock loading, generate, tokenizer ids, both official layouts, untied heads, contract
errors.
"""

import functools
import json
import math
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

from qgpu.circuits.null import null_circuit
from qgpu.compiler.numerics import ANCHOR_EXP
from qgpu.compiler.weights import CircuitWeights
from qgpu.errors import UsageError
from qgpu.model import merge as merge_module
from qgpu.model.merge import (
    METADATA_FILE,
    TEXT_NORMS_FILE,
    merge,
    read_text_config,
    tensor_files,
)
from qgpu.model.tinybase import VOCAB_SIZE, write_tiny_base
from tests.model.helpers import SENTENCES, measure, text_batches, tokenizer_of, trace

pytestmark = pytest.mark.slow

D_BASE = 64
SEED = 1
DTYPES = ("float32", "bfloat16")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> Path:
    """The official (vision + MTP) layout, fp32 weights so both output dtypes round from them."""
    return write_tiny_base(
        tmp_path_factory.mktemp("base"), seed=SEED, dtype="float32", cache_dir=cache
    )


@pytest.fixture(scope="module")
def circuit(base: Path) -> CircuitWeights:
    return null_circuit(read_text_config(base))


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory, base: Path, circuit) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("merged")
    return {dt: merge(base, circuit, root / dt, dtype=dt) for dt in DTYPES}


@functools.cache
def load(path: Path, dtype: str) -> torch.nn.Module:
    return AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)).eval()


def tensors(path: Path) -> dict[str, torch.Tensor]:
    """All model tensors of a checkpoint, single-file or sharded."""
    out = {}
    for name, file in tensor_files(path).items():
        with safe_open(file, "pt") as f:
            out[name] = f.get_tensor(name)
    return out


def test_checkpoint_layout(merged: dict[str, Path], base: Path, circuit) -> None:
    path = merged["float32"]
    k = circuit.k_dims
    assert (D_BASE + k) == 81 and k == 17  # 64 + 17 = 9**2
    config = json.loads((path / "config.json").read_text())
    assert config["architectures"] == ["Qwen3_5ForCausalLM"]
    assert config["hidden_size"] == 81
    assert config["vocab_size"] == VOCAB_SIZE + 4
    assert config["num_hidden_layers"] == 6
    assert config["layer_types"] == ["linear_attention"] * 5 + ["full_attention"]
    assert config["rms_norm_eps"] == 1e-6
    assert config["tie_word_embeddings"] is True
    meta = json.loads((path / METADATA_FILE).read_text())
    assert meta["circuit_dims"] == [64, 81] and meta["circuit_layers"] == [0, 2]
    assert meta["token_ids"] == {f"<|gpu:null{i}|>": VOCAB_SIZE + i for i in range(4)}
    assert meta["anchor"] == {"dims": [64], "values": [9 * 2.0**ANCHOR_EXP], "exp": ANCHOR_EXP}
    assert meta["base"]["dropped_tensors"]["vision"] > 0 and meta["base"]["dropped_tensors"]["mtp"]
    assert {p.name for p in path.iterdir()} >= {
        "model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
        "tokenizer_config.json", "chat_template.jinja", METADATA_FILE, TEXT_NORMS_FILE,
    }  # fmt: skip
    got, src = tensors(path), tensors(base)
    with safe_open(path / TEXT_NORMS_FILE, "pt") as f:  # the uncompensated base norms
        kept = {name: f.get_tensor(name) for name in f.keys()}
    assert len(kept) == 2 * 4 + 1
    assert torch.equal(kept["model.norm.weight"], src["model.language_model.norm.weight"])
    assert torch.equal(kept["model.layers.5.post_attention_layernorm.weight"],
                       src["model.language_model.layers.3.post_attention_layernorm.weight"])

    assert "lm_head.weight" not in got
    assert not any(n.startswith(("mtp.", "model.visual.", "model.language_model.")) for n in got)
    emb, base_emb = (
        got["model.embed_tokens.weight"],
        src["model.language_model.embed_tokens.weight"],
    )
    assert torch.equal(emb[:VOCAB_SIZE, :D_BASE], base_emb)
    assert not emb[:VOCAB_SIZE, D_BASE:].any() and not emb[VOCAB_SIZE:, :D_BASE].any()
    assert torch.equal(emb[VOCAB_SIZE:, D_BASE:], circuit.token_embeddings)
    scale = math.sqrt(64 / 81)
    for i in range(4):  # base layer i is merged layer i + 2
        b, m = f"model.language_model.layers.{i}.", f"model.layers.{i + 2}."
        for norm in ("input_layernorm.weight", "post_attention_layernorm.weight"):
            w = got[m + norm]
            torch.testing.assert_close(w[:D_BASE], (1 + src[b + norm]) * scale - 1)
            assert torch.equal(w[D_BASE:], torch.full((k,), -1.0))
        up = got[m + "mlp.up_proj.weight"]
        assert (
            torch.equal(up[:, :D_BASE], src[b + "mlp.up_proj.weight"]) and not up[:, D_BASE:].any()
        )
        down = got[m + "mlp.down_proj.weight"]
        assert (
            torch.equal(down[:D_BASE], src[b + "mlp.down_proj.weight"]) and not down[D_BASE:].any()
        )
    for i, layer in enumerate(circuit.layers):
        m = f"model.layers.{i}."
        qkv = got[m + "linear_attn.in_proj_qkv.weight"]
        assert torch.equal(qkv[:, D_BASE:], layer["linear_attn.in_proj_qkv.weight"])
        assert not qkv[:, :D_BASE].any()
        out = got[m + "linear_attn.out_proj.weight"]
        assert torch.equal(out[D_BASE:], layer["linear_attn.out_proj.weight"])
        assert not out[:D_BASE].any()
        norm = got[m + "input_layernorm.weight"]
        assert torch.equal(norm[D_BASE:], layer["input_layernorm.weight"])
        assert torch.equal(norm[:D_BASE], torch.full((D_BASE,), -1.0))
        assert torch.equal(got[m + "linear_attn.A_log"], layer["linear_attn.A_log"])
    final = got["model.norm.weight"]
    torch.testing.assert_close(
        final[:D_BASE], (1 + src["model.language_model.norm.weight"]) * scale - 1
    )
    assert torch.equal(final[D_BASE:], circuit.final_norm)


def shard(path: Path) -> None:
    """Split a checkpoint into two safetensors files with an index, as big repos ship."""
    weights = tensors(path)
    (path / "model.safetensors").unlink()
    names = sorted(weights)
    files = {"model-00001-of-00002.safetensors": names[::2],
             "model-00002-of-00002.safetensors": names[1::2]}  # fmt: skip
    for file, part in files.items():
        save_file({n: weights[n] for n in part}, path / file, metadata={"format": "pt"})
    index = {"metadata": {}, "weight_map": {n: f for f, part in files.items() for n in part}}
    (path / "model.safetensors.index.json").write_text(json.dumps(index))


def test_both_layouts_and_sharding_merge_to_the_same_tensors(
    tmp_path: Path, merged: dict[str, Path], circuit, cache: Path, monkeypatch
) -> None:
    """A sharded text-only base gives the tensors of the official one; big outputs shard too."""
    text_only = write_tiny_base(
        tmp_path / "text", seed=SEED, dtype="float32", text_only=True, cache_dir=cache
    )
    shard(text_only)
    monkeypatch.setattr(merge_module, "SHARD_BYTES", 40 << 20)
    out = merge(text_only, circuit, tmp_path / "merged", dtype="float32")
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    assert all((out / f).is_file() for f in index["weight_map"].values())
    a, b = tensors(out), tensors(merged["float32"])
    assert a.keys() == b.keys()
    assert all(torch.equal(a[n], b[n]) for n in a)
    model = load(out, "float32")
    ids = torch.tensor([[9707, 11, 1879]])
    with torch.no_grad():
        torch.testing.assert_close(
            model(ids).logits, load(merged["float32"], "float32")(ids).logits, rtol=0, atol=0
        )


@pytest.mark.parametrize("dtype", DTYPES)
def test_stock_load_tokenizer_and_generate(merged: dict[str, Path], base: Path, dtype: str) -> None:
    path = merged[dtype]
    model = AutoModelForCausalLM.from_pretrained(path)  # dtype from config.json
    assert type(model).__name__ == "Qwen3_5ForCausalLM"
    assert model.dtype == getattr(torch, dtype)
    tokenizer, base_tokenizer = tokenizer_of(path), tokenizer_of(base)
    names = [f"<|gpu:null{i}|>" for i in range(4)]
    ids = list(range(VOCAB_SIZE, VOCAB_SIZE + 4))
    assert tokenizer.convert_tokens_to_ids(names) == ids
    text = "x = 1" + names[2] + names[0] + "2"
    assert tokenizer(text).input_ids == [*base_tokenizer("x = 1").input_ids, ids[2], ids[0],
                                         *base_tokenizer("2").input_ids]  # fmt: skip
    assert tokenizer.decode(ids[:2]) == names[0] + names[1]
    assert (
        tokenizer.decode([ids[0], *base_tokenizer("ok").input_ids], skip_special_tokens=True)
        == "ok"
    )
    for sentence in SENTENCES:
        assert tokenizer(sentence).input_ids == base_tokenizer(sentence).input_ids
    chat = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert "<|im_start|>user\nhi<|im_end|>" in chat

    prompt = tokenizer("Hello, world", return_tensors="pt").input_ids
    out = model.generate(prompt, max_new_tokens=4, do_sample=False)
    assert out.shape == (1, prompt.shape[1] + 4)
    launch = torch.tensor([[ids[0], ids[1], ids[3]]])
    assert model.generate(launch, max_new_tokens=3, do_sample=False).shape == (1, 6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_base_layers_add_exactly_zero_to_circuit_tokens(
    merged: dict[str, Path], dtype: str
) -> None:
    model = load(merged[dtype], dtype)
    ids = VOCAB_SIZE + torch.tensor([[0, 1, 2, 3, 3, 0, 2, 1, 1, 0, 3, 2]])
    records, logits = trace(model, ids)
    assert len(records) == 6
    for i, (inp, out) in enumerate(records):
        assert not inp[..., :D_BASE].any() and not out[..., :D_BASE].any(), f"layer {i}"
        if i >= 2:
            assert torch.equal(out, inp), f"base layer {i - 2} changed a circuit token"
        else:  # the circuit layers do write: the proof above is not vacuous
            assert not torch.equal(out, inp)
    assert not logits[..., :VOCAB_SIZE].any()  # base tokens' logits: exactly 0
    assert logits[..., VOCAB_SIZE:].abs().min() > 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_anchor_makes_circuit_norms_divide_by_exactly_a_power_of_two(
    merged: dict[str, Path], dtype: str
) -> None:
    """The contract the compiler relies on: sqrt(D) * 2**ANCHOR_EXP on the anchor dim dominates
    mean x^2, so every RMSNorm of a circuit token is x * 2**-ANCHOR_EXP * (1 + w), bit for bit."""
    model = load(merged[dtype], dtype)
    norms = {"final": model.model.norm}
    for i in range(2):
        layer = model.model.layers[i]
        norms |= {f"{i}.input": layer.input_layernorm, f"{i}.post": layer.post_attention_layernorm}
    seen = {}

    def hook(name: str):
        return lambda module, args, output: seen.update({name: (args[0], output, module.weight)})

    handles = [norm.register_forward_hook(hook(name)) for name, norm in norms.items()]
    try:
        with torch.no_grad():
            model(VOCAB_SIZE + torch.tensor([[0, 1, 2, 3, 3, 0, 2, 1]]))
    finally:
        for handle in handles:
            handle.remove()
    assert seen.keys() == norms.keys()
    for name, (x, out, w) in seen.items():
        expected = (x.float() * 2.0**-ANCHOR_EXP * (1 + w.float())).to(x.dtype)
        assert torch.equal(out[..., D_BASE:], expected[..., D_BASE:]), name
        assert (x[..., D_BASE] == 9 * 2.0**ANCHOR_EXP).all(), name


@pytest.mark.parametrize("dtype", DTYPES)
def test_circuit_layers_add_exactly_zero_to_text(
    merged: dict[str, Path], base: Path, dtype: str
) -> None:
    model = load(merged[dtype], dtype)
    ids = tokenizer_of(base)(SENTENCES[1] + SENTENCES[4], return_tensors="pt").input_ids
    records, logits = trace(model, ids)
    for i, (inp, out) in enumerate(records):
        assert not inp[..., D_BASE:].any() and not out[..., D_BASE:].any(), f"layer {i}"
        if i < 2:
            assert torch.equal(out, inp), f"circuit layer {i} changed a text token"
    assert not logits[..., VOCAB_SIZE:].any()  # circuit tokens' logits: exactly 0


def report(label: str, m: dict) -> None:
    print(f"\n  {label:42s} KL max {m['max']:.2e} mean {m['mean']:.2e}"
          f"   circuit-token mass max {m['mass']:.2e}", end="")  # fmt: skip


def test_text_kl_float32(merged: dict[str, Path], base: Path) -> None:
    base_model, model = load(base, "float32"), load(merged["float32"], "float32")
    for kind, batches in text_batches(base).items():
        m = measure(base_model, model, batches)
        report(f"fp32 {kind}: KL(base || merged)", m)
        assert m["max"] <= 1e-5
        assert 0 < m["mass"] < 1e-4


def test_text_kl_bfloat16(merged: dict[str, Path], base: Path) -> None:
    """bf16 text drift is bf16's own rounding noise, not the merge's.

    This random tiny base is chaotic in bf16: nudging one element of one norm weight of the plain
    bf16 base by 2**-12 already moves its next-token KL by ~1.5e-4 (mean), and the gap between
    its own fp32 and bf16 runs is ~6e-4. The merge has to change every base norm weight (the
    rescaled w is rounded to bf16 again; keeping just those in fp32 drops the same-dtype KL
    tenfold, to ~8e-5), so KL(base bf16 || merged bf16) lands at the bf16 floor, far above 1e-5,
    while fp32 shows ~1e-10.
    What the merge must not do is add drift beyond bf16's own: against the exact (fp32) base,
    the merged bf16 model is compared with the plain bf16 base.
    """
    exact, base16 = load(base, "float32"), load(base, "bfloat16")
    model = load(merged["bfloat16"], "bfloat16")
    nudged = AutoModelForCausalLM.from_pretrained(base, dtype=torch.bfloat16).eval()
    with torch.no_grad():
        nudged.model.layers[0].input_layernorm.weight[0] += 2.0**-12
    for kind, batches in text_batches(base).items():
        same_dtype = measure(base16, model, batches)
        floor = measure(exact, base16, batches)
        merged_vs_exact = measure(exact, model, batches)
        chaos = measure(base16, nudged, batches)
        report(f"bf16 {kind}: KL(base bf16 || merged bf16)", same_dtype)
        report(f"bf16 {kind}: KL(base fp32 || base bf16)", floor)
        report(f"bf16 {kind}: KL(base fp32 || merged bf16)", merged_vs_exact)
        report(f"bf16 {kind}: KL(base bf16 || one weight +2^-12)", chaos)
        assert chaos["mean"] > 1e-5  # 1e-5 is out of reach in bf16 for any change at all
        assert merged_vs_exact["mean"] <= 1.5 * floor["mean"]
        assert merged_vs_exact["max"] <= 2.0 * floor["max"]
        assert 0 < same_dtype["mass"] < 1e-4


def untied(tmp_path: Path, cache: Path) -> Path:
    """A text-only tiny base with its own lm_head (like Qwen3.5-9B)."""
    return write_tiny_base(tmp_path / "untied", seed=SEED, dtype="float32", text_only=True,
                           tied=False, cache_dir=cache)  # fmt: skip


def test_untied_base_gets_circuit_rows_in_its_head(tmp_path: Path, circuit, cache: Path) -> None:
    base = untied(tmp_path, cache)
    out = merge(base, circuit, tmp_path / "merged", dtype="float32")
    head, src = tensors(out)["lm_head.weight"], tensors(base)["lm_head.weight"]
    assert json.loads((out / "config.json").read_text())["tie_word_embeddings"] is False
    assert torch.equal(head[:VOCAB_SIZE, :D_BASE], src) and not head[:VOCAB_SIZE, D_BASE:].any()
    assert torch.equal(head[VOCAB_SIZE:], tensors(out)["model.embed_tokens.weight"][VOCAB_SIZE:])
    base_model, model = load(base, "float32"), load(out, "float32")
    ids = torch.randint(0, 248044, (1, 32), generator=torch.Generator().manual_seed(0))
    m = measure(base_model, model, [ids])
    report("fp32 untied head: KL(base || merged)", m)
    assert m["max"] <= 1e-5
    with torch.no_grad():
        assert not model(ids).logits[..., VOCAB_SIZE:].any()


def broken(circuit: CircuitWeights, **changes) -> CircuitWeights:
    return CircuitWeights(**{**circuit.__dict__, **changes})


def test_contract_violations_are_usage_errors(tmp_path: Path, base: Path, circuit) -> None:
    bad_k = broken(circuit, k_dims=3)  # 67: neither a square nor a sum of two
    with pytest.raises(UsageError, match="no exact anchors"):
        merge(base, bad_k, tmp_path / "a")
    tokens = circuit.token_embeddings.clone()
    tokens[1, 0] = 1.0
    with pytest.raises(UsageError, match="anchor"):
        merge(base, broken(circuit, token_embeddings=tokens), tmp_path / "b")
    layer = dict(circuit.layers[0])
    layer["mlp.up_proj.weight"] = layer["mlp.up_proj.weight"][:, :-1]
    with pytest.raises(UsageError, match="mlp.up_proj.weight"):
        merge(base, broken(circuit, layers=[layer]), tmp_path / "c")
    with pytest.raises(UsageError, match="not unique"):
        merge(base, broken(circuit, token_names=["<|a|>"] * 4), tmp_path / "d")
    with pytest.raises(UsageError, match="already in the base tokenizer"):
        merge(base, broken(circuit, token_names=["<|im_end|>", "a", "b", "c"]), tmp_path / "e")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(UsageError, match="not empty"):
        merge(base, circuit, tmp_path / "full")
    with pytest.raises(UsageError, match="config.json"):
        merge(tmp_path / "full", circuit, tmp_path / "f")
