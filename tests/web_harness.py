"""Run the workshop in-process on a free loopback port, and the Chromium settings that drive it:
shared by the browser tests, benchmarks/bench_web.py and docs/make_screenshots.py (test-only code,
so it lives here and not in the package). Nothing here downloads a browser; it uses the
system's Chromium (Debian: ``apt-get install chromium``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
import time
from typing import Iterator

CHROMIUM_ARGS = (
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


# Why a browser test skips, and what to do about it (tests/conftest.py lets such a skip pass only
# where test.sh found no Chromium and said so).
CHROMIUM_MISSING = ("no Chromium at $ROOFLINE_CHROMIUM, /usr/bin/chromium or on PATH: install it (Debian: "
                    "sudo apt-get install chromium) or set ROOFLINE_CHROMIUM to an executable Chromium")


def chromium_path() -> str | None:
    """The system Chromium: $ROOFLINE_CHROMIUM, /usr/bin/chromium, or chromium on PATH."""
    for candidate in (os.environ.get("ROOFLINE_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def background_server(app, host: str = "127.0.0.1", start_timeout_s: float = 20.0) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a daemon thread; yield its base URL; stop it on exit, and its
    plan views' worker processes with it (lifespan is off here)."""
    import uvicorn

    port = free_port(host)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name="roofline-web", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the workshop server did not start on {host}:{port}")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        if hasattr(app, "state") and hasattr(app.state, "pool"):
            app.state.pool.close()
