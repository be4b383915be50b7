"""cocotb testbench of the AXI4 HBM controller top (:class:`hw.hbm.axi.HBMController`).

Configuration: :class:`verif.tb.base.HbmAxiTbConfig` (``HBM_AXI_TB_CONFIG``): the shared region
at address 0 is small by default (4096 bytes), so that reads often cover bytes written before; with
the default address mapping it still spans both pseudo-channels, every bank and two rows per bank.

The device model (every pseudo-channel, fatal JEDEC checker) sits on the ``pc*`` ports
(:class:`verif.tb.base.DramAdapter`). One
cocotbext-axi ``AxiMaster`` per port; each runs ``workers`` concurrent workers. Memory is split into
256-byte blocks owned round-robin by the workers (overlapping rows and banks, interleaved
ownership); a worker writes only its own blocks (aligned INCR bursts, the last beat often partial so
WSTRB matters) and reads anywhere (1..16 beats across owners). Bytes the reader owns must equal its
shadow exactly; other bytes must hold a value their owner wrote there (or the initial 0).

A protocol monitor on every port checks at each clock edge: every AW is answered by exactly one B
with its ID, every AR by ARLEN + 1 R beats in order per ID ending in RLAST, and no R or B beat
arrives that was not asked for; at the end nothing is outstanding.
"""

from __future__ import annotations

import logging
import random
from collections import defaultdict, deque

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge, Timer
from cocotbext.axi import AxiBurstType, AxiBus, AxiMaster, AxiResp

from verif import checked
from verif.hbm_device import HBMDevice
from verif.tb.base import DramAdapter, HbmAxiTbConfig, start_clock


class Bench:
    def __init__(self, dut):
        self.dut = dut
        self.cfg = HbmAxiTbConfig.from_env()
        self.config = self.cfg.config
        self.ports = self.cfg.axi_ports
        self.dram = DramAdapter(dut, self.config, HBMDevice(self.config), all_pins=True)
        self.device = self.dram.device
        self.errors: list[str] = []

    @property
    def cycle(self) -> int:
        return self.dram.cycle

    @property
    def stop(self) -> bool:
        return self.dram.stop

    @stop.setter
    def stop(self, value: bool) -> None:
        self.dram.stop = value

    async def start(self):
        dut = self.dut
        await start_clock(dut)
        dut.rst.value = 1
        self.dram.reset_inputs()
        self.masters = [AxiMaster(AxiBus.from_prefix(dut, f"axi{p}_"), dut.clk, dut.rst) for p in range(self.ports)]
        for m in self.masters:  # one line per burst is too much for long runs
            for log in (m.write_if.log, m.read_if.log):
                log.setLevel(logging.WARNING)
        await FallingEdge(dut.clk)
        await FallingEdge(dut.clk)
        dut.rst.value = 0
        cocotb.start_soon(self.dram.run())
        for p in range(self.ports):
            cocotb.start_soon(self._monitor(p))

    async def _monitor(self, p):
        dut = self.dut
        s = lambda n: getattr(dut, f"axi{p}__{n}")  # noqa: E731
        aw_ids: dict[int, deque] = defaultdict(deque)
        ar: dict[int, deque] = defaultdict(deque)  # id -> remaining beats of each AR
        self.outstanding = getattr(self, "outstanding", {})
        counts = {"aw": 0, "b": 0, "ar": 0, "r": 0}
        self.outstanding[p] = (aw_ids, ar, counts)
        while not self.stop:
            await RisingEdge(dut.clk)
            if int(s("awvalid").value) and int(s("awready").value):
                aw_ids[int(s("awid").value)].append(self.cycle)
                counts["aw"] += 1
            if int(s("bvalid").value) and int(s("bready").value):
                bid = int(s("bid").value)
                if not aw_ids[bid]:
                    self.errors.append(f"port {p} cycle {self.cycle}: B with ID {bid} without an open AW")
                else:
                    aw_ids[bid].popleft()
                counts["b"] += 1
            if int(s("arvalid").value) and int(s("arready").value):
                ar[int(s("arid").value)].append(int(s("arlen").value) + 1)
                counts["ar"] += 1
            if int(s("rvalid").value) and int(s("rready").value):
                rid, last = int(s("rid").value), int(s("rlast").value)
                counts["r"] += 1
                if not ar[rid]:
                    self.errors.append(f"port {p} cycle {self.cycle}: R beat with ID {rid} without an open AR")
                else:
                    ar[rid][0] -= 1
                    if bool(last) != (ar[rid][0] == 0):
                        self.errors.append(f"port {p} cycle {self.cycle}: RLAST={last} with {ar[rid][0]} beats "
                                           f"left in the burst of ID {rid}")
                    if ar[rid][0] == 0:
                        ar[rid].popleft()

    def check_idle(self):
        assert not self.errors, "\n".join(self.errors[:10])
        for p, (aw_ids, ar, counts) in self.outstanding.items():
            assert not any(aw_ids.values()), f"port {p}: AW without B: {dict(aw_ids)}"
            assert not any(ar.values()), f"port {p}: AR without all R beats: {dict(ar)}"
            assert counts["aw"] == counts["b"], counts


