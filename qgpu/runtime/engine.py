"""The sparse engine: launch sequences through the circuit layers of a merged checkpoint, keeping
only what is nonzero.

A circuit token sees exact zeros from every base layer (docs/ARCHITECTURE.md §5), so its logits
depend only on the circuit layers, the final norm and the circuit tokens' rows of the tied
embedding. Of those, about 0.15 % of the weights are nonzero. The engine reads each circuit
tensor of the checkpoint once and keeps: the circuit dims; the GDN heads whose q, k or v rows or
out_proj columns hold something, and of those only the value channels some v row writes (a
channel nothing writes stays 0 in the state and in the output); the MLP neurons whose gate, up
and down all hold something; the projections as CSR matrices. A step runs the mathematics of
transformers' Qwen3.5 modules on what is kept — the RMSNorms over the merged width, the
depthwise causal conv1d + SiLU, the gated delta rule (transformers' own functions, called on
the kept heads and channels), the gated RMSNorm over whole heads, SwiGLU, the residual adds —
rounding to the model dtype where the stock path rounds. Every sum the circuit makes is exact
in float32 (the numerics contract, docs/ARCHITECTURE.md §3), so the order of the sparse sums
cannot change a value; tests/runtime/test_engine.py compares tokens and every bank's state with
the stock path's after every token, in float32 and bfloat16.

Activations are held as columns ([dims, tokens]), the layout CSR products want. On a CPU a
decode step runs as one native call (engine_native.py: the same operations and rounding points
in C, no per-operation dispatch); this module's PyTorch step is the prompt's path, the CUDA
path, and the fallback where no C compiler is found.

Honest by construction: everything here is computed from the checkpoint's tensors (nothing
from the circuit's graph, the evaluator or the interpreter); the sparse form is a lossless
re-encoding of those tensors (checked when it is derived), cached in the qgpu cache dir keyed
by the checkpoint's files.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file
from transformers.models.qwen3_5.modeling_qwen3_5 import torch_chunk_gated_delta_rule

from qgpu.cache import default_cache_dir, mark_used
from qgpu.model.merge import tensor_files
from qgpu.runtime.engine_native import CscMatrix, LayerStruct, ModelStruct, P, library
from qgpu.runtime.session import OnLayer

FORMAT = 4
"""Bump when the cached sparse form changes."""

CHUNK_RULE = getattr(torch_chunk_gated_delta_rule, "__wrapped__", torch_chunk_gated_delta_rule)
"""transformers' PyTorch chunked delta rule itself (the exported name may dispatch to a kernels
package and warns that it falls back): what the stock path runs for a prompt here."""

@dataclass
class Projection:
    """A weight matrix as the engine holds it: CSR, or — when the circuit dims it reads are
    few (GDN projections read a handful of address bits) — those columns dense, which a small
    dense product serves faster than a sparse kernel's set-up. Float32; its values are as the
    model dtype holds them."""

    matrix: torch.Tensor  # CSR [out, in], or dense [out, len(cols)]
    cols: torch.Tensor | None  # the input dims a dense matrix reads
    inputs: int

    DENSE_LIMIT = 1 << 16  # entries of a column-compacted dense matrix, beyond its nonzeros

    @classmethod
    def of(cls, csr: torch.Tensor) -> Projection:
        cols = csr.col_indices().unique()
        if csr.shape[0] * len(cols) <= 4 * csr.values().numel() + cls.DENSE_LIMIT:
            return cls(csr.to_dense()[:, cols].contiguous(), cols.long(), csr.shape[1])
        return cls(csr, None, csr.shape[1])

    def __matmul__(self, x: torch.Tensor) -> torch.Tensor:
        """self @ x in float32: every sum the circuit makes is exact there, so rounding to the
        model dtype afterwards is the stock linear's one rounding."""
        x = x.float() if self.cols is None else x.float().index_select(0, self.cols)
        if x.shape[1] == 1:  # one token: the matrix-vector kernel (no matrix product set-up)
            return torch.mv(self.matrix, x[:, 0])[:, None]
        return self.matrix @ x

    def by_columns(self) -> torch.Tensor:
        """The matrix's columns: the CSR of its transpose ([in, out])."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "sparse CSR support is in beta"
            if self.cols is not None:
                dense = self.matrix.new_zeros(self.matrix.shape[0], self.inputs)
                dense[:, self.cols] = self.matrix
                return dense.T.to_sparse_csr()
            csc = self.matrix.to_sparse_csc()
            return torch.sparse_csr_tensor(csc.ccol_indices(), csc.row_indices(), csc.values(),
                                           (self.inputs, self.matrix.shape[0]))

    def tensors(self) -> list[torch.Tensor]:
        if self.cols is None:
            return [self.matrix.crow_indices(), self.matrix.col_indices(), self.matrix.values()]
        return [self.matrix, self.cols]


@dataclass
class EngineLayer:
    """One circuit layer, reduced to what is nonzero. Rows of ``proj``: the q then the k
    channels of each kept head (all dk of them: the delta rule scales q by the head's width),
    the kept v channels, the same z channels, then the heads' b and a rows."""

    input_scale: torch.Tensor | None  # (1 + w) of input_layernorm on the circuit dims (None: 1)
    post_scale: torch.Tensor | None
    heads: list[int]  # kept GDN heads, as the checkpoint numbers them
    channels: int  # value channels 0..channels-1 kept: up to the last one some v row writes
    proj: Projection  # [rows, K]
    mixing: torch.Tensor  # the q, k, v channels whose conv taps are not (0, .., 0, 1): the only
    # ones whose conv output is not their input, and whose past inputs the state keeps
    conv: torch.Tensor  # their taps [mixing channels, taps], float32 (as the model dtype holds)
    A_log: torch.Tensor  # [kept heads], model dtype
    dt_bias: torch.Tensor
    g: torch.Tensor | None  # the decay's log when the a rows are empty (a = 0 for any input)
    decay: torch.Tensor | None  # exp(g) as a step multiplies the state by it ([heads, 1, 1, 1]);
    # None when it is exactly 1 (multiplying changes nothing) or not a constant
    norm_weight: torch.Tensor  # Qwen3_5RMSNormGated's weight, model dtype
    out: Projection  # [K, kept heads * kept channels]
    gate_up: Projection  # [2 * kept neurons, K]
    down: Projection  # [K, kept neurons]
    neurons: int


class EngineState:
    """The recurrent state of a batch of sequences: per layer the conv inputs of the last
    taps - 1 tokens of the channels that read them ([mixing channels, batch, taps - 1],
    float32 holding values of the model dtype) and
    the delta rule's state of the kept heads and channels ([heads, dk, batch, channels],
    float32: row (h * dk + j) * batch + b is entry j of sequence b's keys for head h, the
    order in which a step holds the keys)."""

    def __init__(self, conv: list[torch.Tensor], recurrent: list[torch.Tensor],
                 layers: list[EngineLayer], dv: int) -> None:
        self.conv, self.recurrent, self.layers, self.dv = conv, recurrent, layers, dv
        self._index = [{h: j for j, h in enumerate(layer.heads)} for layer in layers]

    def head(self, layer: int, head: int, batch: int = 0) -> torch.Tensor:
        """The [dk, dv] state of one GDN head for sequence `batch`, as the stock path holds it
        (zeros where the engine keeps nothing: nothing ever writes there)."""
        state = self.recurrent[layer]
        j = self._index[layer].get(head)
        if j is None:
            return state.new_zeros(state.shape[-2], self.dv)
        return F.pad(state[j, :, batch], (0, self.dv - state.shape[-1]))

    def select(self, rows: list[int]) -> EngineState:
        """The state of some sequences of the batch, in this order."""
        idx = torch.tensor(rows, device=self.conv[0].device)
        return EngineState([c.index_select(1, idx) for c in self.conv],
                           [r.index_select(2, idx) for r in self.recurrent], self.layers, self.dv)

    @staticmethod
    def stack(states: list[EngineState]) -> EngineState:
        s0 = states[0]
        return EngineState(
            [torch.cat([s.conv[i] for s in states], 1) for i in range(len(s0.conv))],
            [torch.cat([s.recurrent[i] for s in states], 2) for i in range(len(s0.recurrent))],
            s0.layers, s0.dv)


class Engine:
    """The circuit layers of a merged GPU checkpoint, sparse, in `dtype` on `device`."""

    def __init__(self, layers: list[EngineLayer], embed: tuple[torch.Tensor, ...],
                 select: tuple[torch.Tensor, ...], *, width: int, first_id: int, eps: float,
                 dtype: torch.dtype, shape: dict) -> None:
        self.layers = layers
        self.embed_base, self.embed_cols, self.embed_vals = embed  # base row + differences
        self.select_dims, self.select_scale, self.select_rows = select
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "sparse CSR support is in beta"
            self.select_csr = self.select_rows.T.to_sparse_csr()  # [circuit vocab, dims]
        self.width, self.first_id, self.eps, self.dtype = width, first_id, eps, dtype
        self.dk, self.dv, self.taps = shape["dk"], shape["dv"], shape["taps"]
        self.device = self.embed_base.device
        self.native: NativeStep | None = None  # the decode step as one C call (CPU)
        self.native_off = "not a CPU" if self.device.type != "cpu" else ""
        if not self.native_off and any(layer.heads and layer.g is None for layer in layers):
            self.native_off = "a GDN layer's decay depends on its input"
        if not self.native_off:
            lib, self.native_off = library()
            if lib is not None:
                self.native = NativeStep(lib, self)

    # --- loading ---------------------------------------------------------------------------

    @classmethod
    def load(cls, merged: Path, meta: dict, dtype: torch.dtype, device: torch.device) -> Engine:
        """The engine of a merged checkpoint: its sparse form from the cache, else derived from
        the checkpoint's tensors (one tensor in memory at a time) and cached."""
        path = _cache_path(merged)
        if not path.is_file():
            tensors, shape = _derive(merged, meta)
            path.parent.mkdir(parents=True, exist_ok=True)
            _prune(path.parent, merged)
            tmp = path.with_suffix(f".{id(tensors)}.tmp")
            save_file(tensors, str(tmp), metadata={"shape": json.dumps(shape),
                                                   "checkpoint": str(merged.resolve())})
            tmp.replace(path)
        else:
            mark_used(path)
        with safe_open(str(path), framework="pt") as f:
            shape = json.loads(f.metadata()["shape"])
        return cls._from_tensors(load_file(str(path)), shape, meta, dtype, device)

    @classmethod
    def _from_tensors(cls, t: dict[str, torch.Tensor], shape: dict, meta: dict,
                      dtype: torch.dtype, device: torch.device) -> Engine:
        def held(x: torch.Tensor) -> torch.Tensor:
            """Values as the model holds them in `dtype`, float32 to compute with."""
            return x.to(dtype).float().to(device)

        def csr(name: str) -> Projection:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "sparse CSR support is in beta"
                return Projection.of(torch.sparse_csr_tensor(
                    t[name + ".crow"].to(device), t[name + ".col"].to(device),
                    held(t[name + ".val"]), tuple(t[name + ".shape"].tolist()),
                    check_invariants=False))

        def scale(name: str) -> torch.Tensor | None:
            """(1 + w) of a norm as the model computes it; None where it is 1 everywhere."""
            one_plus = 1.0 + held(t[name])
            return None if bool((one_plus == 1).all()) else one_plus

        layers = []
        for i in range(int(meta["circuit_layers"][1])):
            p = f"{i}."
            taps = held(t[p + "conv"])
            mixing = ((taps[:, :-1] != 0).any(1) | (taps[:, -1] != 1)).nonzero().flatten()
            layers.append(EngineLayer(
                input_scale=scale(p + "input_norm"), post_scale=scale(p + "post_norm"),
                heads=t[p + "heads"].tolist(),
                channels=int(t[p + "channels"]), proj=csr(p + "proj"),
                mixing=mixing, conv=taps[mixing],
                A_log=t[p + "A_log"].to(device=device, dtype=dtype),
                dt_bias=t[p + "dt_bias"].to(device=device, dtype=dtype), g=None,
                decay=None, norm_weight=t[p + "norm"].to(device=device, dtype=dtype),
                out=csr(p + "out"), gate_up=csr(p + "gate_up"), down=csr(p + "down"),
                neurons=int(t[p + "down.shape"][1])))
            layer = layers[-1]
            nh, crow = len(layer.heads), t[p + "proj.crow"]
            if nh and crow[-1] == crow[-1 - nh]:
                # a = 0 whatever the input (no weight in its rows): the decay is a constant
                layer.g = -layer.A_log.float().exp() * F.softplus(
                    torch.zeros(nh, device=device) + layer.dt_bias)
                decay = layer.g.exp()
                layer.decay = None if bool((decay == 1).all()) else decay[:, None, None, None]
        embed = (t["embed.base"].to(device), t["embed.cols"].to(device), t["embed.vals"].to(device))
        select = (t["select.dims"].to(device), scale("select.norm"),
                  held(t["select.rows"]))
        return cls(layers, embed, select, width=int(meta["circuit_dims"][1]),
                   first_id=min(meta["token_ids"].values()), eps=shape["eps"], dtype=dtype,
                   shape=shape)

    # --- running ---------------------------------------------------------------------------

    def new_state(self, batch: int) -> EngineState:
        conv = [torch.zeros(len(layer.mixing), batch, self.taps - 1, device=self.device)
                for layer in self.layers]
        rec = [torch.zeros(len(layer.heads), self.dk, batch, layer.channels,
                           device=self.device) for layer in self.layers]
        return EngineState(conv, rec, self.layers, self.dv)

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, state: EngineState, *, prefill: bool,
                on_layer: Callable[[int, torch.Tensor], None] | None = None) -> torch.Tensor:
        """Run tokens `ids` ([B, T]) through every circuit layer, updating `state`: the whole
        prompt of one sequence at once (prefill: B = 1, the state empty, as the stock path's
        first pass) or one token per sequence (T = 1). Returns the circuit tokens' logits after
        each sequence's last token ([B, circuit vocab], float32, rounded to the model dtype as
        the stock head rounds them). `on_layer(i, h)` sees layer i's output ([K, B * T])."""
        B, T = ids.shape
        h = self._embed(ids.flatten())
        for i, layer in enumerate(self.layers):
            if layer.heads:  # a layer with no kept head adds exactly 0 in its GDN sublayer
                h = h + self._gdn(i, layer, h, state, B, T, prefill)
            if layer.neurons:
                x = self._norm(h, layer.post_scale)
                gate, up = (layer.gate_up @ x).to(self.dtype).split(layer.neurons)
                h = h + (layer.down @ (F.silu(gate) * up)).to(self.dtype)
            if on_layer is not None:
                on_layer(i, h)
        return self._logits(h[:, T - 1::T])

    def greedy(self, logits: torch.Tensor) -> list[int]:
        """The stock argmax over the whole vocabulary, from the circuit tokens' logits: every
        text token's logit is exactly 0 at a circuit position (their rows are zero on the
        circuit dims) and text ids come first, so a circuit token wins only with a logit
        above 0; otherwise the first text token, id 0."""
        values, best = logits.max(-1)  # the first of equal maxima, as argmax
        return [self.first_id + int(i) if float(v) > 0 else 0
                for v, i in zip(values.tolist(), best.tolist(), strict=True)]

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        idx = ids - self.first_id
        rows = self.embed_base.expand(len(idx), -1).clone()
        rows.scatter_add_(1, self.embed_cols[idx], self.embed_vals[idx])
        return rows.T.to(self.dtype).contiguous()

    def _norm(self, h: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
        """Qwen3_5RMSNorm over the merged width: the base dims are zeros and add nothing to the
        sum of squares, and the anchors make it exact in any order (so mean = sum / width).
        A scale of None is (1 + w) = 1 on every circuit dim: multiplying by it is skipped."""
        xf = h.float()
        x = xf * torch.rsqrt(xf.pow(2).sum(0, keepdim=True) / self.width + self.eps)
        return (x if scale is None else x * scale[:, None]).to(self.dtype)

    def _gdn(self, i: int, layer: EngineLayer, h: torch.Tensor, state: EngineState, B: int,
             T: int, prefill: bool) -> torch.Tensor:
        """Qwen3_5GatedDeltaNet on the kept heads and channels: its output ([K, B * T])."""
        nh, nc, dk, dv, dt = len(layer.heads), layer.channels, self.dk, self.dv, self.dtype
        y = (layer.proj @ self._norm(h, layer.input_scale)).to(dt)
        qkv, z, b, a = y.split([nh * (2 * dk + nc), nh * nc, nh, nh])
        mixed = F.silu(self._conv(i, layer, qkv, state, prefill))
        beta = b.T.reshape(B, T, nh).sigmoid()
        if prefill:  # transformers' chunked rule, as the stock path's first pass runs it
            q, k, v = (m.T.reshape(B, T, nh, -1) for m in mixed.split([nh * dk, nh * dk, nh * nc]))
            g = layer.g.expand(B, T, nh) if layer.g is not None else \
                self._log_decay(layer, a).view(B, T, nh)
            core, final = CHUNK_RULE(
                q, k, v, g=g, beta=beta, initial_state=None, output_final_state=True,
                use_qk_l2norm_in_kernel=True)
            state.recurrent[i] = final.permute(1, 2, 0, 3).contiguous()
            core = core.reshape(B * T * nh, nc)
        else:
            core = self._delta_step(i, layer, mixed, a, beta[:, 0], state, B)
        # Qwen3_5RMSNormGated over whole heads: the channels not kept are zeros, padded back
        # for the mean; elementwise, only the kept channels are computed
        x = core.float()
        var = F.pad(x, (0, dv - nc)).pow(2).mean(-1, keepdim=True)
        x = layer.norm_weight[:nc] * (x * torch.rsqrt(var + self.eps)).to(dt)
        gate = z.T.reshape(B * T * nh, nc).float()
        normed = (x * F.silu(gate)).to(dt).reshape(B * T, nh * nc)
        return (layer.out @ normed.T).to(dt)

    @staticmethod
    def _log_decay(layer: EngineLayer, a: torch.Tensor) -> torch.Tensor:
        """The gate g = -exp(A_log) * softplus(a + dt_bias) of every token ([B * T, heads] from
        the a rows [heads, B * T]), as Qwen3_5GatedDeltaNet computes it."""
        return -layer.A_log.float().exp() * F.softplus(a.T.float() + layer.dt_bias)

    def _delta_step(self, i: int, layer: EngineLayer, mixed: torch.Tensor, a: torch.Tensor,
                    beta: torch.Tensor, state: EngineState, B: int) -> torch.Tensor:
        """One token of transformers' torch_recurrent_gated_delta_rule (l2-normalised q and k,
        q scaled by 1 / sqrt(dk), decay, delta rule, read after write) on the kept heads and
        channels, q and k normalised together. Returns the heads' outputs [B * heads, kept].

        The state's products with k and q are matrix products for one sequence, and for a
        batch touch only the state rows where k or q is nonzero: a zero entry adds 0 * row = 0
        to a sum and k_j * delta = 0 to row j, changing nothing (the state is finite). A key
        or query of the circuit has one nonzero entry (a row address) of value 1, so each sum
        holds one nonzero term, exact in any order, and a written row gets the stock path's
        value."""
        nh, nc, dk = len(layer.heads), layer.channels, self.dk
        qk = mixed[:2 * nh * dk].view(2, nh, dk, B).float()
        qk = qk * torch.rsqrt((qk * qk).sum(dim=2, keepdim=True) + 1e-6)
        q, k = qk[0] * (1 / dk ** 0.5), qk[1]  # [heads, dk, B]
        v = mixed[2 * nh * dk:].view(nh, nc, B).transpose(1, 2).reshape(nh * B, nc).float()
        beta = beta.float().T.reshape(nh * B, 1)
        S = state.recurrent[i]  # [heads, dk, B, channels]
        if layer.g is None:
            S = S * self._log_decay(layer, a).exp().T[:, None, :, None]
        elif layer.decay is not None:  # (a decay of exactly 1 leaves S as it is)
            S = S * layer.decay
        state.recurrent[i] = S
        if B == 1:
            keys, queries, heads = k.view(nh, 1, dk), q.view(nh, 1, dk), S.view(nh, dk, nc)
            delta = (v - torch.bmm(keys, heads)[:, 0]) * beta
            heads.baddbmm_(keys.mT, delta[:, None])
            return torch.bmm(queries, heads)[:, 0].to(self.dtype)
        rows = S.view(nh * dk * B, nc)  # row (h * dk + j) * B + b: entry (h, j, b) of k
        k, q = k.reshape(-1), q.reshape(-1)

        def head(at: torch.Tensor) -> torch.Tensor:
            """The (head, sequence) rows h * B + b of state rows `at`."""
            return at // (dk * B) * B + at % B

        def read(x: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
            """x's products with the state ([heads * B, channels]) from rows `at`."""
            products = rows.index_select(0, at) * x.index_select(0, at)[:, None]
            return v.new_zeros(nh * B, nc).index_add_(0, head(at), products)

        at = k.nonzero().flatten()
        delta = (v - read(k, at)) * beta
        rows.index_add_(0, at, k.index_select(0, at)[:, None] * delta.index_select(0, head(at)))
        out = read(q, q.nonzero().flatten())
        return out.view(nh, B, nc).transpose(0, 1).reshape(B * nh, nc).to(self.dtype)

    def _conv(self, i: int, layer: EngineLayer, x: torch.Tensor, state: EngineState,
              prefill: bool) -> torch.Tensor:
        """The depthwise causal conv1d ([channels, B * T], rounded to the model dtype as the
        stock conv rounds its float32 sums of exact products): each channel's taps over its last
        inputs. A channel whose taps are (0, .., 0, 1) passes its input (0 * a finite input
        adds exactly 0): only the mixing channels are computed, and the state keeps their
        newest taps - 1 inputs."""
        rows, taps = layer.mixing, self.taps
        if not len(rows):
            return x
        fresh = x.index_select(0, rows)
        if prefill:  # one sequence: zeros before its first token
            window = F.pad(fresh, (taps - 1, 0))
            state.conv[i].copy_(window[:, None, -(taps - 1):])
            mixed = (window.float().unfold(1, taps, 1) * layer.conv[:, None]).sum(-1)
        else:
            window = torch.cat([state.conv[i], fresh[:, :, None]], dim=2)
            state.conv[i] = window[:, :, 1:]
            mixed = (window.float() * layer.conv[:, None]).sum(-1)
        return x.index_copy(0, rows, mixed.to(self.dtype))

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        """The final norm and the tied head on the circuit tokens: only the selection dims pass
        the norm ((1 + w) = 0 elsewhere), and of those only the nonzero ones add anything."""
        x = self._norm(h, self.select_scale).index_select(0, self.select_dims).float()
        if x.shape[1] > 1:  # a batch: the vocabulary's rows as CSR (~15 of 110 dims a token)
            return (self.select_csr @ x).T.to(self.dtype).float()
        live = x[:, 0].nonzero().flatten()  # one token: the rows of its nonzero dims
        rows = self.select_rows.index_select(0, live)
        return torch.mv(rows.T, x[live, 0]).to(self.dtype).float()[None]

    def resident_bytes(self) -> int:
        """Bytes the engine holds (weights and embedding, the native step's forms of them;
        not the per-launch state)."""
        tensors = [self.embed_base, self.embed_cols, self.embed_vals, self.select_rows,
                   self.select_csr.crow_indices(), self.select_csr.col_indices(),
                   self.select_csr.values()]
        for layer in self.layers:
            tensors += [layer.conv, layer.A_log, layer.dt_bias, layer.norm_weight]
            for proj in (layer.proj, layer.out, layer.gate_up, layer.down):
                tensors += proj.tensors()
        if self.native is not None:  # its own forms (packed columns) of what it reads
            tensors += self.native.tensors
        held = {t.data_ptr(): t.numel() * t.element_size() for t in tensors}
        return sum(held.values())


class EngineSession:
    """One batch on the engine: each prompt prefilled on its own (no padding), then one decode
    step for the running rows only (finished rows leave the batch)."""

    def __init__(self, engine: Engine, native: bool = True) -> None:
        self.engine, self.native = engine, native
        self.rows: list[int] = []  # the batch rows `state` holds, in its order
        self.state: EngineState | None = None

    def prefill(self, prompts: list[list[int]], on_layer: OnLayer | None = None) -> list[int]:
        states, chosen = [], []
        for b, prompt in enumerate(prompts):
            state = self.engine.new_state(1)
            hook = None if on_layer is None else lambda i, h, b=b: on_layer(i, b, h.T)
            logits = self.engine.forward(torch.tensor([prompt], device=self.engine.device), state,
                                         prefill=True, on_layer=hook)
            states.append(state)
            chosen += self.engine.greedy(logits)
        self.state, self.rows = EngineState.stack(states), list(range(len(prompts)))
        return chosen

    def step(self, ids: list[int | None], on_layer: OnLayer | None = None) -> list[int]:
        """One token for each running sequence: the native step where the engine has one
        (and the tokens are circuit tokens), else the PyTorch step."""
        engine, running = self.engine, [b for b, i in enumerate(ids) if i is not None]
        if running != self.rows:
            self.state = self.state.select([self.rows.index(b) for b in running])
            self.rows = running
        feed = [ids[b] for b in running]
        hook = None if on_layer is None else \
            lambda i, h: [on_layer(i, b, h[:, j:j + 1].T) for j, b in enumerate(running)]
        if engine.native is not None and self.native and all(
                0 <= i - engine.first_id < engine.select_rows.shape[1] for i in feed):
            picked = engine.native.step(feed, self.state, hook)
        else:
            logits = engine.forward(torch.tensor(feed, device=engine.device)[:, None],
                                    self.state, prefill=False, on_layer=hook)
            picked = engine.greedy(logits)
        chosen = [0] * len(ids)
        for b, c in zip(running, picked, strict=True):
            chosen[b] = c
        return chosen

    def head(self, layer: int, head: int, batch: int) -> torch.Tensor:
        return self.state.head(layer, head, self.rows.index(batch))


# --- deriving the sparse form -------------------------------------------------------------

def _cache_path(merged: Path) -> Path:
    """Keyed by the checkpoint's weight files (paths, sizes, modification times) and the
    format: a rebuilt checkpoint gets a fresh sparse form."""
    key = hashlib.sha256(f"engine{FORMAT}".encode())
    for path in sorted(set(tensor_files(merged).values())):
        st = path.stat()
        key.update(f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns};".encode())
    return default_cache_dir() / "engine" / f"{key.hexdigest()[:24]}.safetensors"


def _prune(folder: Path, merged: Path) -> None:
    """Before caching the sparse form of `merged`: remove the forms of checkpoints that are
    gone (a test session's temporary builds) or that `merged` replaces (a rebuild), so the
    cache holds at most one form per checkpoint on disk."""
    for entry in folder.glob("*.safetensors"):
        try:
            with safe_open(str(entry), framework="pt") as f:
                source = (f.metadata() or {}).get("checkpoint", "")
        except (OSError, SafetensorError):  # unreadable: a partial write of an older run
            source = ""
        if not source or source == str(merged.resolve()) or not Path(source).is_dir():
            entry.unlink(missing_ok=True)


def _csr_parts(name: str, dense: torch.Tensor) -> dict[str, torch.Tensor]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "sparse CSR support is in beta"
        w = dense.to_sparse_csr()
    return {f"{name}.crow": w.crow_indices().int(), f"{name}.col": w.col_indices().int(),
            f"{name}.val": w.values(), f"{name}.shape": torch.tensor(list(w.shape))}


def _derive(merged: Path, meta: dict) -> tuple[dict[str, torch.Tensor], dict]:
    """The sparse form of a merged checkpoint's circuit, straight from its tensors (as stored),
    and the shapes a step needs (head dims, conv taps, the norms' eps)."""
    files = tensor_files(merged)
    config = json.loads((merged / "config.json").read_text())
    config = config.get("text_config", config)
    d_base, width = (int(d) for d in meta["circuit_dims"])
    nk, nv = config["linear_num_key_heads"], config["linear_num_value_heads"]
    dk, dv = config["linear_key_head_dim"], config["linear_value_head_dim"]
    ratio = nv // nk
    handles: dict[Path, object] = {}

    def get(name: str) -> torch.Tensor:
        path = files[name]
        if path not in handles:
            handles[path] = safe_open(str(path), framework="pt")
        return handles[path].get_tensor(name)

    out: dict[str, torch.Tensor] = {}
    for i in range(int(meta["circuit_layers"][1])):
        p, t = f"model.layers.{i}.linear_attn.", f"{i}."
        qkv = get(p + "in_proj_qkv.weight")[:, d_base:]
        o = get(p + "out_proj.weight")[d_base:]
        q, k, v = qkv[:nk * dk], qkv[nk * dk:2 * nk * dk], qkv[2 * nk * dk:]

        def key_rows(w: torch.Tensor, h: int) -> torch.Tensor:  # a value head's key head
            return w[h // ratio * dk:(h // ratio + 1) * dk]

        def value_rows(w: torch.Tensor, h: int) -> torch.Tensor:
            return w[h * dv:(h + 1) * dv]

        heads = [h for h in range(nv) if key_rows(q, h).any() or key_rows(k, h).any()
                 or value_rows(v, h).any() or o[:, h * dv:(h + 1) * dv].any()]
        written = torch.zeros(dv, dtype=torch.bool)
        for h in heads:
            written |= value_rows(v, h).any(1)
        channels = int(written.nonzero().max()) + 1 if written.any() else 0  # a prefix
        z = get(p + "in_proj_z.weight")[:, d_base:]
        rows = ([key_rows(q, h) for h in heads] + [key_rows(k, h) for h in heads]
                + [value_rows(v, h)[:channels] for h in heads]
                + [value_rows(z, h)[:channels] for h in heads])
        b = get(p + "in_proj_b.weight")[heads, d_base:]
        a = get(p + "in_proj_a.weight")[heads, d_base:]
        out |= _csr_parts(t + "proj", torch.cat([*rows, b, a]) if heads else b[:0])
        conv = get(p + "conv1d.weight").squeeze(1)
        cq, ck, cv = conv[:nk * dk], conv[nk * dk:2 * nk * dk], conv[2 * nk * dk:]
        convs = ([key_rows(cq, h) for h in heads] + [key_rows(ck, h) for h in heads]
                 + [value_rows(cv, h)[:channels] for h in heads])
        out[t + "conv"] = torch.cat(convs) if heads else cv[:0]
        out[t + "A_log"] = get(p + "A_log")[heads]
        out[t + "dt_bias"] = get(p + "dt_bias")[heads]
        out[t + "norm"] = get(p + "norm.weight")
        out[t + "heads"] = torch.tensor(heads, dtype=torch.int64)
        out[t + "channels"] = torch.tensor(channels)
        cols = [h * dv + c for h in heads for c in range(channels)]
        out |= _csr_parts(t + "out", o[:, cols])
        m = f"model.layers.{i}."
        gate = get(m + "mlp.gate_proj.weight")[:, d_base:]
        up = get(m + "mlp.up_proj.weight")[:, d_base:]
        down = get(m + "mlp.down_proj.weight")[d_base:]
        kept = (gate.any(1) & up.any(1) & down.any(0)).nonzero().flatten()
        out |= _csr_parts(t + "gate_up", torch.cat([gate[kept], up[kept]]))
        out |= _csr_parts(t + "down", down[:, kept])
        out[t + "input_norm"] = get(m + "input_layernorm.weight")[d_base:]
        out[t + "post_norm"] = get(m + "post_attention_layernorm.weight")[d_base:]
    ids = sorted(meta["token_ids"].values())
    if ids != list(range(ids[0], ids[0] + len(ids))):
        raise ValueError("the circuit tokens' ids are not contiguous")
    with safe_open(str(files["model.embed_tokens.weight"]), framework="pt") as f:
        embed = f.get_slice("model.embed_tokens.weight")[ids[0]:ids[-1] + 1, d_base:width]
    # each row as the most common row plus a few differences (exact: small integers)
    base = embed.float().mode(dim=0).values
    delta = embed.float() - base
    cols = delta.abs().topk(max(1, int((delta != 0).sum(1).max())), dim=1).indices
    vals = delta.gather(1, cols)
    if not torch.equal(base.expand_as(delta).clone().scatter_add_(1, cols, vals), embed.float()):
        raise ValueError("the circuit tokens' embedding rows do not re-encode exactly")
    out |= {"embed.base": base, "embed.cols": cols, "embed.vals": vals}
    final = get("model.norm.weight")[d_base:]
    dims = (final.float() != -1.0).nonzero().flatten()  # (1 + w) = 0 silences a dim
    out |= {"select.dims": dims, "select.norm": final, "select.rows": embed[:, dims].T.contiguous()}
    shape = {"dk": dk, "dv": dv, "taps": config["linear_conv_kernel_dim"],
             "eps": config["rms_norm_eps"]}
    return out, shape


class NativeStep:
    """An engine's decode step bound to the compiled library (CPU, float32 or bfloat16)."""

    def __init__(self, lib: ctypes.CDLL, engine: Engine, pack: bool = True) -> None:
        """Bind `engine`'s tensors (`pack` False keeps every matrix's rows and values apart,
        the form a matrix that cannot be packed takes)."""
        self.lib, self.engine, self.pack = lib, engine, pack
        self.tensors: list[torch.Tensor] = []  # what the C structs point into
        self._work = threading.local()  # a scratch buffer per thread
        layers = (LayerStruct * len(engine.layers))()
        for slot, layer in zip(layers, engine.layers, strict=True):
            slot.heads, slot.channels = len(layer.heads), layer.channels
            slot.mixing, slot.neurons = len(layer.mixing), layer.neurons
            slot.input_scale, slot.post_scale = self._ptr(layer.input_scale), \
                self._ptr(layer.post_scale)
            for name in ("proj", "out", "gate_up", "down"):
                setattr(slot, name, self._columns(getattr(layer, name).by_columns()))
            slot.mix_rows = self._ptr(layer.mixing.int())
            slot.taps = self._ptr(layer.conv)
            slot.decay = self._ptr(None if layer.decay is None else layer.decay.flatten())
            slot.norm_weight = self._ptr(layer.norm_weight.float())
        self._layers = layers
        m = ModelStruct(layers=len(engine.layers), dims=engine.embed_base.numel(), dk=engine.dk,
                   dv=engine.dv, taps=engine.taps, bf16=int(engine.dtype == torch.bfloat16),
                   first_id=engine.first_id, vocab=engine.select_rows.shape[1],
                   diffs=engine.embed_cols.shape[1], selected=engine.select_rows.shape[0],
                   eps=engine.eps, width=float(engine.width), q_scale=1 / engine.dk ** 0.5)
        m.layer = layers
        m.embed_base, m.embed_cols = self._ptr(engine.embed_base), self._ptr(engine.embed_cols)
        m.embed_vals, m.select_dims = self._ptr(engine.embed_vals), \
            self._ptr(engine.select_dims)
        m.select_scale = self._ptr(engine.select_scale)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "sparse CSR support is in beta"
            m.select = self._columns(engine.select_rows.to_sparse_csr())  # of [vocab, dims]
        self.model = m

    def _ptr(self, t: torch.Tensor | None) -> int | None:
        if t is None:
            return None
        t = t.contiguous()
        self.tensors.append(t)
        return t.data_ptr()

    def _compressed(self, m: torch.Tensor, shape: tuple[int, int], bound: int) -> CscMatrix:
        """A CSR tensor's pointers and entries (their indices below `bound`) as the C struct
        with `shape` (rows, cols); packed (index << 16 | bfloat16 bits, 4 bytes an entry) where
        every value is exact in bfloat16 and `bound` is at most 65,536."""
        ptr, idx, values = m.crow_indices().int(), m.col_indices(), m.values().float()
        halves = values.to(torch.bfloat16)
        if self.pack and bound <= 1 << 16 and torch.equal(halves.float(), values):
            packed = (idx.long() << 16) | (halves.view(torch.int16).long() & 0xFFFF)
            packed = torch.where(packed >= 1 << 31, packed - (1 << 32), packed)  # as uint32
            return CscMatrix(self._ptr(ptr), self._ptr(packed.int()), None, None, *shape)
        return CscMatrix(self._ptr(ptr), None, self._ptr(idx.int()), self._ptr(values), *shape)

    def _columns(self, by_columns: torch.Tensor) -> CscMatrix:
        """A matrix by its columns, given as the CSR of its transpose ([in, out])."""
        inputs, outputs = by_columns.shape
        return self._compressed(by_columns, (outputs, inputs), bound=outputs)

    def step(self, ids: list[int], state: EngineState,
             on_layer: Callable[[int, torch.Tensor], None] | None = None) -> list[int]:
        """One token per sequence through every circuit layer, the state updated in place:
        each sequence's greedy choice. `on_layer(i, h)` sees layer i's output ([dims, B], the
        model dtype) once the step is done, as Engine.forward's hook does."""
        B = len(ids)
        need = int(self.lib.qgpu_step_work(self.model, B))
        work = getattr(self._work, "buffer", None)
        if work is None or work.numel() < need:
            work = self._work.buffer = torch.empty(need)
        for states in (state.conv, state.recurrent):  # float32 [.., B, ..], as the C step reads
            for i, t in enumerate(states):
                if t.dtype != torch.float32 or not t.is_contiguous():
                    states[i] = t.float().contiguous()
        conv = (P * len(state.conv))(*(t.data_ptr() for t in state.conv))
        rec = (P * len(state.recurrent))(*(t.data_ptr() for t in state.recurrent))
        chosen = (ctypes.c_int64 * B)()
        outputs = None if on_layer is None else torch.empty(self.model.layers, self.model.dims, B)
        self.lib.qgpu_step(self.model, (ctypes.c_int64 * B)(*ids), B, conv, rec, chosen,
                           None if outputs is None else outputs.data_ptr(), work.data_ptr())
        if outputs is not None:
            for i, h in enumerate(outputs.to(self.engine.dtype)):
                on_layer(i, h)
        return list(chosen)
