"""The HBM2 pseudo-channel device in HDL (simulation only), with its JEDEC checker beside it.

It answers the controller's pins as the Python model :class:`verif.hbm_device.HBMDevice` does: a RD
at cycle T returns its burst on ``rdata``/``rdata_valid`` at exactly T + CL; a WR at T takes
``wdata``/``wmask`` at T + CWL and writes the bytes whose mask bit is 1; never-written memory reads
as ``fill`` bytes. Every command also goes through :class:`~verif.hdl.jedec_checker.JedecCheckerHDL`
(submodule ``checker``), so the timing check costs no Python call per cycle either.

Storage is a plain Verilog memory (module :data:`STORE_VERILOG`, instance ``store``, array ``mem``),
one ``burst_bytes * 8``-bit word per burst at index :meth:`HBMDeviceHDL.word_index`, filled with
``fill`` by an ``initial`` loop: an Amaranth ``Memory`` of this depth would be written out with one
initializer line per word. A testbench loads and dumps whole matrices through that array without
clock cycles (the backdoor). Rows at or above ``stored_rows`` are not stored: an ACT to one raises
``row_error`` (the testbench fails), so nothing aliases silently.
"""

from __future__ import annotations

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.config import check_int, check_pow2
from hw.hbm.config import HBMConfig
from hw.hbm.interface import ColCmd, RowCmd, dram_signature
from hw.instance import ModuleInstance

from .jedec_checker import JedecCheckerHDL

__all__ = ["HBMDeviceHDL", "STORE_VERILOG"]

#: The storage module (byte write enables, registered read port, filled at time 0).
STORE_VERILOG = """\
// Storage of the simulation-only HBM2 device model (verif/hdl/hbm_device.py): one word per burst.
module hbm_store #(parameter DEPTH = 1, parameter AW = 1, parameter WIDTH = 256, parameter [7:0] FILL = 8'h00) (
    input wire clk,
    input wire ren,
    input wire [AW-1:0] raddr,
    output reg [WIDTH-1:0] rdata,
    input wire [WIDTH/8-1:0] wen,
    input wire [AW-1:0] waddr,
    input wire [WIDTH-1:0] wdata
);
  reg [WIDTH-1:0] mem [0:DEPTH-1] /*verilator public_flat_rw*/;  // the testbench's backdoor
  integer i, b;
  initial begin
    for (i = 0; i < DEPTH; i = i + 1) mem[i] = {(WIDTH/8){FILL}};
  end
  always @(posedge clk) begin
    if (ren) rdata <= mem[raddr];
    for (b = 0; b < WIDTH/8; b = b + 1)
      if (wen[b]) mem[waddr][b*8 +: 8] <= wdata[b*8 +: 8];
  end
endmodule
"""


