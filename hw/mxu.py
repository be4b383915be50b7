"""Weight-stationary systolic matrix unit (MXU): ``rows x cols`` PEs with skew, de-skew and a
double-buffered weight path, in the style of the TPU's matrix unit (Jouppi et al., ISCA 2017).

Dataflow (R = rows, C = cols, L = ``stages``, the PE's partial-sum latency in cycles):

* PE(r, c) holds the weight ``W[r][c]``; one tile computes ``out[m, c] = c_in[m, c] + sum_r
  a[m, r] * W[r][c]`` as one sequential chain over r = 0..R-1 (one RNE rounding per PE), so a K
  dimension split into tiles continues the same chain when the result re-enters as ``c_in``.
* Activation beat m (a vector of R operands, plus C partial-sum inputs ``c_in`` and a ``swap`` bit)
  is accepted at step s. Row r of it is delayed r*L steps (input skew) and then moves right one PE
  per step; ``c_in[c]`` is delayed c steps into the top of column c; so PE(r, c) sees the beat at step
  ``s + r*L + c`` together with its partial sum. Column c's result leaves the bottom at
  ``s + R*L + c`` and is delayed ``C-1-c`` steps (de-skew): the whole output vector appears at
  step ``s + D`` with **D = R*L + C - 1**.
* Weights: a weight beat is one row of C operands; R beats (row R-1 first, row 0 last) shift down
  every column's ``transport`` chain. Then a *commit* strobe copies ``transport`` into every PE's
  ``shadow`` register; it starts at the top-left and reaches PE(r, c) at ``k + r + c`` (a 1-bit
  delay line along the top edge, then one PE per step down each column). An activation beat with
  ``swap`` set starts the next tile: it and every later beat use the committed weights, and the swap
  travels with the wavefront (PE(r, c) swaps at ``s + r*L + c``), so tiles run back to back.
* "Step" = a clock cycle in which the array advances. The array stalls as a unit (every register
  holds) exactly when the output holds a valid beat that the consumer does not take:
  ``advance = ~(out.valid & ~out.ready)``. Input gaps (``act.valid`` low) enter as bubbles that
  travel through the array and never produce an output beat.

Sequencing rules (enforced by the edge logic; the cycle model in :mod:`verif.cycles` mirrors them):

1. ``wgt.ready`` while fewer than R weight beats are loaded and the load path is free.
2. Commit at step k when R beats are loaded, the shadow registers are free (the previous commit's
   tile has started) and ``k - s_prev >= GAP = max(1, (R-1)*(L-1))`` steps after the previous swap
   beat, so the commit reaches every PE no earlier than that PE's previous swap.
3. The load path is free again ``HOLD = max(1, R + C - 2)`` steps after a commit (the commit has then
   passed the last PE, which reads ``transport`` last).
4. A beat with ``swap`` set is accepted only after a commit whose weights are not yet in use
   (``act.ready`` is low for it until then; ``act.ready`` depends on ``act.payload.swap``).

fp8 inputs are decoded exactly to bf16 at the left and top edges, so PEs are bf16 (or int8) only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from amaranth import Cat, ClockSignal, EnableInserter, Instance, Module, Mux, ResetSignal, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .arith.formats import BF16, FP32, INT32, Format, Subnormals, operand_layout
from .arith.fp8_decode import decode_fp8
from .arith.mac import MAX_STAGES, check_multiplier
from .config import check_choice, check_int
from .pe import PE, PEConfig

__all__ = ["MXUConfig", "MXU", "MXURow", "PRESETS", "MAX_SIDE"]


#: Largest R and C. Amaranth signals are at most 65,535 bits wide and the array's edge streams grow
#: with the side (up to 48 bits a column for bf16: generation fails from 1,366 columns); 1,024 is
#: four times the largest TPU array (256 x 256).
MAX_SIDE = 1024


@dataclass(frozen=True)
class MXUConfig:
    """Configuration of a systolic MXU.

    Attributes:
        rows: PE rows R (the K extent of a weight tile), 1..:data:`MAX_SIDE`.
        cols: PE columns C (the N extent of a weight tile), 1..:data:`MAX_SIDE`.
        fmt: input format: "bf16", "fp8_e4m3fn", "fp8_e5m2" (decoded to bf16 at the edge) or "int8".
        subnormals: "ftz" (default) or "ieee" (float formats; int8 reads "ftz" whatever was given).
        stages: partial-sum latency of a PE in cycles, 1..9 (the MAC pipeline depth; default 2).
        backpressure: ``True`` (default): the array stalls as a unit while a valid output is not
            taken (``out.ready`` low: one clock enable to every register). ``False``: ``out.ready``
            is ignored (the port stays; the consumer must take every beat), the array never stalls
            and has no clock enable, which removes a net fanning out to every register (on ECP5 the
            8x8 bf16 array's critical path with back-pressure: 14 ns from ``out__valid`` to the
            PEs' first pipeline register).
        multiplier: the PEs' multiplier, "generic" (default) or "ecp5" (an ECP5 ``MULT18X18D`` whose output
            register is the product register: int8, or bf16 with 8 or 9 stages; the Verilog then
            instantiates the primitive, see :mod:`hw.arith.dsp`).

    Raises:
        ValueError: naming the parameter and its allowed values.
    """

    rows: int = 8
    cols: int = 8
    fmt: str = "bf16"
    subnormals: str = "ftz"
    stages: int = 2
    backpressure: bool = True
    multiplier: str = "generic"

    def __post_init__(self):
        if not isinstance(self.backpressure, bool):
            raise TypeError(f"backpressure must be True or False; got {self.backpressure!r}")
        check_int("rows", self.rows, 1, MAX_SIDE)
        check_int("cols", self.cols, 1, MAX_SIDE)
        check_choice("fmt", self.fmt, Format)
        check_choice("subnormals", self.subnormals, Subnormals)
        check_int("stages", self.stages, 1, MAX_STAGES)
        if self.fmt == "int8":  # no subnormals in int8: one configuration whatever was given
            object.__setattr__(self, "subnormals", "ftz")
        check_multiplier(self.multiplier, "int8" if self.fmt == "int8" else "bf16", self.stages)

    # ---- derived ---------------------------------------------------------------------------
    @property
    def format(self) -> Format:
        return Format(self.fmt)

    @property
    def pe(self) -> PEConfig:
        """The configuration of every PE (fp8 becomes bf16 inside the array)."""
        return PEConfig("int8" if self.fmt == "int8" else "bf16", self.subnormals, self.stages, self.multiplier)

    @property
    def operand_bits(self) -> int:
        """Width of one input operand at the ports: 16 (bf16) or 8 (fp8, int8)."""
        return 16 if self.fmt == "bf16" else 8

    @property
    def latency_cycles(self) -> int:
        """D = R*L + C - 1: steps from accepting an activation beat to its output beat."""
        return self.rows * self.stages + self.cols - 1

    @property
    def commit_gap_cycles(self) -> int:
        """GAP = max(1, (R-1)*(L-1)): minimum steps from a swap beat to the next commit."""
        return max(1, (self.rows - 1) * (self.stages - 1))

    @property
    def load_hold_cycles(self) -> int:
        """HOLD = max(1, R + C - 2): steps from a commit until the weight chain may shift again."""
        return max(1, self.rows + self.cols - 2)

    @property
    def weight_beats(self) -> int:
        """Weight beats per tile: R (row R-1 first)."""
        return self.rows

    def act_layout(self) -> data.StructLayout:
        """Activation stream payload: ``a`` (R operands, row 0 in the low bits), ``c`` (C 32-bit
        partial-sum inputs, column 0 low), ``swap`` (1 bit, MSB)."""
        return data.StructLayout({
            "a": data.ArrayLayout(operand_layout(self.format), self.rows),
            "c": data.ArrayLayout(INT32 if self.fmt == "int8" else FP32, self.cols),
            "swap": 1,
        })

    def wgt_layout(self) -> data.ArrayLayout:
        """Weight stream payload: one row of C operands, column 0 in the low bits."""
        return data.ArrayLayout(operand_layout(self.format), self.cols)

    def out_layout(self) -> data.ArrayLayout:
        """Output stream payload: C results (fp32, or int32 for int8), column 0 in the low bits."""
        return data.ArrayLayout(INT32 if self.fmt == "int8" else FP32, self.cols)

    def as_dict(self) -> dict:
        return asdict(self)


#: Named configurations for ``mxu generate --preset``.
PRESETS: dict[str, MXUConfig] = {
    "tpu-v1-int8-8x8": MXUConfig(8, 8, "int8", "ftz", 2),
    "tpu-v1-int8-256x256": MXUConfig(256, 256, "int8", "ftz", 2),
    "tpu-v3-bf16-128x128": MXUConfig(128, 128, "bf16", "ftz", 2),
    "bf16-8x8": MXUConfig(8, 8, "bf16", "ftz", 2),
    "bf16-16x16": MXUConfig(16, 16, "bf16", "ftz", 2),
    "bf16-ieee-16x16": MXUConfig(16, 16, "bf16", "ieee", 2),
    "fp8-e4m3-16x16": MXUConfig(16, 16, "fp8_e4m3fn", "ftz", 2),
    "ice40-int8-4x4": MXUConfig(4, 4, "int8", "ftz", 1),
}


#: Delay lines at least this long are built as a RAM ring buffer instead of a register chain: the
#: same timing, far fewer netlist bits (128 x 128 generation time), and LUT RAM or block RAM on an
#: FPGA instead of flip-flops.
RAM_DELAY_MIN = 4


def _tapped_delay(m: Module, bit, taps: list[int], name: str) -> list[Value]:
    """One control bit delayed by each of ``taps`` steps, from a single shift register of
    ``max(taps)`` bits with a reset to 0 (so a reset in the middle of a tile leaves no stale strobe
    in flight). Obeys the enclosing ``EnableInserter``."""
    length = max(taps)
    if length == 0:
        return [Value.cast(bit) for _ in taps]
    chain = Signal(length, name=name)
    m.d.sync += chain.eq(Cat(bit, chain[:length - 1]) if length > 1 else bit)
    return [Value.cast(bit) if d == 0 else chain[d - 1] for d in taps]


def _delay(m: Module, value, steps: int, name: str) -> Value:
    """``value`` (data) delayed by ``steps`` clock-enabled steps; returns the output.

    Short delays are register chains without reset; from :data:`RAM_DELAY_MIN` steps on, a ring
    buffer: a memory of ``steps - 1`` entries written and read (read-before-write, synchronous) at one
    pointer, whose read register is the last stage. Both obey the enclosing ``EnableInserter``.
    """
    value = Value.cast(value)
    if steps < RAM_DELAY_MIN:
        for i in range(steps):
            reg = Signal(value.shape(), name=f"{name}_d{i}", reset_less=True)
            m.d.sync += reg.eq(value)
            value = reg
        return value
    depth = steps - 1
    mem = Memory(shape=value.shape(), depth=depth, init=[])
    m.submodules[f"{name}_ram"] = mem
    wr = mem.write_port()
    rd = mem.read_port()
    ptr = Signal(range(depth), name=f"{name}_ptr")
    m.d.sync += ptr.eq(Mux(ptr == depth - 1, 0, ptr + 1))
    m.d.comb += [wr.addr.eq(ptr), wr.data.eq(value), wr.en.eq(1), rd.addr.eq(ptr)]
    return rd.data


class MXURow(wiring.Component):
    """One row of C PEs: the activation enters at the left and moves right; partial sums, weight
    chains and commit strobes pass through from the row above to the row below.

    Ports (w = operand bits, 16 or 8): ``en``, ``w_shift`` (1 each, to every PE); ``a_in`` (w),
    ``swap_in`` (1) into PE 0; ``lookahead`` (1, a strap) and ``swap_next`` (1) for PE 0 (PE c > 0
    looks ahead at PE c - 1's ``swap_in``, see :class:`~hw.pe.PE`); ``psum_in``/``psum_out``
    (C x 32), ``w_in``/``w_out`` (C x w), ``commit_in``/``commit_out`` (C), element c belonging to
    column c.

    Args:
        pe_config: the :class:`PEConfig` of every PE.
        cols: C >= 1.
        pe_blackbox: instance the PE as ``Instance(pe_name, ...)`` (for Verilog with one PE module).
    """

    OUTPUTS = frozenset({"psum_out", "w_out", "commit_out"})

    def __init__(self, pe_config: PEConfig, cols: int, *, pe_blackbox: bool = False, pe_name: str = "mxu_pe"):
        self.pe_config, self.cols = pe_config, cols
        self.pe_blackbox, self.pe_name = pe_blackbox, pe_name
        op, acc = pe_config.operand_shape, pe_config.acc_shape
        super().__init__({
            "en": In(1), "w_shift": In(1), "a_in": In(op), "swap_in": In(1),
            "lookahead": In(1), "swap_next": In(1),
            "psum_in": In(data.ArrayLayout(acc, cols)), "psum_out": Out(data.ArrayLayout(acc, cols)),
            "w_in": In(data.ArrayLayout(op, cols)), "w_out": Out(data.ArrayLayout(op, cols)),
            "commit_in": In(cols), "commit_out": Out(cols),
        })

    def elaborate(self, platform):
        m = Module()
        C = self.cols
        op = self.pe_config.operand_shape
        a_net = [Signal(op, name=f"a_{c}") for c in range(C + 1)]
        s_net = [Signal(name=f"swap_{c}") for c in range(C + 1)]
        m.d.comb += [a_net[0].eq(self.a_in), s_net[0].eq(self.swap_in)]
        outs = {"a_out", "swap_out", "psum_out", "w_out", "commit_out"}
        for c in range(C):
            ports = dict(
                en=self.en, w_shift=self.w_shift, a_in=a_net[c], swap_in=s_net[c], a_out=a_net[c + 1],
                swap_out=s_net[c + 1], psum_in=self.psum_in[c], psum_out=self.psum_out[c],
                w_in=self.w_in[c], w_out=self.w_out[c], commit_in=self.commit_in[c],
                commit_out=self.commit_out[c],
                lookahead=self.lookahead if c == 0 else int(self.pe_config.lookahead),
                swap_next=self.swap_next if c == 0 else s_net[c - 1],
            )
            if self.pe_blackbox:
                kw = {("o_" if k in outs else "i_") + k: v for k, v in ports.items()}
                m.submodules[f"pe_{c}"] = Instance(self.pe_name, i_clk=ClockSignal(), i_rst=ResetSignal(), **kw)
            else:
                pe = PE(self.pe_config)
                m.submodules[f"pe_{c}"] = pe
                for k, v in ports.items():
                    port = getattr(pe, k)
                    m.d.comb += (v.eq(port) if k in outs else port.eq(v))
        return m


class MXU(wiring.Component):
    """The systolic array with its edge logic (see the module docstring).

    Ports (``amaranth.lib.stream``; Verilog ``<name>__payload``/``__valid``/``__ready``):

    * ``act``: In, payload :meth:`MXUConfig.act_layout` (R*w + 32*C + 1 bits).
    * ``wgt``: In, payload :meth:`MXUConfig.wgt_layout` (w*C bits).
    * ``out``: Out, payload :meth:`MXUConfig.out_layout` (32*C bits).

    Args:
        config: the :class:`MXUConfig`.
        pe_blackbox: ``True`` instantiates every row as ``Instance(row_name, ...)`` so that the Verilog
            holds one row module (of C PE instances) and one PE module (see
            :func:`hw.generate.mxu_verilog`); Amaranth's simulator ignores black boxes, so simulate
            with the default ``False`` (real row and PE submodules).
        row_name: module name of the row for ``pe_blackbox``.
    """

    def __init__(self, config: MXUConfig | None = None, *, pe_blackbox: bool = False, row_name: str = "mxu_row"):
        self.config = config or MXUConfig()
        if not isinstance(self.config, MXUConfig):
            raise TypeError(f"config must be an MXUConfig; got {type(self.config).__name__}")
        self.pe_blackbox = pe_blackbox
        self.row_name = row_name
        super().__init__({
            "act": In(stream.Signature(self.config.act_layout())),
            "wgt": In(stream.Signature(self.config.wgt_layout())),
            "out": Out(stream.Signature(self.config.out_layout())),
        })

    @property
    def latency_cycles(self) -> int:
        return self.config.latency_cycles

    def port_meanings(self) -> dict[str, str]:
        """One-line meaning of each Verilog port, for the manifest."""
        cfg = self.config
        w = cfg.operand_bits
        acc = "int32" if cfg.fmt == "int8" else "fp32"
        ra = cfg.rows * w
        return {
            "act__payload": (f"activation beat: a[r] = bits [{w}*r+{w - 1}:{w}*r] for r < {cfg.rows} ({cfg.fmt}); "
                             f"c[c] = bits [{ra}+32*c+31:{ra}+32*c] ({acc} partial-sum input of column c); "
                             f"swap = bit {ra + 32 * cfg.cols} (first beat of a new weight tile)"),
            "act__valid": "activation beat valid",
            "act__ready": "activation beat accepted (low while the array stalls, or for a swap beat before its "
                          "weights are committed)",
            "wgt__payload": f"weight row: w[c] = bits [{w}*c+{w - 1}:{w}*c] ({cfg.fmt}); {cfg.rows} beats per "
                            f"tile, row {cfg.rows - 1} first",
            "wgt__valid": "weight beat valid",
            "wgt__ready": "weight beat accepted",
            "out__payload": f"result vector: out[c] = bits [32*c+31:32*c] ({acc}), c_in + sum over rows of a*w",
            "out__valid": f"result valid, {cfg.latency_cycles} steps after its activation beat",
            "out__ready": ("consumer ready; low while out__valid stalls the whole array" if cfg.backpressure
                           else "ignored (backpressure=False): the consumer must take every beat"),
        }

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        R, C, L = cfg.rows, cfg.cols, cfg.stages
        pe_cfg = cfg.pe
        fp8 = cfg.format in (Format.FP8_E4M3FN, Format.FP8_E5M2)

        def to_array(x, name):
            if not fp8:
                return x
            y = Signal(BF16, name=name)
            m.d.comb += y.eq(decode_fp8(m, x, cfg.format))
            return y

        # ---- stall and sequencing --------------------------------------------------------
        advance = Signal(name="advance")
        if cfg.backpressure:
            m.d.comb += advance.eq(~(self.out.valid & ~self.out.ready))
        else:
            m.d.comb += advance.eq(1)   # always-ready output: never stalls, no clock enable

        w_count = Signal(range(R + 1), name="w_count")         # weight beats in the transport chain
        hold = Signal(range(cfg.load_hold_cycles + 1), name="load_hold")
        shadow_full = Signal(name="shadow_full")               # committed weights not yet swapped in
        since_swap = Signal(range(cfg.commit_gap_cycles + 1), name="since_swap",
                            init=cfg.commit_gap_cycles)
        can_load = (w_count < R) & (hold == 0)
        w_shift = Signal(name="w_shift")
        commit = Signal(name="commit")
        act_fire = Signal(name="act_fire")
        swap = Signal(name="swap")
        m.d.comb += [
            self.wgt.ready.eq(advance & can_load),
            w_shift.eq(self.wgt.valid & self.wgt.ready),
            commit.eq(advance & (w_count == R) & ~shadow_full & (since_swap >= cfg.commit_gap_cycles)),
            self.act.ready.eq(advance & (~self.act.payload.swap | shadow_full)),
            act_fire.eq(self.act.valid & self.act.ready),
            swap.eq(act_fire & self.act.payload.swap),
        ]
        with m.If(commit):
            m.d.sync += [w_count.eq(0), hold.eq(cfg.load_hold_cycles - 1), shadow_full.eq(1)]
        with m.Else():
            with m.If(w_shift):
                m.d.sync += w_count.eq(w_count + 1)
            with m.If(hold != 0):
                m.d.sync += hold.eq(hold - 1)
        with m.If(swap):
            m.d.sync += [shadow_full.eq(0), since_swap.eq(1)]
        with m.Elif(since_swap < cfg.commit_gap_cycles):
            m.d.sync += since_swap.eq(since_swap + 1)

        # ---- nets between rows: row r's inputs from above are row r-1's outputs ----------
        # (plain vectors: a layout here would add C debug wires per field per row to the Verilog)
        acc_w, op_w = 32, pe_cfg.operand_bits
        p_net = [Signal(C * acc_w, name=f"psum_row{r}") for r in range(R + 1)]
        w_net = [Signal(C * op_w, name=f"w_row{r}") for r in range(R + 1)]
        k_net = [Signal(C, name=f"commit_row{r}") for r in range(R + 1)]

        # Control strobes: the swap bit reaches row r after r*L steps, the commit strobe column c
        # after c steps; each is one tapped shift register. Row r > 0 also gets the swap bit one step
        # early (PE look-ahead, PEConfig.lookahead); row 0 has no earlier copy, so its first PE
        # chooses without it.
        swap_taps = _tapped_delay(m, swap, [r * L for r in range(R)] + [r * L - 1 for r in range(1, R)],
                                  "skew_swap")
        commit_taps = _tapped_delay(m, commit, list(range(C)), "commit_top")

        # Top edge: partial-sum inputs delayed c steps, weights (decoded) into the chains, commit
        # strobe delayed c steps along the top.
        for c in range(C):
            m.d.comb += [
                p_net[0][c * acc_w:(c + 1) * acc_w].eq(_delay(m, self.act.payload.c[c], c, f"skew_c{c}")),
                w_net[0][c * op_w:(c + 1) * op_w].eq(to_array(self.wgt.payload[c], f"w_dec_{c}")),
                k_net[0][c].eq(commit_taps[c]),
            ]
        # Left edge (decode, row r delayed r*L steps; bubbles carry swap = 0) and the rows.
        for r in range(R):
            a = to_array(self.act.payload.a[r], f"a_dec_{r}")
            ports = dict(
                en=advance, w_shift=w_shift,
                a_in=_delay(m, a, r * L, f"skew_a{r}"), swap_in=swap_taps[r],
                lookahead=int(r > 0 and pe_cfg.lookahead), swap_next=swap_taps[R + r - 1] if r else 0,
                psum_in=p_net[r], psum_out=p_net[r + 1], w_in=w_net[r], w_out=w_net[r + 1],
                commit_in=k_net[r], commit_out=k_net[r + 1],
            )
            if self.pe_blackbox:
                kw = {("o_" if k in MXURow.OUTPUTS else "i_") + k: v for k, v in ports.items()}
                m.submodules[f"row_{r}"] = Instance(self.row_name, i_clk=ClockSignal(), i_rst=ResetSignal(), **kw)
            else:
                row = MXURow(pe_cfg, C)
                m.submodules[f"row_{r}"] = row
                for k, v in ports.items():
                    port = getattr(row, k)
                    m.d.comb += (v.eq(port) if k in MXURow.OUTPUTS else port.eq(v))
        # Bottom edge: column c delayed C-1-c steps; output valid D steps after the input beat.
        for c in range(C):
            m.d.comb += self.out.payload[c].eq(_delay(m, p_net[R][c * acc_w:(c + 1) * acc_w], C - 1 - c, f"deskew{c}"))
        valid = act_fire
        for i in range(cfg.latency_cycles):
            reg = Signal(name=f"valid_d{i}")
            m.d.sync += reg.eq(valid)
            valid = reg
        m.d.comb += self.out.valid.eq(valid)
        return EnableInserter(advance)(m) if cfg.backpressure else m
