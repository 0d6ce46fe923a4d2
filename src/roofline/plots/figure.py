"""What every figure shares: a matplotlib Figure made outside pyplot (no global backend, no figure
registry: headless, and shown by Jupyter when returned), written only when given a path, and
labels placed where they cover nothing else.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np


@functools.lru_cache(maxsize=1)
def _figure_class():
    from matplotlib.figure import Figure

    class RooflineFigure(Figure):
        """A Figure that shows itself in Jupyter as a PNG whether or not pyplot was imported."""

        def _repr_png_(self) -> bytes:
            import io

            buf = io.BytesIO()
            self.savefig(buf, format="png", bbox_inches="tight", facecolor="white")
            return buf.getvalue()

    return RooflineFigure


def new_figure(figsize, nrows: int = 1, ncols: int = 1, **subplot_kw):
    """A figure on its own Agg canvas and its axes, as pyplot.subplots would give them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = _figure_class()(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, **subplot_kw)


def _save(fig, path):
    """Write the figure atomically (files.write_atomically), in the format its suffix names; SVG
    keeps its text as text (selectable, searchable)."""
    import matplotlib

    from roofline.files import write_atomically

    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        write_atomically(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=150, bbox_inches="tight", facecolor="white"))


def finish_figure(fig, path):
    if path is not None:
        _save(fig, path)
    return fig


# Where a point's label may go, in points from it, nearest first: beside, above, below and on the
# four diagonals, then stepped up and down on either side with a leader line back to the point.
_LABEL_SPOTS = ([(7, 0, "left", "center"), (-7, 0, "right", "center"), (0, 7, "center", "bottom"), (0, -7, "center", "top"),
                 (7, -5, "left", "top"), (-7, 5, "right", "bottom"), (7, 5, "left", "bottom"), (-7, -5, "right", "top")]
                + [(side * 9, sign * (5 + 11 * k), "left" if side > 0 else "right", "center")
                   for k in range(1, 8) for side in (1, -1) for sign in (1, -1)])
_LEADER_FROM = {"left": (0, 0.5), "right": (1, 0.5), "center": (0.5, 0.5)}  # where on the text a leader starts


def _obstacles(ax, renderer):
    """Display-space points a label should not cover: every line, segment and marker in the axes
    (resampled every few pixels), and the corners and edges of the texts and legend already drawn."""
    pts = []
    ring = np.array([(0, 0), *((np.cos(a), np.sin(a)) for a in np.linspace(0, 2 * np.pi, 8, endpoint=False))])
    for ln in ax.get_lines():
        if ln.get_marker() not in (None, "", "None", " ") and len(ln.get_xydata()):
            radius = ln.get_markersize() / 2 * ax.figure.dpi / 72
            centres = ln.get_transform().transform(ln.get_xydata())
            pts += [c + radius * ring for c in centres]
    segments = [ln.get_transform().transform(ln.get_xydata()) for ln in ax.get_lines()
                if len(ln.get_xydata()) and ln.get_linestyle() not in ("None", "", " ")]
    for coll in ax.collections:
        if hasattr(coll, "get_segments"):  # error bars and other line collections
            segments += [coll.get_transform().transform(np.asarray(seg)) for seg in coll.get_segments() if len(seg)]
    for xy in segments:
        xy = xy[np.all(np.isfinite(xy), axis=1)]
        for (x0, y0), (x1, y1) in zip(xy[:-1], xy[1:]):
            n = int(min(max(abs(x1 - x0), abs(y1 - y0)) / 3, 2000)) + 1
            pts.append(np.column_stack([np.linspace(x0, x1, n), np.linspace(y0, y1, n)]))
    boxes = [t.get_window_extent(renderer) for t in ax.texts if t.get_text()]
    if ax.get_legend() is not None:
        boxes.append(ax.get_legend().get_window_extent(renderer))
    for bb in boxes:
        gx, gy = np.meshgrid(np.linspace(bb.x0, bb.x1, max(2, int(bb.width / 3))), np.linspace(bb.y0, bb.y1, max(2, int(bb.height / 3))))
        pts.append(np.column_stack([gx.ravel(), gy.ravel()]))
    return np.concatenate(pts) if pts else np.zeros((0, 2))


def place_labels(ax, labels, fontsize: float = 7.5, **text_kw):
    """Annotate each (x, y, text) at the first of _LABEL_SPOTS where its text (and leader) covers
    no line, marker, other label or the legend and stays inside the axes, else where it covers
    least. Call it last, once the limits and the layout are set: it measures in display space."""
    renderer = ax.figure.canvas.get_renderer()
    avoid = _obstacles(ax, renderer)
    frame = ax.get_window_extent(renderer)
    px_per_pt = ax.figure.dpi / 72
    placed = []

    def covered(bb, pts):
        return (np.abs(pts[:, 0] - (bb.x0 + bb.x1) / 2) < bb.width / 2) & (np.abs(pts[:, 1] - (bb.y0 + bb.y1) / 2) < bb.height / 2)

    for x, y, text in labels:
        point = ax.transData.transform((x, y))
        best = None
        for dx, dy, ha, va in _LABEL_SPOTS:
            ann = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=fontsize,
                              **text_kw)
            bb = ann.get_window_extent(renderer).padded(1.5)
            ann.remove()
            leader = np.linspace(point, point + np.array([dx, dy]) * px_per_pt, 12)[3:] if abs(dy) > 7 else np.zeros((0, 2))
            cost = (int(covered(bb, avoid).sum()) + 400 * sum(bb.overlaps(o) for o in placed)
                    + 10 * sum(int(covered(o, leader).sum()) for o in placed)
                    + 1000 * (not (frame.x0 <= bb.x0 and bb.x1 <= frame.x1 and frame.y0 <= bb.y0 and bb.y1 <= frame.y1)))
            if best is None or cost < best[0]:
                best = (cost, dx, dy, ha, va, bb, leader)
            if cost == 0:
                break
        _, dx, dy, ha, va, bb, leader = best
        line = {"arrowprops": dict(arrowstyle="-", color="0.6", lw=0.6, shrinkA=0, shrinkB=3, relpos=_LEADER_FROM[ha])} if len(leader) else {}
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=fontsize, **line,
                    **text_kw)
        placed.append(bb)
        avoid = np.concatenate([avoid, leader])
