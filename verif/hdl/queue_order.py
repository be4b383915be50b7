"""Formal harness: the HBM request queue loses nothing, keeps same-address order, bounds passing over.

Three properties of :class:`hw.hbm.request_queue.RequestQueue`, checked on the queue alone with a free
environment (every input, reset included, takes any value in any cycle) that keeps two rules of the
controller around it:

* the command choice retires at most one slot per cycle, and only a slot that is occupied, allowed
  and column-ready (``CommandScheduler``'s ``col_cand``: ``valid & allow & col_ready & ...``);
* a tag names one request at a time: no request enters with the tag of one still queued (the AXI
  ports and the engine hand out tags that way; the properties follow requests by tag).

Two requests are followed, with tags ``T1`` and ``T2`` that the solver picks (``AnyConst``: the
proof holds for every pair of tags, so for every pair of requests):

1. **Nothing lost or duplicated.** While a followed request is in the queue, exactly one occupied
   slot holds its tag, with the address and direction it entered with; before it enters and after
   its column command, none. And the number of occupied slots is always the number of requests
   accepted less the number retired.
2. **Same-address order.** When the two are to the same address (bank, row, column) and one is a
   write, the one that entered second never has its column command first. Two reads to the same
   address may pass each other: their responses carry their tags and the same data.
3. **The age cap bounds passing over.** Once ``T1`` has waited ``age_cap_cycles + 1`` cycles, only
   requests that entered before it may have their column command before it; there are fewer than
   ``queue_depth`` of those, so it is passed over a bounded number of times. (The queue's age reaches
   the cap ``age_cap_cycles`` cycles after the request enters, and the strict order is a register:
   one cycle more.)
"""

from __future__ import annotations

from amaranth.asserts import AnyConst  # Amaranth 0.5 keeps it here, not in amaranth.hdl
from amaranth.hdl import Assert, Assume, Cat, Cover, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In

from hw.hbm.interface import bank_status_signature, issue_layout, request_layout

__all__ = ["PROPERTIES", "QueueOrder"]

#: the properties by name, in the order of the module docstring
PROPERTIES = ("kept", "order", "age")


