"""The inter-chip interconnect (ICI): point-to-point links between the pod's nodes."""

from .channel import ICIChannel
from .config import ICIConfig
from .receiver import ICIReceiver
from .transmitter import ICITransmitter
from .wire import ICIWire

__all__ = ["ICIConfig", "ICITransmitter", "ICIReceiver", "ICIWire", "ICIChannel"]
