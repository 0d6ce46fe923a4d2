"""docs/notebook.ipynb runs top to bottom in a fresh Jupyter kernel (nbclient), every cell without
an error, and shows what it promises: the seed layer as an HTML table (8,756 us, seed 003), its
DataFrame, the roofline figure inline as a PNG, the decode plan as a table."""

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("pandas")

NOTEBOOK = Path(__file__).resolve().parent.parent / "docs" / "notebook.ipynb"


@pytest.fixture(scope="module")
def executed():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:  # run from nothing: the stored outputs must not count
        if cell.cell_type == "code":
            cell.outputs = []
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()  # raises on an error
    return [c for c in nb.cells if c.cell_type == "code"]


def _data(cell) -> dict:
    out = {}
    for o in cell.outputs:
        out.update(o.get("data", {}))
        if o.output_type == "stream":
            out["stream"] = out.get("stream", "") + o.text
    return out


def test_every_cell_runs_without_an_error(executed):
    assert len(executed) == 4
    for cell in executed:
        assert cell.execution_count is not None
        assert not [o for o in cell.outputs if o.output_type == "error"]


def test_the_layer_report_shows_as_an_html_table(executed):
    html = _data(executed[0])["text/html"]
    assert "<table" in html and "8,756 µs" in html and ">gate+up proj</td>" in html


def test_to_pandas_has_the_twelve_ops_and_their_total(executed):
    out = _data(executed[1])
    assert "12 ops, 8,756 us, of which memory-bound 41%" in out["stream"]
    assert "<table" in out["text/html"]  # the DataFrame itself, as pandas shows it


def test_the_roofline_figure_shows_inline(executed):
    png = _data(executed[2])["image/png"]  # base64
    assert png.startswith("iVBORw0KGgo")  # b"\x89PNG\r\n\x1a\n", base64-encoded


def test_the_decode_plan_shows_as_a_table(executed):
    out = _data(executed[3])
    assert "matmuls compute-bound from batch" in out["stream"] and "DecodePlan" in out["text/html"]
