"""A run's steps as the scheduler records them, and the closed form of a stretch of decode-only
steps (scheduler.simulate): between arrivals, finishes and the cache running out the batch does not
change, so its steps' seconds, ends and cache are computed at once; speculating, each step's tokens
per sequence from the expected tokens per verify step (accepted_tokens), in closed form too.
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
        self.late: list[tuple] = []  # (step, gaps): deliveries whose gap outlasts their step's seconds (waited)

    def one(self, dt, nd, fed, prefix, chunks):
        self.singles.append((dt, nd, fed, prefix, chunks))

    def stretch(self, dts: np.ndarray, nd: int):
        """K decode-only steps of ``nd`` decodes each, their seconds ``dts``."""
        self.runs.append((len(self.singles), dts, nd))

    def waited(self, at: int, gaps_s: np.ndarray):
        """Decodes of step ``at`` (its index in the run) whose gap since their sequence's last token
        is ``gaps_s``, longer than the step: they sat through steps of prompts alone before it; at
        -1, tokens of no decode step (a preempted sequence's, from its recomputed prompt)."""
        self.late.append((at, gaps_s))

    def inter_token(self, dts: np.ndarray, nds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The run's inter-token gaps, one a delivery (a sequence's tokens from one step), as values
        and whole-number counts: each decode step's seconds once per sequence it decoded (``dts``,
        ``nds`` from arrays()), less the deliveries of it whose sequences waited (``late``: the gap
        from their last token, the waits' seconds with the step's), which count at their own gaps.
        Their sum is every sequence's time from its first token to its last."""
        if not self.late:
            return dts, nds
        gaps = np.concatenate([g for _, g in self.late])
        at = np.repeat([k for k, _ in self.late], [len(g) for _, g in self.late])
        counts = nds - np.bincount(at[at >= 0], minlength=len(nds))
        return np.concatenate([dts, gaps]), np.concatenate([counts, np.ones(len(gaps))])

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
                    res: list, tick: int, bs: int, poll: tuple[int, int] | None = None):
    """The decode-only steps to run at once from ``now``: at most K (up to the next finish), to the
    one during which the next request ``arrives`` (with ``poll`` (first, every): a scheduler that takes
    requests only as it polls, after the first-th step and every every-th after it, to its first poll at or
    after that step: the batch does not change before), and before the cache runs out (``cache``: bytes
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
    if arrives < math.inf:  # stop at the step during which one arrives (or at the poll that first sees it)
        k = int(np.searchsorted(ends, arrives, side="left")) + 1
        if poll is not None:
            first, every = poll
            k = first if k <= first else first + -(-(k - first) // every) * every
        K = min(K, k)
    if linear:
        inc = np.asarray(res)[(-1 - tick - np.arange(K - 1)) % bs]
        used_k = used + table[1] * np.concatenate(([0], np.cumsum(inc)))
    else:
        used_k = used + cache_growth(table, ctx0, -(-(ctx0 + 1) // bs), K, bs)
    if used_k[K - 1] > cap:  # the steps before the cache runs out (at least the first: it fit)
        K = int(np.flatnonzero(used_k > cap)[0])
    return K, times[:K], float(ends[K - 1]), used_k[:K]


ROUNDING = 1e-9  # accepted_tokens: a product within this of a whole number counts as that number


def accepted_tokens(verify_steps, tokens_per_verify: float):
    """The tokens a speculating sequence has emitted after ``verify_steps`` verify steps (an int or an
    array of them), the expected tokens per verify E carried as a fraction from step to step (the
    expected value, not a random draw): floor(steps x E). One formula for the step-by-step path and
    the stretch, so that both emit the same tokens at the same steps."""
    return np.floor(np.asarray(verify_steps) * tokens_per_verify + ROUNDING).astype(np.int64)


MAX_CELLS = 1 << 20  # verify_stretch: (sequences x steps) cells at most, its arrays' size


def verify_stretch(step: StepCost, draft: StepCost | None, overhead_s: float, K: int, now: float, arrives: float,
                   ctx0: np.ndarray, verified: np.ndarray, left: np.ndarray, E: float, cache, step_s: float = 0.0):
    """The speculating decode-only steps to run at once from ``now`` (the sequences' contexts ``ctx0``,
    verify steps run ``verified`` and tokens still wanted ``left``; E tokens per verify): at most K,
    to the one at which a sequence has all its tokens, to the one during which the next request
    ``arrives``, and before a step whose T = verify_tokens new tokens a sequence outgrow the cache
    (``cache``: bytes held now, for the first step's tokens already; bytes held by the rest of the
    pool; the capacity; the bytes by blocks held; the block size). Step k feeds each sequence T
    tokens against its context plus the tokens accepted in the k - 1 steps before
    (accepted_tokens), after the draft's T - 1 decode steps. None where that is a single step;
    else (the steps, their seconds, the last one's end, the cache held during each, each sequence's
    tokens before the last step, and over them all, at most ``left``). ``step_s``, a recent step's
    seconds, and the cache's bytes a block bound the steps tried (each sequence takes E / bs blocks
    a step on average): the work is (sequences x steps), and a stretch cut short by a bound is still
    exact, only shorter."""
    used, rest, cap, table, bs = cache
    n, T = len(ctx0), step.verify_tokens
    # after k steps a sequence has at least k E - 1 tokens: the first is done by step (min left + 1) / E
    K = min(K, max(2, MAX_CELLS // n), int((int(left.min()) + 1) / E) + 1)
    if step_s > 0 and arrives < math.inf:
        K = min(K, max(2, int((arrives - now) / step_s) + 2))
    if len(table) > 1 and table[1] > 0:
        K = min(K, max(2, int((cap - used) / (table[1] * max(n * E / bs, 1.0))) + 2))
    got = accepted_tokens(verified[:, None] + np.arange(K + 1), E)
    got -= got[:, :1]  # (n, K + 1): tokens after k = 0 .. K steps
    done = np.flatnonzero((got >= left[:, None]).any(axis=0))
    if len(done):
        K = min(K, int(done[0]))
    if K <= 1:
        return None
    sums = float(ctx0.sum()) + got[:, :K].sum(axis=0).astype(float)  # before each step
    times = step.decode_steps_seconds(None, K, (n, 0.0), sums=sums + n * T)
    if overhead_s:
        times += overhead_s
    if draft is not None:  # the draft's T - 1 steps before each: its contexts ctx + 1 .. ctx + T - 1
        runs = (sums[:, None] + n * np.arange(1, T)).ravel()
        times += draft.decode_steps_seconds(None, K * (T - 1), (n, 0.0), sums=runs).reshape(K, T - 1).sum(axis=1)
    ends = np.cumsum(np.concatenate(([now], times)))[1:]
    if arrives < math.inf:  # stop at the step during which one arrives
        K = min(K, int(np.searchsorted(ends, arrives, side="left")) + 1)
    used_k = rest + table[-(-(ctx0[:, None] + got[:, :K] + T) // bs)].sum(axis=0)
    used_k[0] = used
    over = np.flatnonzero(used_k > cap)
    if len(over):  # the steps before the cache runs out (at least the first: it fit)
        K = int(over[0])
    if K <= 1:
        return None
    return K, times[:K], float(ends[K - 1]), used_k[:K], got[:, K - 1], np.minimum(got[:, K], left)
