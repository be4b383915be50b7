"""Interfaces of the HBM2-style pseudo-channel controller and of its parts.

The controller's ports (native request and response streams, the DRAM command and data pins of one
pseudo-channel, :func:`dram_signature`) and the internal interface by which its command choice
(:class:`~hw.hbm.scheduler.CommandScheduler`) tells the request queue, the bank timing and the pins
what is issued this cycle (:func:`issue_layout`).
"""

from __future__ import annotations

from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

from .config import HBMConfig

__all__ = ["ColCmd", "RowCmd", "bank_bits", "check_config", "bank_status_signature", "dram_signature", "issue_layout",
           "queue_view_signature", "request_layout", "response_layout"]


class RowCmd(enum.Enum, shape=3):
    """Row command bus of a pseudo-channel (JESD235 row commands; NOP = no command)."""

    NOP = 0
    ACT = 1
    PRE = 2
    PREA = 3
    REF = 4


class ColCmd(enum.Enum, shape=2):
    """Column command bus of a pseudo-channel (NOP = no command)."""

    NOP = 0
    RD = 1
    WR = 2


def request_layout(config: HBMConfig) -> data.StructLayout:
    """Native request: ``write`` (1 bit), byte ``addr`` (``address_bits``, burst aligned; the channel
    field is ignored by a pseudo-channel controller), ``tag`` (``tag_bits``), ``wdata``
    (``burst_bytes * 8`` bits, byte i in bits 8i..8i+7), ``wmask`` (``burst_bytes`` bits, 1 = write)."""
    return data.StructLayout({
        "write": 1,
        "addr": config.address_bits,
        "tag": config.tag_bits,
        "wdata": config.burst_bytes * 8,
        "wmask": config.burst_bytes,
    })


def response_layout(config: HBMConfig) -> data.StructLayout:
    """Read response: ``tag`` (``tag_bits``) and ``rdata`` (``burst_bytes * 8`` bits)."""
    return data.StructLayout({"tag": config.tag_bits, "rdata": config.burst_bytes * 8})


def dram_signature(config: HBMConfig) -> wiring.Signature:
    """Controller-side view of one pseudo-channel's command and data interface.

    ``row_*``: row command bus (``row_cmd`` a :class:`RowCmd`, bank group, bank, row address).
    ``col_*``: column command bus (``col_cmd`` a :class:`ColCmd`, bank group, bank, column in bursts;
    ``col_row`` is the open row the command targets, for the checker, not a DRAM pin).
    ``wdata``/``wmask``/``wdata_valid``: one write burst at WR + CWL. ``rdata``/``rdata_valid`` (in):
    one read burst at RD + CL.
    """
    bits = config.field_bits
    w = config.burst_bytes * 8
    return wiring.Signature({
        "row_cmd": Out(RowCmd),
        "row_bg": Out(max(1, bits["bank_group"])),
        "row_bank": Out(max(1, bits["bank"])),
        "row_row": Out(max(1, bits["row"])),
        "col_cmd": Out(ColCmd),
        "col_bg": Out(max(1, bits["bank_group"])),
        "col_bank": Out(max(1, bits["bank"])),
        "col_row": Out(max(1, bits["row"])),
        "col_column": Out(max(1, bits["column"])),
        "wdata": Out(w),
        "wmask": Out(config.burst_bytes),
        "wdata_valid": Out(1),
        "rdata": In(w),
        "rdata_valid": In(1),
    })


def check_config(config) -> HBMConfig:
    """``config`` itself, after checking that it is an :class:`HBMConfig` (each controller part takes one).

    Raises:
        TypeError: ``config`` is not an :class:`HBMConfig`.
    """
    if not isinstance(config, HBMConfig):
        raise TypeError(f"config must be an HBMConfig; got {config!r}")
    return config


def bank_bits(config: HBMConfig) -> int:
    """Bits of a flat bank index ``bank_group * banks_per_group + bank`` (at least 1)."""
    return max(1, (config.banks - 1).bit_length())


