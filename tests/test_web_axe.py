"""The workshop page under axe-core (tests/vendor/axe.min.js, vendored: no download at test time) in
every state a person meets, on a desktop and on a phone: each view, a refused value (the results
greyed as stale), a link the page could not use (the notice), a pinned baseline and a model that
does not fit. Issue 38 found 21 elements at 2.45:1 contrast in the error state; the page must have
0 violations everywhere. Playwright driving Debian's Chromium, as test_web_browser.py."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed: pip install 'roofline[web]'")
pytest.importorskip("playwright", reason="Playwright is not installed: pip install playwright pytest-playwright")
pytest.importorskip("pytest_playwright", reason="pytest-playwright is not installed: pip install pytest-playwright")

from web_harness import CHROMIUM_MISSING, chromium_path  # noqa: E402

from test_web_browser import render_count, wait_render  # noqa: E402

if chromium_path() is None:
    pytest.skip(CHROMIUM_MISSING, allow_module_level=True)

AXE = Path(__file__).parent / "vendor" / "axe.min.js"
SIZES = {"desktop": {"width": 1400, "height": 800}, "phone": {"width": 390, "height": 844}}


def _refused(page):
    before = render_count(page)
    page.fill("#batch", "-5")
    page.press("#batch", "Enter")
    page.wait_for_function("document.body.dataset.stale === '1'")
    assert render_count(page) == before


def _pinned(page):
    before = render_count(page)
    page.click("#pin")
    wait_render(page, before, "pin=")
    before = render_count(page)
    page.fill("#batch", "2")
    page.press("#batch", "Enter")
    wait_render(page, before, "batch=2")


STATES = {
    "layer": ("/", None),
    "model": ("/?view=model", None),
    "model-does-not-fit": ("/?view=model&model=llama3-70b", None),
    "decode": ("/?view=decode", None),
    "serving": ("/?view=serving", None),
    "exercises": ("/?view=learn", None),
    "machine": ("/?view=machine&machine=mi300x", None),
    "refused-value": ("/", _refused),
    "notice": ("/?batch=-5&machine=nope", None),
    "pinned": ("/", _pinned),
}


def violations(page) -> list:
    page.add_script_tag(path=str(AXE))
    return page.evaluate(
        "axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => "
        "({id: v.id, nodes: v.nodes.length, first: v.nodes.slice(0, 3).map(n => n.target.join(' '))})))")


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("state", sorted(STATES))
def test_no_axe_violation_in_any_state(page, base_url_web, state, size):
    path, act = STATES[state]
    page.set_viewport_size(SIZES[size])
    page.goto(base_url_web + path)
    wait_render(page, 0)
    if act:
        act(page)
    page.wait_for_function("!document.body.dataset.busy")
    assert violations(page) == []
