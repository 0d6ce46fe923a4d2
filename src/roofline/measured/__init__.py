"""Measured kernels (issue 34): the engines' measured kernel tables of the ``roofline[measured]``
extra (aiconfigurator-core), read directly, and ops priced from them against their roofline.

tables.py finds and lists the tables (``roofline machines --measured``), reads them once per
process, and names the measured GPU a preset without tables borrows from; grid.py interpolates
between measured points; gemm.py, attention.py, mla.py, moe.py, gdn.py and comm.py read one family each,
linear.py two (Kimi Delta Attention, Mamba-2's conv);
profile.py reads a `roofline calibrate` profile's points into the same GEMM and attention tables;
model.py is the cost model that uses them (``--kernels``); atlas.py places a model's measured ops on
the roofline (``roofline plot atlas``). pyarrow and the package are imported
only when a table is read.
"""

from roofline.measured.gemm import GemmEstimate, GemmTable, gemm_table, gemm_time
from roofline.measured.tables import INSTALL, PRESET_OF_GPU, TableSet, inventory, resolve

__all__ = ["GemmEstimate", "GemmTable", "gemm_table", "gemm_time", "INSTALL", "PRESET_OF_GPU", "TableSet", "inventory",
           "resolve"]
