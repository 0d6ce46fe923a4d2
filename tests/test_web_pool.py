"""The heavy views run in a pool of worker processes (web.pool, issue 38): a light request is answered
while every worker is held; a full queue and a wait past its limit are a 503 with Retry-After; a job
past its time limit has its worker killed and is answered 503; the workers stop with the app.

The heavy job is made slow deterministically: the app's job is replaced by ``gated``, which marks
that it started and then waits for a gate file the test creates (no timing race decides a test)."""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import time
import warnings
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed: pip install 'roofline[web]'")
pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from roofline.web import jobs
from roofline.web.app import create_app
from roofline.web.pool import Busy, PoolLimits, WorkerPool

GATED_BODY = b'{"gated":true}'


def run_apart(make):
    """asyncio.run(make()) on a thread of its own: the test session may already run an event loop on this
    one (the browser tests' Playwright leaves one), where asyncio.run refuses to start."""
    out = {}

    def go():
        try:
            out["value"] = asyncio.run(make())
        except BaseException as exc:  # noqa: BLE001 - raised again on the test's thread
            out["error"] = exc

    thread = threading.Thread(target=go)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def gated(folder: str, q) -> bytes:
    """In a worker: mark this job started (a file named by its pid), then wait for ``folder``/open
    (at most 60 s) and answer GATED_BODY."""
    (Path(folder) / f"started-{os.getpid()}-{time.monotonic_ns()}").touch()
    deadline = time.monotonic() + 60
    while not (Path(folder) / "open").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return GATED_BODY


