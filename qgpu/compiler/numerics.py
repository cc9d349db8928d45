"""The numerics contract that makes compiled Qwen3.5 layers exact in float32 and bfloat16.

Every constant here was chosen so that stock ``transformers`` arithmetic produces exact values:

* **Anchor.** Circuit dim 0 of every circuit token holds ``A = sqrt(D) * 2**ANCHOR_EXP`` with
  ``D = d_base + K`` a perfect square, or the pair ``a, b * 2**ANCHOR_EXP`` on dims 0 and K - 1
  with ``a^2 + b^2 = D``. Their energy ``D * 4**ANCHOR_EXP`` swallows every other dim in the
  float32 sum of squares (their total stays below half an ulp of the smaller anchor's square),
  so every RMSNorm of a circuit token divides by exactly ``2**ANCHOR_EXP``: the normalised
  residual is the residual scaled by a power of two. Norm weights on circuit dims are 0
  (scale 1); projection weights carry the ``2**ANCHOR_EXP`` back.
* **Unit.** Circuit dims 1 and 2 hold 1: the bias channels (Qwen3.5 linears have no biases).
  A rule's bias is split between them (``GATE_ON`` on dim 2, the literal and carrier terms, all
  multiples of ``GATE_STEP``, on dim 1) so that each weight is exact in bfloat16; emission checks
  every weight.
* **Rules** (MLP neurons) fire with pre-activation ``GATE_ON`` (silu is the identity there, in
  float32 and bfloat16) and each unmet literal subtracts ``GATE_STEP``, which lands at or below
  -96 where silu is exactly 0. All values are small dyadics: exact in bfloat16.
* **Memory** (GDN heads): one-hot keys/queries of magnitude ``KEY_SCALE`` normalise to exactly 1;
  stored entries are 0 or ``VALUE_SCALE`` (SiLU passes both unchanged); beta is exactly 1; decay
  exactly 0. A stored word is 32 base-4 digits, one hot dim in each group of 4, so a 128-dim row
  always has 32 non-zero entries and its per-head RMSNorm maps them to exactly 2 (up to float32
  rounding of the query scale 1/sqrt(128), removed by the carrier below).
* **Bits rows.** A ``bits`` bank row holds ``ROW_ANCHOR`` in two entries and 0 or
  ``VALUE_SCALE`` in each data entry. The anchors' squares (2 * 2**48) swallow every data square
  in the float32 sum, so the per-head RMSNorm scales by exactly ``sqrt(head_dim / 2) / ROW_ANCHOR``
  whatever the bits are (``bits_read_norm``), and an unwritten row reads as all zeros.
* **Counts.** A dim may hold an integer 0..``COUNT_MAX`` that rules summed (a column of partial
  products, a population count). A rule that also needs "count >= k" is a pair of neurons with
  gates ``GATE_STEP * (c - k + 1)`` and ``GATE_STEP * (c - k)`` (each failing literal subtracts
  ``COUNT_LITERAL``): silu passes both unchanged when positive and gives exactly 0 at or below 0,
  so their difference is exactly ``GATE_STEP`` when c >= k and 0 otherwise.
* **Carrier.** Dims that receive memory reads hold ``CARRIER`` in every circuit token; the read
  adds 0 or 1 (times 1 +- a few float32 ulps), and the addition rounds back onto the exact grid.
"""

from __future__ import annotations

import math

ANCHOR_EXP = 16
SCALE = 2.0**ANCHOR_EXP  # normalised circuit value = residual value / SCALE
GATE_ON = 32.0
GATE_STEP = 128.0
KEY_SCALE = 1024.0
VALUE_SCALE = 32.0
BETA_LOGIT = 32.0  # sigmoid(32) == 1 in float32 and bfloat16
BETA_OFF = -128.0  # sigmoid(-128) == 0: exp(128) overflows, so a disabled write changes nothing
A_LOG = -200.0  # exp(-200) == 0: no decay
Z_GATE = 32.0  # silu(32) == 32
READ_NORM = 2.0  # a normalised stored entry
CARRIER = 16.0
ROW_DIGITS = 32  # base-4 digits per stored word (128 dims)
ROW_ANCHOR = 2.0**24  # the two anchor entries of a bits-bank row
ROW_ANCHORS = 2
ROW_BITS = 126  # data bits of a bits-bank row (128 dims minus the anchors)
CONV_REACH = 3  # a write can take row parts from this many tokens back (conv1d of 4 taps)
SILU_ZERO = -96.0  # the highest pre-activation of a neuron that must not fire
COUNT_MAX = 64  # largest integer a count dim may hold
COUNT_LITERAL = 2.0**14  # a failing literal of a count rule: > GATE_STEP * (COUNT_MAX + 1)

ANCHOR_DIM = 0
UNIT_DIM = 1
ON_DIM = 2  # also 1: carries GATE_ON, so the unit dim's bias weights stay multiples of 128
RESERVED_DIMS = 3


def pad_k(d_base: int, k_min: int, energy: float | None = None) -> int:
    """The smallest K >= k_min whose merged width d_base + K is a perfect square (one anchor).
    With `energy` (a bound the circuit's dims stay below, summed squares, at every token) a
    width with two anchors (``anchor_roots``) whose ``energy_budget`` is at least that will do
    as well; its second anchor takes the last circuit dim, so then K > k_min."""
    k = k_min
    while True:
        try:
            second = anchor_roots(d_base + k)[1]
        except ValueError:
            second = None
        if second == 0 or (second and energy is not None and k > k_min
                           and energy_budget(d_base + k) >= energy):
            return k
        k += 1


def anchor_roots(hidden: int) -> tuple[int, int]:
    """(a, b), a >= b, with a^2 + b^2 = hidden: the anchors are a * SCALE on circuit dim 0 and,
    unless hidden is a perfect square (b = 0), b * SCALE on the last circuit dim. Their squares
    sum to exactly hidden * 4**ANCHOR_EXP, so an RMSNorm over the merged width divides by
    exactly SCALE. The most even pair is taken: the smaller square sets ``energy_budget``."""
    root = math.isqrt(hidden)
    if root * root == hidden:
        return root, 0
    for b in range(math.isqrt(hidden // 2), 0, -1):
        a = math.isqrt(hidden - b * b)
        if a * a == hidden - b * b:
            return a, b
    raise ValueError(f"hidden size {hidden} is neither a perfect square nor a sum of two: "
                     "no exact anchors")


def anchors(hidden: int, k: int) -> dict[int, float]:
    """Circuit dim -> value of the anchor dims at merged width `hidden` with K = `k`."""
    a, b = anchor_roots(hidden)
    return {ANCHOR_DIM: a * SCALE} | ({k - 1: b * SCALE} if b else {})


def bits_read_norm(head_dim: int) -> float:
    """A set data bit of a bits-bank row after the GDN's per-head RMSNorm (a power of two)."""
    scale = math.sqrt(head_dim / ROW_ANCHORS)
    if scale != 2.0 ** round(math.log2(scale)):
        raise ValueError(f"bits banks need head_dim / 2 to be a power of 4, not {head_dim}")
    return VALUE_SCALE * scale / ROW_ANCHOR


def energy_budget(hidden: int) -> float:
    """Total squared magnitude the other dims may hold without disturbing the norm scale: below
    half a float32 ulp of the smaller anchor's square, they vanish into whichever partial sum
    of the norm's reduction holds an anchor, in any order of summation."""
    a, b = anchor_roots(hidden)
    return 2.0 ** (math.floor(math.log2((b or a) ** 2 * SCALE**2)) - 24)
