"""The token protocol between the host and the GPU inside the model (docs/ARCHITECTURE.md §9).

The host feeds a *prompt* of tokens known before the launch (the ROM image, parameter words,
initial global memory, the launch shape); the model then *generates* the launch: one EXEC token
per machine block it runs (block, warp, active lanes), followed by the write-back frames that
carry that block's live results down to the early layers where later blocks read them, and END
(or FAULT) when the launch is over. Within one forward pass information only flows to later
layers, so a register written at layer 30 reaches layer 5 of a later token only through a
generated token's id: these frames are that channel, and the protocol is where tokens per launch
are won or lost.

**Frames.** A token carries at most one data byte; a GDN memory write takes its value from the
header token and, through the 4-tap causal conv1d, from up to three data tokens right before it:
``D3 D2 D1 HEADER``, where ``Dk`` (``<|gpu:dk:BYTE|>``) sits k tokens before the header. Headers
with a payload carry byte 0 and ``Dk`` byte k; headers without one (ROM parts) take byte k-1 from
``Dk``. Leading zero bytes are left out, so a value below 256 is one token. Data tokens are
positional so that a frame's bytes can never be confused with a neighbouring frame's.

Vocabulary (names ``<|gpu:...|>``, ids assigned by the merge after the base vocabulary):

=========================  ======================================================  ==========
token                      meaning                                                 where
=========================  ======================================================  ==========
``rom:B:s:p``              part p (24 bits) of ROM row (block B, slot s)           prompt
``param:w:X``              parameter word w, byte 0 = X                            prompt
``mem:ROW:X``              memory word ROW (g = global, s = shared, lL.w = local   both
                           word w of lane L), byte 0 = X
``block:XxY`` / ``grid:XxY``  launch shape                                         prompt
``shared:N``               shared memory words per thread block                    prompt
``go``                     end of the prompt: the model takes over                 prompt
``dK:X``                   data byte X, K tokens before its header                 both
``exec:B:wW:mM``           warp W runs machine block B with active lanes M         generated
``park:B:wW:mM``           lanes M of warp W wait at block B                       generated
``exit:wW:mM``             lanes M of warp W have exited                           generated
``warp:wW``                the scheduler looks at warp W                           generated
``cta:C``                  thread block C (C >= 1) starts                          generated
``val:rR:L:X``             register R of lane L (or every active lane: ``all``)    generated
                           gets the frame's value, byte 0 = X
``prow:X``                 the current warp's predicate row (bit 4L+P: predicate   generated
                           P of lane L; 16 bits), byte 0 = X
``end`` / ``fault:KIND``   the launch finished / stopped on a fault                generated
=========================  ======================================================  ==========

Modules by job: ``vocabulary`` (token names, memory rows, frames), ``prompt`` (``Launch``,
``prompt_tokens``), ``stream`` (``expected_tokens``, ``fault_tokens``: what the model must
generate) and ``decode`` (token traces as machine events); this package exports them all.
``expected_tokens`` derives, from the reference interpreter's trace, exactly the tokens the model
must generate — the yardstick of ``--check`` and of the token counts in README.
"""

from qgpu.protocol.decode import Event, decode
from qgpu.protocol.prompt import Launch, Placed, allocated_words, prompt_tokens
from qgpu.protocol.stream import (
    Reference,
    exec_token,
    expected_tokens,
    fault_tokens,
    pred_row,
    reference,
    sends_pred_row,
    writeback_tokens,
)
from qgpu.protocol.vocabulary import (
    DATA_POSITIONS,
    FAULTS,
    LANE_ALL,
    PREFIX,
    SUFFIX,
    body,
    frame,
    memory_row,
    memory_rows,
    name,
    part_frame,
    vocabulary,
)

__all__ = [
    "DATA_POSITIONS", "FAULTS", "LANE_ALL", "PREFIX", "SUFFIX", "Event", "Launch", "Placed",
    "Reference",
    "allocated_words", "body", "decode", "exec_token", "expected_tokens", "fault_tokens", "frame",
    "memory_row", "memory_rows", "name", "part_frame", "pred_row", "prompt_tokens", "reference",
    "sends_pred_row", "vocabulary", "writeback_tokens",
]
