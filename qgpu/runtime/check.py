"""``--check`` inside the model: the first generated token that is not the reference machine's
(``Divergence``), and per circuit layer the features that must hold the weight-free evaluator's
values (``CircuitReference``, ``LayerCheck``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from qgpu import protocol as T
from qgpu.errors import LaunchError, UsageError


class Divergence(LaunchError):
    """The model left the reference (--check): generated token `index` was not the reference
    machine's, or (with a layer check) a circuit layer went wrong in the pass that read it."""

    def __init__(self, index: int, generated: list[str], message: str) -> None:
        super().__init__(message)
        self.index, self.generated = index, generated

    @classmethod
    def token(cls, index: int, generated: list[str], expected: list[str], note: str = "") \
            -> Divergence:
        got = T.body(generated[index])
        want = T.body(expected[index]) if index < len(expected) else "(the stream had ended)"
        context = " ".join(T.body(t) for t in generated[max(0, index - 4):index])
        return cls(index, generated, f"generated token {index} is {got}, the reference machine "
                                     f"says {want} (after: {context}){note}")


class CircuitReference:
    """What a layer check needs from the circuit the model was built with: its graph (the
    reference semantics) and, per circuit layer, the features settled there — every writer has
    run and the dims are not cleared yet — with their residual dims and carrier offsets."""

    def __init__(self, config: dict, banks: dict[str, tuple[int, int]], circuit_layers: int,
                 path: Path) -> None:
        """`config`: the merged model's (its layer shapes); `banks` and `circuit_layers`: what
        the build recorded, which must be what this qgpu's circuit compiles to."""
        from qgpu.circuits.gpu.compiled import gpu_schedule
        from qgpu.compiler.evaluate import flat_offsets
        from qgpu.compiler.schedule import LayerShape

        sched = gpu_schedule(LayerShape.from_config(config))
        if sched.heads != banks or sched.layers != circuit_layers:
            raise UsageError(f"{path} was built from another version of the GPU circuit "
                             "than this qgpu's: rebuild it (python -m qgpu build)")
        g = self.graph = sched.graph  # the graph the build compiled (packing.py rewrote it)
        done = sched.ready
        last = {n: sched.clears[n][0] - 1 if n in sched.clears else sched.layers - 1
                for n in g.features}
        for grp, (layer, _) in sched.neurons.items():
            for f in g.rule_outputs[grp]:
                if g.features[f].alias:  # selection adds onto the token input's dims
                    target = g.features[f].alias
                    last[target] = min(last[target], layer - 1)
        offsets = flat_offsets(g)
        self.plan = []  # per circuit layer: (residual dims, evaluator positions, offsets, names)
        for layer in range(sched.layers):
            dims, pos, off, names = [], [], [], []
            for n, f in g.features.items():
                if f.alias or not done[n] <= 2 * layer + 1 or layer > last[n]:
                    continue
                dims += list(sched.dims[n])  # circuit-local
                pos += [offsets[n] + i for i in range(f.size)]
                off += [sched.offset(n)] * f.size
                names += [f"{n}[{i}]" for i in range(f.size)]
            self.plan.append((torch.tensor(dims), torch.tensor(pos), torch.tensor(off), names))


class LayerCheck:
    """``--check`` inside the model, for one launch: after every circuit layer, each settled
    feature (``CircuitReference``) must hold exactly what the weight-free evaluator (the
    circuit's reference semantics, qgpu/compiler/evaluate.py) gives on the same tokens. The
    first (token, layer) that differs is kept, with the features that differ there."""

    def __init__(self, reference: CircuitReference) -> None:
        from qgpu.circuits.gpu.encoding import features
        from qgpu.compiler.evaluate import Evaluator

        self.reference, self.encode, self.ev = reference, features, Evaluator(reference.graph)
        self.fed: list[str] = []  # every token the model has read
        self.first: tuple[int, int, list[str]] | None = None  # (fed index, layer, differences)
        self._refs = torch.zeros(0)

    def feed(self, names: list[str]) -> None:
        """The tokens the next forward pass reads: their reference values."""
        self._base = len(self.fed)
        self._refs = torch.from_numpy(np.stack(
            [self.ev.step_vector(self.encode(n)).copy() for n in names])).float()
        self.fed += names

    def compare(self, layer: int, out: torch.Tensor) -> None:
        """Circuit layer `layer`'s output for the tokens fed last ([tokens, hidden])."""
        dims, pos, off, names = self.reference.plan[layer]
        got = out[:, dims.to(out.device)].float().cpu() - off
        want = self._refs[:, pos]
        bad = (got != want).nonzero()
        if not len(bad):
            return
        t = int(bad[0, 0])
        if self.first is not None and (self.first[0], self.first[1]) <= (self._base + t, layer):
            return
        cols = bad[bad[:, 0] == t, 1].tolist()
        self.first = (self._base + t, layer, [f"{names[c]} holds {got[t, c].item():g}, the "
                                              f"reference {want[t, c].item():g}" for c in cols])

    def report(self, prompt: list[str]) -> str:
        """The first divergence in words: the token whose pass went wrong, the layer, and the
        features that differ there (up to 4)."""
        at, layer, what = self.first
        where = f"prompt token {at}" if at < len(prompt) \
            else f"generated token {at - len(prompt)}"
        more = f" and {len(what) - 4} more" if len(what) > 4 else ""
        return (f"in the pass that read {where} ({T.body(self.fed[at])}), circuit layer {layer} "
                f"left the reference semantics: {'; '.join(what[:4])}{more}")