class HBMDeviceHDL(wiring.Component):
    """Device side of one pseudo-channel: storage, read and write data timing, JEDEC checker.

    Ports:
        dram: ``In(dram_signature(config))`` (commands and write data in, read data out).
        finish: In(1), strobe at the end of a run (the checker's refresh-rate check).
        row_error: Out(1), sticky: an ACT addressed a row at or above ``stored_rows``.

    Args:
        config: the :class:`~hw.hbm.config.HBMConfig` (geometry, CL, CWL, timing rules).
        pc: this pseudo-channel's index (messages only).
        stored_rows: rows per bank that are stored, a power of two from 1 to ``config.rows``.
        fill: byte value of never-written memory, 0..255.
        checker_name: instantiate the checker as the Verilog module of this name
            (:class:`hw.instance.ModuleInstance`; Verilog generation, see
            :func:`~verif.hdl.gemm_sim_top.gemm_sim_verilog`) instead of flattening it.

    Raises:
        ValueError: ``stored_rows`` or ``fill`` out of range, or ``timing.CL < 2``.
    """

    def __init__(self, config: HBMConfig, pc: int = 0, *, stored_rows: int = 256, fill: int = 0,
                 checker_name: str | None = None):
        if not isinstance(config, HBMConfig):
            raise TypeError(f"config must be an HBMConfig; got {type(config).__name__}")
        check_int("stored_rows", stored_rows, 1, config.rows)
        check_pow2("stored_rows", stored_rows, 1, config.rows)
        check_int("fill", fill, 0, 255)
        if config.timing.CL < 2:
            raise ValueError(f"timing.CL must be >= 2 (the store's read port is registered); got {config.timing.CL}")
        self.config, self.pc, self.stored_rows, self.fill = config, pc, stored_rows, fill
        self.checker = JedecCheckerHDL(config, pc)
        self.checker_name = checker_name
        super().__init__({"dram": In(dram_signature(config)), "finish": In(1), "row_error": Out(1)})

    @property
    def depth(self) -> int:
        """Stored bursts: banks * stored_rows * columns."""
        return self.config.banks * self.stored_rows * self.config.columns

    def word_index(self, bank_group: int, bank: int, row: int, column: int) -> int:
        """The ``mem`` index of a burst (column in the low bits, then row, bank, bank group)."""
        b, rb = self.config.field_bits, (self.stored_rows - 1).bit_length()
        if row >= self.stored_rows:
            raise ValueError(f"row {row} is not stored (stored_rows = {self.stored_rows})")
        return column | row << b["column"] | bank << (b["column"] + rb) | bank_group << (b["column"] + rb + b["bank"])

    def elaborate(self, platform):
        cfg, t, d = self.config, self.config.timing, self.dram
        m = Module()
        bits, rb = cfg.field_bits, (self.stored_rows - 1).bit_length()
        aw = max(1, (self.depth - 1).bit_length())

        def word(bg, bank, row, col):
            parts = [col[: bits["column"]], row[:rb], bank[: bits["bank"]], bg[: bits["bank_group"]]]
            return Cat(*(p for p in parts if len(p)))

        # the checker sees the same pins
        chk = self.checker
        m.submodules.checker = chk if self.checker_name is None else ModuleInstance(chk, self.checker_name)
        for name in ("row_cmd", "row_bg", "row_bank", "row_row", "col_cmd", "col_bg", "col_bank", "col_row",
                     "col_column", "wdata_valid"):
            m.d.comb += getattr(chk, name).eq(getattr(d, name))
        m.d.comb += chk.finish.eq(self.finish)
        with m.If((d.row_cmd == RowCmd.ACT) & (d.row_row >= self.stored_rows)):
            m.d.sync += self.row_error.eq(1)

        # reads: the store is read at T + CL - 1 (registered output at T + CL) with the RD's address
        # delayed CL - 1 cycles; equal to reading at T for every legal stream (a WR to the same burst
        # lands before T by tWTR or after T + CL by tRTW), which the checker enforces.
        raddr, rv = word(d.col_bg, d.col_bank, d.col_row, d.col_column), d.col_cmd == ColCmd.RD
        for k in range(t.CL - 1):
            na, nv = Signal(aw, name=f"rd_addr_d{k + 1}"), Signal(name=f"rd_valid_d{k + 1}")
            m.d.sync += [na.eq(raddr), nv.eq(rv)]
            raddr, rv = na, nv
        rvalid = Signal()
        m.d.sync += rvalid.eq(rv)
        rdata = Signal(cfg.burst_bytes * 8)
        # writes: the WR's address waits CWL cycles for its data
        waddr, wv = word(d.col_bg, d.col_bank, d.col_row, d.col_column), d.col_cmd == ColCmd.WR
        for k in range(t.CWL):
            na, nv = Signal(aw, name=f"wr_addr_d{k + 1}"), Signal(name=f"wr_valid_d{k + 1}")
            m.d.sync += [na.eq(waddr), nv.eq(wv)]
            waddr, wv = na, nv
        wen = Cat(*(d.wmask[i] & d.wdata_valid for i in range(cfg.burst_bytes)))
        m.submodules.store = Instance(
            "hbm_store", p_DEPTH=self.depth, p_AW=aw, p_WIDTH=cfg.burst_bytes * 8, p_FILL=Const(self.fill, 8),
            i_clk=ClockSignal(), i_ren=rv, i_raddr=raddr, o_rdata=rdata, i_wen=wen, i_waddr=waddr, i_wdata=d.wdata)
        m.d.comb += [d.rdata.eq(rdata), d.rdata_valid.eq(rvalid)]

        return m

