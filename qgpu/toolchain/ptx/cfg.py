"""Control-flow graph of a kernel and immediate post-dominators, for SIMT reconvergence.

A divergent branch reconverges at the immediate post-dominator of its block (GPGPU-Sim's
model). ``ret``/``exit`` and falling off the end of the body lead to one virtual exit node, so
loops with ``break`` and early returns get a well-defined reconvergence point too. A jump to a
block that starts with an unguarded ``ret``/``exit`` counts as a return: NVVM merges every
``return`` into one such block, and lanes that took an early return must be able to finish
(and so stop counting for ``bar.sync``) instead of waiting there for the others.
"""

from __future__ import annotations

from dataclasses import dataclass

from qgpu.toolchain.ptx.ast import Instr, Kernel, Label

EXIT = -1  # the virtual exit node (as a block index)


@dataclass(frozen=True)
class BasicBlock:
    """Instructions ``start .. end-1``; successors are block indices or EXIT."""

    index: int
    start: int
    end: int
    succs: tuple[int, ...]


@dataclass(frozen=True)
class Cfg:
    """Blocks of a kernel body plus the immediate post-dominator of each block."""

    blocks: tuple[BasicBlock, ...]
    block_of: tuple[int, ...]  # instruction index -> block index
    ipdom: tuple[int, ...]  # block index -> block index or EXIT
    n_instructions: int

    def start_pc(self, block: int) -> int:
        """First instruction of a block; EXIT maps to one past the last instruction."""
        return self.n_instructions if block == EXIT else self.blocks[block].start

    def reconvergence_pc(self, pc: int) -> int:
        """Where the lanes split by the branch at ``pc`` meet again."""
        return self.start_pc(self.ipdom[self.block_of[pc]])


def label_pcs(kernel: Kernel) -> dict[str, int]:
    """Label name -> index of the instruction it precedes (len(instructions) at the end)."""
    pcs: dict[str, int] = {}
    pc = 0
    for item in kernel.body:
        if isinstance(item, Label):
            pcs[item.name] = pc
        else:
            pc += 1
    return pcs


def _ends_block(ins: Instr) -> bool:
    return ins.opcode in ("bra", "ret", "exit")


def build_cfg(kernel: Kernel) -> Cfg:
    """Split the body into basic blocks and compute immediate post-dominators."""
    instrs = kernel.instructions
    n = len(instrs)
    labels = label_pcs(kernel)
    ends = {i + 1 for i, ins in enumerate(instrs) if _ends_block(ins)}
    leaders = {0} | set(labels.values()) | ends
    starts = sorted(x for x in leaders if x < n)
    block_of = [0] * n
    for b, start in enumerate(starts):
        end = starts[b + 1] if b + 1 < len(starts) else n
        for pc in range(start, end):
            block_of[pc] = b

    def block_at(pc: int) -> int:
        returns = pc >= n or (instrs[pc].opcode in ("ret", "exit") and instrs[pc].guard is None)
        return EXIT if returns else block_of[pc]

    blocks = []
    for b, start in enumerate(starts):
        end = starts[b + 1] if b + 1 < len(starts) else n
        last = instrs[end - 1]
        succs: list[int] = []
        if last.opcode == "bra":
            succs.append(block_at(labels[last.operands[0].name]))  # type: ignore[union-attr]
        elif last.opcode in ("ret", "exit"):
            succs.append(EXIT)
        if not _ends_block(last) or last.guard is not None:
            succs.append(block_at(end))
        blocks.append(BasicBlock(b, start, end, tuple(dict.fromkeys(succs))))
    return Cfg(tuple(blocks), tuple(block_of), _ipdoms(blocks), n)


def _ipdoms(blocks: list[BasicBlock]) -> tuple[int, ...]:
    """Immediate post-dominators by the iterative set algorithm (kernels are small).

    Blocks that cannot reach the exit (endless loops) get EXIT: they never reconverge, and the
    interpreter's step limit stops them.
    """
    nodes = [b.index for b in blocks]
    preds: dict[int, list[int]] = {EXIT: [], **{b: [] for b in nodes}}
    for b in blocks:
        for s in b.succs:
            preds[s].append(b.index)
    reaches, todo = {EXIT}, [EXIT]
    while todo:
        for p in preds[todo.pop()]:
            if p not in reaches:
                reaches.add(p)
                todo.append(p)
    everything = frozenset(nodes) | {EXIT}
    pdom: dict[int, frozenset[int]] = {EXIT: frozenset({EXIT})}
    pdom.update({b: everything for b in nodes})
    changed = True
    while changed:
        changed = False
        for b in reversed(nodes):
            new = frozenset.intersection(*(pdom[s] for s in blocks[b].succs)) | {b}
            if new != pdom[b]:
                pdom[b] = new
                changed = True
    result = []
    for b in nodes:
        strict = pdom[b] - {b}
        # the immediate one is the strict post-dominator that all the others post-dominate
        result.append(next(d for d in strict if pdom[d] == strict) if b in reaches else EXIT)
    return tuple(result)
