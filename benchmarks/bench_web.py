"""Latency of the web workshop (the target: p95 under 100 ms on the 2-core machine).

1. API: GET /api/layer against a real uvicorn server on 127.0.0.1 (one keep-alive client, a
   bounded number of requests sweeping tokens, machines and attention), p50/p95 in ms.
2. Browser: in headless Chromium, the time from a control change (the token slider, the machine,
   the attention) to the redrawn chart, timed inside the page from the change event to the page's
   ``roofline:rendered`` event (after both Plotly charts have drawn), p50/p95 in ms.
3. Drag: a run of slider ``input`` events on #tokens 30 ms apart, the time from the last one to the
   redraw that shows its value (earlier requests are aborted on the way), p50/p95 in ms.
4. First load: fresh browser contexts (no cache), navigation start to the first
   ``roofline:rendered`` event, p50/p95 in ms, the bytes transferred, and where the time goes
   (Plotly's download, the page's start-up requests).

    python3 benchmarks/bench_web.py [--requests 300] [--changes 30] [--drags 10] [--loads 10]

Needs the web extra and httpx; the browser part needs playwright and /usr/bin/chromium and is
skipped with a note otherwise. Only loopback traffic (a free port on 127.0.0.1, tests/web_harness.py's
background_server, stopped on the way out); every loop is bounded.

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): 2 API requests after 2 of warm-up, 2 control
changes after one of warm-up, 2 drags and 2 first loads; the figures mean nothing.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # web_harness: test-only code

from smoke import announce, smoke_or  # noqa: E402  (benchmarks/ is on sys.path as a script)

API_WARMUP = smoke_or(20, 2)
BROWSER_WARMUP = smoke_or(3, 1)


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
        for _ in range(API_WARMUP):
            client.get("/api/layer", params=next(params)).raise_for_status()
        for _ in range(n_requests):
            p = next(params)
            t0 = time.perf_counter()
            client.get("/api/layer", params=p).raise_for_status()
            samples.append(time.perf_counter() - t0)
    return samples


VIEWPORT = {"width": 1400, "height": 800}

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


DRAG_JS = """
async ([from, to, gapMs]) => {
  const slider = document.getElementById("tokens");
  const step = from < to ? 1 : -1;
  let last = 0, value = "";
  for (let i = from; ; i += step) {
    slider.value = String(i);
    slider.dispatchEvent(new Event("input", { bubbles: true }));
    last = performance.now();
    value = document.getElementById("tokens-number").value;
    if (i === to) break;
    await new Promise((resolve) => setTimeout(resolve, gapMs));
  }
  const shown = (e) => new URLSearchParams((e.detail && e.detail.query) || document.body.dataset.query || "").get("tokens");
  const done = new Promise((resolve, reject) => {
    const onRender = (e) => {
      if (shown(e) !== value) return;
      document.removeEventListener("roofline:rendered", onRender);
      resolve(performance.now());
    };
    document.addEventListener("roofline:rendered", onRender);
    setTimeout(() => reject(new Error(`no redraw showing tokens=${value} within 10 s`)), 10000);
  });
  return (await done) - last;
}
"""

# Before any of the page's scripts: the time (from navigation start) of the first redraw.
FIRST_RENDER_INIT_JS = """
document.addEventListener("roofline:rendered", () => { window.__firstRenderMs = performance.now(); }, { once: true });
"""

LOAD_TIMING_JS = """
() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const res = performance.getEntriesByType("resource");
  const sum = (xs, f) => xs.reduce((a, r) => a + r[f], 0);
  const plotly = res.find((r) => r.name.includes("plotly")) || null;
  const options = res.filter((r) => /\\/api\\/(machines|models|options)$/.test(r.name));
  return {
    first_render_ms: window.__firstRenderMs,
    transfer_bytes: nav.transferSize + sum(res, "transferSize"),
    decoded_bytes: nav.decodedBodySize + sum(res, "decodedBodySize"),
    plotly_bytes: plotly ? plotly.transferSize : 0,
    plotly_end_ms: plotly ? plotly.responseEnd : 0,
    dom_content_loaded_ms: nav.domContentLoadedEventEnd,
    options_start_ms: Math.min(...options.map((r) => r.startTime)),
    options_end_ms: Math.max(...options.map((r) => r.responseEnd)),
  };
}
"""


def launch_chromium(p):
    """Debian's Chromium with the harness's settings, or why it cannot run."""
    from web_harness import CHROMIUM_ARGS, chromium_path

    chromium = chromium_path()
    if chromium is None:
        return "skipped: no /usr/bin/chromium (apt-get install chromium)"
    return p.chromium.launch(executable_path=chromium, args=list(CHROMIUM_ARGS), headless=True)


def bench_browser(browser, base_url: str, n_changes: int, n_drags: int) -> tuple[list[float], list[float]]:
    """Seconds from each control change to the redrawn chart, and from the last input of each drag
    (8 slider stops, 30 ms apart) to the redraw that shows it."""
    changes = itertools.cycle(
        [("tokens", str(i), "input") for i in (13, 25, 29, 20, 33, 8)]  # slider stops 128 ... 131072
        + [("machine", "a100-80gb", "change"), ("attention", "flash", "change"),
           ("machine", "h100-sxm", "change"), ("attention", "naive", "change")]
    )
    drags = itertools.cycle([(13, 21), (21, 13), (25, 17), (17, 25)])  # 8 stops each way
    samples, dragged = [], []
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(base_url + "/")
    page.wait_for_function("Number(document.body.dataset.renderCount || 0) >= 1", timeout=30000)
    for _ in range(BROWSER_WARMUP):
        page.evaluate(CHANGE_JS, list(next(changes)))
    for _ in range(n_changes):
        samples.append(page.evaluate(CHANGE_JS, list(next(changes))) / 1e3)
    for _ in range(n_drags):
        dragged.append(page.evaluate(DRAG_JS, [*next(drags), 30]) / 1e3)
    page.close()
    return samples, dragged


def bench_first_load(browser, base_url: str, n_loads: int) -> list[dict]:
    """``n_loads`` fresh contexts (no cache; one untimed load first, to warm Chromium and the
    server): each load's LOAD_TIMING_JS figures. Fails on a page error."""
    loads = []
    for i in range(n_loads + 1):
        context = browser.new_context(viewport=VIEWPORT)
        context.add_init_script(FIRST_RENDER_INIT_JS)
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.goto(base_url + "/")
        page.wait_for_function("Number(document.body.dataset.renderCount || 0) >= 1", timeout=30000)
        timing = page.evaluate(LOAD_TIMING_JS)
        context.close()
        if errors:
            raise RuntimeError(f"the page reported errors on load: {errors}")
        if i:
            loads.append(timing)
    return loads


