"""Interpolation between measured points: one home for every measured family.

A family's points lie on a grid of its shape axes (a GEMM's m, n, k; attention's heads, length,
batch), each point held as its efficiency against its own roofline (roofline / measured). A query's
efficiency is interpolated log-linearly in the log of each axis between the up to 2^n grid points
around it; points not measured are left out and the rest reweighted. On a grid point exactly it is
that point's ("measured"), inside the grid "interpolated", and past the measured range of any axis
the nearest edge's ("extrapolated"); with no measured point around it, the nearest measured point
in log-shape distance ("extrapolated"). The caller divides the query's own roofline by it.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LogGrid:
    """Efficiencies on a grid: ``axes`` (each sorted, positive) and ``efficiency`` of their shape,
    NaN where a point was not measured."""

    axes: tuple[np.ndarray, ...]
    efficiency: np.ndarray

    @classmethod
    def from_points(cls, coords: tuple[np.ndarray, ...], efficiency: np.ndarray) -> "LogGrid":
        """The grid of scattered points (one array per axis, one entry per point); a repeated point
        keeps its first value (as the tables' own reader keeps the first row of a repeated key)."""
        axes = tuple(np.unique(c).astype(float) for c in coords)
        idx = tuple(np.searchsorted(a, c) for a, c in zip(axes, coords))
        eff = np.full([len(a) for a in axes], np.nan)
        order = np.arange(len(efficiency))[::-1]
        eff[tuple(i[order] for i in idx)] = np.asarray(efficiency, dtype=float)[order]
        return cls(axes, eff)

    def __post_init__(self):
        # the axes' logs as plain floats: a lookup is a few microseconds of Python, no numpy per call
        object.__setattr__(self, "_logs", tuple([math.log(float(v)) for v in a] for a in self.axes))
        object.__setattr__(self, "_eff", self.efficiency.tolist())

    def estimate(self, point) -> tuple[float, str, int]:
        """(efficiency, basis, points used) at ``point`` (one value per axis)."""
        corners = []
        outside = False
        for logs, x in zip(self._logs, point):
            lx = math.log(float(x))
            if lx <= logs[0] or lx >= logs[-1]:
                outside |= lx < logs[0] or lx > logs[-1]
                corners.append(((0 if lx <= logs[0] else len(logs) - 1, 1.0),))
                continue
            j = bisect.bisect_right(logs, lx) - 1
            w = (lx - logs[j]) / (logs[j + 1] - logs[j])
            corners.append(((j, 1.0 - w), (j + 1, w)))
        total = acc = 0.0
        used = 0
        for corner in itertools.product(*corners):
            w, e = 1.0, self._eff
            for i, cw in corner:
                w *= cw
                e = e[i]
            if w > 0 and e == e:  # a measured point (NaN where none)
                total += w
                acc += w * math.log(e)
                used += 1
        if used and total > 1e-9:
            exact = used == 1 and abs(total - 1.0) < 1e-12
            basis = "extrapolated" if outside else ("measured" if exact else "interpolated")
            return math.exp(acc / total), basis, used
        return float(self._nearest(np.log(np.asarray([point], dtype=float)))[0]), "extrapolated", 1

    def _nearest(self, log_points: np.ndarray) -> np.ndarray:
        """The efficiency of the measured point nearest each of ``log_points`` (n, axes) in log shape, the
        first in flat order among equals (NaN-free unless nothing was measured): the Euclidean distance
        as np.linalg.norm takes it (squares summed left to right over the axes, then the root), each
        axis' squared differences taken once per axis value. Where the measured points of each line along
        the last axis are one run of it (a table measured up to a length), each line's nearest point is
        its run's value nearest the query's (_nearest_by_lines); else, and for a query whose nearest is
        not plain there (two points within rounding of the least distance), every measured point
        (_nearest_of_all)."""
        values = self.efficiency.ravel()
        flat, _, logs, _, _, lines = self._near_points()
        if not len(flat):
            return np.full(len(log_points), values[0])
        out = np.empty(len(log_points))
        for lo in range(0, len(log_points), 256):
            q = log_points[lo:lo + 256]
            sq = []
            for a, la in enumerate(logs):  # each axis' squared differences, by axis value
                x = la[None, :] - q[:, a:a + 1]
                sq.append(x * x)
            got, plain = self._nearest_by_lines(sq) if lines is not None else (None, np.zeros(len(q), dtype=bool))
            if got is not None:
                out[lo:lo + 256] = got
            if not plain.all():
                rest = np.flatnonzero(~plain)
                out[lo + rest] = self._nearest_of_all([s[rest] for s in sq])
        return out

    def _near_points(self) -> tuple:
        """The measured points' flat and per-axis indices, the axes' logs, their distinct (first, second) axis
        values (pairs, pair_of: the squares' sum taken once a pair, the same sum left to right as point by
        point), and the lines along the last axis (_lines), once per grid."""
        near = self.__dict__.get("_near")
        if near is None:
            flat = np.flatnonzero(np.isfinite(self.efficiency))
            index = np.unravel_index(flat, self.efficiency.shape)
            pairs, pair_of = np.unique(np.stack(index[:2]), axis=1, return_inverse=True) if len(index) > 2 else (None, None)
            near = (flat, index, [np.log(a) for a in self.axes], pairs, None if pair_of is None else pair_of.ravel(),
                    self._lines(index))
            object.__setattr__(self, "_near", near)
        return near

    def _lines(self, index) -> tuple | None:
        """The measured lines along the last axis, in flat order: (each line's indices on the other axes (one
        array per axis), the first and last measured index of its run, its flat index at the axis' 0), where
        every line's measured points are one unbroken run; else None (and for a one-axis grid)."""
        if len(index) < 2 or not len(index[0]):
            return None
        heads = np.stack(index[:-1])
        lines, line_of = np.unique(heads, axis=1, return_inverse=True)
        line_of = line_of.ravel()
        last = index[-1]
        lo = np.full(lines.shape[1], np.iinfo(np.int64).max)
        hi = np.full(lines.shape[1], -1)
        np.minimum.at(lo, line_of, last)
        np.maximum.at(hi, line_of, last)
        if not (np.bincount(line_of, minlength=lines.shape[1]) == hi - lo + 1).all():
            return None  # a hole inside a line's run: every point, as before
        start = np.ravel_multi_index(tuple(lines) + (np.zeros(lines.shape[1], dtype=np.int64),), self.efficiency.shape)
        return tuple(lines), lo, hi, start

    def _nearest_by_lines(self, sq) -> tuple[np.ndarray, np.ndarray]:
        """_nearest on a grid whose lines along the last axis are measured in runs (_lines), from the squared
        differences ``sq`` of a block of queries: (each query's efficiency, whether it is plain). A line's
        distances, the squares of its other axes summed as _nearest_of_all sums them plus the last axis',
        fall to the axis value nearest the query's and rise after it (each step rounded monotonically), so the
        line's least is at that value clipped to its run; the least over lines is the least distance. The
        point is plain where the first line reaching it (within 1e-12 of it: every point whose root rounds to
        the same lies within that) has it at its clipped value and the value before that is not within it
        too; the rest are left to _nearest_of_all."""
        lines, lo, hi, start = self._near_points()[5]
        base = sq[0][:, lines[0]]
        for a in range(1, len(lines)):
            base = base + sq[a][:, lines[a]]
        last = sq[-1]
        at = np.clip(np.argmin(last, axis=1)[:, None], lo[None, :], hi[None, :])  # (queries, lines)
        d2 = base + np.take_along_axis(last, at, axis=1)
        least = d2.min(axis=1)
        within = least * (1.0 + 1e-12)
        first = np.argmax(d2 <= within[:, None], axis=1)
        rows = np.arange(len(d2))
        j = at[rows, first]
        plain = np.sqrt(d2[rows, first]) == np.sqrt(least)
        before = j - 1
        plain &= ~((before >= lo[first]) & (base[rows, first] + last[rows, np.maximum(before, 0)] <= within))
        return self.efficiency.ravel()[start[first] + j], plain

    def _nearest_of_all(self, sq) -> np.ndarray:
        """_nearest over every measured point from the squared differences ``sq`` of a block of queries:
        each axis' gathered per measured point and summed left to right (the first two once per pair of
        values), rooted, the first least taken."""
        flat, index, _, pairs, pair_of, _ = self._near_points()
        if pairs is None:
            d2, done = sq[0][:, index[0]], 1
        else:
            d2, done = (sq[0][:, pairs[0]] + sq[1][:, pairs[1]])[:, pair_of], 2
        for a in range(done, len(sq)):
            d2 = d2 + sq[a][:, index[a]]
        return self.efficiency.ravel()[flat[np.argmin(np.sqrt(d2), axis=1)]]

    def estimate_many(self, points) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """estimate for many points at once (an array of shape (n, axes)): (efficiency, basis code,
        points used), basis 0 measured, 1 interpolated, 2 extrapolated (BASES), in numpy: a decode
        curve's or a sweep's sizes in one pass. Points with no measured corner take estimate's
        nearest measured point (the same arithmetic, in blocks of points). An axis on which every point
        has one value (a GEMM's n and k over a step's token counts) is placed once, and a corner whose
        weight is 0 at every point (that value on a grid line) is skipped: it adds nothing."""
        pts = np.atleast_2d(np.asarray(points, dtype=float))
        n = len(pts)
        lows, ws, outside = [], [], np.zeros(n, dtype=bool)
        for a in range(len(self.axes)):
            j, w, out = self._placed(a, pts[:, a])
            outside |= out
            lows.append(j)
            ws.append(w)
        total = np.zeros(n)
        acc = np.zeros(n)
        used = np.zeros(n, dtype=int)
        exact = np.ones(n, dtype=bool)
        # each axis' two sides: (grid index, weight) below and above each point, taken once for every corner
        sides = [((j, 1.0 - wa), (np.minimum(j + 1, size - 1), wa))
                 for j, wa, size in zip(lows, ws, self.efficiency.shape)]
        # a one-valued axis whose weight is 0 on a side (its value on a grid line): every corner on that side is 0
        nothing = [[len(wa) == 1 and float(side[1][0]) == 0.0 for side in two] for wa, two in zip(ws, sides)]
        for corner in itertools.product((0, 1), repeat=len(self.axes)):
            if any(nothing[a][c] for a, c in enumerate(corner)):
                continue
            idx, w = [], np.ones(n)
            for c, two in zip(corner, sides):
                idx.append(two[c][0])
                w = w * two[c][1]
            if not (w > 0).any():  # no weight anywhere (a one-valued axis on a grid line): nothing to add
                continue
            e = self.efficiency[tuple(idx)]
            ok = (w > 0) & np.isfinite(e)
            total += np.where(ok, w, 0.0)
            acc += np.where(ok, w * np.log(np.where(ok, e, 1.0)), 0.0)
            used += ok
            exact &= ~ok | (np.abs(w - 1.0) < 1e-12)
        eff = np.full(n, np.nan)
        have = (used > 0) & (total > 1e-9)
        eff[have] = np.exp(acc[have] / total[have])
        basis = np.where(outside, 2, np.where((used == 1) & exact, 0, 1))
        far = np.flatnonzero(~have)  # no measured point around it: the nearest one's (estimate's, all at once)
        if len(far):
            eff[far] = self._nearest(np.log(pts[far]))
        used[far] = 1
        basis[far] = BASES.index("extrapolated")
        return eff, basis, used

    def _placed(self, a: int, col: np.ndarray) -> tuple:
        """Each of ``col``'s values placed on axis ``a``: (the grid index at or below it, its log-linear weight
        toward the next, whether it lies past the axis' ends), one value placed once (length-1 arrays, broadcast);
        each axis' last column placed kept (the next GEMM of a step reads the same token counts on the same axis)."""
        key = (len(col), col.tobytes()) if len(col) > 64 else None
        kept = self.__dict__.get("_last_placed")
        if kept is None:
            kept = {}
            object.__setattr__(self, "_last_placed", kept)
        last = kept.get(a)
        if key is not None and last is not None and last[0] == key:
            return last[1]
        la = np.asarray(self._logs[a])
        lx = np.log(col[:1]) if len(col) and (col == col[0]).all() else np.log(col)  # one value: placed once, broadcast
        outside = (lx < la[0]) | (lx > la[-1])
        clipped = np.clip(lx, la[0], la[-1])
        j = np.clip(np.searchsorted(la, clipped, side="right") - 1, 0, max(len(la) - 2, 0))
        got = ((np.zeros(len(lx), dtype=int), np.zeros(len(lx)), outside) if len(la) == 1 else
               (j, (clipped - la[j]) / (la[j + 1] - la[j]), outside))
        if key is not None:
            kept[a] = (key, got)
        return got


BASES = ("measured", "interpolated", "extrapolated")  # estimate_many's basis codes


class BuiltOnRead(dict):
    """A table's sites whose values are built when first read: each held as a function of no arguments until then
    (a table holds thousands of sites; a run reads a few). Keys, ``in`` and iteration see every site at once."""

    def __getitem__(self, key):
        value = dict.__getitem__(self, key)
        if callable(value):
            value = value()
            dict.__setitem__(self, key, value)
        return value

    def get(self, key, default=None):
        return self[key] if key in self else default
