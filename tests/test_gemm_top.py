"""The engine + HBM controller top in a simulator (cocotb, HBM device model with its fatal JEDEC
checker): padded row strides, a bad descriptor through the real register port, the clobber check.

The broad GEMM coverage (shapes, formats, specials, the default 8x8 engine on Verilator) is in
``tests/test_cli_matmul.py``; the fast engine tier in ``tests/test_engine.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from hw.engine import ENGINE_ID, PERF_COUNTERS, REG, REGISTERS, EngineConfig
from sim.gemm import GemmJob, run_gemms
from verif import checked
from verif.golden import matmul, to_format

SMALL = EngineConfig.from_options(rows=4, cols=4, pseudo_channels=1, queue_depth=8)


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["icarus"], indirect=True)
def test_padded_strides_and_no_stray_bytes(simulator, seed):
    """Rows 64 bytes longer than needed (FILL bytes in the padding): results exact, and no byte of
    D's region outside the result changes."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    jobs = []
    for m, k, n in ((5, 9, 7), (1, 17, 3), (9, 4, 12)):
        a = to_format(rng.standard_normal((m, k)).astype(np.float32), "bf16")
        b = to_format(rng.standard_normal((k, n)).astype(np.float32), "bf16")
        c = rng.standard_normal((m, n)).astype(np.float32) if m == 9 else None
        jobs.append(GemmJob(a, b, c, out="bf16" if n == 3 else "fp32"))
    results, info = run_gemms(jobs, SMALL, sim=simulator, progress=False, pad_bytes=64)
    from verif.golden import fp32_to_bf16_bits

    for job, r in zip(jobs, results):
        assert r.status == 0b10, hex(r.status)
        g = matmul(job.a, job.b, job.c)
        want = fp32_to_bf16_bits(g) if job.out == "bf16" else g.view(np.uint32)
        checked.count(want.size)
        assert np.array_equal(r.bits, want)
        assert r.clobbered_bytes == 0


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["icarus"], indirect=True)
def test_bad_descriptor_through_the_register_port(simulator):
    """A zero dimension and a range past the end of memory: DONE with the ERROR code, within a few
    cycles, and the engine takes the next descriptor."""
    base = {
        "M": 2,
        "K": 3,
        "N": 4,
        "FLAGS": 0,
        "A_BASE": 0x1000,
        "A_STRIDE": 32,
        "B_BASE": 0x2000,
        "B_STRIDE": 32,
        "D_BASE": 0x3000,
        "D_STRIDE": 32,
    }
    raw = [
        {"writes": [(REG[k].offset, v) for k, v in dict(base, N=0).items()]},
        {"writes": [(REG[k].offset, v) for k, v in dict(base, D_BASE=(1 << 28) - 32).items()]},
        # the good descriptor again, M written as 0x0502 and then its byte 1 alone (a one-byte
        # write strobe): M = 2; then every register read back; the AXI4-Lite channels paused
        {
            "writes": [(REG["D_BASE"].offset, 0x3000), (REG["M"].offset, 0x0502), (REG["M"].offset + 1, 0, 1)],
            "readback": True,
            "pause": True,
        },
    ]
    results, info = run_gemms([], SMALL, sim=simulator, progress=False, raw_jobs=raw)
    # the same jobs without the pauses: the same registers, read back in fewer bench cycles
    calm, calm_info = run_gemms(
        [], SMALL, sim=simulator, progress=False, raw_jobs=[*raw[:2], dict(raw[2], pause=False)]
    )
    assert [r.readback for r in calm] == [r.readback for r in results]
    assert calm_info["sim_cycles"] < info["sim_cycles"]
    assert [r.status for r in results] == [(1 << 4) | 0b10, (6 << 4) | 0b10, 0b10]
    assert all(r.cycles < 20 for r in results[:2])
    assert [r.readback for r in results[:2]] == [None, None]
    last = results[2]
    regs = dict(
        base,
        ID=ENGINE_ID,
        CONFIG=SMALL.config_word,
        CTRL=0b10,
        STATUS=0,
        C_BASE=0,
        C_STRIDE=0,
        CYCLES=last.cycles,
        MAX_K=SMALL.max_k,
        **{p: last.perf[p.lower()] for p in PERF_COUNTERS},
    )
    assert last.readback == (*(regs[r.name] for r in REGISTERS), 0)


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator"], indirect=True)
def test_trace_records_every_dram_command_and_feed(simulator, tmp_path, seed):
    """``run_gemms(trace=...)`` on the default 8x8 engine, 8x8x8 bf16: the trace holds exactly the
    DRAM traffic of the GEMM (8 A rows + 8 B rows = 16 RD bursts, 8 result rows = 8 WR bursts, one
    32 B burst each) and one array feed per PERF_FEED count (8 beats); the HDL memory system's trace
    (``memory="hdl"``) has the same commands and addresses at the same distances."""
    from hw.hbm.controller import ColCmd

    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    a = to_format(rng.standard_normal((8, 8)).astype(np.float32), "bf16")
    b = to_format(rng.standard_normal((8, 8)).astype(np.float32), "bf16")
    path = tmp_path / "trace.npz"
    results, _ = run_gemms([GemmJob(a, b)], EngineConfig(), sim=simulator, progress=False, trace=str(path))
    r = results[0]
    checked.count(r.bits.size)
    assert r.status == 0b10 and np.array_equal(r.bits, matmul(a, b).view(np.uint32))
    t = np.load(path)
    cmds, samples = t["cmds"], t["samples"]
    assert int((cmds[:, 3] == ColCmd.RD.value).sum()) == 16
    assert int((cmds[:, 3] == ColCmd.WR.value).sum()) == 8
    fed = (samples[:, 1] == 1) & (samples[:, 2] == 1)
    assert int(fed.sum()) == r.perf["perf_feed"] == 8
    assert samples.shape[1] == 13 and np.all(np.diff(samples[:, 0]) == 1)
    # the HDL memory system's trace (its bench samples the pins between controller and device models):
    # the same commands with the same addresses at the same distances, and no samples
    hdl_path = tmp_path / "trace_hdl.npz"
    run_gemms([GemmJob(a, b)], EngineConfig(), sim=simulator, progress=False, trace=str(hdl_path), memory="hdl")
    h = np.load(hdl_path)
    assert h["samples"].shape == (0, 13)
    assert np.array_equal(h["cmds"][:, 1:], cmds[:, 1:]) and np.array_equal(h["addrs"], t["addrs"])
    assert np.array_equal(np.diff(h["cmds"][:, 0]), np.diff(cmds[:, 0]))


