"""The machine's graph as a whole (qgpu/circuit/gpu/machine.py build)."""

from qgpu.circuits.gpu import machine
from qgpu.compiler.graph import addr_features


def test_every_computed_feature_is_read() -> None:
    """A feature nothing reads still holds residual dims to the last layer (the scheduler
    cannot clear it), so every feature a rule or a bank read writes must have a reader; only
    the output selection's aliases are read by the unembedding instead."""
    g = machine.build()
    read = set().union(*g.rule_inputs.values())
    read |= {f for bank in g.banks for f in g.write_inputs(bank)}
    read |= {f for r in g.reads for f in addr_features(r.addr)}
    written = set().union(*g.rule_outputs.values()) | {r.out for r in g.reads}
    unread = sorted(f for f in written - read if not g.features[f].alias)
    assert not unread, f"written, never read: {unread}"
