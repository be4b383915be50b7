"""Configuration of the HBM2-style pseudo-channel controller: timing sets and geometry.

One :class:`HBMTiming` object parameterizes the RTL controller, the device model
(``verif/hbm_device.py``) and the JEDEC checker (``verif/jedec_checker.py``), so the three can never
disagree about a timing.

Units: every timing except ``tCK_ns`` is an integer number of **clock cycles at tCK** (the command
clock of one pseudo-channel; data moves at double data rate, so a BL4 burst occupies
``burst_cycles = 2`` cycles of the data bus). ``tCK_ns`` is the clock period in nanoseconds; it is
informative (figures in ns, bandwidth) and never used by the cycle-level rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from ..config import check_choice, check_int, check_pow2

__all__ = [
    "ADDRESS_FIELDS",
    "COMPRESSED_REFRESH",
    "DRAMSIM3_HBM2",
    "HBMConfig",
    "HBMTiming",
    "PagePolicy",
    "RAMULATOR2_HBM2",
    "TIMING_PRESETS",
]

# Integer timing fields, in declaration order (all >= 1, in cycles of tCK).
_TIMING_INTS = (
    "CL", "CWL", "tRCD", "tRP", "tRAS", "tRC", "tCCD_S", "tCCD_L", "tRRD_S", "tRRD_L", "tFAW",
    "tWR", "tWTR_S", "tWTR_L", "tRTP", "tRTW", "tRFC", "tREFI", "burst_cycles",
)


@dataclass(frozen=True, kw_only=True)
class HBMTiming:
    """One HBM2 timing set. All fields but ``tCK_ns`` are integers in clock cycles (tCK).

    Attributes:
        tCK_ns: clock period in ns (> 0; informative only).
        CL: read latency: RD command to first read data beat on the bus.
        CWL: write latency: WR command to first write data beat on the bus.
        tRCD: ACT to RD or WR, same bank (HBM2 tRCDRD = tRCDWR in both sources).
        tRP: PRE to ACT (or to REF), same bank.
        tRAS: ACT to PRE, same bank.
        tRC: ACT to ACT, same bank; ``None`` means tRAS + tRP (must be >= tRAS + tRP).
        tCCD_S / tCCD_L: column command to column command (RD-RD, WR-WR), different / same bank group.
        tRRD_S / tRRD_L: ACT to ACT, different / same bank group.
        tFAW: window in which at most four ACTs may be issued to one pseudo-channel.
        tWR: write recovery: end of the write burst to PRE (WR to PRE = CWL + burst_cycles + tWR).
        tWTR_S / tWTR_L: end of the write burst to RD, different / same bank group
            (WR to RD = CWL + burst_cycles + tWTR).
        tRTP: RD to PRE, same bank.
        tRTW: RD to WR (any bank of the pseudo-channel, bus turnaround); ``None`` means
            CL + burst_cycles - CWL + 2 (one read preamble + one turnaround cycle, the formula of both
            DRAMsim3 and Ramulator2). Must be >= CL + burst_cycles - CWL so bursts never overlap.
        tRFC: REF (all banks) to any other command on that pseudo-channel.
        tREFI: average refresh interval.
        burst_cycles: data-bus cycles of one burst (BL4 at double data rate = 2).

    Raises:
        ValueError: naming the parameter and its allowed values.
    """

    tCK_ns: float
    CL: int
    CWL: int
    tRCD: int
    tRP: int
    tRAS: int
    tRC: int | None = None
    tCCD_S: int
    tCCD_L: int
    tRRD_S: int
    tRRD_L: int
    tFAW: int
    tWR: int
    tWTR_S: int
    tWTR_L: int
    tRTP: int
    tRTW: int | None = None
    tRFC: int
    tREFI: int
    burst_cycles: int = 2

    def __post_init__(self):
        ok = (not isinstance(self.tCK_ns, bool) and isinstance(self.tCK_ns, (int, float))
              and self.tCK_ns > 0)
        if not ok:
            raise ValueError(f"tCK_ns must be a number > 0; got {self.tCK_ns!r}")
        for name in ("CL", "CWL", "tRCD", "tRP", "tRAS"):
            check_int(name, getattr(self, name), 1)
        if self.tRC is None:
            object.__setattr__(self, "tRC", self.tRAS + self.tRP)
        for name in ("tRC", "tCCD_S", "tCCD_L", "tRRD_S", "tRRD_L", "tFAW", "tWR", "tWTR_S",
                     "tWTR_L", "tRTP", "burst_cycles"):
            check_int(name, getattr(self, name), 1)
        if self.tRTW is None:
            object.__setattr__(self, "tRTW", max(1, self.CL + self.burst_cycles - self.CWL + 2))
        for name in ("tRTW", "tRFC", "tREFI"):
            check_int(name, getattr(self, name), 1)
        # cross-checks
        _at_least("tRAS", self.tRAS, "tRCD", self.tRCD)
        _at_least("tRC", self.tRC, "tRAS + tRP", self.tRAS + self.tRP)
        _at_least("tCCD_L", self.tCCD_L, "tCCD_S", self.tCCD_S)
        _at_least("tRRD_L", self.tRRD_L, "tRRD_S", self.tRRD_S)
        _at_least("tWTR_L", self.tWTR_L, "tWTR_S", self.tWTR_S)
        _at_least("tRTW", self.tRTW, "CL + burst_cycles - CWL", self.CL + self.burst_cycles - self.CWL)
        if not self.tREFI > self.tRFC:
            raise ValueError(f"tREFI must be > tRFC = {self.tRFC}; got {self.tREFI}")

    def as_dict(self) -> dict:
        return {"tCK_ns": self.tCK_ns, **{n: getattr(self, n) for n in _TIMING_INTS}}


def _at_least(name: str, value: int, what: str, bound: int) -> None:
    if value < bound:
        raise ValueError(f"{name} must be >= {what} = {bound}; got {value}")


# DRAMsim3 (umd-memsys/DRAMsim3), configs/HBM2_8Gb_x128.ini, [timing] section:
#   tCK = 1, CL = 14, CWL = 4, tRCDRD = 14, tRCDWR = 14, tRP = 14, tRAS = 34, tRFC = 260,
#   tREFI = 3900, tRRD_S = 4, tRRD_L = 6, tWTR_S = 6, tWTR_L = 8, tFAW = 30, tWR = 16,
#   tCCD_S = 1, tCCD_L = 2, tRTP_L = 6, tRTP_S = 4, tRPRE = 1, BL = 4.
# Not in the file, derived as DRAMsim3's src/timing.cc does: tRC = tRAS + tRP = 48 (the .ini has no
# tRC); burst_cycles = BL / 2 = 2; tRTW = RL + burst_cycle - WL + tRPRE + tRTRS = 14 + 2 - 4 + 1 + 1
# = 14 (tRTRS = 1 assumed). tRTP here is the same-bank RD->PRE figure, tRTP_L = 6.
DRAMSIM3_HBM2 = HBMTiming(
    tCK_ns=1.0, CL=14, CWL=4, tRCD=14, tRP=14, tRAS=34, tRC=48,
    tCCD_S=1, tCCD_L=2, tRRD_S=4, tRRD_L=6, tFAW=30,
    tWR=16, tWTR_S=6, tWTR_L=8, tRTP=6, tRTW=14,
    tRFC=260, tREFI=3900, burst_cycles=2,
)

# Ramulator2 (CMU-SAFARI/ramulator2), src/dram/impl/HBM2.cpp, timing_presets "HBM2_2Gbps"
# (rate 2000 MT/s, tCK_ps 1000): nBL 4, nCL 7, nRCDRD 7, nRCDWR 7, nRP 7, nRAS 17, nRC 19, nWR 8,
# nRTPS 2, nRTPL 3, nCWL 2, nCCDS 1, nCCDL 2, nRRDS 2, nRRDL 3, nWTRS 3, nWTRL 4, nRTW 3, nFAW 15,
# nRFC -1 (filled from its tRFC table by density: 2Gb 160, 4Gb 260, 8Gb 350 ns), nREFI 3900.
# Deviations, all documented: tRC = tRAS + tRP = 24 instead of nRC 19 (19 < 17 + 7 can never bind:
# ACT->PRE >= 17 and PRE->ACT >= 7 already force 24); tRFC = 350 (the 8Gb row of its table, the
# density of its HBM2_8Gb organization); burst_cycles = 2 (BL4 at DDR; Ramulator2 charges nBL = 4
# cycles per burst); tRTW = CL + burst_cycles - CWL + 2 = 9, the formula Ramulator2 itself applies
# (nCL + nBL + 2 - nCWL) with our burst_cycles -- its nRTW = 3 field is not used by its rules.
# tRTP is its same-bank figure nRTPL = 3.
RAMULATOR2_HBM2 = HBMTiming(
    tCK_ns=1.0, CL=7, CWL=2, tRCD=7, tRP=7, tRAS=17, tRC=24,
    tCCD_S=1, tCCD_L=2, tRRD_S=2, tRRD_L=3, tFAW=15,
    tWR=8, tWTR_S=3, tWTR_L=4, tRTP=3, tRTW=9,
    tRFC=350, tREFI=3900, burst_cycles=2,
)

# DRAMsim3 figures with refresh compressed in time (tREFI = 400 cycles, tRFC unchanged at 260) so
# that short simulations see many refreshes and postponement. Not a real part.
COMPRESSED_REFRESH = replace(DRAMSIM3_HBM2, tREFI=400)

TIMING_PRESETS: dict[str, HBMTiming] = {
    "dramsim3_hbm2": DRAMSIM3_HBM2,
    "ramulator2_hbm2": RAMULATOR2_HBM2,
    "compressed_refresh": COMPRESSED_REFRESH,
}


class PagePolicy(Enum):
    """Row-buffer policy: keep the row open after an access, or close it (precharge) at once."""

    OPEN = "open"
    CLOSED = "closed"


ADDRESS_FIELDS = ("channel", "bank_group", "bank", "row", "column")


@dataclass(frozen=True)
class HBMConfig:
    """Geometry and policy of the controller (one object for RTL, device model and checker).

    Attributes:
        pseudo_channels: independent pseudo-channels, a power of two >= 1 (the channel field of the
            address must be a whole number of bits).
        bank_groups: bank groups per pseudo-channel, a power of two.
        banks_per_group: banks per bank group, a power of two.
        rows: rows per bank, a power of two.
        columns: columns per row **in bursts** (one column address = one ``burst_bytes`` access),
            a power of two.
        data_bits: data-bus width of one pseudo-channel, a power of two >= 8 (64 for HBM2).
        burst_length: beats per burst, 2 or 4 (4 for HBM2 pseudo-channel mode); the timing set's
            ``burst_cycles`` must be ``burst_length / 2`` (double data rate).
        timing: an :class:`HBMTiming`.
        queue_depth: request-queue entries per pseudo-channel, 1..256.
        max_refresh_postpone: REFs that may be postponed, 0..8 (JEDEC allows 8).
        page_policy: "open" or "closed" (:class:`PagePolicy` values).
        address_mapping: ordering of ``channel``, ``bank_group``, ``bank``, ``row``, ``column``,
            most significant first, above the byte offset inside a burst.
        channel_xor: hash the pseudo-channel (default False): the channel is the channel field
            XOR every ``log2(pseudo_channels)``-bit slice of the address above it, so a stream at
            any power-of-two stride of at least two bursts (rows of a matrix, one column segment
            per row) alternates pseudo-channels instead of staying in one (XOR interleaving, as in
            Zhang, Zhu and Zhang, "A permutation-based page interleaving scheme", MICRO 2000).
            :meth:`decode` and :meth:`encode` apply it; the bank, row and column fields are
            unchanged.
        tag_bits: width of the request tag returned with read data, 1..16 bits.
        age_cap_cycles: a request waiting this many cycles switches the scheduler of its
            pseudo-channel to oldest-first until it is served (starvation bound), 1..65535 cycles.

    Byte addresses are burst aligned (the low ``offset_bits`` bits are zero).

    Raises:
        ValueError: naming the parameter and its allowed values.
    """

    pseudo_channels: int = 2
    bank_groups: int = 4
    banks_per_group: int = 4
    rows: int = 16384
    columns: int = 32
    data_bits: int = 64
    burst_length: int = 4
    timing: HBMTiming = field(default_factory=lambda: DRAMSIM3_HBM2)
    queue_depth: int = 16
    max_refresh_postpone: int = 8
    page_policy: str = "open"
    address_mapping: tuple[str, ...] = ("row", "bank", "bank_group", "channel", "column")
    channel_xor: bool = False
    tag_bits: int = 8
    age_cap_cycles: int = 512

    def __post_init__(self):
        check_pow2("pseudo_channels", self.pseudo_channels)
        check_pow2("bank_groups", self.bank_groups)
        check_pow2("banks_per_group", self.banks_per_group)
        check_pow2("rows", self.rows)
        check_pow2("columns", self.columns)
        ok = (not isinstance(self.data_bits, bool) and isinstance(self.data_bits, int)
              and self.data_bits >= 8 and self.data_bits & (self.data_bits - 1) == 0)
        if not ok:
            raise ValueError(f"data_bits must be a power of two >= 8; got {self.data_bits!r}")
        if isinstance(self.burst_length, bool) or self.burst_length not in (2, 4):
            raise ValueError(f"burst_length must be one of 2, 4; got {self.burst_length!r}")
        if not isinstance(self.timing, HBMTiming):
            raise TypeError(f"timing must be an HBMTiming; got {self.timing!r}")
        if self.timing.burst_cycles != self.burst_length // 2:
            raise ValueError(
                f"timing.burst_cycles must be burst_length / 2 = {self.burst_length // 2}; "
                f"got {self.timing.burst_cycles}")
        check_int("queue_depth", self.queue_depth, 1, 256)
        check_int("max_refresh_postpone", self.max_refresh_postpone, 0, 8)
        check_choice("page_policy", self.page_policy, PagePolicy)
        check_int("tag_bits", self.tag_bits, 1, 16)
        check_int("age_cap_cycles", self.age_cap_cycles, 1, 65535)
        if not isinstance(self.channel_xor, bool):
            raise TypeError(f"channel_xor must be True or False; got {self.channel_xor!r}")
        mapping = self.address_mapping
        if isinstance(mapping, list):
            mapping = tuple(mapping)
            object.__setattr__(self, "address_mapping", mapping)
        if not isinstance(mapping, tuple) or sorted(mapping) != sorted(ADDRESS_FIELDS):
            raise ValueError(
                "address_mapping must be an ordering of channel, bank_group, bank, row, column "
                f"(each once, MSB first); got {self.address_mapping!r}")

    # ---- serialization -----------------------------------------------------------------------
    def as_dict(self) -> dict:
        """Plain JSON-able dict (``timing`` as a dict of its fields); inverse of :meth:`from_dict`."""
        out = {f: getattr(self, f) for f in self.__dataclass_fields__ if f != "timing"}
        out["address_mapping"] = list(self.address_mapping)
        out["timing"] = self.timing.as_dict()
        return out

    @classmethod
    def from_dict(cls, d: dict) -> HBMConfig:
        """Build from :meth:`as_dict` output; ``timing`` may also be a preset name
        (``TIMING_PRESETS`` key).

        Raises:
            ValueError: unknown timing preset, unknown key, or any field check.
        """
        d = dict(d)
        timing = d.pop("timing", None)
        unknown = sorted(set(d) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown HBMConfig keys: {', '.join(unknown)}")
        if isinstance(timing, str):
            if timing not in TIMING_PRESETS:
                raise ValueError(f"timing must be one of {', '.join(TIMING_PRESETS)}; got {timing!r}")
            d["timing"] = TIMING_PRESETS[timing]
        elif isinstance(timing, dict):
            d["timing"] = HBMTiming(**timing)
        elif timing is not None:
            d["timing"] = timing
        if "address_mapping" in d:
            d["address_mapping"] = tuple(d["address_mapping"])
        return cls(**d)

    # ---- derived ---------------------------------------------------------------------------
    @property
    def policy(self) -> PagePolicy:
        return PagePolicy(self.page_policy)

    @property
    def banks(self) -> int:
        """Banks per pseudo-channel."""
        return self.bank_groups * self.banks_per_group

    @property
    def burst_bytes(self) -> int:
        """Bytes moved by one RD or WR: data_bits * burst_length / 8 (32 for HBM2)."""
        return self.data_bits * self.burst_length // 8

    @property
    def page_bytes(self) -> int:
        """Bytes in one row of one bank."""
        return self.columns * self.burst_bytes

    @property
    def capacity_bytes(self) -> int:
        return self.pseudo_channels * self.banks * self.rows * self.page_bytes

    @property
    def offset_bits(self) -> int:
        """Byte-offset bits inside one burst."""
        return self.burst_bytes.bit_length() - 1

    @property
    def field_bits(self) -> dict[str, int]:
        """Width in bits of each address field."""
        sizes = self.field_sizes
        return {name: sizes[name].bit_length() - 1 for name in ADDRESS_FIELDS}

    @property
    def field_sizes(self) -> dict[str, int]:
        return {"channel": self.pseudo_channels, "bank_group": self.bank_groups,
                "bank": self.banks_per_group, "row": self.rows, "column": self.columns}

    @property
    def address_bits(self) -> int:
        """Width of a byte address: sum of the field widths plus ``offset_bits``."""
        return sum(self.field_bits.values()) + self.offset_bits

    @property
    def field_shifts(self) -> dict[str, int]:
        """Bit position of the LSB of each field in a byte address."""
        shifts, pos, bits = {}, self.offset_bits, self.field_bits
        for name in reversed(self.address_mapping):
            shifts[name] = pos
            pos += bits[name]
        return shifts

    def decode(self, address: int) -> tuple[int, int, int, int, int]:
        """Byte address -> ``(channel, bank_group, bank, row, column)`` following address_mapping.

        Raises:
            ValueError: address not an integer in range, or not burst aligned.
        """
        check_int("address", address, 0, self.capacity_bytes - 1)
        if address % self.burst_bytes:
            raise ValueError(f"address must be a multiple of burst_bytes = {self.burst_bytes}; "
                             f"got {address}")
        shifts, bits = self.field_shifts, self.field_bits
        f = {n: (address >> shifts[n]) & ((1 << bits[n]) - 1) for n in ADDRESS_FIELDS}
        return f["channel"] ^ self._channel_hash(address), f["bank_group"], f["bank"], f["row"], f["column"]

    def _channel_hash(self, address: int) -> int:
        """XOR of the ``log2(pseudo_channels)``-bit slices of ``address`` above the channel field
        (0 without ``channel_xor``)."""
        cb = self.field_bits["channel"]
        if not (self.channel_xor and cb):
            return 0
        h, rest = 0, address >> (self.field_shifts["channel"] + cb)
        while rest:
            h ^= rest & ((1 << cb) - 1)
            rest >>= cb
        return h

    def channel_slices(self) -> list[tuple[int, int]]:
        """(shift, width) of the address slices XORed into the channel field by ``channel_xor``
        (empty without it); the last slice may be narrower than the channel field."""
        cb = self.field_bits["channel"]
        if not (self.channel_xor and cb):
            return []
        lo = self.field_shifts["channel"] + cb
        return [(s, min(cb, self.address_bits - s)) for s in range(lo, self.address_bits, cb)]

    def encode(self, channel: int, bank_group: int, bank: int, row: int, column: int) -> int:
        """``(channel, bank_group, bank, row, column)`` -> burst-aligned byte address.

        Raises:
            ValueError: a field out of its range, naming it.
        """
        values = {"channel": channel, "bank_group": bank_group, "bank": bank, "row": row,
                  "column": column}
        sizes, shifts = self.field_sizes, self.field_shifts
        address = 0
        for name in ADDRESS_FIELDS:
            check_int(name, values[name], 0, sizes[name] - 1)
            if name != "channel":
                address |= values[name] << shifts[name]
        # the hash reads only bits above the channel field, so it is known before the channel bits
        return address | (channel ^ self._channel_hash(address)) << shifts["channel"]
