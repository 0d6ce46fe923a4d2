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


# -- a machine given by its figures, in the URL (issue 37 item 5) -----------------------------------------

# The H100 SXM's datasheet figures (data/machines.toml: 989 TFLOP/s dense bf16, 3.35 TB/s, 80 GB, NVLink 450 GB/s
# per direction), given as a user would, with the seed's 3 us launch: the same predictions as the preset's
H100_FIGURES = "custom:bf16=989TFLOP/s,bw=3.35TB/s,mem=80GB,launch=3us,nvlink=450GB/s"


@pytest.mark.parametrize("view", ["/api/layer", "/api/model", "/api/decode"])
def test_a_custom_machine_drives_each_view_and_is_said_to_be_the_users(client, view):
    custom = client.get(view, params={"machine": H100_FIGURES, "launch_overhead_us": 3})
    preset = client.get(view, params={"machine": "h100-sxm", "launch_overhead_us": 3})
    assert custom.status_code == 200, custom.text[:300]
    # the roofline of one layer, a model or a decode step at the same peak and bandwidth: the same times
    key = {"/api/layer": "total_s", "/api/model": "total_s", "/api/decode": "compute_bound_batch"}[view]
    assert custom.json()[key] == pytest.approx(preset.json()[key])
    assert "Custom machine (your figures, no source)" in custom.text and "H100" not in custom.json().get("caption", "")


def test_a_custom_machine_drives_the_serving_view(client):
    r = client.get("/api/serving", params={"machine": H100_FIGURES, "model": "llama3.2-1b", "max_users": 2})
    assert r.status_code == 200 and "Custom machine (your figures, no source)" in r.json()["description"]


@pytest.mark.parametrize("figures, named", [
    ("custom:bf16=1e30,bw=3.35e12", "bf16"),  # past the physical range of a peak (1e21 FLOP/s)
    ("custom:bf16=989e12,bw=1e20", "bw"),  # past 1e18 bytes/s
    ("custom:bf16=989e12,bw=3.35e12,launch=5", "launch"),  # 5 s a launch: a unit slip
    ("custom:bf16=989e12,bw=3.35e12,nvlink=-1", "nvlink"),
    ("custom:bf16=989e12", "bw"),  # no bandwidth: no roofline
    ("custom:bw=3.35e12", "peak"),
    ("custom:bf16=989e12,bw=3.35e12,hbm=1", "hbm"),  # not a key
    ("custom:bf16=989e12,bw=3.35e12,bw=2e12", "bw"),  # given twice
    ("custom:bf16=989e12,bw=3.35e12,launch=3", "launch"),  # a time without its unit
    ("custom:bf16=nan,bw=3.35e12", "bf16"), ("custom:bf16=989e12,bw=fast", "bw"),
])
def test_a_bad_figure_is_a_422_naming_it(client, figures, named):
    r = client.get("/api/layer", params={"machine": figures})
    assert r.status_code == 422 and r.json()["field"] == "machine", r.text[:300]
    assert named in r.json()["detail"][0]["msg"]


def test_the_schema_takes_a_preset_or_a_custom_machine_and_refuses_others(client):
    schema = next(p for p in client.app.openapi()["paths"]["/api/layer"]["get"]["parameters"] if p["name"] == "machine")
    enum, custom = schema["schema"]["anyOf"]
    assert "h100-sxm" in enum["enum"] and custom["pattern"].startswith("^custom:")
    r = client.get("/api/layer", params={"machine": "h100"})
    assert r.status_code == 422 and r.json()["field"] == "machine" and "custom:" in r.json()["detail"][0]["msg"]


def test_the_custom_form_sends_its_figures_in_the_url_and_every_view_uses_them(page, base_url_web):
    _browser()
    from test_web_browser import open_page, render_count, switch_view, text, wait_render

    errors = open_page(page, base_url_web + "/?view=machine&machine=a100-80gb")
    form = "#custom-machine"
    # the form starts from the machine shown, as its view lists it: the A100 80GB's 312 TFLOP/s bf16, 2.04 TB/s
    # (2.039, data/machines.toml), 80 GB, 3 us a launch, NVLink 300 GB/s a direction
    assert [page.input_value(f"{form} [name={n}]") for n in ("peak", "bw", "mem", "launch", "link")] == \
        ["312TFLOP/s", "2.04TB/s", "80GB", "3µs", "300GB/s"]
    page.fill(f"{form} [name=peak]", "500 TFLOP/s")
    before = render_count(page)
    page.click(f"{form} button[type=submit]")
    wait_render(page, before, "machine=custom")
    assert "machine=custom%3Abf16%3D500TFLOP%2Fs%2Cbw%3D2.04TB%2Fs" in page.url
    assert "launch_overhead_us" not in page.url  # the machine's own launch, 3 us: the API reads it from the figures
    assert "Custom machine (your figures, no source)" in text(page, "#machine-sentence")
    rows = page.eval_on_selector_all("#machine-table tbody tr", "rs => rs.map(r => [r.cells[0].innerText, r.cells[1].innerText])")
    assert ["peak bf16", "500TFLOP/s"] in rows and "no source" in text(page, "#machine-sources")  # as given
    switch_view(page, "layer")  # the layer view prices the ops on the user's machine, and says whose it is
    assert "Custom machine (your figures, no source)" in text(page, "#config-note")
    # the link reopens the same machine: the menu lists it, the form holds its figures
    page.goto(page.url.replace("view=layer", "view=machine"))
    wait_render(page, 0)
    assert page.input_value("#machine").startswith("custom:bf16=500TFLOP/s,bw=2.04TB/s")
    assert page.input_value(f"{form} [name=peak]") == "500TFLOP/s"
    page.fill(f"{form} [name=bw]", "")  # refused in the page, naming the box
    page.click(f"{form} button[type=submit]")
    page.wait_for_selector("#error:not([hidden])")
    assert text(page, "#error").startswith('Memory bandwidth: "" is not a figure like')
    before = render_count(page)
    page.fill(f"{form} [name=bw]", "1e20B/s")  # past the physical range: the API's 422, naming the figure
    page.click(f"{form} button[type=submit]")
    page.wait_for_function("document.getElementById('error').textContent.includes(\"custom machine's bw\")")
    assert render_count(page) == before and "bw%3D2.04TB" in page.url  # the machine shown stays the last that worked
    assert errors == []


def test_a_custom_machines_download_is_named_custom():
    # its figures (':', ',' and '/' in "989TFLOP/s") would make a file name some file systems refuse
    from fastapi.testclient import TestClient

    from roofline.web.app import create_app

    with TestClient(create_app()) as c:
        r = c.get("/api/layer.csv", params={"machine": H100_FIGURES, "tokens": 8192})
    assert r.status_code == 200
    assert r.headers["content-disposition"] == 'attachment; filename="layer-llama3-8b-custom-prefill-8192-b1-naive.csv"'
