"""Small combinational building blocks shared by the arithmetic units.

The functions that build multi-level structures (:func:`leading_zeros`, :func:`shift_right_jam`,
:func:`normalize_left`) add their intermediate values to a module as named wires: Amaranth writes an
expression out once for every place it is used, so a shifter stage that uses the previous stage twice
(once shifted, once not) would double the Verilog at every stage (32 copies of the operand after five
stages; the bf16 PE's Verilog was three times its size and Icarus evaluated every copy).
"""

from amaranth import Cat, Const, Module, Mux, Signal, Value

__all__ = ["wire", "leading_zeros", "normalize_left", "shift_right_jam", "lt_const", "signed_lt_const",
           "signed_gt_const"]


def wire(m: Module, value, name: str) -> Signal:
    """``value`` driven onto a new wire ``name`` of its shape (written once in the Verilog)."""
    sig = Signal(Value.cast(value).shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


def leading_zeros(m: Module, x: Value, width: int, name: str = "lz") -> Signal:
    """Count of leading zero bits of the ``width``-bit value ``x`` (``width`` when x == 0).

    The leading one is isolated as a one-hot vector (a prefix OR from the MSB down), then each bit of
    the count is the OR of the one-hot positions whose count has that bit set (for the 2-stage bf16
    MAC this mapped smaller on ECP5 than a priority chain of muxes or a recursive LZC tree; see
    ``bench/mac_area.py`` for the current figure). Adds the wires ``<name>_x``, ``<name>_seen`` (the
    prefix OR), ``<name>_onehot`` and ``<name>`` (the count) to ``m``. Result width:
    ``width.bit_length()`` bits.
    """
    nbits = width.bit_length()
    x = wire(m, x[:width], f"{name}_x")
    seen = Signal(width, name=f"{name}_seen")      # seen[k]: a one among the top k + 1 bits
    onehot = Signal(width, name=f"{name}_onehot")  # onehot[k] <-> exactly k leading zeros
    for k in range(width):                         # from the MSB down
        i = width - 1 - k
        m.d.comb += seen[k].eq(x[i] if k == 0 else seen[k - 1] | x[i])
        m.d.comb += onehot[k].eq(x[i] if k == 0 else x[i] & ~seen[k - 1])
    bits = []
    for b in range(nbits):
        terms = [onehot[k] for k in range(width) if (k >> b) & 1]
        if (width >> b) & 1:
            terms.append(~seen[width - 1])         # x == 0 counts width
        acc = Const(0, 1)
        for t in terms:
            acc = acc | t
        bits.append(acc)
    return wire(m, Cat(*bits), name)


def shift_right_jam(m: Module, x: Value, width: int, amount: Value, name: str = "srj") -> Signal:
    """``x >> amount`` on ``width`` bits with every shifted-out bit ORed into bit 0 ("jamming").

    Jamming is round-to-odd at the LSB: the result's bits above bit 0 equal those of the exact
    quotient and bit 0 is set whenever anything non-zero was lost, which is what a later
    round-to-nearest-even needs (guard/round/sticky). ``amount`` is unsigned, any width; a shift of
    ``width`` or more leaves only the sticky bit. A logarithmic shifter: stage k shifts by 2**k when
    bit k of ``amount`` is set and ORs the 2**k bits it drops into the sticky bit, so the sticky bit
    costs one small OR per stage and no comparator (comparisons against constants become carry
    chains in Yosys's ECP5 mapping: the earlier thermometer-mask version spent 27 of them).
    Adds the wires ``<name>_x``, ``<name>_s<k>`` and ``<name>_sticky<k>`` (after stage k) and
    ``<name>`` (the result) to ``m``. Returns a ``width``-bit signal.
    """
    stages = max(1, (width - 1).bit_length())      # 2**stages - 1 >= width - 1
    x = wire(m, x[:width], f"{name}_x")
    cur = x
    sticky = Const(0, 1)
    for k in range(min(stages, len(amount))):
        step = 1 << k
        if step >= width:
            shifted, dropped = Const(0, width), cur.any()
        else:
            shifted, dropped = cur[step:], cur[:step].any()
        sticky = wire(m, sticky | (amount[k] & dropped), f"{name}_sticky{k}")
        cur = wire(m, Mux(amount[k], shifted, cur), f"{name}_s{k}")
    kept = Cat(cur[0] | sticky, cur[1:])
    if len(amount) > stages:                        # 2**stages or more: everything is shifted out
        kept = Mux(amount[stages:].any(), Cat(x.any(), Const(0, width - 1)), kept)
    return wire(m, kept, name)


def lt_const(x: Value, k: int) -> Value:
    """``x < k`` for an unsigned ``x`` and a constant ``k``, as bit logic from the MSB down.

    Written out so that Yosys keeps it in LUTs: a ``$lt`` against a constant becomes an ``$alu``
    carry chain (CCU2C cells on ECP5) in its generic mapping.
    """
    n = len(x)
    if k <= 0:
        return Const(0, 1)
    if k >= 1 << n:
        return Const(1, 1)
    less, equal = Const(0, 1), Const(1, 1)
    for i in reversed(range(n)):
        if (k >> i) & 1:
            less = less | (equal & ~x[i])
            equal = equal & x[i]
        else:
            equal = equal & ~x[i]
    return less


def signed_lt_const(x: Value, k: int) -> Value:
    """``x < k`` for a two's-complement ``x`` (``len(x)`` bits) and a constant ``k`` (bit logic)."""
    n = len(x)
    offset = Cat(x[:n - 1], ~x[n - 1])             # offset binary: order-preserving as unsigned
    return lt_const(offset, k + (1 << (n - 1)))


def signed_gt_const(x: Value, k: int) -> Value:
    """``x > k`` for a two's-complement ``x`` and a constant ``k`` (bit logic)."""
    return ~signed_lt_const(x, k + 1)


def normalize_left(m: Module, x: Value, width: int, steps=None, name: str = "nl") -> tuple[Signal, Value]:
    """Shift the ``width``-bit ``x`` left until its MSB is 1; returns ``(shifted, count)``.

    ``count`` is the number of leading zeros (``2**k - 1`` >= width - 1 bits wide; for x == 0 the
    shifted value is 0 and the count is the sum of all stages, which callers treat as "zero").
    Successive normalization: stage k (from the largest power of two below ``width`` down to 1)
    shifts by 2**k when the top 2**k bits are all zero, so the leading-zero count and the shift are
    one structure (one 2:1 mux per bit and stage plus a small OR per stage) instead of a count
    followed by a separate barrel shifter.

    ``steps`` (optional) limits the work to those shift amounts (powers of two, e.g. ``(16, 8)`` then
    ``(4, 2, 1)``), so a pipeline register can split the normalization: the count then has the bits of
    the other steps zero and the two partial counts OR together. Adds the wires ``<name>_x`` and
    ``<name>_s<step>`` (after the shift by ``step``) to ``m``. Raises ``ValueError`` for a step that is
    not a power of two below ``width``'s stage range.
    """
    stages = max(1, (width - 1).bit_length())
    all_steps = [1 << k for k in reversed(range(stages))]
    if steps is None:
        steps = all_steps
    bad = [st for st in steps if st not in all_steps]
    if bad:
        raise ValueError(f"steps must be among {all_steps} for width {width}; got {bad}")
    cur = wire(m, x[:width], f"{name}_x")
    bits = []
    for k in reversed(range(stages)):
        step = 1 << k
        if step >= width or step not in steps:
            bits.append(Const(0, 1))
            continue
        zero_top = wire(m, ~cur[width - step:].any(), f"{name}_z{step}")
        cur = wire(m, Mux(zero_top, Cat(Const(0, step), cur[:width - step]), cur), f"{name}_s{step}")
        bits.append(zero_top)
    return cur, Cat(*reversed(bits))
