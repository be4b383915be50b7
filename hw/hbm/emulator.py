"""BRAM-backed emulator of one HBM2 pseudo-channel, for FPGAs (which have no HBM PHY).

It sits on the device side of :func:`~hw.hbm.controller.dram_signature` and answers like the
device model ``verif/hbm_device.py`` does: a RD on the pins at cycle T returns its burst on
``rdata``/``rdata_valid`` at T + CL; a WR at T takes ``wdata``/``wmask`` at T + CWL (the controller
drives them then) and writes the bytes whose mask bit is 1. It checks no timing (the controller
obeys it; the cocotb device model is where timing is checked) and ignores ACT/PRE/REF.

Storage: one ``burst_bytes * 8``-bit word per burst, addressed by ``(bank_group, bank, row mod
emulated_rows, column)``, with byte write enables (Yosys maps it to block RAM: DP16KD on ECP5,
SB_RAM40_4K on iCE40). Rows at or above ``emulated_rows`` alias onto ``row mod emulated_rows``, so
the emulated capacity is ``banks * emulated_rows * columns * burst_bytes`` bytes.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from ..config import check_int, check_pow2
from .config import HBMConfig
from .interface import ColCmd, check_config, dram_signature

__all__ = ["BRAMEmulator"]


class BRAMEmulator(wiring.Component):
    """Device-side BRAM model of one pseudo-channel.

    Ports: ``dram`` -- ``In(dram_signature(config))`` (commands and write data in, read data out).

    Args:
        config: the :class:`HBMConfig` of the controller (geometry, CL, CWL).
        emulated_rows: rows per bank that are stored, a power of two from 1 to ``config.rows``.

    Raises:
        ValueError: ``emulated_rows`` out of range or not a power of two, or ``timing.CL < 2``.
    """

    def __init__(self, config: HBMConfig, emulated_rows: int = 1):
        check_config(config)
        check_int("emulated_rows", emulated_rows, 1, config.rows)
        check_pow2("emulated_rows", emulated_rows, 1, config.rows)
        if config.timing.CL < 2:
            raise ValueError(f"timing.CL must be >= 2 for the BRAM emulator (the RAM's output register is "
                             f"one cycle); got {config.timing.CL}")
        self.config, self.emulated_rows = config, emulated_rows
        super().__init__({"dram": In(dram_signature(config))})

    @property
    def depth(self) -> int:
        """Stored bursts: banks * emulated_rows * columns."""
        return self.config.banks * self.emulated_rows * self.config.columns

    @property
    def capacity_bytes(self) -> int:
        return self.depth * self.config.burst_bytes

    def elaborate(self, platform):
        cfg, t = self.config, self.config.timing
        d = self.dram
        m = Module()
        bits = cfg.field_bits
        rb = (self.emulated_rows - 1).bit_length()
        m.submodules.store = store = Memory(shape=cfg.burst_bytes * 8, depth=self.depth, init=[])
        wport = store.write_port(granularity=8)
        rport = store.read_port()

        def word(bg, bank, row, col):
            parts = [col[:bits["column"]], row[:rb], bank[:bits["bank"]], bg[:bits["bank_group"]]]
            return Cat(*parts)

        # reads: the RAM is read at T + CL - 1 (registered output at T + CL) with the address of the RD
        # at T delayed CL - 1 cycles: only the address bits wait, not 256 data bits. This equals reading
        # at T for every legal command stream: a WR to the same burst lands its data before T (tWTR)
        # or after T + CL (tRTW >= CL + burst_cycles - CWL), never in between.
        addr, rv = word(d.col_bg, d.col_bank, d.col_row, d.col_column), d.col_cmd == ColCmd.RD
        for k in range(t.CL - 1):
            na, nv = Signal(len(rport.addr), name=f"rd_addr_d{k + 1}"), Signal(name=f"rd_valid_d{k + 1}")
            m.d.sync += [na.eq(addr), nv.eq(rv)]
            addr, rv = na, nv
        valid = Signal(name="rd_valid_q")
        m.d.sync += valid.eq(rv)
        m.d.comb += [rport.addr.eq(addr), rport.en.eq(rv), d.rdata.eq(rport.data), d.rdata_valid.eq(valid)]

        # writes: remember the address for CWL cycles, write when the data arrives
        is_wr = d.col_cmd == ColCmd.WR
        addr, wv = word(d.col_bg, d.col_bank, d.col_row, d.col_column), is_wr
        for k in range(t.CWL):
            na = Signal(len(wport.addr), name=f"wr_addr_d{k + 1}")
            nv = Signal(name=f"wr_valid_d{k + 1}")
            m.d.sync += [na.eq(addr), nv.eq(wv)]
            addr, wv = na, nv
        m.d.comb += [
            wport.addr.eq(addr),
            wport.data.eq(d.wdata),
            wport.en.eq(Cat(*(d.wmask[i] & d.wdata_valid for i in range(cfg.burst_bytes)))),
        ]
        return m
