"""The plan views' knobs on the page (issue 14 item 4): the weights, KV-cache, tensor-parallel and
CUDA-graph controls, each shown only in the views whose endpoint takes it, and what they change.
Playwright driving Debian's Chromium, as test_web_browser.py."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed: pip install 'roofline[web]'")
pytest.importorskip("playwright", reason="Playwright is not installed: pip install playwright pytest-playwright")
pytest.importorskip("pytest_playwright", reason="pytest-playwright is not installed: pip install pytest-playwright")

from web_harness import CHROMIUM_MISSING, chromium_path  # noqa: E402

from test_web_browser import choose, open_page, render_count, switch_view, text, type_value, wait_render  # noqa: E402

CHROMIUM = chromium_path()
if CHROMIUM is None:
    pytest.skip(CHROMIUM_MISSING, allow_module_level=True)

# Llama 3 8B's 8,030,261,248 parameters (Meta's model card) and one 8,192-token sequence's KV cache,
# 8,192 x 2 x 32 layers x 8 kv heads x 128 x 2 B = 1,073,741,824 B:
# bf16 weights 16,060,522,496 B + the cache = 17.1 GB; int4 weights 0.5 B each but the embedding, the
# LM head (128,256 x 4,096 each) and the 65 norms of 4,096 at 2 B: 5,591,539,712 B + the cache = 6.67 GB;
# each plus a step's activations, as serving reserves them: 8,192 x (2 x 14,336 + 4 x 4,096) x 2
# + 256 x 128,256 x 4 = 869,531,648 B: 18.0 GB and 7.53 GB
HELD_BF16, HELD_INT4 = "18 GB", "7.53 GB"
KNOBS = {"weights": "#weights", "kv_cache": "#kv-cache", "tp": "#tp", "cuda_graph": "#cuda-graph"}


def shown(page) -> set[str]:
    return {name for name, selector in KNOBS.items() if page.is_visible(selector)}


def test_each_knob_shows_only_where_its_view_takes_it(page, base_url_web):
    errors = open_page(page, base_url_web + "/")
    assert shown(page) == {"cuda_graph"}  # the layer view: one dtype, one GPU
    for control in ("#dtype", "#tokens-number", "#batch", "#launch-overhead-number"):  # the others stay
        assert page.is_visible(control), control
    switch_view(page, "model")
    assert shown(page) == set(KNOBS)
    switch_view(page, "decode")
    assert shown(page) == set(KNOBS)
    switch_view(page, "serving")
    assert shown(page) == {"tp", "weights", "kv_cache"}  # serving replays a graph for its decode steps
    assert page.is_visible("#max-users") and not page.is_visible("#batch")
    assert errors == []


def test_int4_weights_change_the_memory_card(page, base_url_web):
    open_page(page, base_url_web + "/?view=model")
    assert text(page, "#model-memory") == HELD_BF16
    choose(page, "#weights", "int4", "weights=int4")
    assert text(page, "#model-memory") == HELD_INT4
    assert "weights int4" in text(page, "#model-note")
    # the URL holds it: a reload shows the same
    page.reload()
    wait_render(page, 0, "weights=int4")  # the count starts again at a reload
    assert page.input_value("#weights") == "int4" and text(page, "#model-memory") == HELD_INT4
    choose(page, "#weights", "", "view=model")  # "same as the precision": left out of the query
    assert "weights=" not in page.url and text(page, "#model-memory") == HELD_BF16


def test_tp_and_the_cuda_graph_reach_the_query(page, base_url_web):
    open_page(page, base_url_web + "/?view=model")
    type_value(page, "#tp", 2, "tp=2")
    assert "tensor-parallel over 2 GPUs" in text(page, "#model-note")
    before = render_count(page)
    page.check("#cuda-graph")
    wait_render(page, before, "cuda_graph=true")
    assert "one CUDA graph launch" in text(page, "#model-note")
    before = render_count(page)
    page.uncheck("#cuda-graph")
    wait_render(page, before, "tp=2")
    assert "cuda_graph" not in page.url and not page.is_checked("#cuda-graph")
    page.fill("#tp", "3")  # 32 heads do not split 3 ways: the API refuses it, and the page names the control
    page.press("#tp", "Enter")
    page.wait_for_selector("#error:not([hidden])")
    assert "tp 3 must divide" in text(page, "#error")
    assert page.get_attribute("#tp", "aria-invalid") == "true"


def test_the_kernels_select_prices_the_layer_from_measured_kernels(page, base_url_web):
    """Beside the machine, the engine's measured kernels: the caption names the tables and the op
    table says each projection was measured; a machine without tables is refused in words."""
    errors = open_page(page, base_url_web + "/?view=layer")
    choose(page, "#kernels", "trtllm", "kernels=trtllm")
    body = page.inner_text("body")
    assert "measured kernels of trtllm 1.3.0rc20 on h100_sxm" in body
    before = render_count(page)
    page.select_option("#machine", "v100")  # no tables and none to transfer from (an MI300X takes the H200's)
    page.wait_for_function("() => document.body.innerText.includes('no measured kernel tables for v100')")
    assert render_count(page) >= before and errors == []
