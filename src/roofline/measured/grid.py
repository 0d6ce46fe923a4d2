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

import itertools
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

    def estimate(self, point) -> tuple[float, str, int]:
        """(efficiency, basis, points used) at ``point`` (one value per axis)."""
        corners = []
        outside = False
        for axis, x in zip(self.axes, point):
            x = float(x)
            if x <= axis[0] or x >= axis[-1]:
                outside |= x < axis[0] or x > axis[-1]
                corners.append(((0 if x <= axis[0] else len(axis) - 1, 1.0),))
                continue
            j = int(np.searchsorted(axis, x, side="right")) - 1
            w = float((np.log(x) - np.log(axis[j])) / (np.log(axis[j + 1]) - np.log(axis[j])))
            corners.append(((j, 1.0 - w), (j + 1, w)))
        weights, logs = [], []
        for corner in itertools.product(*corners):
            w = float(np.prod([cw for _, cw in corner]))
            e = self.efficiency[tuple(i for i, _ in corner)]
            if w > 0 and np.isfinite(e):
                weights.append(w)
                logs.append(np.log(e))
        if weights and sum(weights) > 1e-9:
            exact = len(weights) == 1 and abs(weights[0] - 1.0) < 1e-12
            basis = "extrapolated" if outside else ("measured" if exact else "interpolated")
            return float(np.exp(np.dot(weights, logs) / sum(weights))), basis, len(weights)
        grid = np.stack(np.meshgrid(*(np.log(a) for a in self.axes), indexing="ij"), axis=-1)
        d = np.linalg.norm(grid - np.log(np.asarray(point, dtype=float)), axis=-1)
        d[~np.isfinite(self.efficiency)] = np.inf
        return float(self.efficiency.flat[int(np.argmin(d))]), "extrapolated", 1