def machine_line() -> str:
    """The CPU model (from /proc/cpuinfo) and the cores this process may use."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpu}, {cores} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=smoke_or(300, 2), help="timed API requests (default 300)")
    parser.add_argument("--changes", type=int, default=smoke_or(30, 2), help="timed control changes in the browser (default 30)")
    parser.add_argument("--drags", type=int, default=smoke_or(10, 2), help="timed slider drags in the browser (default 10)")
    parser.add_argument("--loads", type=int, default=smoke_or(10, 2), help="timed first loads, each in a fresh context (default 10)")
    args = parser.parse_args()
    announce()
    warnings.simplefilter("ignore")

    from roofline.web.app import create_app
    from web_harness import background_server

    rows = []  # (what, samples, p50 ms, p95 ms)
    with background_server(create_app()) as base_url:
        api = bench_api(base_url, max(args.requests, 2))
        rows.append(("GET /api/layer (uvicorn, loopback)", len(api), *quantiles_ms(api)))
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            sync_playwright = None
            print("browser: skipped: playwright is not installed")
        if sync_playwright is not None:
            with sync_playwright() as p:
                browser = launch_chromium(p)
                if isinstance(browser, str):
                    print(f"browser: {browser}")
                else:
                    changes, drags = bench_browser(browser, base_url, max(args.changes, 2), max(args.drags, 2))
                    loads = bench_first_load(browser, base_url, max(args.loads, 2))
                    browser.close()
                    rows.append(("control change -> redrawn chart", len(changes), *quantiles_ms(changes)))
                    rows.append(("drag: last slider input -> its redraw", len(drags), *quantiles_ms(drags)))
                    rows.append(("first load -> first render (no cache)", len(loads),
                                 *quantiles_ms([t["first_render_ms"] / 1e3 for t in loads])))
                    t = loads[len(loads) // 2]
                    print(f"first load: {t['transfer_bytes'] / 1e3:,.0f} kB transferred ({t['decoded_bytes'] / 1e3:,.0f} kB "
                          f"decoded), Plotly {t['plotly_bytes'] / 1e3:,.0f} kB done at {t['plotly_end_ms']:.0f} ms, "
                          f"DOMContentLoaded {t['dom_content_loaded_ms']:.0f} ms, /api/machines+models+options "
                          f"{t['options_start_ms']:.0f}-{t['options_end_ms']:.0f} ms, first render "
                          f"{t['first_render_ms']:.0f} ms (one load)")
    print(f"\n{machine_line()}; {datetime.date.today().isoformat()}")
    print(f"{'':42} {'n':>4} {'p50 ms':>8} {'p95 ms':>8}")
    for what, n, p50, p95 in rows:
        print(f"{what:42} {n:4d} {p50:8.1f} {p95:8.1f}")


if __name__ == "__main__":
    main()
