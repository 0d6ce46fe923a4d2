"""Figures (matplotlib, imported inside each function so that the CLI starts fast). Each plot_*
function returns its matplotlib Figure and writes it only when given a path.

    roofline_chart.py  plot_roofline (the roofline chart), seed_kernels (the chapter's seven)
    layer.py           plot_layer (one block's ops, the plate's bars)
    measured.py        plot_check, plot_profile (measured against predicted)
    plan_figures.py    plot_decode, plot_sweep, plot_memory, plot_train, plot_serving
    atlas.py           plot_atlas (a GPU's measured kernels against its roofline)
    figure.py          the Figure made outside pyplot, saving, label placement
"""

from roofline.plots.atlas import plot_atlas
from roofline.plots.roofline_chart import plot_roofline, seed_kernels
from roofline.plots.layer import plot_layer
from roofline.plots.measured import plot_check, plot_profile
from roofline.plots.plan_figures import plot_decode, plot_memory, plot_serving, plot_sweep, plot_train

__all__ = ["plot_atlas", "plot_check", "plot_decode", "plot_layer", "plot_memory", "plot_profile", "plot_roofline", "plot_serving",
           "plot_sweep", "plot_train", "seed_kernels"]
