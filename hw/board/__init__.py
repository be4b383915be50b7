"""FPGA board top: the GEMM engine with a BRAM-backed memory and a UART bridge (see :mod:`hw.board.top`)."""

from .bridge import CMD, NAK, PROTOCOL_VERSION, UARTBridge, info_bytes
from .top import BoardConfig, BoardTop, board_engine_config
from .uart import UARTReceiver, UARTTransmitter, uart_divisor

__all__ = ["BoardConfig", "BoardTop", "board_engine_config", "UARTBridge", "UARTReceiver", "UARTTransmitter",
           "uart_divisor", "CMD", "NAK", "PROTOCOL_VERSION", "info_bytes"]
