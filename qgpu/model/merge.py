"""Merge compiled circuit layers into a Qwen3.5 checkpoint by widening its residual stream.

The merged hidden size is D = d_base + K. Base weights are zero-padded so that base layers read
and write only dims < d_base; the circuit owns dims d_base..D-1 and its layers run first. Every
RMSNorm multiplies the dims its layer does not own by exactly 0 (zero-centred weight -1), so each
side's projections see exact zeros from the other side: isolation holds by construction, in
float32 and bfloat16 alike (docs/ARCHITECTURE.md, section 5; proofs in tests/model/test_merge.py).

What does change for text is the base RMSNorms' denominator: they now average x^2 over D dims,
d_base of which carry text. Scaling their weights as (1+w)*sqrt(d_base/D) - 1 undoes that; the
only residue is rms_norm_eps, which acts as if multiplied by D/d_base (negligible next to the
activations), and the rounding of the new weights. The global eps is left alone: it also feeds
the GDN-internal and q/k head norms, which are not widened.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from tqdm import tqdm
from transformers import GenerationConfig, Qwen3_5ForCausalLM, Qwen3_5TextConfig

from qgpu.compiler import numerics as nx
from qgpu.compiler.schedule import allocation_table
from qgpu.compiler.weights import (
    CIRCUIT_LAYER_KEYS,
    CIRCUIT_LAYER_TYPE,
    CircuitWeights,
    circuit_layer_shapes,
    qwen_text_config,
)
from qgpu.errors import UsageError

METADATA_FILE = "qgpu_circuit.json"
METADATA_FORMAT = 2
ALLOCATION_FILE = "qgpu_allocation.txt"
"""The circuit's allocation map as a readable table (the JSON is in METADATA_FILE)."""
TEXT_NORMS_FILE = "qgpu_text_norms.safetensors"
"""The base's own hidden-size norm weights (before compensation), under their merged names: with
them the base half of a merged checkpoint is exactly the base (qgpu/split.py)."""
SHARD_BYTES = 2 << 30
"""Output shard size: bounds the merge's memory to about one shard plus one base tensor."""

_READS_HIDDEN = frozenset({
    "linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight",
    "linear_attn.in_proj_b.weight", "linear_attn.in_proj_a.weight", "self_attn.q_proj.weight",
    "self_attn.k_proj.weight", "self_attn.v_proj.weight", "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
})  # fmt: skip
_WRITES_HIDDEN = frozenset(
    {"linear_attn.out_proj.weight", "self_attn.o_proj.weight", "mlp.down_proj.weight"}
)
_HIDDEN_NORMS = frozenset({"input_layernorm.weight", "post_attention_layernorm.weight"})
_NO_HIDDEN_AXIS = frozenset({
    "linear_attn.conv1d.weight", "linear_attn.dt_bias", "linear_attn.A_log",
    "linear_attn.norm.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
})  # fmt: skip
_DROPPED_PREFIXES = {"model.visual.": "vision", "mtp.": "mtp"}
_TOKENIZER_FILES = (
    "tokenizer_config.json", "chat_template.jinja", "chat_template.json", "vocab.json",
    "merges.txt", "special_tokens_map.json",
)  # fmt: skip
"""Tokenizer files copied unchanged (tokenizer.json is rewritten with the circuit tokens)."""


def read_text_config(base_dir: Path) -> dict:
    """The text-model config of a base checkpoint, from either official layout."""
    config = _read_json(Path(base_dir) / "config.json")
    return dict(config.get("text_config", config))


