"""Board top for ECP5: GEMM engine + HBM controller + BRAM emulator + UART bridge.

``BoardTop`` is what goes onto an FPGA board without HBM: the GEMM engine (:class:`hw.engine.GEMMEngine`)
and the HBM2-style controller (:class:`hw.hbm.axi.HBMController`) as in :class:`hw.top.GEMMTop`, a
:class:`hw.hbm.emulator.BRAMEmulator` behind every pseudo-channel (block RAM holding the whole
emulated memory: no aliasing), and a :class:`~hw.board.bridge.UARTBridge` on a fourth AXI port of the
controller and on the engine's register port, behind an 8N1 UART (:mod:`hw.board.uart`) with a
receive FIFO. A host loads A, B (and C0) into the memory, programs the engine's registers, starts it,
polls STATUS and reads D back, all through the serial line (``mxu board matmul --port``).

Pins (Verilog ports): ``clk``, ``rst`` (synchronous, active high; configuration already sets every
register to its reset value, so the pin only needs to be driven to reset by hand), ``uart_rx``,
``uart_tx`` (idle high), ``led[7:0]``: 0 UART receive activity (lit for 50 ms after a low on
``uart_rx``), 1 DONE (``irq``, with CTRL.IRQ_EN), 2 a byte was
lost (receive FIFO full; sticky until reset), 3 framing error seen (sticky), 4 heartbeat (toggles every
2^24 clock cycles: 0.67 s at 25 MHz), 5-7 off.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ..axi_slice import AXI4RegisterSlice
from ..config import check_int, check_pow2
from ..engine import ENGINE_ADDRESS_MAPPING, EngineConfig, GEMMEngine
from ..hbm.axi import HBMController
from ..hbm.config import HBMConfig
from ..hbm.emulator import BRAMEmulator
from ..instance import ModuleInstance
from ..mxu import MXUConfig
from .bridge import UARTBridge
from .uart import UARTReceiver, UARTTransmitter, uart_divisor

__all__ = ["BoardConfig", "BoardTop", "board_engine_config"]


def board_engine_config(mxu: MXUConfig | None = None, *, memory_kib: int = 64, pseudo_channels: int = 2,
                        queue_depth: int = 4, a_buffer_bytes: int = 4096, m_block: int = 64) -> EngineConfig:
    """An :class:`EngineConfig` sized for block RAM.

    The HBM geometry keeps 16 banks of 32 columns of 32 B and gets ``rows`` so that the memory is
    ``memory_kib`` KiB (the engine's RANGE check then matches the emulated memory exactly);
    ``a_buffer_bytes`` per A bank (MAX_K = a_buffer_bytes / operand bytes), ``acc_entries = m_block``.

    Raises:
        ValueError: ``memory_kib`` not a power of two of at least one row per bank (16 KiB per
            pseudo-channel), or an engine parameter out of range.
    """
    mxu = mxu or MXUConfig(rows=2, cols=2)
    check_int("pseudo_channels", pseudo_channels, 1, 4)
    # one row in every bank of every pseudo-channel (the default HBM2 geometry: 16 KiB per channel)
    unit_kib = HBMConfig(pseudo_channels=pseudo_channels, rows=1).capacity_bytes // 1024
    # one row per bank: unit_kib (unit_kib / pseudo_channels KiB per pseudo-channel row)
    check_pow2("memory_kib", memory_kib, unit_kib, 1 << 16)
    rows = memory_kib // unit_kib
    hbm = HBMConfig(pseudo_channels=pseudo_channels, rows=rows, queue_depth=queue_depth,
                    address_mapping=ENGINE_ADDRESS_MAPPING, channel_xor=True)
    return EngineConfig(mxu=mxu, hbm=hbm, m_block=m_block, a_buffer_bytes=a_buffer_bytes, acc_entries=m_block,
                        rob_depth=16)


@dataclass(frozen=True)
class BoardConfig:
    """Configuration of :class:`BoardTop`.

    Attributes:
        engine: the :class:`EngineConfig` (default :func:`board_engine_config`: bf16 2 x 2, 64 KiB).
        clk_hz: the clock on ``clk``, in Hz (25 MHz: the ULX3S oscillator).
        baud: UART rate in bit/s (115,200); ``clk_hz / baud`` must round to a divisor >= 4 within 2 %.
        rx_fifo_depth: bytes of the receive FIFO, 2 .. 4096.

    Raises:
        ValueError: naming the parameter and its allowed values.
    """

    engine: EngineConfig = field(default_factory=board_engine_config)
    clk_hz: int = 25_000_000
    baud: int = 115_200
    rx_fifo_depth: int = 64

    def __post_init__(self):
        if not isinstance(self.engine, EngineConfig):
            raise TypeError(f"engine must be an EngineConfig; got {type(self.engine).__name__}")
        uart_divisor(self.clk_hz, self.baud)
        check_int("rx_fifo_depth", self.rx_fifo_depth, 2, 4096)

    @property
    def divisor(self) -> int:
        """Clock cycles per UART bit."""
        return uart_divisor(self.clk_hz, self.baud)

    @property
    def memory_bytes(self) -> int:
        return self.engine.hbm.capacity_bytes


class BoardTop(wiring.Component):
    """The board top (see the module docstring).

    Ports: ``uart_rx`` In(1), ``uart_tx`` Out(1), ``led`` Out(8); ``clk`` and ``rst`` come from the
    ``sync`` domain.

    Args:
        config: :class:`BoardConfig`.
        pe_blackbox, row_name: see :class:`~hw.mxu.MXU` (Verilog generation).
        hbm_name: see :class:`~hw.top.GEMMTop` (Verilog generation).
    """

    def __init__(self, config: BoardConfig | None = None, *, pe_blackbox: bool = False, row_name: str = "mxu_row",
                 hbm_name: str | None = None):
        self.config = config or BoardConfig()
        self.pe_blackbox, self.row_name, self.hbm_name = pe_blackbox, row_name, hbm_name
        super().__init__({"uart_rx": In(1, init=1), "uart_tx": Out(1, init=1), "led": Out(8)})

    @staticmethod
    def hbm_controller(config, ctrl_name: str | None = None) -> HBMController:
        """The HBM controller of a board top with ``config`` (a :class:`BoardConfig`): four AXI4 ports
        (A, W, C and the UART bridge), 1-bit IDs, the engine's reorder buffer depth; ``ctrl_name`` as
        :class:`~hw.hbm.axi.HBMController` takes it."""
        cfg = config.engine
        return HBMController(cfg.hbm, axi_ports=4, id_bits=1, rob_depth=cfg.rob_depth, ctrl_name=ctrl_name)

    def elaborate(self, platform):
        m = Module()
        bc = self.config
        cfg = bc.engine
        m.submodules.engine = eng = GEMMEngine(cfg, pe_blackbox=self.pe_blackbox, row_name=self.row_name)
        hbm = self.hbm_controller(self.config)
        m.submodules.hbm = hbm if self.hbm_name is None else ModuleInstance(hbm, self.hbm_name)
        # a register slice on each engine port: without it the engine's VALIDs run through the front
        # end's round-robin arbiter into the READYs of the other ports and back into the engine
        for i, name in enumerate(("mem_a", "mem_w", "mem_c")):
            m.submodules[f"{name}_slice"] = sl = AXI4RegisterSlice(cfg.hbm.address_bits, cfg.hbm.burst_bytes * 8, 1)
            wiring.connect(m, getattr(eng, name), sl.s)
            wiring.connect(m, sl.m, getattr(hbm, f"axi{i}"))
        for k in range(cfg.hbm.pseudo_channels):
            emu = BRAMEmulator(cfg.hbm, emulated_rows=cfg.hbm.rows)
            m.submodules[f"bram{k}"] = emu
            wiring.connect(m, getattr(hbm, f"pc{k}"), emu.dram)

        m.submodules.uart_rx = urx = UARTReceiver(bc.divisor)
        m.submodules.uart_tx = utx = UARTTransmitter(bc.divisor)
        m.submodules.rx_fifo = fifo = SyncFIFOBuffered(width=8, depth=bc.rx_fifo_depth)
        m.submodules.bridge = br = UARTBridge(cfg.hbm.address_bits, bc.memory_bytes, bc.clk_hz)
        m.d.comb += [urx.rx.eq(self.uart_rx), self.uart_tx.eq(utx.tx),
                     fifo.w_data.eq(urx.data.payload), fifo.w_en.eq(urx.data.valid), urx.data.ready.eq(1),
                     br.rx.payload.eq(fifo.r_data), br.rx.valid.eq(fifo.r_rdy), fifo.r_en.eq(br.rx.ready)]
        wiring.connect(m, br.tx, utx.data)
        # the bridge's requests through a slice too: otherwise its state, decoded into VALID, runs
        # through the same arbiter into the engine's W READY
        m.submodules.bridge_slice = bsl = AXI4RegisterSlice(cfg.hbm.address_bits, cfg.hbm.burst_bytes * 8, 1)
        wiring.connect(m, br.mem, bsl.s)
        wiring.connect(m, bsl.m, hbm.axi3)
        wiring.connect(m, br.csr, eng.csr)

        lost = Signal()
        framing = Signal()
        with m.If((urx.data.valid & ~fifo.w_rdy) | urx.overrun):
            m.d.sync += lost.eq(1)
        with m.If(urx.framing_error):
            m.d.sync += framing.eq(1)
        heartbeat = Signal(25)
        m.d.sync += heartbeat.eq(heartbeat + 1)
        activity = Signal(range(bc.clk_hz // 20 + 1))  # 50 ms after the last start bit
        with m.If(~self.uart_rx):
            m.d.sync += activity.eq(bc.clk_hz // 20)
        with m.Elif(activity != 0):
            m.d.sync += activity.eq(activity - 1)
        m.d.comb += self.led.eq(Cat(activity != 0, eng.irq, lost, framing, heartbeat[24]))
        return m
