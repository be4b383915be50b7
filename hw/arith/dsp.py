"""How a MAC's multiplier and its product register are built: generic, or an ECP5 DSP block with its
output register.

``"generic"``: the product is ``a * b`` and the register after it an ordinary flip-flop; the
synthesizer maps the multiply (Yosys: one ``MULT18X18D`` on ECP5, one ``SB_MAC16`` on iCE40 UP5K)
and leaves the register in the fabric. On ECP5 the route from the DSP column to that flip-flop is
then part of the multiplier's stage: it bounds the 8x8 int8 MXU (``mxu-8x8-int8-generic`` in
``bench/fmax.py``).

``"ecp5"``: one ``MULT18X18D`` instance per product whose output register (``REG_OUTPUT_CLK =
"CLK0"``) is the product register, so the stage ends inside the DSP block (``mxu-8x8-int8``: the
array's own paths are then shorter than the out-of-context wrapper's). Lattice TN1267 (ECP5 and
ECP5-5G sysDSP Usage Guide): with ``REG_OUTPUT`` on ``CLK0`` the product ``P`` (36 bits,
``SIGNEDA``/``SIGNEDB`` per operand) is registered on ``CLK0`` while ``CE0`` is high; ``RST0`` (tied
low here: the MAC's data registers carry no reset) would clear it. The Verilog then needs the
primitive: Yosys and nextpnr-ecp5 know it; for simulation ``verif/models/MULT18X18D.v`` models the
subset used here.
"""

from __future__ import annotations

from enum import Enum

from amaranth.hdl import ClockSignal, Const, Instance, Module, Signal, Value

__all__ = ["Multiplier", "MULTIPLIERS", "registered_product"]


class Multiplier(Enum):
    """The multiplier kinds (see the module docstring)."""
    GENERIC = "generic"
    ECP5 = "ecp5"


#: Their names, for options and messages.
MULTIPLIERS = tuple(k.value for k in Multiplier)

#: MULT18X18D operand width in bits.
_W = 18


def registered_product(m: Module, a, b, *, signed: bool, ce, name: str) -> Value:
    """``a * b`` registered once in an ECP5 ``MULT18X18D``'s output register.

    Args:
        a, b: operands of at most 18 bits each (signed two's complement when ``signed``).
        signed: both operands signed (``SIGNEDA`` = ``SIGNEDB`` = 1) or both unsigned.
        ce: the clock enable (1 bit): the register takes the product only while it is high, as
            every other register of an ``EnableInserter``-wrapped module does.
        name: the instance's name (its 36-bit output is ``<name>_p``, the product returned ``<name>_q``).

    Returns:
        The registered product, ``len(a) + len(b)`` bits (signed when ``signed``), one clock-enabled
        cycle after its operands.

    Raises:
        ValueError: an operand wider than 18 bits.
    """
    a, b = Value.cast(a), Value.cast(b)
    for what, v in (("a", a), ("b", b)):
        if len(v) > _W:
            raise ValueError(f"{what} must be at most {_W} bits for one MULT18X18D; got {len(v)}")
    width = len(a) + len(b)
    ext = (lambda v: v.as_signed()) if signed else (lambda v: v.as_unsigned())
    a18 = Signal(_W, name=f"{name}_a")
    b18 = Signal(_W, name=f"{name}_b")
    m.d.comb += [a18.eq(ext(a)), b18.eq(ext(b))]
    p = Signal(36, name=f"{name}_p")
    ports = {}
    for i in range(_W):
        ports[f"i_A{i}"] = a18[i]
        ports[f"i_B{i}"] = b18[i]
        ports[f"i_C{i}"] = Const(0, 1)
    for i in range(36):
        ports[f"o_P{i}"] = p[i]
    m.submodules[name] = Instance(
        "MULT18X18D",
        p_REG_INPUTA_CLK="NONE", p_REG_INPUTB_CLK="NONE", p_REG_INPUTC_CLK="NONE",
        p_REG_PIPELINE_CLK="NONE", p_REG_OUTPUT_CLK="CLK0", p_REG_OUTPUT_CE="CE0", p_REG_OUTPUT_RST="RST0",
        p_GSR="DISABLED", p_RESETMODE="SYNC",
        i_SIGNEDA=Const(int(signed), 1), i_SIGNEDB=Const(int(signed), 1),
        i_SOURCEA=Const(0, 1), i_SOURCEB=Const(0, 1),
        i_CLK0=ClockSignal(), i_CLK1=Const(0, 1), i_CLK2=Const(0, 1), i_CLK3=Const(0, 1),
        i_CE0=ce, i_CE1=Const(1, 1), i_CE2=Const(1, 1), i_CE3=Const(1, 1),
        i_RST0=Const(0, 1), i_RST1=Const(0, 1), i_RST2=Const(0, 1), i_RST3=Const(0, 1),
        **ports)
    out = Signal(width, name=f"{name}_q")
    m.d.comb += out.eq(p[:width])
    return out.as_signed() if signed else out