def merge(
    base_dir: Path, circuit: CircuitWeights, out_dir: Path, *, dtype: str = "bfloat16"
) -> Path:
    """Write base + circuit as one text-only `Qwen3_5ForCausalLM` checkpoint in `out_dir`.

    Accepts both official layouts (`Qwen3_5ForConditionalGeneration`, text-only
    `Qwen3_5ForCausalLM`). Vision tower and MTP head are dropped, as `AutoModelForCausalLM`
    drops them on load anyway. Circuit layers come first, then the base layers (indices shifted
    by the number of circuit layers); circuit tokens get ids from the base vocab_size up. The
    result loads with stock `AutoModelForCausalLM.from_pretrained(out_dir)`. Tensors stream one at
    a time into shards, so the base is never held in memory twice.
    """
    base_dir, out_dir = Path(base_dir), Path(out_dir)
    if dtype not in ("bfloat16", "float32"):
        raise UsageError(f"dtype must be bfloat16 or float32, got {dtype!r}")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise UsageError(f"{out_dir} is not empty; refusing to merge into it")
    with _BaseCheckpoint(base_dir) as base:
        d_base, vocab = base.config.hidden_size, base.config.vocab_size
        hidden = d_base + circuit.k_dims
        try:
            anchors = nx.anchors(hidden, circuit.k_dims)  # the numerics contract
        except ValueError as e:
            raise UsageError(f"d_base {d_base} + K {circuit.k_dims}: {e}") from None
        _check_circuit(circuit, anchors)
        token_ids = {name: vocab + i for i, name in enumerate(circuit.token_names)}
        tokenizer = _tokenizer_with(base_dir, token_ids)
        n_circuit, n_base = len(circuit.layers), base.config.num_hidden_layers
        config = qwen_text_config(
            {
                **base.text,
                "hidden_size": hidden,
                "vocab_size": vocab + len(circuit.token_names),
                "num_hidden_layers": n_circuit + n_base,
                "tie_word_embeddings": base.tied,
                "mtp_num_hidden_layers": 0,
            },
            layer_types=[CIRCUIT_LAYER_TYPE] * n_circuit + list(base.config.layer_types),
        )
        config.architectures = ["Qwen3_5ForCausalLM"]
        config.dtype = dtype
        plan = _plan(base, circuit, _Widener(d_base, hidden, getattr(torch, dtype)))
        shapes = _expected_shapes(config, [name for name, _ in plan])
        out_dir.mkdir(parents=True, exist_ok=True)
        _write_shards(out_dir, plan, shapes)
        _write_text_norms(out_dir, base, n_circuit)

    config.save_pretrained(out_dir)
    _write_generation_config(base_dir, out_dir, config)
    _write_tokenizer(base_dir, out_dir, tokenizer, token_ids)
    metadata = {
        "format": METADATA_FORMAT,
        "dtype": dtype,
        "base": {
            "architecture": base.architecture,
            "hidden_size": d_base,
            "num_layers": n_base,
            "vocab_size": vocab,
            "tied_embeddings": base.tied,
            "dropped_tensors": base.dropped,
        },
        "hidden_size": hidden,
        "circuit_dims": [d_base, hidden],
        "circuit_layers": [0, n_circuit],
        "base_layers": [n_circuit, n_circuit + n_base],
        "anchor": {"dims": [d_base + d for d in anchors], "values": list(anchors.values()),
                   "exp": nx.ANCHOR_EXP},
        "norm_scale": math.sqrt(d_base / hidden),
        "text_norms": TEXT_NORMS_FILE,
        "token_ids": token_ids,
        "circuit": circuit.metadata,
    }
    (out_dir / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
    if "allocation" in circuit.metadata:
        table = allocation_table(circuit.metadata["allocation"])
        (out_dir / ALLOCATION_FILE).write_text(table + "\n")
    return out_dir


_Plan = list[tuple[str, Callable[[], torch.Tensor]]]


def _plan(base: _BaseCheckpoint, circuit: CircuitWeights, widen: _Widener) -> _Plan:
    """Output tensor names in file order, each with a thunk that reads and widens its source."""
    lm = base.lm
    tokens = circuit.token_embeddings

    def vocab_matrix(name: str) -> Callable[[], torch.Tensor]:
        return lambda: widen.vocab(base.get(name), tokens)

    shapes = circuit_layer_shapes(base.text, circuit.k_dims)

    def circuit_tensor(i: int, key: str) -> Callable[[], torch.Tensor]:
        return lambda: widen.circuit(key, _layer_tensor(circuit, i, key, shapes))

    def base_tensor(key: str, name: str) -> Callable[[], torch.Tensor]:
        return lambda: widen.base(key, base.get(name))

    n_circuit = len(circuit.layers)
    plan: _Plan = [("model.embed_tokens.weight", vocab_matrix(lm + "embed_tokens.weight"))]
    for i in range(n_circuit):
        plan += [(f"model.layers.{i}.{key}", circuit_tensor(i, key)) for key in CIRCUIT_LAYER_KEYS]
    for i in range(base.config.num_hidden_layers):
        prefix = f"{lm}layers.{i}."
        plan += [
            (
                f"model.layers.{n_circuit + i}.{name.removeprefix(prefix)}",
                base_tensor(name.removeprefix(prefix), name),
            )
            for name in sorted(n for n in base.files if n.startswith(prefix))
        ]
    final = lm + "norm.weight"
    plan.append(
        ("model.norm.weight", lambda: widen.final_norm(base.get(final), circuit.final_norm))
    )
    if not base.tied:
        plan.append(("lm_head.weight", vocab_matrix("lm_head.weight")))
    return plan


def _write_text_norms(out_dir: Path, base: _BaseCheckpoint, n_circuit: int) -> None:
    """The uncompensated base norms, as stored in the base (stock loading never reads this)."""
    norms = {"model.norm.weight": base.get(base.lm + "norm.weight")}
    for i in range(base.config.num_hidden_layers):
        for key in sorted(_HIDDEN_NORMS):
            norms[f"model.layers.{n_circuit + i}.{key}"] = base.get(f"{base.lm}layers.{i}.{key}")
    save_file({k: v.contiguous() for k, v in norms.items()}, out_dir / TEXT_NORMS_FILE,
              metadata={"format": "pt"})  # fmt: skip
    (out_dir / TEXT_NORMS_FILE).chmod(0o644)


def base_slice(key: str, t, d_base: int) -> torch.Tensor:
    """Undo `_Widener.base` for one base-layer tensor (norms excepted: see TEXT_NORMS_FILE).
    `t` is a tensor or a safetensors slice, so the padding need not be read at all."""
    if key in _READS_HIDDEN:
        return t[:, :d_base]
    if key in _WRITES_HIDDEN:
        return t[:d_base]
    if key in _NO_HIDDEN_AXIS:
        return t[:]
    raise UsageError(f"base layer tensor {key} has no known place in the widened model")


class _BaseCheckpoint:
    """Lazy, name-indexed access to a base checkpoint's safetensors, in either layout."""

    def __init__(self, base_dir: Path) -> None:
        config_path = base_dir / "config.json"
        if not config_path.is_file():
            raise UsageError(f"{base_dir} has no config.json: not a checkpoint directory")
        config = _read_json(config_path)
        self.architecture = (config.get("architectures") or ["?"])[0]
        if "text_config" in config:
            self.text = dict(config["text_config"])
            self.lm = "model.language_model."
            tied = config.get("tie_word_embeddings", self.text.get("tie_word_embeddings"))
        else:
            self.text = dict(config)
            self.lm = "model."
            tied = config.get("tie_word_embeddings")
        if self.text.get("model_type", "qwen3_5_text") != "qwen3_5_text":
            raise UsageError(f"{base_dir}: not a Qwen3.5 checkpoint ({self.text['model_type']})")
        self.config = qwen_text_config(self.text, layer_types=self.text.get("layer_types"))
        self.files = tensor_files(base_dir)
        self.dropped: dict[str, int] = {}
        for name in self.files:
            part = next((v for k, v in _DROPPED_PREFIXES.items() if name.startswith(k)), None)
            if part:
                self.dropped[part] = self.dropped.get(part, 0) + 1
            elif not name.startswith(self.lm) and name != "lm_head.weight":
                raise UsageError(f"{base_dir}: unexpected tensor {name}")
        has_head = "lm_head.weight" in self.files
        self.tied = bool(tied) if tied is not None else not has_head
        if not self.tied and not has_head:
            raise UsageError(f"{base_dir}: untied embeddings but no lm_head.weight")
        self._handles: dict[Path, object] = {}
        self._stack = contextlib.ExitStack()

    def get(self, name: str) -> torch.Tensor:
        path = self.files.get(name)
        if path is None:
            raise UsageError(f"base checkpoint has no tensor {name}")
        if path not in self._handles:
            self._handles[path] = self._stack.enter_context(safe_open(path, "pt"))
        return self._handles[path].get_tensor(name)

    def __enter__(self) -> _BaseCheckpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        self._handles.clear()


class _Widener:
    """Places base and circuit tensors into the widened residual, in the output dtype."""

    def __init__(self, d_base: int, hidden: int, dtype: torch.dtype) -> None:
        self.d, self.hidden, self.dtype = d_base, hidden, dtype
        self.scale = math.sqrt(d_base / hidden)

    def _zeros(self, *shape: int) -> torch.Tensor:
        return torch.zeros(shape, dtype=self.dtype)

    def base(self, key: str, t: torch.Tensor) -> torch.Tensor:
        if key in _READS_HIDDEN:
            out = self._zeros(t.shape[0], self.hidden)
            out[:, : self.d] = t
        elif key in _WRITES_HIDDEN:
            out = self._zeros(self.hidden, t.shape[1])
            out[: self.d] = t
        elif key in _HIDDEN_NORMS:
            out = self._norm(self._compensate(t), torch.full((self.hidden - self.d,), -1.0))
        elif key in _NO_HIDDEN_AXIS:
            out = t.to(self.dtype)
        else:
            raise UsageError(f"base layer tensor {key} has no known place in the widened model")
        return out

    def circuit(self, key: str, t: torch.Tensor) -> torch.Tensor:
        if key in _READS_HIDDEN:
            out = self._zeros(t.shape[0], self.hidden)
            out[:, self.d :] = t
        elif key in _WRITES_HIDDEN:
            out = self._zeros(self.hidden, t.shape[1])
            out[self.d :] = t
        elif key in _HIDDEN_NORMS:
            out = self._norm(torch.full((self.d,), -1.0), t)
        else:
            out = t.to(self.dtype)
        return out

    def final_norm(self, base: torch.Tensor, circuit: torch.Tensor) -> torch.Tensor:
        return self._norm(self._compensate(base), circuit)

    def vocab(self, base: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Embedding or untied head: base rows on base dims, circuit rows on circuit dims."""
        out = self._zeros(base.shape[0] + tokens.shape[0], self.hidden)
        out[: base.shape[0], : self.d] = base
        out[base.shape[0] :, self.d :] = tokens
        return out

    def _compensate(self, w: torch.Tensor) -> torch.Tensor:
        return (1.0 + w.float()) * self.scale - 1.0

    def _norm(self, base_dims: torch.Tensor, circuit_dims: torch.Tensor) -> torch.Tensor:
        return torch.cat([base_dims.float(), circuit_dims.float()]).to(self.dtype)


def _check_circuit(circuit: CircuitWeights, anchors: dict[int, float]) -> None:
    """Fail early, naming the tensor, when the compiler's output breaks the merge contract
    (layers are checked as they are written: ``_layer_tensor``)."""
    k = circuit.k_dims
    n = len(circuit.token_names)
    if len(set(circuit.token_names)) != n:
        raise UsageError("circuit token names are not unique")
    if tuple(circuit.token_embeddings.shape) != (n, k):
        raise UsageError(
            f"token_embeddings shape {tuple(circuit.token_embeddings.shape)}, expected {(n, k)}"
        )
    if tuple(circuit.final_norm.shape) != (k,):
        raise UsageError(f"final_norm shape {tuple(circuit.final_norm.shape)}, expected {(k,)}")
    for dim, value in anchors.items():
        if n and not bool((circuit.token_embeddings[:, dim] == value).all()):
            raise UsageError(
                f"every circuit token needs the anchor {value} on circuit dim {dim} "
                "(qgpu.compiler.numerics)"
            )


def _layer_tensor(circuit: CircuitWeights, i: int, key: str,
                  shapes: dict[str, tuple[int, ...]]) -> torch.Tensor:
    """Circuit layer i's tensor `key`, checked against the layer's expected keys and shapes."""
    layer = circuit.layers[i]
    if set(layer) != set(CIRCUIT_LAYER_KEYS):
        missing = sorted(set(CIRCUIT_LAYER_KEYS) - set(layer))
        extra = sorted(set(layer) - set(CIRCUIT_LAYER_KEYS))
        raise UsageError(f"circuit layer {i}: missing {missing}, unexpected {extra}")
    t = layer[key]
    if tuple(t.shape) != shapes[key]:
        raise UsageError(f"circuit layer {i} {key}: shape {tuple(t.shape)}, expected "
                         f"{shapes[key]}")
    return t


def _expected_shapes(config: Qwen3_5TextConfig, names: list[str]) -> dict[str, tuple[int, ...]]:
    """The stock model's tensor shapes; every one must be planned exactly once, nothing else."""
    with torch.device("meta"):
        model = Qwen3_5ForCausalLM(config)
    shapes = {n: tuple(t.shape) for n, t in model.state_dict().items()}
    if config.tie_word_embeddings:
        del shapes["lm_head.weight"]
    if len(names) != len(set(names)) or set(names) != set(shapes):
        missing = sorted(set(shapes) - set(names))[:5]
        extra = sorted(set(names) - set(shapes))[:5]
        raise UsageError(
            f"merged tensors do not match a Qwen3_5ForCausalLM: missing {missing}, "
            f"unexpected {extra}"
        )
    return shapes


def _write_shards(out_dir: Path, plan: _Plan, shapes: dict[str, tuple[int, ...]]) -> None:
    """Stream the planned tensors into safetensors shards of at most SHARD_BYTES each."""
    shards: list[dict[str, torch.Tensor]] = [{}]
    sizes = [0]
    written: list[Path] = []
    total = 0

    def flush() -> None:
        path = out_dir / f".shard-{len(written)}.safetensors"
        save_file(shards[-1], path, metadata={"format": "pt"})
        path.chmod(0o644)  # safetensors creates it owner-only
        written.append(path)
        shards[-1] = {}
        sizes[-1] = 0

    weight_map: dict[str, int] = {}
    for name, make in tqdm(plan, desc="merge", unit="tensor", file=sys.stderr, disable=None):
        t = make().contiguous()
        if tuple(t.shape) != shapes[name]:
            raise UsageError(f"{name}: merged shape {tuple(t.shape)}, expected {shapes[name]}")
        nbytes = t.numel() * t.element_size()
        if shards[-1] and sizes[-1] + nbytes > SHARD_BYTES:
            flush()
        shards[-1][name] = t
        sizes[-1] += nbytes
        total += nbytes
        weight_map[name] = len(written)
    flush()
    if len(written) == 1:
        written[0].rename(out_dir / "model.safetensors")
        return
    names = [f"model-{i + 1:05d}-of-{len(written):05d}.safetensors" for i in range(len(written))]
    for path, name in zip(written, names, strict=True):
        path.rename(out_dir / name)
    index = {
        "metadata": {"total_size": total},
        "weight_map": {tensor: names[i] for tensor, i in weight_map.items()},
    }
    (out_dir / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


def _write_generation_config(base_dir: Path, out_dir: Path, config: Qwen3_5TextConfig) -> None:
    if (base_dir / "generation_config.json").is_file():
        shutil.copyfile(base_dir / "generation_config.json", out_dir / "generation_config.json")
    else:
        GenerationConfig.from_model_config(config).save_pretrained(out_dir)


def _tokenizer_with(base_dir: Path, token_ids: dict[str, int]) -> dict:
    """The base's tokenizer.json with the circuit tokens added as special tokens at their ids.

    They are special: never split or normalised, and dropped by
    `decode(skip_special_tokens=True)`, so chat text never shows them. The `tokenizers` library
    renumbers added tokens that are not in the model vocabulary consecutively (they would land
    on 248,077 instead of 248,320), so each one is also entered in the BPE vocabulary at its id;
    no merge rule can produce them there. The base's own added tokens (chat markup such as
    ``<|im_end|>`` and ``<tool_call>``) are entered there too: once the vocabulary reaches past
    them, `tokenizers` would renumber them after the circuit tokens and stop matching them in
    text.
    """
    path = base_dir / "tokenizer.json"
    if not path.is_file():
        raise UsageError(f"{base_dir} has no tokenizer.json")
    tokenizer = _read_json(path)
    vocab = tokenizer["model"]["vocab"]
    taken = set(vocab) | {t["content"] for t in tokenizer["added_tokens"]}
    clash = sorted(taken & set(token_ids))
    if clash:
        raise UsageError(f"circuit tokens already in the base tokenizer: {clash}")
    for t in tokenizer["added_tokens"]:  # the base's own (<|im_end|>, <tool_call>, ...)
        vocab.setdefault(t["content"], t["id"])
    for name, token_id in token_ids.items():
        vocab[name] = token_id
        tokenizer["added_tokens"].append({
            "id": token_id, "content": name, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": False, "special": True,
        })  # fmt: skip
    return tokenizer


def _write_tokenizer(
    base_dir: Path, out_dir: Path, tokenizer: dict, token_ids: dict[str, int]
) -> None:
    """tokenizer.json with the circuit tokens, the other tokenizer files as the base has them."""
    (out_dir / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False))
    for name in _TOKENIZER_FILES:
        if (base_dir / name).is_file():
            shutil.copyfile(base_dir / name, out_dir / name)
    config_path = out_dir / "tokenizer_config.json"
    if config_path.is_file():
        tok_config = _read_json(config_path)
        if "added_tokens_decoder" in tok_config:
            for name, token_id in token_ids.items():
                tok_config["added_tokens_decoder"][str(token_id)] = {
                    "content": name, "lstrip": False, "normalized": False, "rstrip": False,
                    "single_word": False, "special": True,
                }  # fmt: skip
            config_path.write_text(json.dumps(tok_config, indent=2, ensure_ascii=False) + "\n")
    _check_tokenizer(out_dir, token_ids)


def _check_tokenizer(out_dir: Path, token_ids: dict[str, int]) -> None:
    """Load the written tokenizer as transformers will, and check the ids really are these."""
    if not token_ids:
        return
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(out_dir)
    names = list(token_ids)
    got = tokenizer.convert_tokens_to_ids(names)
    encoded = tokenizer("a" + "a".join(names) + "a", add_special_tokens=False).input_ids
    if got != list(token_ids.values()) or not set(token_ids.values()) <= set(encoded):
        raise UsageError(
            f"tokenizer maps the circuit tokens to {got}, expected {list(token_ids.values())}"
        )
    base = {t["content"]: t["id"] for t in _read_json(out_dir / "tokenizer.json")["added_tokens"]
            if t["content"] not in token_ids}
    for name, token_id in base.items():
        if tokenizer(name, add_special_tokens=False).input_ids != [token_id]:
            raise UsageError(f"the merged tokenizer no longer reads {name} as token {token_id}")


def tensor_files(base_dir: Path) -> dict[str, Path]:
    """Tensor name -> safetensors file, from the shard index or by scanning the model files
    (qgpu's own sidecar files are not part of the model)."""
    index = base_dir / "model.safetensors.index.json"
    if index.is_file():
        return {n: base_dir / f for n, f in _read_json(index)["weight_map"].items()}
    files: dict[str, Path] = {}
    for path in sorted(base_dir.glob("*.safetensors")):
        if path.name.startswith("qgpu_"):
            continue
        with safe_open(path, "pt") as f:
            files.update(dict.fromkeys(f.keys(), path))
    if not files:
        raise UsageError(f"{base_dir} has no safetensors weights")
    return files


def _read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())