def wait_for(condition, timeout_s: float = 60.0) -> None:
    """Until ``condition()`` (a worker's first start on a busy machine takes seconds)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def started(folder: Path) -> int:
    return len(list(folder.glob("started-*")))


class Background:
    """A GET on its own thread (the test client gives each its own event loop); ``.response``."""

    def __init__(self, client, path: str, **params):
        self.response = None
        self.thread = threading.Thread(target=self._get, args=(client, path, params), daemon=True)
        self.thread.start()

    def _get(self, client, path, params):
        self.response = client.get(path, **({"timeout": params.pop("timeout")} if "timeout" in params else {}),
                                   params=params)

    def result(self, timeout_s: float = 60.0):
        self.thread.join(timeout_s)
        assert not self.thread.is_alive()
        return self.response


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def gate(tmp_path, monkeypatch) -> Path:
    """The decode view replaced by ``gated`` over ``tmp_path`` (the model and serving views as they are)."""
    monkeypatch.setattr(jobs, "decode_view", functools.partial(gated, str(tmp_path)))
    return tmp_path


def test_a_light_request_is_answered_while_every_worker_computes(gate):
    app = create_app(pool_limits=PoolLimits(workers=2, queued=4, wait_s=60, job_s=120))
    with TestClient(app) as client:
        heavy = [Background(client, "/api/decode", batch=b) for b in (1, 2)]
        wait_for(lambda: started(gate) == 2)  # both workers are held by a job that does not end by itself
        for path in ("/api/layer", "/api/options", "/"):
            assert client.get(path).status_code == 200
        assert all(h.thread.is_alive() for h in heavy)  # still computing when the light ones were answered
        (gate / "open").touch()
        for h in heavy:
            r = h.result()
            assert r.status_code == 200 and r.content == GATED_BODY and r.headers["content-type"] == "application/json"


def test_a_full_queue_and_a_wait_past_the_limit_are_503_with_retry_after(gate):
    wait_s = 0.5
    app = create_app(pool_limits=PoolLimits(workers=1, queued=1, wait_s=wait_s, job_s=120))
    with TestClient(app) as client:
        running = Background(client, "/api/decode")
        wait_for(lambda: started(gate) == 1)
        queued = Background(client, "/api/decode")
        wait_for(lambda: len(app.state.pool._waiters) == 1)
        full = client.get("/api/decode")  # one running, one waiting: the queue (1) is full
        assert full.status_code == 503 and full.json()["reason"] == "queue_full" and full.headers["retry-after"] == "1"
        assert "busy" in full.json()["detail"]
        waited = queued.result()  # it waited wait_s for the worker and was told to retry
        assert waited.status_code == 503 and waited.json()["reason"] == "queue_wait"
        assert waited.json()["limit_s"] == wait_s and waited.headers["retry-after"] == "1"
        # the light views are not in this queue
        assert client.get("/api/layer").status_code == 200
        (gate / "open").touch()
        assert running.result().status_code == 200


def test_a_job_past_its_time_limit_is_stopped_and_its_worker_replaced(gate):
    app = create_app(pool_limits=PoolLimits(workers=1, queued=1, wait_s=60, job_s=1.0))
    with TestClient(app) as client:
        assert client.get("/api/model").status_code == 200  # the worker is started (seconds, the first time)
        (pid,) = app.state.pool.pids()
        r = client.get("/api/decode")  # the gate never opens: the job would run for a minute
        assert r.status_code == 503 and r.json()["reason"] == "time_limit" and r.json()["limit_s"] == 1.0
        assert "limit of 1 s" in r.json()["detail"] and "retry-after" in r.headers
        wait_for(lambda: gone(pid), 10)  # killed, not left running
        assert client.get("/api/model").status_code == 200  # a fresh worker answers the next one
        assert app.state.pool.pids() and app.state.pool.pids() != [pid]


def test_the_workers_stop_with_the_app():
    app = create_app(pool_limits=PoolLimits(workers=2, queued=2, wait_s=60, job_s=120))
    with TestClient(app) as client:
        first = Background(client, "/api/serving")  # two at once: both workers start
        assert client.get("/api/decode").status_code == 200 and first.result().status_code == 200
        pids = app.state.pool.pids()
        assert len(pids) == 2
    wait_for(lambda: all(gone(pid) for pid in pids), 10)


def test_a_job_in_flight_when_the_pool_closes_is_refused_and_its_worker_killed(tmp_path):
    pool = WorkerPool(PoolLimits(workers=1, queued=1, wait_s=60, job_s=120))

    async def main():
        job = asyncio.ensure_future(pool.run(gated, str(tmp_path), None))
        while started(tmp_path) == 0:
            await asyncio.sleep(0.02)
        (pid,) = pool.pids()
        pool.close()
        with pytest.raises(Busy) as refused:
            await asyncio.wait_for(job, 30)
        return pid, refused.value.reason

    pid, reason = run_apart(main)
    assert reason == "closed"
    wait_for(lambda: gone(pid), 10)


def test_a_library_error_in_a_worker_is_the_same_422():
    with TestClient(create_app()) as client:
        r = client.get("/api/decode", params={"tp": 3})  # Llama 3 8B's 8 KV heads: tp must divide them
        assert r.status_code == 422 and r.json()["field"] == "tp" and "model" in r.json()["fields"]


def test_the_server_keeps_idle_connections_longer_than_http_clients_do():
    """A client that sends on a kept-alive connection as the server closes it gets no answer (issue
    38: 4 of 200 dropped): the server's idle timeout must outlast the clients' own. httpx keeps an
    idle connection keepalive_expiry (5 s by default); uvicorn's own default was also 5 s."""
    import httpx

    from roofline.web.server import MAX_CONNECTIONS, uvicorn_config

    config = uvicorn_config(create_app(), "127.0.0.1", 0)
    assert config.timeout_keep_alive > 2 * httpx.Limits().keepalive_expiry
    assert config.limit_concurrency == MAX_CONNECTIONS


def test_every_connection_is_answered_while_the_pool_is_saturated(gate):
    """40 clients on kept-alive connections to a real uvicorn server ask three times each while the
    one worker is held: each gets an answer (a 503 with Retry-After), none a dropped connection."""
    import asyncio as aio

    import httpx
    import uvicorn

    from roofline.web.server import listen, uvicorn_config

    app = create_app(pool_limits=PoolLimits(workers=1, queued=2, wait_s=0.3, job_s=120))
    sock = listen("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", sock.getsockname()[1]))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        wait_for(lambda: server.started, 30)
        held = Background(httpx, base + "/api/decode", timeout=120)  # holds the worker until the gate opens
        wait_for(lambda: started(gate) == 1)

        async def clients():
            async with httpx.AsyncClient(base_url=base, timeout=60, limits=httpx.Limits(max_connections=40)) as c:
                async def one(i):
                    return [(await c.get("/api/decode", params={"batch": i + 1})) for _ in range(3)]
                return [r for rs in await aio.gather(*(one(i) for i in range(40))) for r in rs]

        answers = run_apart(clients)  # an httpx error (a dropped connection) would raise here
        assert len(answers) == 120 and all(r.status_code == 503 and r.headers["retry-after"] for r in answers)
        assert httpx.get(base + "/api/options", timeout=60).status_code == 200  # a light view, meanwhile
        (gate / "open").touch()
        assert held.result().status_code == 200
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
        app.state.pool.close()

