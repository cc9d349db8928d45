"""The exact halves of a merged checkpoint: its base model, and (for launches) its circuit layers.

Stock `transformers` on the merged checkpoint is the reference path. Its text drift is the
base RMSNorms averaging over d_base + K dims, compensated by rescaled norm weights that bf16
has to round (docs/ARCHITECTURE.md, section 5). A runtime can avoid the drift altogether: text
sequences see exact zeros on the circuit dims and circuit layers add exact zeros to them, so
running text through the unpadded base weights with the base's own norms is the same
computation minus the padding — bit for bit the base model (tests/model/test_split.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import Qwen3_5ForCausalLM

from qgpu.compiler.weights import qwen_text_config
from qgpu.errors import UsageError
from qgpu.model.merge import METADATA_FILE, base_slice, tensor_files

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def read_metadata(merged_dir: Path) -> dict:
    """The merge's record (qgpu_circuit.json) of where base and circuit live in the checkpoint."""
    path = Path(merged_dir) / METADATA_FILE
    if not path.is_file():
        raise UsageError(f"{merged_dir} has no {METADATA_FILE}: not a qgpu merged checkpoint")
    return json.loads(path.read_text())


def load_text_model(merged_dir: Path, dtype: str = "bfloat16") -> Qwen3_5ForCausalLM:
    """The base half of a merged checkpoint as a stock `Qwen3_5ForCausalLM` over the base vocab.

    Weights are read as slices of the merged tensors (the padding is never loaded) plus the
    uncompensated norms the merge kept beside them.
    """
    merged_dir = Path(merged_dir)
    meta = read_metadata(merged_dir)
    if "text_norms" not in meta:
        raise UsageError(f"{merged_dir} predates the text-norms file; merge it again")
    d, vocab = meta["base"]["hidden_size"], meta["base"]["vocab_size"]
    first, last = meta["base_layers"]
    merged = json.loads((merged_dir / "config.json").read_text())
    config = qwen_text_config(
        {
            **merged,
            "hidden_size": d,
            "vocab_size": vocab,
            "num_hidden_layers": last - first,
            "tie_word_embeddings": meta["base"]["tied_embeddings"],
        },
        layer_types=merged["layer_types"][first:last],
    )
    state = _base_state(merged_dir, meta, d, vocab)
    with torch.device("meta"):
        model = Qwen3_5ForCausalLM(config)
    dtype_ = DTYPES[dtype]
    state = {k: v.to(dtype_) for k, v in state.items()}
    if config.tie_word_embeddings:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    model.load_state_dict(state, strict=True, assign=True)
    # rope frequencies are buffers computed (in float32, as stock loading keeps them) at init
    model.model.rotary_emb = type(model.model.rotary_emb)(config)
    return model.eval()


def _base_state(merged_dir: Path, meta: dict, d: int, vocab: int) -> dict[str, torch.Tensor]:
    first, last = meta["base_layers"]
    files = tensor_files(merged_dir)
    with safe_open(merged_dir / meta["text_norms"], "pt") as f:
        norms = {name: f.get_tensor(name) for name in f.keys()}
    state: dict[str, torch.Tensor] = {}
    for name, path in sorted(files.items()):
        with safe_open(path, "pt") as f:
            view = f.get_slice(name)
            if name == "model.embed_tokens.weight" or name == "lm_head.weight":
                state[name] = view[:vocab, :d]
            elif name == "model.norm.weight":
                state[name] = norms[name]
            elif name.startswith("model.layers."):
                index, key = name.removeprefix("model.layers.").split(".", 1)
                if not first <= int(index) < last:
                    continue
                new = f"model.layers.{int(index) - first}.{key}"
                state[new] = norms[name] if name in norms else base_slice(key, view, d)
            else:
                raise UsageError(f"{merged_dir}: unexpected tensor {name}")
    return state