def _pauses(rng: random.Random, p: float):
    while True:
        yield rng.random() < p


# A hang (a master waiting for a response that never comes) fails the test instead of blocking the
# regression: the runs take 20-90 us of simulated time (40 operations per worker; 200 under --soak,
# about 5x), so 5 ms is far above any healthy run.
@cocotb.test(timeout_time=5, timeout_unit="ms")
async def two_masters_shared_memory(dut):
    """Random traffic from every port's workers, pauses on every channel, checked byte by byte."""
    b = Bench(dut)
    await b.start()
    cfg = b.config
    seed = b.cfg.seed
    rng = random.Random(seed)
    pause = b.cfg.pause_p
    for m in b.masters:
        for ch in (m.write_if.aw_channel, m.write_if.w_channel, m.write_if.b_channel,
                   m.read_if.ar_channel, m.read_if.r_channel):
            ch.set_pause_generator(_pauses(random.Random(rng.random()), pause))
    workers = b.cfg.workers
    n_owners = b.ports * workers
    block = 256
    region = min(cfg.capacity_bytes, b.cfg.region_bytes)
    n_blocks = region // block
    bb = cfg.burst_bytes
    mem_history: dict[int, set] = defaultdict(lambda: {0})
    counts = {"writes": 0, "reads": 0, "bytes_checked": 0, "write_bursts": 0}
    final: dict[int, int] = {}  # every written byte -> its owner's last value

    async def worker(port: int, owner: int, wrng: random.Random):
        shadow = final  # owners write disjoint bytes, so one map holds every owner's shadow
        own = [k for k in range(n_blocks) if k % n_owners == owner]
        master = b.masters[port]
        for _ in range(b.cfg.ops):
            if wrng.random() < 0.5:
                blk = wrng.choice(own)
                start = blk * block + wrng.randrange(block // bb) * bb
                length = wrng.randint(1, blk * block + block - start)
                data = bytes(wrng.randrange(256) for _ in range(length))
                for i, v in enumerate(data):  # before the write: other readers may see it before B
                    mem_history[start + i].add(v)
                resp = await master.write(start, data)
                assert resp.resp == AxiResp.OKAY, f"write {start:#x}+{length}: {resp.resp}"
                for i, v in enumerate(data):
                    shadow[start + i] = v
                counts["writes"] += 1
                counts["write_bursts"] += -(-length // bb)
            else:
                beats = wrng.randint(1, 16)
                start = wrng.randrange(region // bb - beats + 1) * bb
                resp = await master.read(start, beats * bb)
                assert resp.resp == AxiResp.OKAY, f"read {start:#x}+{beats * bb}: {resp.resp}"
                for i, v in enumerate(resp.data):
                    a = start + i
                    if (a // block) % n_owners == owner:
                        assert v == shadow.get(a, 0), (f"port {port} owner {owner}: byte {a:#x} = {v:#04x}, "
                                                       f"own shadow {shadow.get(a, 0):#04x}")
                    else:
                        assert v in mem_history[a], f"byte {a:#x} = {v:#04x}, never written there"
                counts["reads"] += 1
                counts["bytes_checked"] += len(resp.data)

    tasks = []
    for port in range(b.ports):
        for wk in range(workers):
            tasks.append(cocotb.start_soon(worker(port, port * workers + wk, random.Random(rng.random()))))
    for t in tasks:
        await t
    # Writes are posted: B comes back when a burst is queued, so the last WRs (and their data at
    # WR + CWL) may still be ahead, behind a refresh for example. Wait until the device has
    # received every write burst before the end-of-run checks.
    waited = 0
    while b.device.writes < counts["write_bursts"] or not b.device.idle:
        assert waited < 20_000, (f"{b.device.writes} of {counts['write_bursts']} write bursts reached the "
                                 f"device {waited} cycles after the last B")
        await RisingEdge(dut.clk)
        waited += 1
    for _ in range(4):
        await RisingEdge(dut.clk)
    b.stop = True
    await Timer(1, unit="ns")
    b.check_idle()
    summary = b.device.finish(b.cycle)
    dut._log.info("cycles %d, %s, device reads %d writes %d, refreshes %s", b.cycle, counts,
                  b.device.reads, b.device.writes, summary["refreshes"])
    # backdoor: the device store holds exactly every owner's last write, byte for byte
    bad = [a for a, v in final.items() if b.device.read_address(a - a % bb)[a % bb] != v]
    checked.count(counts["bytes_checked"] + len(final), "bytes")
    assert not bad, f"{len(bad)} bytes differ from the owners' shadows, first at {bad[0]:#x}"
    assert counts["writes"] > 0 and counts["reads"] > 0 and len(final) > 0


@cocotb.test(timeout_time=1, timeout_unit="ms")   # about 1 us when healthy
async def slverr_cases(dut):
    """FIXED and WRAP bursts, narrow beats and unaligned starts get SLVERR, write nothing, and return
    ARLEN + 1 beats of zeros; normal traffic works afterwards. (A burst past the end of memory is
    also rejected by the RTL, but a legal master cannot issue one: the capacity is a power of two,
    so such a burst would wrap the address space, and cocotbext-axi refuses it.)"""
    b = Bench(dut)
    await b.start()
    m = b.masters[0]
    good = bytes(range(64))
    assert (await m.write(0x100, good)).resp == AxiResp.OKAY
    cases = [
        ("fixed", dict(burst=AxiBurstType.FIXED)),
        ("wrap", dict(burst=AxiBurstType.WRAP)),
        ("narrow", dict(size=2)),
    ]
    for name, kw in cases:
        w = await m.write(0x100, bytes([0xEE]) * 64, **kw)
        assert w.resp == AxiResp.SLVERR, f"{name} write: {w.resp}"
        r = await m.read(0x100, 64, **kw)
        assert r.resp == AxiResp.SLVERR and r.data == bytes(64), f"{name} read: {r.resp} {r.data.hex()}"
    w = await m.write(0x104, bytes([0xEE]) * 60)  # unaligned start address
    assert w.resp == AxiResp.SLVERR, f"unaligned write: {w.resp}"
    r = await m.read(0x104, 28)
    assert r.resp == AxiResp.SLVERR and r.data == bytes(28), f"unaligned read: {r.resp} {r.data.hex()}"
    r = await m.read(0x100, 64)
    assert r.resp == AxiResp.OKAY and r.data == good, f"memory changed by a rejected burst: {r.data.hex()}"
    b.stop = True
    await Timer(1, unit="ns")
    b.check_idle()
