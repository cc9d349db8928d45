"""The GPU circuit compiled for a base: the schedule for the base's layer shapes (memoised:
the build, ``--check`` and ``map`` share it), and the weights the merge needs (qgpu/merge.py),
its layers emitted one at a time as the merge asks for them (the 2B shapes' 43 layers are
~10 GB in float32: never held at once)."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from functools import lru_cache

import diskcache
import torch

from qgpu import protocol as T
from qgpu.cache import default_cache_dir, source_hash
from qgpu.circuits.gpu import encoding, machine
from qgpu.compiler import numerics as nx
from qgpu.compiler.schedule import LayerShape, Schedule, schedule
from qgpu.compiler.weights import CircuitWeights, embed_all, emit_layer

RESIDUAL_ENERGY = 2.0**18
"""A bound the circuit's dims stay below (summed squares, at every token and sublayer; the dot
product's launch peaks at 179,692: tests/circuits/test_gpu_compiled.py): the merged width is
padded until the anchors swallow it (``numerics.pad_k``)."""


class _Layers(Sequence):
    """The circuit's layers, each emitted when it is read (the last one kept)."""

    def __init__(self, sched: Schedule, k_dims: int) -> None:
        self.sched, self.k_dims = sched, k_dims
        self._layer = lru_cache(maxsize=1)(lambda i: emit_layer(sched, k_dims, i))

    def __len__(self) -> int:
        return self.sched.layers

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:  # type: ignore[override]
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._layer(i)


@lru_cache(maxsize=2)
def pickled_schedule(shape: LayerShape) -> bytes:
    """machine.build() scheduled for `shape`, pickled. Scheduling tries several searches (about
    a minute), so it is memoised in the process and on disk (``schedules`` in the build cache
    dir), keyed by the shape and a hash of every qgpu source it depends on: a changed circuit
    or scheduler is scheduled afresh, never read stale."""
    key = f"{source_hash([__name__])}:{shape}"
    with diskcache.Cache(str(default_cache_dir() / "schedules")) as cache:
        blob = cache.get(key)
        if blob is None:
            blob = pickle.dumps(schedule(machine.build(), shape, layers=machine.LAYERS))
            cache.set(key, blob)
    return blob


def gpu_schedule(shape: LayerShape) -> Schedule:
    """The GPU circuit's schedule for `shape` (memoised: pickled_schedule). Every caller gets
    its own copy (~1 s to unpickle), so no caller can change what another reads."""
    return pickle.loads(pickled_schedule(shape))


def compile_gpu(base_config: dict) -> CircuitWeights:
    """The machine (machine.build) scheduled for the base's layer shapes, as merge input. K is
    padded so that the merged width has anchors that swallow ``RESIDUAL_ENERGY`` (a perfect
    square, or a sum of two squares with the second anchor on the last dim: for the 2B's 2048,
    K + 1); every token's embedding carries the merged width's anchors; the final norm passes
    only the selection fields (docs/ARCHITECTURE.md §9: the chosen token's logit is their dot
    product with its embedding)."""
    sched = gpu_schedule(LayerShape.from_config(base_config))
    d_base = base_config["hidden_size"]
    k = nx.pad_k(d_base, sched.k_used, RESIDUAL_ENERGY)
    names = T.vocabulary()
    embeddings = embed_all(sched, k, d_base + k, [encoding.features(n) for n in names])
    final = torch.full((k,), -1.0)  # (1 + w) = 0: silence every dim but the selection fields
    for f in encoding.FIELDS:
        if f.selects:
            for name in f.features():
                final[sched.dims[name]] = nx.SCALE - 1.0  # (1 + w) undoes the norm's 1/SCALE
    return CircuitWeights(
        k_dims=k, layers=_Layers(sched, k), token_names=names, token_embeddings=embeddings,
        final_norm=final,
        metadata={"circuit": "gpu", "allocation": sched.allocation_map(),
                  "banks": {b: list(lh) for b, lh in sched.heads.items()},
                  "k_used": sched.k_used},
    )
