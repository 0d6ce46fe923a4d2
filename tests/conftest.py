"""Suite-wide settings. With ROOFLINE_NO_SKIP=1 (set by test.sh, hence CI) a skipped test fails the
run, so a missing browser, extra or torch cannot pass silently; only the GPU tier may skip on a
machine without CUDA, and the browser tests where test.sh found no Chromium and said so
(ROOFLINE_NO_BROWSER=1, never in CI)."""

import os

import pytest

GPU_WORDS = ("cuda", "gpu")
BROWSER_WORDS = ("chromium",)


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("ROOFLINE_NO_SKIP") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    allowed = GPU_WORDS + (BROWSER_WORDS if os.environ.get("ROOFLINE_NO_BROWSER") == "1" else ())
    bad = []
    for report in reporter.stats.get("skipped", []):
        reason = str(report.longrepr).lower()
        if not any(w in reason for w in allowed):
            bad.append(f"{report.nodeid}: {report.longrepr[-1] if isinstance(report.longrepr, tuple) else reason}")
    if bad:
        reporter.write_line("ROOFLINE_NO_SKIP=1: these skipped, and every test must run here:", red=True)
        for line in bad:
            reporter.write_line(f"  {line}", red=True)
        session.exitstatus = 1


# -- the tiers: markers the fast loop leaves out (docs/development.md) -----------------------------
# `slow` is put on a test by hand (@pytest.mark.slow: a search or a calibration of seconds); the
# others follow from what a test is: it drives Chromium (browser), it is a fuzz file (fuzz), it runs
# the documentation's examples or the notebook (docs).

FUZZ_FILES = {"test_cli_fuzz.py", "test_web_fuzz.py"}
DOCS_FILES = {"test_docs.py", "test_notebook.py"}
BROWSER_FIXTURES = {"page", "browser", "base_url_web"}  # pytest-playwright's, and the server the browser tests load


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = item.path.name
        if name in FUZZ_FILES:
            item.add_marker(pytest.mark.fuzz)
        if name in DOCS_FILES:
            item.add_marker(pytest.mark.docs)
        params = item.callspec.params if hasattr(item, "callspec") else {}  # a parameter named page is no browser page
        if BROWSER_FIXTURES & (set(getattr(item, "fixturenames", ())) - set(params)):
            item.add_marker(pytest.mark.browser)


# -- the browser tests' two fixtures (test_web_*.py): one home ------------------------------------
# Imported lazily, so the suite's other tests need neither the web extra nor Playwright.



@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright launches Debian's Chromium by its path, never a downloaded build."""
    from web_harness import CHROMIUM_ARGS, chromium_path

    return {**browser_type_launch_args, "executable_path": chromium_path(), "args": list(CHROMIUM_ARGS), "headless": True}


@pytest.fixture(scope="module")
def base_url_web():
    """The workshop on a free loopback port, one server per test module."""
    from web_harness import background_server

    from roofline.web.app import create_app

    with background_server(create_app()) as url:
        yield url


# -- fixtures several test files share: one home -----------------------------------------------------

@pytest.fixture(scope="module")
def client():
    """The web app's test client (a module's own ``client`` fixture, where it needs other settings, wins)."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from roofline.web.app import create_app

    return TestClient(create_app())


@pytest.fixture(scope="module")
def step():
    """The serving tests' step: Llama 3 8B on an H100, eager (serving_common.llama_step)."""
    from serving_common import llama_step

    return llama_step()
