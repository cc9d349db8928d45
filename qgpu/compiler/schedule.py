"""Scheduling a circuit graph into Qwen3.5 decoder layers (weights.py emits their tensors).

Each layer is a GDN sublayer (memory banks, one head each) followed by an MLP sublayer (rules,
one neuron each). A node goes into the earliest sublayer of its kind that comes after every
feature it reads and still has room (heads, neurons). Every feature gets its own residual dims
after the anchor and unit dims; read outputs sit on carrier dims. The allocation map says what
every layer, head, neuron and residual dim does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import torch

from qgpu.compiler import numerics as nx
from qgpu.compiler.evaluate import node_deps, node_order
from qgpu.compiler.graph import Graph, Rule, addr_features
from qgpu.compiler.packing import PACK_ROUNDS, pack_idle


@dataclass(frozen=True)
class LayerShape:
    """The per-layer sizes of the target model (global in a Qwen3.5 config)."""

    gdn_heads: int = 16
    head_dim: int = 128
    intermediate: int = 6144

    @classmethod
    def from_config(cls, cfg: dict) -> LayerShape:
        if cfg.get("linear_num_key_heads") != cfg.get("linear_num_value_heads"):
            raise ValueError("circuits need as many GDN key heads as value heads")
        return cls(cfg["linear_num_value_heads"], cfg["linear_value_head_dim"],
                   cfg["intermediate_size"])


@dataclass
class Schedule:
    graph: Graph
    shape: LayerShape
    layers: int
    dims: dict[str, list[int]]  # feature -> its residual dims (circuit-local)
    k_used: int  # residual dims the circuit needs (before padding)
    heads: dict[str, tuple[int, int]]  # bank -> (layer, head)
    neurons: dict[str, tuple[int, int]]  # rule group -> (layer, first neuron)
    carriers: list[int] = field(default_factory=list)  # dims that hold CARRIER from the embedding
    clears: dict[str, tuple[int, int]] = field(default_factory=dict)  # feature -> (layer, neuron)
    # cleared feature -> per dim, whether the clear leaves CARRIER (the dim's next holder is a read)
    clear_to_carrier: dict[str, list[bool]] = field(default_factory=dict)
    # feature -> the sublayer of its last writer (GDN 2L, MLP 2L + 1; token inputs -1)
    ready: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.read_outputs = frozenset(r.out for r in self.graph.reads)

    def dim(self, feature: str, i: int) -> int:
        return self.dims[feature][i]

    def offset(self, feature: str) -> float:
        """What a feature's dims hold under its value: CARRIER under a memory read, else 0."""
        return nx.CARRIER if feature in self.read_outputs else 0.0

    def place(self) -> dict[tuple[str, str], int]:
        """Every node's sublayer: ("rules", group) -> 2L + 1, ("bank", bank) -> 2L."""
        return ({("rules", n): 2 * L + 1 for n, (L, _) in self.neurons.items()}
                | {("bank", b): 2 * L for b, (L, _) in self.heads.items()})

    def live(self, feature: str) -> bool:
        """Whether the feature still holds its value after the last layer."""
        return feature not in self.clears

    def residual_energy(self, values: dict[str, list[int]]) -> np.ndarray:
        """The sum of squares of the circuit's dims (all but the anchor) after the embedding
        and after every sublayer, for a token whose features end with `values` (an evaluator
        step of ``self.graph``): what the anchor must swallow for every RMSNorm to divide by
        exactly 2**ANCHOR_EXP (``numerics.energy_budget``). Each dim holds its features in
        turn (a read output on top of CARRIER) and between them what the clear left: 0 or
        CARRIER. A feature counts with its final value from its first writer on."""
        g, last = self.graph, 2 * self.layers
        born = {n: -1 for n, f in g.features.items() if f.token_input}
        for node, t in self.place().items():
            for f in _node_io(g, node, self.shape)[1]:
                born[f] = min(born.get(f, t), t)
        grid = np.zeros((last + 1, self.k_used))  # row t + 1: after sublayer t
        grid[:, nx.UNIT_DIM] = grid[:, nx.ON_DIM] = 1.0
        grid[:, self.carriers] = nx.CARRIER
        order = sorted((n for n in self.dims if not g.features[n].alias), key=lambda n: born[n])
        for name in order + [n for n in self.dims if g.features[n].alias]:
            f = g.features[name]
            start = born[name] + 1
            end = 2 * self.clears[name][0] + 2 if name in self.clears else last + 1
            value = np.asarray(values[name], dtype=float) + self.offset(name)
            for i, d in enumerate(self.dims[name]):
                if f.alias:  # adds on top of its token input, in the last sublayer
                    grid[start:, d] += value[i]
                    continue
                grid[start:end, d] = value[i]
                if end <= last:
                    grid[end:, d] = nx.CARRIER if self.clear_to_carrier[name][i] else 0.0
        return (grid * grid).sum(axis=1)

    def allocation_map(self) -> dict:
        """What every layer, head, neuron range and residual dim does (JSON-ready)."""
        g = self.graph
        residual = [{"dims": [0, 0], "what": "anchor"}, {"dims": [1, 1], "what": "unit (bias)"},
                    {"dims": [2, 2], "what": "on (gate bias)"}]
        for name, ds in sorted(self.dims.items(), key=lambda kv: kv[1][0]):
            f = g.features[name]
            residual.append({"dims": _ranges(ds), "what": name, "code": f.code,
                             "carrier": name in self.read_outputs,
                             "cleared_in_layer": self.clears[name][0] if name in self.clears
                             else None})
        layers = []
        for layer in range(self.layers):
            layers.append({
                "layer": layer,
                "gdn_heads": {f"head {h}": f"bank {b} ({g.banks[b].rows} rows)"
                              for b, (L, h) in self.heads.items() if L == layer},
                "mlp_neurons": {
                    **{f"{n0}..{n0 + rule_neurons(g.rules[r]) - 1}": f"rules {r}"
                       for r, (L, n0) in self.neurons.items() if L == layer},
                    **{f"{n0}..{n0 + g.features[f].size - 1}": f"clear {f}"
                       for f, (L, n0) in self.clears.items() if L == layer}},
            })
        return {"layers": layers, "residual": residual, "k_used": self.k_used}

    def table(self) -> str:
        """The allocation map as a readable table."""
        return allocation_table(self.allocation_map())


