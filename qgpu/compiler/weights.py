"""Weight emission: a scheduled circuit as the tensors of Qwen3.5 GDN + MLP decoder layers
(circuit-local: every hidden-size axis has size K), its token embeddings, and the
``CircuitWeights`` record every circuit compiler hands to the merge."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import Qwen3_5TextConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer

from qgpu.compiler import numerics as nx
from qgpu.compiler.graph import Addr, Rule
from qgpu.compiler.schedule import Schedule

CIRCUIT_LAYER_TYPE = "linear_attention"
CIRCUIT_LAYER_KEYS = (
    "linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight",
    "linear_attn.in_proj_b.weight", "linear_attn.in_proj_a.weight", "linear_attn.conv1d.weight",
    "linear_attn.dt_bias", "linear_attn.A_log", "linear_attn.norm.weight",
    "linear_attn.out_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
    "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight",
)  # fmt: skip
"""The tensors of one circuit layer (a GDN + MLP decoder layer), relative to its prefix."""


@dataclass
class CircuitWeights:
    """A compiled circuit in circuit-local coordinates: every hidden-size axis has size K."""

    k_dims: int
    layers: Sequence[dict[str, torch.Tensor]]  # may emit each layer when it is read
    token_names: list[str]
    token_embeddings: torch.Tensor
    final_norm: torch.Tensor
    metadata: dict


def circuit_layer_shapes(text_config: dict, k_dims: int) -> dict[str, tuple[int, ...]]:
    """Circuit-local shapes of one circuit layer: the base's layer shapes with hidden size K."""
    config = qwen_text_config(
        {**text_config, "hidden_size": k_dims, "num_hidden_layers": 1},
        layer_types=[CIRCUIT_LAYER_TYPE],
    )
    with torch.device("meta"):
        layer = Qwen3_5DecoderLayer(config, 0)
    return {name: tuple(t.shape) for name, t in layer.state_dict().items()}


def qwen_text_config(values: dict, *, layer_types: list[str] | None) -> Qwen3_5TextConfig:
    skip = {"model_type", "transformers_version", "architectures", "layer_types", "dtype"}
    return Qwen3_5TextConfig(
        **{k: v for k, v in values.items() if k not in skip}, layer_types=layer_types
    )


def emit(sched: Schedule, k_dims: int) -> list[dict[str, torch.Tensor]]:
    """float32 tensors of every circuit layer, hidden axes circuit-local (size k_dims)."""
    return [emit_layer(sched, k_dims, layer) for layer in range(sched.layers)]


