"""The workshop page's state as a person meets it: each committed change is a history entry (Back
undoes it, Forward redoes it), a slider redraws while it is dragged, a refused value is named with
its control's label and range and greys what is stale, and a link with values the page cannot use
falls back to the defaults and says so. Playwright driving Debian's Chromium, as test_web_browser.py."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed: pip install 'roofline[web]'")
pytest.importorskip("playwright", reason="Playwright is not installed: pip install playwright pytest-playwright")
pytest.importorskip("pytest_playwright", reason="pytest-playwright is not installed: pip install pytest-playwright")

from roofline.web.app import MAX_BATCH, token_stops  # noqa: E402
from web_harness import chromium_path  # noqa: E402

from test_web_browser import choose, open_page, render_count, switch_view, text, type_value, wait_render  # noqa: E402

CHROMIUM = chromium_path()
if CHROMIUM is None:
    pytest.skip("no system Chromium at /usr/bin/chromium (apt-get install chromium)", allow_module_level=True)

# SPEC: the seed layer (Llama 3 8B, H100 SXM, 8,192 tokens, unfused) takes 8,756 µs, 205 µs at 128 tokens
SEED_TOTAL, TOTAL_128 = "8,756 µs", "205 µs"


def back(page, query_part: str, forward: bool = False) -> None:
    before = render_count(page)
    (page.go_forward if forward else page.go_back)()
    wait_render(page, before, query_part)


def test_back_and_forward_undo_and_redo_each_change(page, base_url_web):
    open_page(page, base_url_web + "/")
    type_value(page, "#tokens-number", 128, "tokens=128")
    assert text(page, "#total") == TOTAL_128
    choose(page, "#attention", "flash", "attention=flash")
    switch_view(page, "model")

    back(page, "view=layer")  # the tab switch undone
    assert page.get_attribute("#view-layer", "aria-selected") == "true" and page.is_visible("#panel-layer")
    back(page, "attention=naive")  # the attention undone
    assert page.input_value("#attention") == "naive" and text(page, "#total") == TOTAL_128
    back(page, "tokens=8192")  # the tokens undone: the seed again
    assert page.input_value("#tokens-number") == "8192" and text(page, "#total") == SEED_TOTAL
    back(page, "tokens=128", forward=True)  # and redone
    assert page.input_value("#tokens-number") == "128" and text(page, "#total") == TOTAL_128
    assert page.url.startswith(base_url_web)  # Back never left the page


def test_a_drag_redraws_live_and_makes_one_history_entry(page, base_url_web):
    open_page(page, base_url_web + "/")
    stops = token_stops()
    start = render_count(page)
    length = page.evaluate("history.length")
    # a drag: twenty slider moves 40 ms apart (about a second), then, on a loaded machine whose answers take longer
    # than that, moves between the last two stops until a drawing lands or 10 s pass, then the release (change)
    targets = [stops.index(16) + i for i in range(20)]
    page.evaluate("""async ([positions, start]) => {
      const s = document.getElementById("tokens");
      const move = async (p) => {
        s.value = String(p); s.dispatchEvent(new Event("input", { bubbles: true }));
        await new Promise((r) => setTimeout(r, 40));
      };
      for (const p of positions) await move(p);
      const drawn = () => Number(document.body.dataset.renderCount || 0) - start >= 2;
      for (const t0 = Date.now(); !drawn() && Date.now() - t0 < 10000;) {
        await move(positions[positions.length - 2]);
        await move(positions[positions.length - 1]);
      }
      s.dispatchEvent(new Event("change", { bubbles: true }));
    }""", [targets, start])
    last = stops[targets[-1]]
    wait_render(page, start, f"tokens={last}&")
    assert render_count(page) - start >= 2  # drawn during the drag, not only once at its end
    assert page.input_value("#tokens-number") == str(last)
    assert page.evaluate("history.length") == length + 1  # the whole drag is one entry
    back(page, "tokens=8192")


def test_a_refused_value_names_the_control_greys_the_results_and_stops_downloads(page, base_url_web):
    open_page(page, base_url_web + "/")
    page.fill("#batch", "-5")
    page.press("#batch", "Enter")
    page.wait_for_selector("#error:not([hidden])")
    # app.MAX_BATCH sequences is the API's bound
    assert text(page, "#error").startswith(f'Batch, B (sequences): "-5" is not a whole number from 1 to {MAX_BATCH:,}.')
    assert "last settings that worked" in text(page, "#error")
    assert page.evaluate("document.body.dataset.stale") == "1"
    # greyed, not faded: faded text fell below the contrast people need to read it (test_web_axe.py)
    style = page.evaluate("(() => { const s = getComputedStyle(document.getElementById('panel-layer')); "
                          "return [s.filter, s.opacity, s.outlineStyle]; })()")
    assert style == ["grayscale(1)", "1", "dashed"]
    for link in ("#download-csv", "#download-json"):
        assert page.get_attribute(link, "aria-disabled") == "true" and page.get_attribute(link, "href") is None
    assert text(page, "#total") == SEED_TOTAL  # still the last good figures, shown greyed
    type_value(page, "#batch", 2, "batch=2")
    assert page.is_hidden("#error") and page.evaluate("document.body.dataset.stale") is None
    assert "batch=2" in page.get_attribute("#download-json", "href")


def test_an_api_refusal_is_shown_in_words_and_greys_the_results(page, base_url_web):
    # context is a parameter with no control (kept from a link); 0 passes the page and the API refuses
    # it: on a first load the page falls back to its defaults and says why in the notice, and draws
    open_page(page, base_url_web + "/?view=model&context=0")
    assert "context: " in text(page, "#notice") and "greater than or equal to 1" in text(page, "#notice")
    assert page.is_hidden("#error") and "context=0" not in page.url
    # once something is drawn, a refused value is said in words and greys what is shown (3 GPUs do
    # not divide Llama 3 8B's 32 heads; the menu offers no precision the machine lacks, so that no more)
    page.fill("#tp", "3")
    page.press("#tp", "Enter")
    page.wait_for_selector("#error:not([hidden])")
    assert "tp 3 must divide" in text(page, "#error") and page.evaluate("document.body.dataset.stale") == "1"


def test_a_bad_link_falls_back_to_defaults_with_a_notice(page, base_url_web):
    errors = open_page(page, base_url_web + "/?view=nonsense&machine=h900&batch=-5&tokens=12x&attention=flash")
    notice = text(page, "#notice")
    assert notice.startswith("This link had values the page cannot use:")
    assert "view=nonsense is not a view of this page" in notice
    assert 'Machine: "h900" is not one of the choices; using H100 SXM' in notice
    assert 'Batch, B (sequences): "-5" is not a whole number' in notice
    assert 'Tokens per sequence, T: "12x" is not a whole number' in notice
    assert page.input_value("#attention") == "flash"  # the good values are kept
    assert page.input_value("#machine") == "h100-sxm" and page.input_value("#batch") == "1"
    assert page.is_hidden("#error") and errors == []
    assert "machine=h100-sxm" in page.url and "h900" not in page.url  # the URL shows what is drawn


def test_every_control_has_a_name_and_the_token_slider_speaks_tokens(page, base_url_web):
    open_page(page, base_url_web + "/")
    unnamed = page.evaluate("""() => [...document.querySelectorAll('#controls input, #controls select')].filter((el) => {
      const byId = el.id && document.querySelector(`label[for="${el.id}"]`);
      const by = (el.getAttribute('aria-labelledby') || '').split(' ').filter(Boolean).map((id) => document.getElementById(id));
      return !(byId || (by.length && by.every(Boolean)) || el.getAttribute('aria-label'));
    }).map((el) => el.id)""")
    assert unnamed == []
    assert page.get_attribute("#tokens", "aria-valuetext") == "8,192 tokens"
    # each view's summary (the sentences; the exercises' verdict) is the only polite live region; the error is an alert
    live = page.evaluate("[...document.querySelectorAll('[aria-live]')].map((el) => el.id)")
    assert set(live) <= {"sentence", "model-sentence", "decode-sentence", "serving-sentence", "machine-sentence", "learn-verdict"}


def _us(text_value: str) -> float:
    """'8,756 µs' -> 8756; '22.2 ms' -> 22200."""
    number, unit = text_value.split(" ")
    return float(number.replace(",", "")) * {"µs": 1, "ms": 1e3, "s": 1e6}[unit]


def test_a_pinned_baseline_is_compared_with_the_shown_configuration(page, base_url_web):
    open_page(page, base_url_web + "/")
    assert page.is_hidden("#compare")
    before = render_count(page)
    page.click("#pin")
    wait_render(page, before, "pin=")
    assert page.is_visible("#compare") and "the same settings" in text(page, "#compare-note")
    choose(page, "#machine", "a100-80gb", "machine=a100-80gb")
    assert "Machine: H100 SXM → A100 80GB SXM" in text(page, "#compare-note")
    rows = page.eval_on_selector_all("#compare-table tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.textContent))")
    name, base, now, ratio = rows[0]
    assert name == "Predicted layer time" and base == SEED_TOTAL  # the baseline is the seed layer (SPEC)
    assert now == text(page, "#total")  # the shown card
    # now ÷ baseline, from the two figures shown (3 significant figures each: the ratio to within 0.5%)
    assert abs(float(ratio[:-1]) / (_us(now) / _us(base)) - 1) < 0.006
    # the pin is in the URL: a reload (or a shared link) compares the same two
    url = page.url
    other = page.context.new_page()
    open_page(other, url)
    assert text(other, "#compare-table tbody tr:first-child td:nth-child(2)") == SEED_TOTAL
    other.close()
    # another model against the same baseline
    choose(page, "#model", "qwen2.5-7b", "model=qwen2.5-7b")
    assert "Model: Llama 3 8B → " in text(page, "#compare-note")
    before = render_count(page)
    page.click("#unpin")
    wait_render(page, before)
    assert page.is_hidden("#compare") and "pin=" not in page.url


def test_a_baseline_pinned_in_another_view_says_so(page, base_url_web):
    open_page(page, base_url_web + "/?view=decode")
    before = render_count(page)
    page.click("#pin")
    wait_render(page, before, "pin=")
    switch_view(page, "layer")
    assert 'pinned in the "Decode vs batch" view' in text(page, "#compare-note")
    assert page.is_hidden("#compare-table")


def test_on_a_phone_the_results_come_first(page, base_url_web):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(base_url_web + "/")
    wait_render(page, 0)
    results = page.locator("#results").bounding_box()
    controls = page.locator("#controls").bounding_box()
    assert results["y"] < controls["y"]
    assert page.is_visible("a.to-settings")
    page.set_viewport_size({"width": 1400, "height": 800})
    assert page.is_hidden("a.to-settings")


def test_the_decode_view_shows_its_phase(page, base_url_web):
    open_page(page, base_url_web + "/?view=decode&phase=prefill")
    assert page.input_value("#phase") == "decode" and page.is_disabled("#phase")
    switch_view(page, "layer")
    assert page.input_value("#phase") == "prefill" and not page.is_disabled("#phase")


def test_after_back_the_views_and_machines_defaults_still_apply(page, base_url_web):
    # the page writes every value in its URL; Back must not turn them into values set by hand
    open_page(page, base_url_web + "/")
    type_value(page, "#batch", 2, "batch=2")
    back(page, "batch=1")
    switch_view(page, "model")
    assert page.input_value("#attention") == "flash"  # the model view's default, as `roofline model`
    choose(page, "#machine", "tpu-v5e", "machine=tpu-v5e")
    # the TPU preset's launch overhead (the layer view's CLI default), not the H100's 3 µs
    from roofline.machines import get_machine
    assert float(page.input_value("#launch-overhead-number")) == get_machine("tpu-v5e").launch_overhead_s * 1e6


def test_a_link_the_api_refuses_as_a_whole_falls_back_with_a_notice(page, base_url_web):
    # each value is in range, together they are not (B x T token rows past the library's bound)
    errors = open_page(page, base_url_web + "/?batch=65536&tokens=8192")
    assert "using Batch, B (sequences) 1" in text(page, "#notice")
    assert page.input_value("#batch") == "1" and text(page, "#total") == SEED_TOTAL
    assert page.is_hidden("#error") and errors == []


def test_every_views_settings_travel_in_the_url_across_views(page, base_url_web):
    # issue 38: T set in the layer view was lost from the URL in the serving view, so Back/Forward
    # and a shared link lost it; now each view's settings stay in the URL whichever view is shown
    open_page(page, base_url_web + "/")
    type_value(page, "#tokens-number", 128, "tokens=128")
    switch_view(page, "serving")
    assert "tokens=128" in page.url  # the serving view does not take T, its URL keeps it
    type_value(page, "#input-len", 100, "input_len=100")
    switch_view(page, "learn")
    assert "tokens=128" in page.url and "input_len=100" in page.url
    # a shared link of the exercises view opens with both views' settings
    page.goto(page.url)
    page.wait_for_function("document.body.dataset.renderedView === 'learn'")
    switch_view(page, "layer")
    assert page.input_value("#tokens-number") == "128" and text(page, "#total") == TOTAL_128
    assert "input_len=100" in page.url
    switch_view(page, "serving")
    assert page.input_value("#input-len") == "100"
    back(page, "view=layer")
    assert page.input_value("#tokens-number") == "128" and text(page, "#total") == TOTAL_128
    # the attention a view follows is not pinned on the next view by the link
    switch_view(page, "model")
    assert page.input_value("#attention") == "flash"
    switch_view(page, "layer")
    assert page.input_value("#attention") == "naive" and "attention=flash" not in page.url
