"""The workshop's screenshots in docs/, each view at desktop (1400 px) and phone (390 px) width,
taken in headless Chromium from a server run in-process (needs the web and web-test extras and
Debian's chromium):

    python docs/make_screenshots.py [--out docs]

Each shot waits for the page's `roofline:rendered` event; a page error or console error stops it.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

# name, URL, actions (click a selector / choose a value) before the shot
SHOTS = [
    ("workshop", "/", []),
    ("workshop-model", "/?view=model", []),
    ("workshop-decode", "/?view=decode&tokens=8192", []),
    ("workshop-serving", "/?view=serving", []),
    ("workshop-compare", "/", [("click", "#pin", None), ("select", "#machine", "a100-80gb")]),
    ("workshop-explain", "/", [("open", "#ops-details", None)]),
    ("workshop-stale", "/", [("fill", "#batch", "-5")]),
    ("workshop-learn", "/?view=learn&kind=layer&seed=0", []),
    ("workshop-machine", "/?view=machine&machine=h100-sxm", []),
]
WIDTHS = {"": 1400, "-phone": 390}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent), help="folder for the PNGs (default: docs/)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from playwright.sync_api import sync_playwright

    from roofline.web.app import create_app

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # web_harness: test-only code
    from web_harness import CHROMIUM_ARGS, background_server, chromium_path

    out = Path(args.out)
    with background_server(create_app()) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=list(CHROMIUM_ARGS), headless=True)
        for name, url, actions in SHOTS:
            for suffix, width in WIDTHS.items():
                page = browser.new_page(viewport={"width": width, "height": 900})
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.goto(base + url)
                page.wait_for_function("Number(document.body.dataset.renderCount || 0) >= 1", timeout=30000)
                for kind, selector, value in actions:
                    n = page.evaluate("Number(document.body.dataset.renderCount)")
                    if kind == "open":
                        page.evaluate(f"document.querySelector('{selector}').open = true")
                        continue
                    if kind == "click":
                        page.click(selector)
                    elif kind == "select":
                        page.select_option(selector, value)
                    elif kind == "fill":
                        page.fill(selector, value)
                        page.press(selector, "Enter")
                        page.wait_for_selector("#error:not([hidden])")
                        continue
                    page.wait_for_function(f"Number(document.body.dataset.renderCount) > {n}", timeout=30000)
                page.wait_for_timeout(250)
                if errors:
                    raise SystemExit(f"{name}{suffix}: {errors}")
                path = out / f"{name}{suffix}.png"
                page.screenshot(path=str(path), full_page=True)
                print(path)
                page.close()
        browser.close()


if __name__ == "__main__":
    main()