def emit_layer(sched: Schedule, k_dims: int, layer: int) -> dict[str, torch.Tensor]:
    """float32 tensors of one circuit layer (a large circuit is emitted a layer at a time)."""
    g, shape = sched.graph, sched.shape
    H, dh, inter = shape.gdn_heads, shape.head_dim, shape.intermediate
    if k_dims < sched.k_used:
        raise ValueError(f"k_dims {k_dims} < {sched.k_used} needed")
    t = {
        "linear_attn.in_proj_qkv.weight": torch.zeros(3 * H * dh, k_dims),
        "linear_attn.in_proj_z.weight": torch.zeros(H * dh, k_dims),
        "linear_attn.in_proj_b.weight": torch.zeros(H, k_dims),
        "linear_attn.in_proj_a.weight": torch.zeros(H, k_dims),
        "linear_attn.conv1d.weight": torch.zeros(3 * H * dh, 1, 4),
        "linear_attn.dt_bias": torch.zeros(H),
        "linear_attn.A_log": torch.full((H,), nx.A_LOG),
        "linear_attn.norm.weight": torch.ones(dh),
        "linear_attn.out_proj.weight": torch.zeros(k_dims, H * dh),
        "mlp.gate_proj.weight": torch.zeros(inter, k_dims),
        "mlp.up_proj.weight": torch.zeros(inter, k_dims),
        "mlp.down_proj.weight": torch.zeros(k_dims, inter),
        "input_layernorm.weight": torch.zeros(k_dims),
        "post_attention_layernorm.weight": torch.zeros(k_dims),
    }
    t["linear_attn.conv1d.weight"][:, 0, 3] = 1.0
    qkv, z = t["linear_attn.in_proj_qkv.weight"], t["linear_attn.in_proj_z.weight"]
    for bank, (L, h) in sched.heads.items():
        if L != layer:
            continue
        t["linear_attn.in_proj_b.weight"][h, nx.UNIT_DIM] = nx.BETA_LOGIT * nx.SCALE
        for w in (w for w in g.writes if w.bank == bank and w.enable is not None):
            _emit_enable(sched, w.enable, t["linear_attn.in_proj_b.weight"][h])
        bits = g.banks[bank].code == "bits"
        v0 = 2 * H * dh + h * dh  # this head's first value channel
        for w in (w for w in g.writes if w.bank == bank):
            _emit_address(sched, w.addr, g.banks[bank].rows, qkv[H * dh + h * dh:])
            if bits:
                _emit_bits_write(sched, w, qkv, t["linear_attn.conv1d.weight"], v0)
                continue
            value = w.parts[0].feature
            width = g.features[value].size
            for j in range(width):
                qkv[v0 + j, sched.dim(value, j)] = nx.VALUE_SCALE * nx.SCALE
            for j in range(width, dh, 4):  # digits the feature does not carry store 0
                qkv[v0 + j, nx.UNIT_DIM] = nx.VALUE_SCALE * nx.SCALE
        for rd in (r for r in g.reads if r.bank == bank):
            _emit_address(sched, rd.addr, g.banks[bank].rows, qkv[h * dh:])
            z[h * dh:(h + 1) * dh, nx.UNIT_DIM] = nx.Z_GATE * nx.SCALE
            first = nx.ROW_ANCHORS if bits else 0
            norm = nx.bits_read_norm(dh) if bits else nx.READ_NORM
            for j in range(g.features[rd.out].size):
                t["linear_attn.out_proj.weight"][sched.dim(rd.out, j), h * dh + first + j] = \
                    1.0 / (norm * nx.Z_GATE)
    gate, up, down = t["mlp.gate_proj.weight"], t["mlp.up_proj.weight"], \
        t["mlp.down_proj.weight"]
    groups = [(g.rules[name], n0) for name, (L, n0) in sched.neurons.items() if L == layer]
    for f, (L, n0) in sched.clears.items():
        if L == layer:
            _emit_clear(sched, f, n0, gate, up, down)
    for rules, n0 in groups:
        j = n0
        for rule in rules:
            if rule.count is not None:
                _emit_count_rule(sched, rule, j, gate, up, down)
                j += 2
                continue
            bias = 0.0
            for (f, i), want in rule.literals:
                d = sched.dim(f, i)
                sign = 1.0 if want else -1.0
                gate[j, d] += sign * nx.GATE_STEP * nx.SCALE
                if want:
                    bias -= nx.GATE_STEP
                bias -= sign * nx.GATE_STEP * sched.offset(f)
            _put_bias(gate[j], bias, nx.GATE_ON)
            up[j, nx.UNIT_DIM] = nx.SCALE
            for (f, i), delta in rule.deltas:
                down[sched.dim(f, i), j] += delta / nx.GATE_ON
            j += 1
    for name, tensor in t.items():
        if not torch.equal(tensor.to(torch.bfloat16).float(), tensor):
            raise ValueError(f"layer {layer} {name}: a weight is not exact in bfloat16")
    return t


def _emit_address(sched: Schedule, addr: Addr, rows: int, proj: torch.Tensor) -> None:
    """Key or query rows 0..rows-1 of a head (`proj` starts at its row 0): a one-hot feature's
    dim r, or an Address decoded as KEY_SCALE * (enable - hamming distance to r)."""
    unit = nx.KEY_SCALE * nx.SCALE
    if isinstance(addr, str):
        for r in range(rows):
            proj[r, sched.dim(addr, r)] = unit
        return
    for r in range(rows):
        signed = [((f, i), 1.0 if r >> k & 1 else -1.0) for k, (f, i) in enumerate(addr.bits)]
        bias = -float(r.bit_count()) + (0.0 if addr.enable else 1.0)
        if addr.enable:
            signed.append((addr.enable, 1.0))
        for (f, i), sign in signed:
            d = sched.dim(f, i)
            proj[r, d] += sign * unit
            bias -= sign * sched.offset(f)
        proj[r, nx.UNIT_DIM] += bias * unit


def _emit_clear(sched: Schedule, feature: str, n0: int, gate: torch.Tensor, up: torch.Tensor,
                down: torch.Tensor) -> None:
    """Subtract a dead feature from its dims: one always-on neuron per dim whose up projection
    is the dim's value minus what the dim's next holder needs under it (CARRIER or 0), so it
    clears any small integer, counts included, and leaves that."""
    to_carrier = sched.clear_to_carrier[feature]
    for j, (i, d) in enumerate(enumerate(sched.dims[feature]), start=n0):
        gate[j, nx.ON_DIM] = nx.GATE_ON * nx.SCALE
        up[j, d] = nx.SCALE
        if to_carrier[i]:
            up[j, nx.UNIT_DIM] = -nx.CARRIER * nx.SCALE
        down[d, j] = -1.0 / nx.GATE_ON