def test_controller_is_one_module_in_the_gemm_top():
    """The GEMM top's Verilog holds the HBM controller as module ``gemm_hbm`` and its pseudo-channel
    controller once, as module ``gemm_hbm_pc``, with one instance per pseudo-channel; only the top
    keeps ``(* top = 1 *)`` (Yosys's ``hierarchy`` picks its top by it)."""
    import os
    import re

    from hw.generate import gemm_top_verilog

    os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
    text = gemm_top_verilog(EngineConfig.from_options(rows=2, cols=2, fmt="int8"), "gemm")
    assert re.findall(r"^module (gemm_hbm(?:_pc)?)\(", text, re.M) == ["gemm_hbm_pc", "gemm_hbm"]
    assert re.findall(r"^  gemm_hbm_pc (\w+) \($", text, re.M) == ["pc0_ctrl", "pc1_ctrl"]
    assert re.findall(r"^  gemm_hbm (\w+) \($", text, re.M) == ["hbm"]
    assert text.count("top =  1") == 1 and text.index("top =  1") > text.index("module gemm_hbm(")


@pytest.mark.parametrize("pseudo_channels", [1, 4])
def test_controller_instances_follow_the_pseudo_channels(pseudo_channels):
    """``HBMController(ctrl_name=...)``: one instance of the named module per pseudo-channel, each
    connecting exactly the ports that the pseudo-channel controller's own Verilog module declares."""
    import re

    from amaranth.back import verilog

    from hw.generate import submodule_verilog
    from hw.hbm import HBMConfig
    from hw.hbm.axi import HBMController
    from hw.hbm.controller import PseudoChannelController

    cfg = HBMConfig(pseudo_channels=pseudo_channels)
    text = verilog.convert(HBMController(cfg, ctrl_name="the_pc"), name="hbm", emit_src=False)
    assert re.findall(r"^  the_pc (\w+) \($", text, re.M) == [f"pc{k}_ctrl" for k in range(pseudo_channels)]
    module = submodule_verilog(PseudoChannelController(cfg), "the_pc")
    header = re.search(r"^module the_pc\(([^)]*)\);", module, re.M).group(1)
    declared = sorted(p.strip() for p in header.split(","))
    for k in range(pseudo_channels):
        body = text[text.index(f"the_pc pc{k}_ctrl (") :]
        body = body[: body.index(");")]
        assert sorted(re.findall(r"^    \.(\w+)\(", body, re.M)) == declared, f"pc{k}_ctrl"
    assert {"clk", "rst", "req__valid", "dram__row_cmd"} <= set(declared)


def test_hbm_verilog_names_the_pseudo_channel_module_itself():
    from hw.generate import hbm_verilog
    from hw.top import GEMMTop

    with pytest.raises(ValueError, match=r"^controller.ctrl_name must be None .* got 'x'$"):
        hbm_verilog(GEMMTop.hbm_controller(EngineConfig(), ctrl_name="x"), "gemm_hbm")


def test_module_instance_rejects_a_plain_elaboratable():
    from hw.instance import ModuleInstance

    with pytest.raises(TypeError, match=r"^component must be a wiring.Component; got <object object"):
        ModuleInstance(object(), "x")