def issue_layout(config: HBMConfig) -> data.StructLayout:
    """The commands chosen in one cycle, at most one per command bus (row and column).

    Row bus: ``act`` (ACT of bank ``act_bank``, row ``act_row``), ``pre`` (PRE of ``pre_bank``),
    ``prea`` (all banks), ``ref`` (all-bank REF); at most one of the four is set. Column bus: ``rd`` /
    ``wr`` for queue slot ``col_grant`` (one-hot, ``queue_depth`` bits; index ``col_slot``) at bank
    ``col_bank``, row ``col_row``, column ``col_col`` (in bursts), tag ``col_tag``. Banks are flat
    indices of :func:`bank_bits` bits; ``act_banks`` / ``pre_banks`` / ``col_banks`` (``banks`` bits)
    are the same banks one-hot (0 without the command), so that the bank timing's counters decode
    nothing.
    """
    bits, n = config.field_bits, config.queue_depth
    bw, roww, colw = bank_bits(config), max(1, bits["row"]), max(1, bits["column"])
    return data.StructLayout({
        "act": 1, "pre": 1, "prea": 1, "ref": 1, "rd": 1, "wr": 1,
        "act_banks": config.banks, "pre_banks": config.banks, "col_banks": config.banks,
        "act_bank": bw, "act_row": roww, "pre_bank": bw,
        "col_bank": bw, "col_row": roww, "col_col": colw, "col_tag": config.tag_bits,
        "col_grant": n, "col_slot": max(1, (n - 1).bit_length()),
    })


def queue_view_signature(config: HBMConfig) -> wiring.Signature:
    """What the request queue shows the command choice; every member is a register.

    Per slot (``queue_depth`` bits each): ``valid``, ``write``, ``hit`` (row open in its bank),
    ``oldest`` (one-hot, the oldest occupied slot), ``allow`` (may issue: every slot, or only the
    oldest while one has waited ``age_cap_cycles``), ``col_ready`` (row hit, no older same-address
    hazard queued, and bank / bank group / pseudo-channel timing allow its RD or WR), ``act_ready``
    (bank closed and ACT timing allows). ``older``: the age matrix (``older[i]`` bit j: slot j is
    older than slot i). ``bank`` / ``row`` / ``col`` / ``tag``: flat bank, row, column in bursts and
    tag of each slot. Per bank (``banks`` bits): ``has_hit`` (a queued request hits the open row),
    ``has_miss`` (one needs another row), ``oldest_miss`` (the oldest request needs another row
    there). ``strict``: the age cap is in force. The readiness and per-bank bits may be one cycle
    conservative (a request that just left still counts), never optimistic.
    """
    n, nb, bits = config.queue_depth, config.banks, config.field_bits
    return wiring.Signature({
        "valid": Out(n), "write": Out(n), "hit": Out(n), "oldest": Out(n), "allow": Out(n),
        "col_ready": Out(n), "act_ready": Out(n),
        "older": Out(data.ArrayLayout(n, n)),
        "bank": Out(data.ArrayLayout(bank_bits(config), n)),
        "row": Out(data.ArrayLayout(max(1, bits["row"]), n)),
        "col": Out(data.ArrayLayout(max(1, bits["column"]), n)),
        "tag": Out(data.ArrayLayout(config.tag_bits, n)),
        "has_hit": Out(nb), "has_miss": Out(nb), "oldest_miss": Out(nb), "strict": Out(1),
    })


def bank_status_signature(config: HBMConfig) -> wiring.Signature:
    """Bank state and timing, as :class:`~hw.hbm.bank_timing.BankTiming` shows it.

    ``bank_open`` (bit per flat bank) and ``open_row`` (row bits per bank); per bank ``act_ok`` (tRC,
    tRP), ``col_ok`` (tRCD), ``pre_ok`` (tRAS, tRTP, write recovery); per bank group ``bg_act_ok``
    (tRRD_L), ``bg_rd_ok`` (tCCD_L, tWTR_L), ``bg_wr_ok`` (tCCD_L); per pseudo-channel ``ch_act_ok``
    (tRRD_S and tFAW), ``ch_rd_ok`` (tCCD_S, burst, tWTR_S), ``ch_wr_ok`` (tCCD_S, burst, tRTW) and
    ``rfc_ok`` (tRFC since the last REF). An ``*_ok`` bit says that a command *decided* in that
    cycle (on the pins one cycle later) keeps the distance to every command already on the pins
    before it; the command on the pins in the same cycle is not in it (the scheduler masks it).
    """
    nb, n_bg = config.banks, config.bank_groups
    return wiring.Signature({
        "bank_open": Out(nb),
        "open_row": Out(data.ArrayLayout(max(1, config.field_bits["row"]), nb)),
        "act_ok": Out(nb), "col_ok": Out(nb), "pre_ok": Out(nb),
        "bg_act_ok": Out(n_bg), "bg_rd_ok": Out(n_bg), "bg_wr_ok": Out(n_bg),
        "ch_act_ok": Out(1), "ch_rd_ok": Out(1), "ch_wr_ok": Out(1), "rfc_ok": Out(1),
    })
