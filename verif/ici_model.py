"""Cycle model of one ICI link direction (:class:`hw.ici.ICIChannel`) without faults.

The model follows the RTL's handshakes as a max-plus recurrence over packets, each bound named:

* a packet is sent when it is stored whole (the input gives a beat per cycle while the replay buffer
  has room), when a credit is back (the receiver frees a slot when it reads the packet's last beat
  out; the credit crosses the wire's reverse lane) and after the packet before it (no gap);
* the replay buffer has room for packet j once packet j - ``replay_packets`` is acknowledged (the
  receiver acknowledges at the CRC beat; the ACK crosses the reverse lane);
* the receiver reads a packet out after its CRC beat, one beat per cycle, behind the packet before.

:func:`link_cycles` is exact for an output that is always ready (``tests/test_ici.py`` checks it
against the RTL); :func:`link_throughput` is the steady state of the same bounds.
"""

from __future__ import annotations

__all__ = ["packets_of", "link_cycles", "link_throughput"]


def packets_of(message_beats: list[int], packet_beats: int) -> list[int]:
    """Payload beats of each packet the messages are cut into (at most ``packet_beats`` each; a
    message's last packet may be shorter)."""
    out = []
    for beats in message_beats:
        if beats < 1:
            raise ValueError(f"a message has at least one beat; got {beats}")
        full, rest = divmod(beats, packet_beats)
        out += [packet_beats] * full + ([rest] if rest else [])
    return out


def link_cycles(cfg, message_beats: list[int]) -> dict:
    """Cycles until the last beat of ``message_beats`` (beats per message, sent back to back from
    cycle 0) is on the receiver's output, for the link ``cfg`` (an :class:`hw.ici.ICIConfig`).

    Returns:
        a dict: ``cycles`` (the last output cycle + 1), ``headers`` (the cycle of each packet's
        header at the transmitter), ``wire_beats`` (beats on the forward lane).
    """
    lens = packets_of(message_beats, cfg.packet_beats)
    lat, Q, P = cfg.latency_cycles, cfg.rx_packets, cfg.replay_packets
    h, acked_at, free_at, read_end = [], [], [], []
    t_beat = 0       # cycle the next input beat can be taken
    for j, n in enumerate(lens):
        if j >= P:   # room in the replay buffer: packet j - P acknowledged
            t_beat = max(t_beat, acked_at[j - P])
        stored = t_beat + n                         # `stored` counts it from this cycle
        t_beat += n
        ready = stored
        if j >= Q:   # a credit: the one packet j - Q held, back across the wire
            ready = max(ready, free_at[j - Q])
        start = ready + 1                           # the header follows the decision
        if j:
            start = max(start, h[-1] + lens[j - 1] + 2)
        h.append(start)
        crc_at_rx = start + n + 1 + lat
        acked_at.append(crc_at_rx + 2 + lat)
        first_read = crc_at_rx + 1
        if read_end:
            first_read = max(first_read, read_end[-1] + 1)
        read_end.append(first_read + n - 1)
        free_at.append(read_end[-1] + 2 + lat)
    return {"cycles": read_end[-1] + 2, "headers": h, "wire_beats": sum(n + 2 for n in lens)}


def link_throughput(cfg) -> float:
    """Payload beats per cycle of a long message in the steady state: the packet overhead
    (``packet_beats / (packet_beats + 2)``), times the credit bound when the credits do not cover a
    packet's credit loop (header to credit back: ``2 * packet_beats + 2 * latency_cycles + 4``
    cycles for ``rx_packets`` packets)."""
    L = cfg.packet_beats
    loop = 2 * L + 2 * cfg.latency_cycles + 4
    return min(L / (L + 2), cfg.rx_packets * L / loop)  # one division each: the ratio, correctly rounded