def _put_bias(gate_row: torch.Tensor, unit: float, on: float) -> None:
    """A neuron's gate bias unit + on through the two constant-1 dims, every weight exact in
    bfloat16: unit rounded to bfloat16 on the unit dim, on and the rounding's remainder on the
    on dim (a rule with many literals has a bias with too many significant bits for one)."""
    hi = float(torch.tensor(unit).to(torch.bfloat16))
    gate_row[nx.UNIT_DIM] += hi * nx.SCALE
    gate_row[nx.ON_DIM] += (on + unit - hi) * nx.SCALE


def _emit_count_rule(sched: Schedule, rule: Rule, j: int, gate: torch.Tensor, up: torch.Tensor,
                     down: torch.Tensor) -> None:
    """A step "count >= k and literals": neurons j and j+1 (numerics.py, Counts)."""
    for f, i in rule.counted:
        if f in sched.read_outputs:
            raise ValueError(f"count dim {f}[{i}] is a memory read; counts are rule outputs")
    c, k = sched.dim(*rule.count[0]), rule.count[1]
    lits = 0.0
    for (lf, li), want in rule.literals:
        d = sched.dim(lf, li)
        sign = 1.0 if want else -1.0
        gate[j:j + 2, d] += sign * nx.COUNT_LITERAL * nx.SCALE
        lits -= nx.COUNT_LITERAL * (want + sign * sched.offset(lf))
    for n, offset in ((j, 1 - k), (j + 1, -k)):
        gate[n, c] += nx.GATE_STEP * nx.SCALE
        if rule.minus is not None:
            gate[n, sched.dim(*rule.minus)] -= nx.GATE_STEP * nx.SCALE
        _put_bias(gate[n], lits, nx.GATE_STEP * offset)
        up[n, nx.UNIT_DIM] = nx.SCALE
    for (df, di), delta in rule.deltas:
        down[sched.dim(df, di), j] += delta / nx.GATE_STEP
        down[sched.dim(df, di), j + 1] -= delta / nx.GATE_STEP


def _emit_enable(sched: Schedule, enable, b_row: torch.Tensor) -> None:
    """beta logit BETA_OFF + (BETA_LOGIT - BETA_OFF) * enable: exactly 0 or 1 after sigmoid."""
    d = sched.dim(*enable)
    step = nx.BETA_LOGIT - nx.BETA_OFF
    b_row[nx.UNIT_DIM] = (nx.BETA_OFF - step * sched.offset(enable[0])) * nx.SCALE
    b_row[d] = step * nx.SCALE


def _emit_bits_write(sched: Schedule, w, qkv: torch.Tensor, conv: torch.Tensor, v0: int) \
        -> None:
    """Value channels of a bits-bank write: anchors from the unit dim, each part's bits from
    its feature, through the conv1d tap of the token it comes from."""
    for a in range(nx.ROW_ANCHORS):
        qkv[v0 + a, nx.UNIT_DIM] = nx.ROW_ANCHOR * nx.SCALE
    for p in w.parts:
        for j in range(sched.graph.features[p.feature].size):
            ch, d = v0 + nx.ROW_ANCHORS + p.offset + j, sched.dim(p.feature, j)
            qkv[ch, d] = nx.VALUE_SCALE * nx.SCALE
            # a memory read of this token: remove its carrier
            qkv[ch, nx.UNIT_DIM] -= nx.VALUE_SCALE * sched.offset(p.feature) * nx.SCALE
            conv[ch, 0, :] = 0.0
            conv[ch, 0, 3 - p.tap] = 1.0


def embed(sched: Schedule, k_dims: int, hidden: int, token: dict[str, list[int]]) \
        -> torch.Tensor:
    """The circuit-local embedding row of a token with the given input features."""
    return embed_all(sched, k_dims, hidden, [token])[0]


def embed_all(sched: Schedule, k_dims: int, hidden: int,
              tokens: Sequence[dict[str, list[int]]]) -> torch.Tensor:
    """Embedding rows of many tokens ([tokens, k_dims]): the constant dims (anchor, unit, on,
    carriers) once, then each token's input features."""
    base = torch.zeros(k_dims)
    for dim, value in nx.anchors(hidden, k_dims).items():
        base[dim] = value
    base[nx.UNIT_DIM] = 1.0
    base[nx.ON_DIM] = 1.0
    base[sched.carriers] = nx.CARRIER
    rows = base.repeat(len(tokens), 1)
    for t, token in enumerate(tokens):
        for name, values in token.items():
            dims = sched.dims[name]
            rows[t, dims] += torch.tensor(values, dtype=rows.dtype)
    return rows
