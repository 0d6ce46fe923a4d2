"""The KV cache of a running replica as the scheduler holds it (docs/serving.md): its sequence
slots, the cache blocks each holds and the bytes they use against the capacity; a slot admitted,
grown, set decoding, released, or preempted when the cache runs out.

With one token per step (``lazy``) every decoding slot advances each decode step, so its state is
kept relative to ``tick`` (the decode steps run): ``ctx`` = context - tick, the request's generated
count - tick, ``fin`` the tick it finishes at (``fins`` a heap of (tick, slot), stale ones skipped),
its blocks ceil(context / bs) (written to ``blocks`` when it stops); ``res`` counts the decoding
slots by ctx mod bs (those at a multiple of bs take a block next step), ``sum_base`` sums their ctx.

Admission (Engine.admission): on demand, a request is admitted while its prompt's blocks are free and
the newest sequence is preempted when a decode lacks a block (vLLM V1); reserving in full
(``reserve``: each request's cache bytes at its last token), while the cache bytes ``committed`` to
the admitted requests' last tokens leave room for its own, so that no decode ever lacks a block and
none is preempted (TensorRT-LLM's GUARANTEED_NO_EVICT).
"""

from __future__ import annotations

import heapq
import math

import numpy as np


class KVPool:
    """Sequence slots and their cache blocks: per slot its request (-1: free), the tokens whose KV is
    cached (``ctx``), the blocks held, whether it decodes, its admission order and (speculation) the
    verify steps it has run since it started decoding (``verified``: its tokens are
    stretch.accepted_tokens of them). ``table`` the cache bytes of one
    sequence by blocks held (``linear``: a block's bytes times the blocks); ``gen`` and ``out`` the
    requests' generated and wanted tokens; ``requeue(r)`` is called for each preempted request;
    ``reserve`` each request's cache bytes at its last token, reserved at admission (None: admitted
    on demand)."""

    def __init__(self, slots: int, cap: float, table: np.ndarray, linear: bool, bs: int, T: int, lazy: bool,
                 gen: np.ndarray, out: np.ndarray, requeue, reserve: list | None = None):
        self.cap, self.table, self.tab, self.linear, self.bs, self.T, self.lazy = (
            cap, table, table.tolist(), linear, bs, T, lazy)
        self.gen, self.out, self.requeue = gen, out, requeue
        self.req = np.full(slots, -1, dtype=np.int64)
        self.ctx = np.zeros(slots, dtype=np.int64)
        self.blocks = np.zeros(slots, dtype=np.int64)
        self.dec = np.zeros(slots, dtype=bool)
        self.order = np.zeros(slots, dtype=np.int64)
        self.verified = np.zeros(slots, dtype=np.int64)
        self.free = list(range(slots - 1, -1, -1))
        self.prefilling: list[int] = []  # slots, in admission order
        self.used = 0.0  # cache bytes held
        self.reserve = reserve
        self.committed = 0.0  # reserving in full: the admitted requests' cache bytes at their last tokens
        self.committed_peak = 0.0  # ... the most it reached
        self.reserved = [0.0] * slots  # ... each slot's
        self.admitted = 0
        self.tick = self.sum_base = 0
        self.res = [0] * bs
        self.fin = [math.inf] * slots
        self.fins: list[tuple[int, int]] = []
        self.running = np.zeros(0, dtype=np.int64)  # lazy: the decoding slots (dec.nonzero()) ...
        self.running_stale = False  # ... to be recomputed

    def admit(self, r: int, start: int, blocks: int) -> int:
        """Request ``r`` given a slot, ``start`` tokens cached and ``blocks`` blocks (the caller
        checked they fit): the slot, now prefilling."""
        slot = self.free.pop()
        self.req[slot], self.ctx[slot], self.blocks[slot], self.dec[slot] = r, start, blocks, False
        self.order[slot] = self.admitted
        self.admitted += 1
        self.used += self.tab[blocks]
        if self.reserve is not None:
            self.reserved[slot] = self.reserve[r]
            self.committed += self.reserve[r]
            self.committed_peak = max(self.committed_peak, self.committed)
        self.prefilling.append(slot)
        return slot

    def fits(self, r: int, blocks: int) -> bool:
        """Whether request ``r`` can be admitted holding ``blocks`` blocks: on demand, while those are
        free; reserving in full, while its cache at its last token is, beside the admitted ones'."""
        if self.reserve is None:
            return self.used + self.tab[blocks] <= self.cap
        return self.committed + self.reserve[r] <= self.cap

    def start_decoding(self, slot: int, r: int):
        self.dec[slot] = True
        self.verified[slot] = 0
        self.running_stale = True
        if self.lazy:
            tick = self.tick
            base = int(self.ctx[slot]) - tick
            self.ctx[slot] = base
            self.gen[r] -= tick
            self.fin[slot] = int(self.out[r] - self.gen[r])
            heapq.heappush(self.fins, (self.fin[slot], slot))
            self.res[base % self.bs] += 1
            self.sum_base += base

    def stop_decoding(self, slot: int):
        self.running_stale = True
        if self.lazy:
            tick = self.tick
            base = int(self.ctx[slot])
            self.res[base % self.bs] -= 1
            self.sum_base -= base
            self.ctx[slot] = base + tick
            self.gen[self.req[slot]] += tick
            self.blocks[slot] = -(-(base + tick) // self.bs)
            self.fin[slot] = math.inf

    def release(self, slot: int):
        """The slot freed and its cache given back."""
        if self.dec[slot]:
            self.stop_decoding(slot)
        self.used -= self.tab[self.blocks[slot]]
        self.committed -= self.reserved[slot]
        self.reserved[slot] = 0.0
        self.req[slot] = -1
        self.dec[slot] = False
        self.blocks[slot] = 0
        self.ctx[slot] = 0
        self.free.append(slot)

    def preempt_newest(self):
        """The most recently admitted sequence preempted: its cache freed, its request handed to
        ``requeue`` (to wait again at the head of the queue and recompute)."""
        active = np.flatnonzero(self.req >= 0)
        victim = int(active[np.argmax(self.order[active])])
        r = int(self.req[victim])
        if victim in self.prefilling:
            self.prefilling.remove(victim)
        self.release(victim)
        self.requeue(r)

    def grow_decodes(self) -> np.ndarray:
        """The decoding slots, their blocks for the T tokens the step writes taken; the newest
        sequences preempted while those do not fit."""
        dec = np.flatnonzero(self.dec)
        table = self.table
        while len(dec):
            grow_to = -(-(self.ctx[dec] + self.T) // self.bs)
            extra = float((table[grow_to] - table[self.blocks[dec]]).sum())
            if self.used + extra <= self.cap:
                self.blocks[dec] = grow_to
                self.used += extra
                break
            self.preempt_newest()
            dec = np.flatnonzero(self.dec)
        return dec

    def decoding(self) -> np.ndarray:
        """grow_decodes(); with one token per step (lazy) from the kept counts: in O(1) while no
        decoding slot needs a block or the cache holds those that do (a linear table: a block each)."""
        if not self.lazy:
            return self.grow_decodes()
        res, tick, bs = self.res, self.tick, self.bs
        while True:
            if self.running_stale:
                self.running = self.dec.nonzero()[0]
                self.running_stale = False
            crossing = res[-tick % bs]
            if not crossing:
                return self.running
            if self.linear:
                extra = self.tab[1] * crossing
            else:
                ctx = self.ctx[self.running] + tick
                extra = float((self.table[-(-(ctx + 1) // bs)] - self.table[-(-ctx // bs)]).sum())
            if self.used + extra <= self.cap:
                self.used += extra
                return self.running
            self.preempt_newest()

    def due(self) -> list[tuple[int, int]]:
        """Lazy: the (request, slot) of the decoding slots whose last token this tick gave, in the
        order they finish, taken off the heap."""
        fins, fin, tick, out = self.fins, self.fin, self.tick, []
        while fins and fins[0][0] <= tick:
            f, slot = heapq.heappop(fins)
            if fin[slot] == f:
                fin[slot] = math.inf  # once: a stale entry of the same tick for this slot is skipped
                out.append((int(self.req[slot]), slot))
        return out

    def next_finish(self) -> float:
        """Lazy: the tick at which the next decoding slot finishes."""
        fins = self.fins
        while fins and self.fin[fins[0][1]] != fins[0][0]:
            heapq.heappop(fins)
        return fins[0][0] if fins else math.inf
