"""Small combinational building blocks shared by the arithmetic units (pure functions on Values)."""

from amaranth import Cat, Const, Mux, Value

__all__ = ["leading_zeros", "shift_right_jam"]


def leading_zeros(x: Value, width: int) -> Value:
    """Count of leading zero bits of the ``width``-bit value ``x`` (``width`` when x == 0).

    The leading one is isolated as a one-hot vector (a prefix OR from the MSB down), then each bit of
    the count is the OR of the one-hot positions whose count has that bit set (for the 2-stage bf16
    MAC this mapped smaller on ECP5 than a priority chain of muxes or a recursive LZC tree; see
    ``bench/mac_area.py`` for the current figure). Result width: ``width.bit_length()`` bits.
    """
    nbits = width.bit_length()
    seen = Const(0, 1)
    onehot = []
    for i in reversed(range(width)):          # from the MSB down
        onehot.append(x[i] & ~seen)            # onehot[k] <-> k leading zeros
        seen = seen | x[i]
    bits = []
    for b in range(nbits):
        terms = [onehot[k] for k in range(width) if (k >> b) & 1]
        if (width >> b) & 1:
            terms.append(~seen)                # x == 0 counts width
        acc = Const(0, 1)
        for t in terms:
            acc = acc | t
        bits.append(acc)
    return Cat(*bits)


def shift_right_jam(x: Value, width: int, amount: Value, max_shift: int) -> Value:
    """``x >> amount`` on ``width`` bits with every shifted-out bit ORed into bit 0 ("jamming").

    Jamming is round-to-odd at the LSB: the result's bits above bit 0 equal those of the exact
    quotient and bit 0 is set whenever anything non-zero was lost, which is what a later
    round-to-nearest-even needs (guard/round/sticky). ``amount`` saturates at ``max_shift`` (any
    larger shift leaves only the sticky bit). The sticky bit comes from a thermometer mask of
    ``amount`` rather than a ``width + max_shift``-bit shifter. Returns a ``width``-bit value.
    """
    m_amt = Mux(amount > max_shift, max_shift, amount)
    kept = (x >> m_amt)[:width]
    # Bit i of x is lost when i < amount: OR them through a thermometer mask (no wide shifter).
    lost = Cat(*[x[i] & (m_amt > i) for i in range(width)])
    return kept | (lost != 0)