class QueueOrder(wiring.Component):
    """The request-queue harness (see the module docstring) around ``queue``, a
    :class:`~hw.hbm.request_queue.RequestQueue` (or a deliberately broken subclass in the tests).

    Ports: ``req`` (the request stream into the queue, free), ``issue``, ``retire``, ``banks``,
    ``banks_next`` (free, ``retire`` under the command choice's contract above).

    Raises:
        ValueError: the queue's ``tag_bits`` is 1 (two followed requests need two tags).
    """

    def __init__(self, queue, properties=PROPERTIES):
        if not properties or set(properties) - set(PROPERTIES):
            raise ValueError(f"properties must be a non-empty subset of {PROPERTIES}; got {properties!r}")
        self._props = tuple(properties)
        cfg = queue.config
        if cfg.tag_bits < 2:
            raise ValueError(f"the queue harness needs tag_bits >= 2; got {cfg.tag_bits}")
        self._queue = queue
        super().__init__({
            "req": In(stream.Signature(request_layout(cfg))),
            "issue": In(issue_layout(cfg)),
            "retire": In(cfg.queue_depth),
            "banks": In(bank_status_signature(cfg)),
            "banks_next": In(bank_status_signature(cfg)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.queue = qu = self._queue
        cfg, n = qu.config, qu.config.queue_depth
        q = qu.view
        wiring.connect(m, wiring.flipped(self.req), qu.req)
        wiring.connect(m, wiring.flipped(self.banks), qu.banks)
        wiring.connect(m, wiring.flipped(self.banks_next), qu.banks_next)
        m.d.comb += [qu.issue.eq(self.issue), qu.retire.eq(self.retire)]
        # the command choice: at most one slot, occupied, allowed and column-ready
        m.d.comb += Assume((self.retire & (self.retire - 1)) == 0)
        m.d.comb += Assume((self.retire & ~(q.valid & q.allow & q.col_ready)) == 0)

        accept = Signal(name="accept")
        m.d.comb += accept.eq(self.req.valid & qu.req.ready)
        bits, shifts = cfg.field_bits, cfg.field_shifts

        def fields(addr):  # the address fields the queue keeps: bank (flat), row, column
            def f(name):
                return addr[shifts[name]:shifts[name] + bits[name]]
            return Cat(f("bank"), f("bank_group")), f("row"), f("column")

        # ---------------------------------------------------------------- occupancy
        count = Signal(range(n + 1), name="ghost_count")
        m.d.sync += count.eq(count + accept - self.retire.any())
        popcount = sum(q.valid[i] for i in range(n))
        kept, order, age = (p in self._props for p in PROPERTIES)
        if kept:
            m.d.comb += Assert(popcount == count, "occupied slots differ from requests accepted less retired")

        # ---------------------------------------------------------------- two followed requests
        tags = [Signal(cfg.tag_bits, name=f"T{k + 1}") for k in range(2)]
        m.d.comb += [t.eq(AnyConst(cfg.tag_bits)) for t in tags]
        m.d.comb += Assume(tags[0] != tags[1])
        inside = [Signal(name=f"T{k + 1}_inside") for k in range(2)]
        write = [Signal(name=f"T{k + 1}_write") for k in range(2)]
        addr = [Signal(len(self.req.payload.addr), name=f"T{k + 1}_addr") for k in range(2)]
        entering = [Signal(name=f"T{k + 1}_entering") for k in range(2)]
        leaving = [Signal(name=f"T{k + 1}_leaving") for k in range(2)]
        holds = [Signal(n, name=f"T{k + 1}_slots") for k in range(2)]  # occupied slots with the tag
        for k in range(2):
            m.d.comb += [
                holds[k].eq(Cat(q.valid[i] & (q.tag[i] == tags[k]) for i in range(n))),
                entering[k].eq(accept & (self.req.payload.tag == tags[k])),
                leaving[k].eq((self.retire & holds[k]).any()),
            ]
            m.d.comb += Assume(~(inside[k] & self.req.valid & (self.req.payload.tag == tags[k])))
            with m.If(entering[k]):
                m.d.sync += [inside[k].eq(1), write[k].eq(self.req.payload.write), addr[k].eq(self.req.payload.addr)]
            with m.Elif(leaving[k]):
                m.d.sync += inside[k].eq(0)
            one = (holds[k] & (holds[k] - 1)) == 0
            if not kept:
                continue
            m.d.comb += Assert(Cat(holds[k].any() == inside[k], one).all(),
                               f"T{k + 1}: not in exactly one slot while queued, or in a slot after it left")
            bank, row, col = fields(addr[k])
            for i in range(n):
                with m.If(holds[k][i]):
                    m.d.comb += Assert(Cat(q.bank[i] == bank, q.row[i] == row, q.col[i] == col,
                                           q.write[i] == write[k]).all(), f"T{k + 1}: its slot changed")

        # ---------------------------------------------------------------- same-address order
        first = [Signal(name="T1_before_T2"), Signal(name="T2_before_T1")]
        for k in range(2):
            other = 1 - k
            with m.If(entering[other] & inside[k] & ~leaving[k]):
                m.d.sync += first[k].eq(1)
            with m.Elif(leaving[k] | leaving[other]):
                m.d.sync += first[k].eq(0)
        hazard = Signal(name="T1_T2_hazard")
        m.d.comb += hazard.eq((Cat(*fields(addr[0])) == Cat(*fields(addr[1]))) & (write[0] | write[1]))
        for k in range(2 if order else 0):
            m.d.comb += Assert(~(first[k] & hazard & leaving[1 - k]),
                               f"T{2 - k} overtook T{k + 1} to the same address")

        # ---------------------------------------------------------------- the age cap
        cap = cfg.age_cap_cycles
        waited = Signal(range(cap + 2), name="T1_waited")  # cycles T1 has been queued, to cap + 1
        before = Signal(n, name="before_T1")  # slots holding a request that entered before T1
        with m.If(entering[0]):
            m.d.sync += [waited.eq(0), before.eq(q.valid & ~self.retire)]
        with m.Else():
            with m.If(inside[0] & (waited != cap + 1)):
                m.d.sync += waited.eq(waited + 1)
            m.d.sync += before.eq(before & ~self.retire)
        aged = inside[0] & (waited == cap + 1)
        if age:
            m.d.comb += Assert(~(aged & (self.retire & ~holds[0] & ~before).any()),
                               "a request younger than T1 went first after T1 reached the age cap")

        # not vacuous: a hazard pair leaves in order, and an aged T1 leaves
        m.d.comb += Cover(first[0] & hazard & leaving[0] & write[0])
        m.d.comb += Cover(aged & leaving[0] & (count == n))
        return m
