"""A run's steps as the scheduler records them, and the closed form of a stretch of decode-only
steps (scheduler.simulate): between arrivals, finishes and the cache running out the batch does not
change, so its steps' seconds, ends and cache are computed at once.
"""

from __future__ import annotations

import math

import numpy as np

from roofline.plan.step import StepCost
from roofline.serving.cache import cache_growth


class StepRecords:
    """Every step's seconds, decodes, prompt tokens, their mean prefix and chunks: a single step kept
    as a tuple, a stretch of decode-only steps as its seconds and its decodes, until the end, so that
    a step or a stretch costs no array of its own."""

    def __init__(self):
        self.singles: list[tuple] = []  # each single step's (seconds, decodes, prompt tokens, mean prefix, chunks)
        self.runs: list[tuple] = []  # each stretch's (single steps before it, seconds, decodes)

    def one(self, dt, nd, fed, prefix, chunks):
        self.singles.append((dt, nd, fed, prefix, chunks))

    def stretch(self, dts: np.ndarray, nd: int):
        """K decode-only steps of ``nd`` decodes each, their seconds ``dts``."""
        self.runs.append((len(self.singles), dts, nd))

    def arrays(self) -> list[np.ndarray]:
        """The five columns in step order: segments (a single step, or a stretch) placed in order,
        repeated by their lengths; a stretch's seconds put in between the single steps'."""
        one = np.array(self.singles, dtype=float).reshape(-1, 5)
        if not self.runs:
            return [column.copy() for column in one.T]
        at = np.array([k for k, _, _ in self.runs], dtype=np.int64)
        n1, R = len(one), len(at)
        segments = np.zeros((5, n1 + R))
        seg_len = np.ones(n1 + R, dtype=np.int64)
        singles_at = np.arange(n1) + np.searchsorted(at, np.arange(n1), side="right")  # runs placed before each
        runs_at = at + np.arange(R)
        segments[:, singles_at] = one.T
        segments[1, runs_at] = [nd for _, _, nd in self.runs]
        seg_len[runs_at] = [len(dts) for _, dts, _ in self.runs]
        pieces, prev = [], 0
        for k, dts, _ in self.runs:
            if k > prev:
                pieces.append(one[prev:k, 0])
                prev = k
            pieces.append(dts)
        pieces.append(one[prev:, 0])
        return [np.concatenate(pieces), *np.repeat(segments[1:], seg_len, axis=1)]


def decode_stretch(step: StepCost, overhead_s: float, K: int, now: float, arrives: float, totals, ctx0, cache,
                    res: list, tick: int, bs: int):
    """The decode-only steps to run at once from ``now``: at most K (up to the next finish), to the
    one during which the next request ``arrives``, and before the cache runs out (``cache``: bytes
    used, the capacity, the bytes by blocks held, whether those are linear). ``totals`` (sequences,
    their contexts' sum) and ``ctx0`` (the contexts, or None where the sum will do) as
    StepCost.decode_steps_seconds takes them; with a linear table the blocks come from ``res``, the
    decoding slots counted by context - tick mod bs (a block each for those at a multiple of bs
    before step 2 .. K). Returns (the steps, their seconds, the last one's end, the cache held during
    each)."""
    used, cap, table, linear = cache
    if linear and table[1] > 0:  # past the cache's end at most: n blocks taken every bs steps
        K = min(K, bs * -(-(int((cap - used) // table[1]) + 2) // totals[0]) + 1)
    times = step.decode_steps_seconds(ctx0, K, totals)
    if overhead_s:
        times += overhead_s
    ends = np.cumsum(np.concatenate(([now], times)))[1:]  # each step's end, summed as step by step
    if arrives < math.inf:  # stop at the step during which one arrives
        K = min(K, int(np.searchsorted(ends, arrives, side="left")) + 1)
    if linear:
        inc = np.asarray(res)[(-1 - tick - np.arange(K - 1)) % bs]
        used_k = used + table[1] * np.concatenate(([0], np.cumsum(inc)))
    else:
        used_k = used + cache_growth(table, ctx0, -(-(ctx0 + 1) // bs), K, bs)
    if used_k[K - 1] > cap:  # the steps before the cache runs out (at least the first: it fit)
        K = int(np.flatnonzero(used_k > cap)[0])
    return K, times[:K], float(ends[K - 1]), used_k[:K]
