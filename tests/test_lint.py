"""Generated Verilog passes ``verilator --lint-only -Wall`` with no warning but those waived, with
their reasons, in ``sim/lint_waivers.vlt``: every block (MAC, PE, MXU module by module, HBM
pseudo-channel controller, HBM controller, GEMM engine, GEMM top, board top, ICI link), and real
defects are still reported through the waivers."""

import re
import shutil

import pytest

from hw.generate import mxu_verilog
from hw.mxu import MXUConfig
from sim.lint import WAIVER_FILE, lint_module, lint_mxu, waived_rules
from sim.runner import generate_verilog


def _blocks():
    """(id, factory, top module name, cache key) of every block a user generates. The HBM, GEMM top
    and board configurations are the ones the simulation tests build (same cache keys), so the
    lint costs no extra generation."""
    from hw.arith import MAC, MACConfig
    from hw.engine import EngineConfig
    from hw.generate import board_top_verilog, engine_verilog, gemm_top_verilog
    from hw.hbm.axi import HBMController
    from hw.hbm.config import COMPRESSED_REFRESH, RAMULATOR2_HBM2, HBMConfig
    from hw.hbm.controller import PseudoChannelController
    from hw.ici import ICIChannel, ICIConfig
    from hw.pe import PE, PEConfig
    from sim.board import sim_config

    hbm_pc = HBMConfig(pseudo_channels=1, queue_depth=8, rows=64, columns=8, timing=RAMULATOR2_HBM2)
    hbm_axi = HBMConfig(
        pseudo_channels=2,
        bank_groups=2,
        banks_per_group=2,
        rows=32,
        columns=8,
        queue_depth=4,
        tag_bits=6,
        timing=COMPRESSED_REFRESH,
        max_refresh_postpone=2,
    )
    gemm = EngineConfig.from_options(rows=4, cols=4, pseudo_channels=1, queue_depth=8)
    engine = EngineConfig.from_options(rows=2, cols=2, fmt="int8")
    board = sim_config()
    ici = ICIConfig(beat_bytes=8, latency_cycles=3, packet_beats=6, rx_packets=3, replay_packets=4)
    return [
        ("mac_bf16_ieee", lambda: MAC(MACConfig("bf16", "ieee", 2)), "mac", ("lint", "mac", "bf16", "ieee")),
        ("mac_fp8", lambda: MAC(MACConfig("fp8_e4m3fn", "ftz", 3)), "mac", ("lint", "mac", "fp8")),
        ("mac_int8", lambda: MAC(MACConfig("int8", "ftz", 1)), "mac", ("lint", "mac", "int8")),
        ("pe_bf16", lambda: PE(PEConfig("bf16", "ftz", 2)), "pe", ("lint", "pe", "bf16")),
        ("pe_int8", lambda: PE(PEConfig("int8", "ftz", 2)), "pe", ("lint", "pe", "int8")),
        ("hbm_channel", lambda: PseudoChannelController(hbm_pc), "hbm_pc", hbm_pc),
        (
            "hbm_2pc_2ports",
            lambda: HBMController(hbm_axi, axi_ports=2, id_bits=4, rob_depth=16),
            "hbm_axi",
            (hbm_axi, 2, 4, 16),
        ),
        ("engine_int8", lambda: engine_verilog(engine, "engine"), "engine", ("lint", "engine", engine)),
        ("gemm_top", lambda: gemm_top_verilog(gemm, "gemm"), "gemm", ("gemm_top", gemm)),
        ("board_top", lambda: board_top_verilog(board, "board"), "board", ("board_top", board)),
        ("ici_channel", lambda: ICIChannel(ici), "ici", ("lint", "ici", ici)),
    ]


@pytest.mark.flow
@pytest.mark.parametrize("block", _blocks(), ids=lambda b: b[0])
def test_every_block_lints_clean_under_wall(block, tmp_path):
    _id, factory, top, key = block
    verilog = generate_verilog(factory, name=top, key=key)
    shutil.copy(verilog, tmp_path / f"{top}.v")
    r = lint_module([tmp_path / f"{top}.v"], top)
    assert r.ok, r.output[:3000]


def test_every_waiver_has_its_reason():
    """Each ``lint_off`` in the waiver file is preceded by a comment naming its rule and saying why."""
    text = WAIVER_FILE.read_text()
    rules = waived_rules()
    assert rules == ["WIDTHTRUNC", "WIDTHEXPAND", "PROCASSINIT", "CASEINCOMPLETE", "DECLFILENAME", "UNUSEDSIGNAL"]
    for rule in rules:
        reason = re.search(rf"^// {rule}: (.+?)\nlint_off -rule {rule}$", text, re.M | re.S)
        assert reason and len(reason.group(1)) > 80, rule
    assert all(
        line.startswith(("`verilator_config", "//", "lint_off -rule ")) or not line.strip()
        for line in text.splitlines()
    ), "only whole-rule waivers, each with a comment"


@pytest.mark.flow
@pytest.mark.parametrize(
    "cfg",
    [
        MXUConfig(8, 8, "bf16", "ftz", 2),
        MXUConfig(3, 5, "fp8_e5m2", "ieee", 4),
        MXUConfig(3, 5, "bf16", "ftz", 2),
        MXUConfig(2, 3, "int8", "ftz", 1),
    ],
    ids=str,
)
def test_mxu_lints_clean(cfg, tmp_path):
    verilog = generate_verilog(lambda: mxu_verilog(cfg, "mxu"), name="mxu", key=cfg)
    shutil.copy(verilog, tmp_path / "mxu.v")
    results = lint_mxu(tmp_path / "mxu.v")
    assert [r.top for r in results] == ["mxu_pe", "mxu_row", "mxu"]
    for r in results:
        assert r.ok, r.output


@pytest.mark.parametrize(
    "name,text,warning",
    [
        (
            "loop",
            "module bad(input a, output y);\n  wire x;\n  assign x = ~x & a;\n  assign y = x;\nendmodule\n",
            "UNOPTFLAT",
        ),
        ("latch", "module bad(input a, input b, output reg y);\n  always @* if (a) y = b;\nendmodule\n", "LATCH"),
        (
            "multi",
            "module bad(input a, input b, output y);\n  assign y = a;\n  assign y = b;\nendmodule\n",
            "MULTIDRIVEN",
        ),
        ("undeclared", "module bad(input a, output y);\n  assign y = a & nope;\nendmodule\n", "%Error"),
        ("undriven", "module bad(input a, output y, output z);\n  assign y = a;\nendmodule\n", "UNDRIVEN"),
        (
            "blocking_in_sequential",
            "module bad(input clk, input a, output reg y);\n  always @(posedge clk) y = a;\nendmodule\n",
            "BLKSEQ",
        ),
    ],
)
def test_lint_can_fail(tmp_path, name, text, warning):
    """Real defects are reported (the waivers do not hide them), so a clean result means something."""
    (tmp_path / "bad.v").write_text(text)
    r = lint_module([tmp_path / "bad.v"], "bad")
    assert not r.ok and warning in r.output