def allocation_table(m: dict) -> str:
    """An allocation map (``Schedule.allocation_map``) as a readable table."""
    lines = [f"{len(m['layers'])} layers, {m['k_used']} residual dims"]
    for layer in m["layers"]:
        lines.append(f"layer {layer['layer']}:")
        lines += [f"  GDN {k}: {v}" for k, v in layer["gdn_heads"].items()]
        lines += [f"  MLP neurons {k}: {v}" for k, v in layer["mlp_neurons"].items()]
    lines.append("residual:")
    lines += [f"  {r['dims']!s:>16} {r['what']}" for r in m["residual"]]
    return "\n".join(lines)


def _ranges(ds: list[int]) -> list[list[int]] | list[int]:
    """Dims as [first, last] of each consecutive run (a single run is flattened)."""
    runs: list[list[int]] = []
    for d in ds:
        if runs and d == runs[-1][1] + 1:
            runs[-1][1] = d
        else:
            runs.append([d, d])
    return runs[0] if len(runs) == 1 else runs


FLATTEN_PLANS = ((8,), (6,), (4, 8, 12), (10,))
"""The flatten's move reaches, one plan per full schedule (``_flatten``): each hill-climb ends
in another local optimum, whose peak differs by up to ~100 dims, so schedule() keeps the best."""


def schedule(g: Graph, shape: LayerShape, *, pack: bool = True, layers: int = 1) -> Schedule:
    """Place every node by list scheduling (``_list_schedule``), then sink each node whose
    outputs are read later towards its first reader (so values do not sit in the residual longer
    than needed), flatten the peak of live dims, then give features residual dims, reusing the
    dims of features that are dead (cleared by extra rules). With `pack`, features that wait
    long between reads are then held packed (packing.py), round after round (each packs what
    the last one's placement leaves waiting). Every flatten plan runs its own rounds; the
    schedule needing the fewest dims in no more layers is kept: its graph is then the
    rewritten one (``Schedule.graph``). A circuit with an output selection that needs fewer
    than `layers` layers is stretched to them (the selection goes to the last one), which gives
    the flattening room to spread work that would otherwise overlap."""
    best = None
    for reaches in FLATTEN_PLANS:
        sched = _schedule(g, shape, reaches, layers)
        if best is None or sched.k_used < best.k_used and sched.layers <= best.layers:
            best = sched
        for _ in range(PACK_ROUNDS if pack else 0):  # a round's packing shifts the schedule
            packed = pack_idle(sched.graph, sched.ready, sched.place())
            if packed is None:
                break
            sched = _schedule(packed, shape, reaches, layers)
            if sched.k_used < best.k_used and sched.layers <= best.layers:
                best = sched
    assert best is not None
    return best


