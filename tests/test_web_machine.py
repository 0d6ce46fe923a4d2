"""The machine on the page (issue 37 item 5): the precision menu lists only what the chosen machine
computes, and the machine view shows every figure the predictions use with its source, as
/api/machines carries them from data/machines.toml. API tests without a browser; the page's with
Playwright driving Debian's Chromium, as test_web_browser.py."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed: pip install 'roofline[web]'")
pytest.importorskip("httpx", reason="the web-test extra is not installed: pip install 'roofline[web-test]'")

from fastapi.testclient import TestClient  # noqa: E402

from roofline.web.app import create_app  # noqa: E402


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


def _machine(client, key: str) -> dict:
    return next(m for m in client.get("/api/machines").json() if m["key"] == key)


# -- /api/machines: precisions and sources -----------------------------------------------------------

def test_the_precisions_are_those_the_machine_has_a_peak_for(client):
    # NVIDIA's A100 datasheet has no FP8 row; the V100 (Volta whitepaper, Table 1) has FP64, FP32 and
    # FP16 tensor cores only: of the planner's fp32 bf16 fp16 fp8 int8 fp4 int4, five are not on it
    assert _machine(client, "a100-80gb")["precisions"] == ["fp32", "bf16", "fp16", "int8"]
    assert _machine(client, "v100")["precisions"] == ["fp32", "fp16"]
    assert "fp8" in _machine(client, "h100-sxm")["precisions"]
    assert "fp4" in _machine(client, "b200")["precisions"]  # NVFP4 on Blackwell


def test_each_figure_carries_its_value_note_and_citation(client):
    figures = {f["name"]: f for f in _machine(client, "h100-sxm")["figures"]}
    bf16 = figures["peak bf16"]
    # NVIDIA's H100 page prints 1,979 TFLOP/s bf16 with sparsity: dense is half, 989
    assert bf16["value"] == 989e12 and bf16["text"] == "989 TFLOP/s"
    assert "sparsity" in bf16["note"]
    assert [s["key"] for s in bf16["sources"]] == ["NV-H100"]
    assert "https://www.nvidia.com/en-us/data-center/h100/" in bf16["sources"][0]["citation"]
    assert figures["memory bandwidth"]["value"] == 3.35e12 and figures["memory bandwidth"]["text"] == "3.35 TB/s"
    # two sources, each cited: the nvidia-smi reports of 81,559 MiB = 85,520,809,984 B
    usable = figures["memory (as the driver reports)"]
    assert usable["value"] == 81_559 * 2**20 and [s["key"] for s in usable["sources"]] == ["SMI-H100", "SMI-MODAL"]
    assert all(s["citation"] != s["key"] for s in usable["sources"])
    assert figures["nvlink link (per direction)"]["text"] == "450 GB/s"  # 900 GB/s bidirectional / 2


def test_every_preset_figure_has_a_cited_source(client):
    for m in client.get("/api/machines").json():
        assert m["figures"], m["key"]
        for f in m["figures"]:
            assert f["sources"] and all(s["citation"] for s in f["sources"]), (m["key"], f["name"])
        names = {f["name"] for f in m["figures"]}
        assert {f"peak {d}" for d in m["dtypes"]} <= names and "memory bandwidth" in names, m["key"]


def test_a_machine_files_figures_cite_its_own_sources(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('''[sources]
MINE = "my lab's measurements, https://example.org/mine"
[machines.my-gpu]
name = "My GPU"
memory_bytes_per_s = { value = 1e12, source = "MINE", note = "measured" }
[machines.my-gpu.peak_flops_per_s]
bf16 = { value = 100e12, source = "MINE" }
''')
    mine = TestClient(create_app([str(path)])).get("/api/machines").json()[-1]
    assert mine["origin"] == str(path) and mine["precisions"] == ["bf16"]
    assert [(f["name"], f["text"], f["note"], f["sources"]) for f in mine["figures"]] == [
        ("peak bf16", "100 TFLOP/s", "", [{"key": "MINE", "citation": "my lab's measurements, https://example.org/mine"}]),
        ("memory bandwidth", "1 TB/s", "measured", [{"key": "MINE", "citation": "my lab's measurements, https://example.org/mine"}]),
    ]


# -- the page -------------------------------------------------------------------------------------

def _browser():
    pytest.importorskip("playwright", reason="Playwright is not installed: pip install playwright pytest-playwright")
    pytest.importorskip("pytest_playwright", reason="pytest-playwright is not installed: pip install pytest-playwright")
    from web_harness import CHROMIUM_MISSING, chromium_path

    if chromium_path() is None:
        pytest.skip(CHROMIUM_MISSING)


def _options(page) -> list[str]:
    return page.eval_on_selector_all("#dtype option", "os => os.map(o => o.value)")


def test_the_precision_menu_follows_the_machine(page, base_url_web):
    _browser()
    from test_web_browser import choose, open_page, text

    errors = open_page(page, base_url_web + "/")
    assert _options(page) == ["", "fp32", "bf16", "fp16", "fp8", "int8"]  # the H100: no fp4, no int4
    choose(page, "#dtype", "fp8", "dtype=fp8")
    # the A100 has no fp8 peak: the menu drops it and the precision goes back to the machine's, said
    choose(page, "#machine", "a100-80gb", "machine=a100-80gb")
    assert _options(page) == ["", "fp32", "bf16", "fp16", "int8"]
    assert page.input_value("#dtype") == "" and "dtype=" not in page.url
    assert "no fp8 peak" in text(page, "#notice") and page.is_hidden("#error")
    choose(page, "#machine", "v100", "machine=v100")
    assert _options(page) == ["", "fp32", "fp16"]
    assert page.inner_text("#dtype option[value='']") == "the machine's default (fp16)"
    assert errors == []


def test_a_link_with_a_precision_the_machine_lacks_says_so(page, base_url_web):
    _browser()
    from test_web_browser import open_page, text

    open_page(page, base_url_web + "/?machine=v100&dtype=bf16")
    assert "the V100 SXM2 32GB has no bf16 peak; it computes fp32, fp16" in text(page, "#notice")
    assert page.input_value("#machine") == "v100" and page.input_value("#dtype") == ""


def test_the_machine_view_lists_every_figure_with_its_source(page, base_url_web, client):
    _browser()
    from test_web_browser import choose, open_page, switch_view, text

    errors = open_page(page, base_url_web + "/?machine=a100-80gb")
    switch_view(page, "machine")
    figures = _machine(client, "a100-80gb")["figures"]
    rows = page.eval_on_selector_all("#machine-table tbody tr", "rs => rs.map(r => [r.cells[0].innerText, r.cells[1].innerText])")
    assert rows == [[f["name"], f["text"]] for f in figures]
    # each source key links to its citation, listed once below the table
    assert page.locator("#machine-table a[href='#source-NV-A100']").count() >= 1
    assert page.locator("#machine-sources a[href='https://www.nvidia.com/en-us/data-center/a100/']").count() == 1
    assert "A100 80GB SXM" in text(page, "#machine-sentence")
    assert "view=machine" in page.url and "machine=a100-80gb" in page.url
    assert page.get_attribute("#download-json", "href") == "/api/machines" and page.is_hidden("#pin")
    choose(page, "#machine", "mi300x", "machine=mi300x")
    assert "MI300X" in text(page, "#machine-sentence")
    assert "rocm.docs.amd.com" in text(page, "#machine-sources")
    assert errors == []
