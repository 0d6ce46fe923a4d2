"""The whole-model and decode views price flash attention by default (as `roofline model` and
`roofline decode` do) while the One layer view prices it unfused: issue 38 found the switch silent
(32 x 8,756 us is not the model view's 208 ms). The views now say which attention they priced, in a
field and on the page."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed: pip install 'roofline[web]'")
pytest.importorskip("httpx", reason="the web-test extra is not installed: pip install 'roofline[web-test]'")




def test_the_plan_views_say_which_attention_they_priced(client):
    assert client.get("/api/model").json()["attention_note"]["attention"] == "flash"
    assert client.get("/api/decode").json()["attention_note"]["attention"] == "flash"
    assert client.get("/api/model", params={"attention": "naive"}).json()["attention_note"]["attention"] == "naive"


def test_with_the_layer_views_attention_the_blocks_are_l_times_the_layer(client):
    # what the note tells a reader to do: with the same (unfused) attention, the model's 32 blocks take
    # 32 x the One layer view's 8,756 us (seed 003) = 280.2 ms; with flash they take less
    layer_s = client.get("/api/layer").json()["readouts"]["total_us"] * 1e-6
    naive = {p["key"]: p["time_s"] for p in client.get("/api/model", params={"attention": "naive"}).json()["parts"]}
    flash = {p["key"]: p["time_s"] for p in client.get("/api/model").json()["parts"]}
    assert layer_s == pytest.approx(8.756e-3, abs=1e-6)
    assert naive["blocks"] == pytest.approx(32 * layer_s, rel=1e-9)
    assert flash["blocks"] < naive["blocks"]


def test_the_model_view_says_its_attention_on_the_page(page, base_url_web):
    pytest.importorskip("playwright", reason="Playwright is not installed: pip install playwright pytest-playwright")
    from web_harness import CHROMIUM_MISSING, chromium_path

    if chromium_path() is None:
        pytest.skip(CHROMIUM_MISSING)
    from test_web_browser import choose, open_page, switch_view

    errors = open_page(page, base_url_web + "/")
    switch_view(page, "model")
    note = page.locator("#model-attention")
    assert note.is_visible() and note.get_attribute("data-attention") == "flash"
    choose(page, "#attention", "naive", "attention=naive")
    assert note.get_attribute("data-attention") == "naive"
    switch_view(page, "decode")
    assert page.locator("#decode-attention").get_attribute("data-attention") == "naive"  # set by hand: kept
    assert errors == []