def _schedule(g: Graph, shape: LayerShape, reaches: tuple[int, ...], layers: int) -> Schedule:
    order = node_order(g)
    io = {node: _node_io(g, node, shape) for node in order}
    written = {f for node in order for f in io[node][1]}
    for name, f in g.features.items():
        if name not in written and not f.token_input:
            raise ValueError(f"feature {name} is never written")
    # ties go to nodes with outputs: banks nothing in the circuit reads take the heads left over
    order = [n for n in order if io[n][1]] + [n for n in order if not io[n][1]]
    used: dict[tuple[str, int], int] = {}  # (kind, sublayer) -> neurons or heads taken
    deps = node_deps(g)
    users: dict[tuple[str, str], list] = {n: [] for n in order}  # the nodes that need each one
    for n in order:
        for d in deps[n]:
            users[d].append(n)
    place = _list_schedule(order, deps, users, io, used, shape)
    _sink(g, order, io, place, used, shape)
    _selection_last(g, order, io, place, used, shape, layers)
    _flatten(g, order, deps, users, io, place, used, shape, reaches)

    ready = {n: -1 for n, f in g.features.items() if f.token_input}
    first: dict[str, int] = dict(ready)  # first sublayer writing each feature (its dims' birth)
    readers: dict[str, list[int]] = {n: [] for n in g.features}
    heads: dict[str, tuple[int, int]] = {}
    neurons: dict[str, tuple[int, int]] = {}
    taken: dict[int, int] = {}
    for node in sorted(order, key=lambda n: place[n]):
        ins, outs, size = io[node]
        s = place[node]
        (neurons if node[0] == "rules" else heads)[node[1]] = (s // 2, taken.get(s, 0))
        taken[s] = taken.get(s, 0) + size
        for f in ins:
            readers[f].append(s)
        for f in outs:
            ready[f] = max(ready.get(f, -1), s)
            first[f] = min(first.get(f, s), s)
    neurons_used = {s // 2: n for s, n in taken.items() if s % 2}
    last = max(ready.values(), default=-1)
    clears = _place_clears(g, shape, ready, readers, neurons_used, last)
    read_at_birth = {f for f, at in first.items() if at in readers.get(f, [])}
    dims, carriers, clear_to_carrier, k = _allocate(g, first, clears, read_at_birth)
    layers = max([last] + [2 * L + 1 for L, _ in clears.values()]) // 2 + 1
    return Schedule(g, shape, max(layers, 1), dims, k, heads, neurons, carriers, clears,
                    clear_to_carrier, ready)


def _list_schedule(order: list, deps: dict, users: dict, io: dict, used: dict,
                   shape: LayerShape) -> dict[tuple[str, str], int]:
    """Place every node at the first sublayer of its kind (GDN even, MLP odd) after all its
    dependencies, filling each sublayer with the ready nodes that have the longest chain of
    dependants first (so a full layer delays the nodes with slack, not the critical path)."""
    height: dict[tuple[str, str], int] = {}
    for n in reversed(order):
        height[n] = 1 + max((height[u] for u in users[n]), default=0)
    rank = {n: i for i, n in enumerate(order)}
    waiting = {n: len(deps[n]) for n in order}
    ready_at: dict[tuple[str, str], int] = {n: 0 for n in order if not deps[n]}
    place: dict[tuple[str, str], int] = {}
    s = 0
    while ready_at:
        kind = "rules" if s % 2 else "bank"
        cap = shape.intermediate if kind == "rules" else shape.gdn_heads
        due = sorted((n for n, at in ready_at.items() if at <= s and n[0] == kind),
                     key=lambda n: (-height[n], rank[n]))
        for n in due:
            size = io[n][2]
            if used.get((kind, s), 0) + size > cap:
                continue
            used[(kind, s)] = used.get((kind, s), 0) + size
            place[n] = s
            del ready_at[n]
            for u in users[n]:
                waiting[u] -= 1
                if not waiting[u]:
                    ready_at[u] = max(place[d] for d in deps[u]) + 1
        s += 1
    return place


def _node_io(g: Graph, node: tuple[str, str], shape: LayerShape) \
        -> tuple[set[str], set[str], int]:
    """(features read, features written, neurons or heads taken) of a node."""
    kind, name = node
    if kind == "rules":
        size = rule_neurons(g.rules[name])
        if size > shape.intermediate:
            raise ValueError(f"rule group {name} has {size} neurons > {shape.intermediate}")
        return set(g.rule_inputs[name]), set(g.rule_outputs[name]), size
    if sum(w.bank == name for w in g.writes) > 1 or sum(r.bank == name for r in g.reads) > 1:
        raise ValueError(f"bank {name}: one write and one read per token at most")
    ins = g.write_inputs(name) | {f for r in g.reads if r.bank == name
                                  for f in addr_features(r.addr)}
    return ins, {r.out for r in g.reads if r.bank == name}, 1


def _fit(kind: str, s: int, size: int, used: dict[tuple[str, int], int],
         shape: LayerShape) -> int:
    """The first sublayer >= s of the node's kind (MLP odd, GDN even) with room for it."""
    s += (s % 2 == 0) if kind == "rules" else (s % 2 == 1)
    cap = shape.intermediate if kind == "rules" else shape.gdn_heads
    while used.get((kind, s), 0) + size > cap:
        s += 2
    return s


def _sink(g: Graph, order: list, io: dict, place: dict, used: dict, shape: LayerShape) -> None:
    """Move nodes later, latest first, while every reader of their outputs still comes after
    them, to the place that saves the most residual dims x sublayers: outputs born later, minus
    inputs the node reads last kept alive longer. Nodes whose outputs nobody reads (the
    circuit's results) stay where they are."""
    readers_of: dict[str, list[tuple[str, str]]] = {}
    for node in order:
        for f in io[node][0]:
            readers_of.setdefault(f, []).append(node)
    for node in reversed(order):
        ins, outs, size = io[node]
        # how long each input lives anyway: its other readers
        held = {f: max([place[r] for r in readers_of[f] if r != node] + [place[node]])
                for f in ins}
        out_dims = sum(g.features[f].size for f in outs)

        def gain(s: int, node: tuple = node, held: dict = held, out_dims: int = out_dims) -> int:
            """Residual dim-sublayers saved by moving the node to s: its outputs are born
            later, inputs it reads last die later."""
            return out_dims * (s - place[node]) - sum(
                g.features[f].size * max(0, s - h) for f, h in held.items())

        later = [place[r] for f in outs for r in readers_of.get(f, []) if r != node]
        writers_after = [place[w] for f in outs for w in order
                         if w != node and f in io[w][1] and f in io[w][0]]
        if not later:
            continue
        limit = min(later + writers_after) - 1
        kind, cap = node[0], shape.intermediate if node[0] == "rules" else shape.gdn_heads
        best = place[node]
        s = best + 2
        while s <= limit:
            if used.get((kind, s), 0) + size <= cap and gain(s) > gain(best):
                best = s
            s += 2
        if best != place[node]:
            used[(kind, place[node])] -= size
            used[(kind, best)] = used.get((kind, best), 0) + size
            place[node] = best


def _selection_last(g: Graph, order: list, io: dict, place: dict, used: dict,
                    shape: LayerShape, layers: int) -> None:
    """Rule groups that write aliases (the output selection) add to dims a token input holds,
    so every reader of that input must come first: they all go into one MLP sublayer after
    every other node (a group that also reads the input reads it there, before any adds), in
    layer `layers` - 1 at the earliest."""
    aliased = {n for n, f in g.features.items() if f.alias}
    writers = [n for n in order if n[0] == "rules" and io[n][1] & aliased]
    if not writers:
        return
    for w in writers:
        used[("rules", place[w])] -= io[w][2]
    s = _fit("rules", max(max(place.values()), 2 * layers - 1), sum(io[w][2] for w in writers),
             used, shape)
    for w in writers:
        place[w] = s
        used[("rules", s)] = used.get(("rules", s), 0) + io[w][2]


FLATTEN_CONE = 64  # nodes one move may shift along with it (its users or its dependencies)


def _flatten(g: Graph, order: list, deps: dict, users: dict, io: dict, place: dict,
             used: dict, shape: LayerShape, reaches: tuple[int, ...], passes: int = 4) -> None:
    """Lower the peak of live residual dims (what K must hold) by hill-climbing: move a node up
    to `reach` sublayers (for each of `reaches` in turn, until a pass finds no move), shifting
    the users it would overtake later (or the dependencies it would pass earlier) just enough,
    within the sublayers' room, while the profile of live dims — each feature from its first
    writer to the clear after its last reader — gets a lower peak, or as high a peak at fewer
    sublayers (the sum of (live / peak)^8 falls). The layers stay as many; the output
    selection's sublayer stays last."""
    aliased = {f.alias for f in g.features.values() if f.alias}
    writers: dict[str, list] = {}
    readers: dict[str, list] = {}
    for n in order:
        for f in io[n][1]:
            writers.setdefault(f, []).append(n)
        for f in io[n][0]:
            readers.setdefault(f, []).append(n)
    last = max(place.values())
    fixed = {n for n in order if place[n] == last and n[0] == "rules"}  # the selection
    forever = {n for n, f in g.features.items()
               if n in aliased or (f.token_input and f.accumulate) or n not in readers}
    cap = {"rules": shape.intermediate, "bank": shape.gdn_heads}

    def span(f: str) -> tuple[int, int]:
        """The sublayers [birth, end) in which f holds its dims."""
        feat = g.features[f]
        b = -1 if feat.token_input else min(place[w] for w in writers[f])
        if f in forever:
            return max(b, 0), last + 1
        at = [place[r] for r in readers[f]]
        b -= b in at  # read where it is born: it cannot take the dims cleared there
        c = max(at)
        c += c % 2 == 0
        return max(b, 0), (last + 1 if c >= last else c)

    sizes = {f: g.features[f].size for f in g.features if not g.features[f].alias}
    live = np.zeros(last + 1)
    load = np.zeros(last + 2)  # MLP neurons per sublayer: rules, and the clears (one per dim)
    for (kind, s), n in used.items():
        if kind == "rules":
            load[s] += n
    spans = {}
    for f in sizes:
        if f in writers or g.features[f].token_input:
            spans[f] = span(f)
            live[spans[f][0]:spans[f][1]] += sizes[f]
            load[spans[f][1]] += sizes[f]

    def cost(prof: np.ndarray, load: np.ndarray) -> tuple[float, float, float]:
        """Neurons over an MLP's room first (a clear that waits for room keeps its dims
        longer than the profile says), then the peak, then how many sublayers come near it."""
        top = prof.max()
        over = np.maximum(load[:last + 1] - shape.intermediate, 0).sum()
        return over, top, float(((prof / top) ** 8).sum())

    def cone(n: tuple[str, str], s: int) -> dict | None:
        """New places when n moves to s: the nodes it would overtake shifted just past it."""
        later = s > place[n]
        moves = {n: s}
        stack = [n]
        while stack:
            m = stack.pop()
            for u in users[m] if later else deps[m]:
                at = moves.get(u, place[u])
                if (at > moves[m]) if later else (at < moves[m]):
                    continue
                need = moves[m] + (1 if later else -1)
                if (need % 2 == 1) != (u[0] == "rules"):
                    need += 1 if later else -1
                if u in fixed or not 0 <= need <= last - 1 or len(moves) >= FLATTEN_CONE:
                    return None
                moves[u] = need
                stack.append(u)
        return moves

    best = cost(live, load)
    for reach in reaches:  # each reach's passes climb on from where the last one's ended
        for _ in range(passes):
            moved = False
            for n in order:
                if n in fixed:
                    continue
                here, choice = place[n], None
                for s in range(here - reach, here + reach + 1, 2):
                    moves = None if s == here or not 0 <= s <= last - 1 else cone(n, s)
                    if moves is None:
                        continue
                    room = {}
                    for m, t in moves.items():
                        room[(m[0], place[m])] = room.get((m[0], place[m]), 0) - io[m][2]
                        room[(m[0], t)] = room.get((m[0], t), 0) + io[m][2]
                    if any(used.get(key, 0) + d > cap[key[0]] for key, d in room.items() if d > 0):
                        continue
                    old = {m: place[m] for m in moves}
                    place.update(moves)
                    trial, trial_load = live.copy(), load.copy()
                    new = {}
                    for f in {f for m in moves for f in io[m][0] | io[m][1] if f in spans}:
                        (b0, e0), (b1, e1) = spans[f], span(f)
                        trial[b0:e0] -= sizes[f]
                        trial[b1:e1] += sizes[f]
                        trial_load[e0] -= sizes[f]
                        trial_load[e1] += sizes[f]
                        new[f] = (b1, e1)
                    for (kind, t), d in room.items():
                        if kind == "rules":
                            trial_load[t] += d
                    place.update(old)
                    c = cost(trial, trial_load)
                    if c < best:
                        best, choice = c, (moves, room, trial, trial_load, new)
                if choice is not None:
                    moves, room, live, load, new = choice
                    for key, d in room.items():
                        used[key] = used.get(key, 0) + d
                    place.update(moves)
                    spans.update(new)
                    moved = True
            if not moved:
                break


def _place_clears(g: Graph, shape: LayerShape, ready: dict[str, int],
                  readers: dict[str, list[int]], neurons_used: dict[int, int], last: int) \
        -> dict[str, tuple[int, int]]:
    """For every feature whose last reader comes before the last sublayer: the MLP sublayer
    (layer, first neuron) where rules subtract it, so that later features can take its dims. A
    token input that the output selection aliases is cleared too (after layer 0's MLP when
    nothing reads it): its dims are lent until the selection adds there (``_allocate``)."""
    clears = {}
    aliased = {f.alias for f in g.features.values() if f.alias}
    for name, f in g.features.items():
        if f.token_input and f.accumulate or not readers[name] and name not in aliased:
            continue
        c = max(readers[name], default=1)
        c += (c % 2 == 0)  # the same MLP sublayer as the last reader, or the next one
        while c < last and neurons_used.get(c // 2, 0) + f.size > shape.intermediate:
            c += 2
        if c >= last:
            continue  # nothing is written after it: no dims to win
        clears[name] = (c // 2, neurons_used.get(c // 2, 0))
        neurons_used[c // 2] = neurons_used.get(c // 2, 0) + f.size
    return clears


def _allocate(g: Graph, first: dict[str, int], clears: dict[str, tuple[int, int]],
              read_at_birth: set[str]) \
        -> tuple[dict[str, list[int]], list[int], dict[str, list[bool]], int]:
    """Residual dims per feature; a dim freed by a clear in MLP sublayer c can hold any feature
    written after c, or written in c by rules that do not read it there (the clear's neuron
    and the writers' add up in the same sublayer: the old value goes, the new one comes). A
    memory read adds to CARRIER, so a read output's dims hold CARRIER before it is written:
    from the embedding, or from the clear of the dim's previous holder (a clear leaves 0 or
    CARRIER, whichever the next holder needs). The dims of a token input that the output
    selection aliases are only lent once it is cleared: they go to features that are cleared
    too (before the selection's sublayer), so they hold 0 when the selection adds there."""
    read_outs = {r.out for r in g.reads}
    aliased = {f.alias for f in g.features.values() if f.alias}
    lent: set[int] = set()  # dims the selection takes back at the end
    free: list[tuple[int, int]] = []  # (freed after sublayer, dim)
    dims: dict[str, list[int]] = {}
    holder: dict[int, tuple[str, int]] = {}  # dim -> (latest feature on it, its index there)
    clear_to_carrier = {name: [False] * g.features[name].size for name in clears}
    carriers: list[int] = []
    k = nx.RESERVED_DIMS

    def born(n: str) -> int:  # token inputs hold their dims from the embedding on
        return -1 if g.features[n].token_input else first[n]

    for name in sorted(g.features, key=lambda n: (born(n), n)):
        f = g.features[name]
        if f.alias:
            dims[name] = dims[f.alias]
            continue
        # born in the clear's own sublayer: its writers must not read it there (it is not 0 yet)
        latest = born(name) - (name in read_at_birth)
        usable = sorted((e for e in free if e[0] <= latest
                         and (name in clears or e[1] not in lent)), key=lambda e: e[1])[:f.size]
        for e in usable:
            free.remove(e)
        got = [d for _, d in usable] + list(range(k, k + f.size - len(usable)))
        k += f.size - len(usable)
        dims[name] = got
        for i, d in enumerate(got):
            if d in holder:
                prev, j = holder[d]
                clear_to_carrier[prev][j] = name in read_outs
            elif name in read_outs:
                carriers.append(d)
            holder[d] = (name, i)
        if name in clears:
            layer, _ = clears[name]
            free += [(2 * layer + 1, d) for d in got]
            if name in aliased:
                lent.update(got)
    return dims, sorted(carriers), clear_to_carrier, k


def rule_neurons(rules: list[Rule]) -> int:
    return sum(r.neurons for r in rules)


def decode(sched: Schedule, residual: torch.Tensor) -> dict[str, list[float]]:
    """Values of the features still live after the last layer, read back from a circuit-local
    residual vector (carriers removed)."""
    out = {}
    for name in sched.graph.features:
        if sched.live(name):
            out[name] = [float(residual[d]) - sched.offset(name) for d in sched.dims[name]]
    return out


def dump_map(sched: Schedule) -> str:
    return json.dumps(sched.allocation_map(), indent=1)
