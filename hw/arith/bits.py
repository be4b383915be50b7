"""Small combinational building blocks shared by the arithmetic units (pure functions on Values)."""

from amaranth import Const, Mux, Value

__all__ = ["leading_zeros", "shift_right_jam"]


def leading_zeros(x: Value, width: int) -> Value:
    """Count of leading zero bits of the ``width``-bit value ``x`` (``width`` when x == 0).

    Built as a priority chain from the LSB up, so the highest set bit wins; Yosys maps it to a
    log-depth tree. Result width: ``width.bit_length()`` bits.
    """
    count = Const(width, width.bit_length())
    for i in range(width):
        count = Mux(x[i], width - 1 - i, count)
    return count


def shift_right_jam(x: Value, width: int, amount: Value, max_shift: int) -> Value:
    """``x >> amount`` on ``width`` bits with every shifted-out bit ORed into bit 0 ("jamming").

    Jamming is round-to-odd at the LSB: the result's bits above bit 0 equal those of the exact
    quotient and bit 0 is set whenever anything non-zero was lost, which is what a later
    round-to-nearest-even needs (guard/round/sticky). ``amount`` saturates at ``max_shift`` (any
    larger shift leaves only the sticky bit). Returns a ``width``-bit value.
    """
    amt = Mux(amount > max_shift, max_shift, amount)
    wide = (x << max_shift) >> amt          # width + max_shift bits: kept part over lost part
    kept = wide[max_shift:max_shift + width]
    lost = wide[:max_shift]
    return kept | (lost != 0)
