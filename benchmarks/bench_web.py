"""Latency of the web workshop (issue 3's target: p95 under 100 ms on the 2-core machine).

1. API: GET /api/layer against a real uvicorn server on 127.0.0.1 (one keep-alive client, a
   bounded number of requests sweeping tokens, machines and attention), p50/p95 in ms.
2. Browser: in headless Chromium, the time from a control change (the token slider, the machine,
   the attention) to the redrawn chart, timed inside the page from the change event to the page's
   ``roofline:rendered`` event (after both Plotly charts have drawn), p50/p95 in ms.

    python3 benchmarks/bench_web.py [--requests 300] [--changes 30]

Needs the web extra and httpx; the browser part needs playwright and /usr/bin/chromium and is
skipped with a note otherwise. Only loopback traffic; every loop is bounded.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
import warnings


def quantiles_ms(samples_s: list[float]) -> tuple[float, float]:
    """(p50, p95) in ms."""
    cuts = statistics.quantiles(samples_s, n=100, method="inclusive")
    return 1e3 * statistics.median(samples_s), 1e3 * cuts[94]


def bench_api(base_url: str, n_requests: int) -> list[float]:
    import httpx

    params = itertools.cycle(
        {"tokens": t, "machine": m, "attention": a}
        for t in (1, 128, 1024, 8192, 32768, 131072)
        for m in ("h100-sxm", "a100-80gb", "mi300x")
        for a in ("naive", "flash")
    )
    samples = []
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for _ in range(20):  # warm-up
            client.get("/api/layer", params=next(params)).raise_for_status()
        for _ in range(n_requests):
            p = next(params)
            t0 = time.perf_counter()
            client.get("/api/layer", params=p).raise_for_status()
            samples.append(time.perf_counter() - t0)
    return samples


CHANGE_JS = """
async ([id, value, event]) => {
  const el = document.getElementById(id);
  const done = new Promise((resolve, reject) => {
    document.addEventListener("roofline:rendered", () => resolve(performance.now()), { once: true });
    setTimeout(() => reject(new Error(`no redraw within 10 s after ${id} = ${value}`)), 10000);
  });
  const t0 = performance.now();
  el.value = value;
  el.dispatchEvent(new Event(event, { bubbles: true }));
  return (await done) - t0;
}
"""


def bench_browser(base_url: str, n_changes: int) -> list[float] | str:
    """Seconds from each control change to the redrawn chart, or why it could not run."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "skipped: playwright is not installed"
    from roofline.web.harness import CHROMIUM_ARGS, chromium_path

    chromium = chromium_path()
    if chromium is None:
        return "skipped: no /usr/bin/chromium (apt-get install chromium)"
    changes = itertools.cycle(
        [("tokens", str(i), "input") for i in (13, 25, 29, 20, 33, 8)]  # slider stops 128 ... 131072
        + [("machine", "a100-80gb", "change"), ("attention", "flash", "change"),
           ("machine", "h100-sxm", "change"), ("attention", "naive", "change")]
    )
    samples = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=list(CHROMIUM_ARGS), headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 800})
        page.goto(base_url + "/")
        page.wait_for_function("Number(document.body.dataset.renderCount || 0) >= 1", timeout=30000)
        for _ in range(3):  # warm-up
            page.evaluate(CHANGE_JS, list(next(changes)))
        for _ in range(n_changes):
            samples.append(page.evaluate(CHANGE_JS, list(next(changes))) / 1e3)
        browser.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="timed API requests (default 300)")
    parser.add_argument("--changes", type=int, default=30, help="timed control changes in the browser (default 30)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    from roofline.web.app import create_app
    from roofline.web.harness import background_server

    with background_server(create_app()) as base_url:
        api = bench_api(base_url, max(args.requests, 2))
        p50, p95 = quantiles_ms(api)
        print(f"API  GET /api/layer (uvicorn on loopback, {len(api)} requests): p50 {p50:6.1f} ms   p95 {p95:6.1f} ms")
        browser = bench_browser(base_url, max(args.changes, 2))
        if isinstance(browser, str):
            print(f"browser control change -> redrawn chart: {browser}")
        else:
            p50, p95 = quantiles_ms(browser)
            print(f"browser control change -> redrawn chart ({len(browser)} changes):   p50 {p50:6.1f} ms   p95 {p95:6.1f} ms")


if __name__ == "__main__":
    main()
