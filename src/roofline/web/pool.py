"""The process pool the web app runs its heavy views in (the whole model, decode versus batch, the
serving simulation), so that the process answering requests is never held by them.

A fixed number of worker processes, each started on first use and kept; each runs one job at a
time (a picklable function and its arguments; its answer or its exception comes back). A request
that finds every worker busy waits its turn in a bounded queue: when the queue is full, when the
wait it would face (the jobs ahead of it times the recent mean job) is past ``wait_s``, or when it
has waited nearly ``wait_s`` (ANSWER_MARGIN_S less, for the answer itself), it gets :class:`Busy`:
the busy answer comes within ``wait_s``. A job past ``job_s`` has its worker killed
(the job with it) and a fresh one started for the next job: it is answered :class:`Busy`, not left
running. Nothing here is tied to one event loop: the state sits behind a thread lock and a waiter
is woken on its own loop, so uvicorn's loop and the test client's loops per request alike work.

Workers are forked from multiprocessing's fork server (a clean process that imported the job
module once, so a fresh worker costs a fork, not an interpreter start) at a lower priority than
the server's own process, ignore Ctrl-C (the server stops them), and exit when their pipe closes
or after ``idle_s`` without a job (the next job starts a fresh one). As with any multiprocessing
start but fork, a worker imports the parent's ``__main__`` script: a script that builds the app
keeps that under ``if __name__ == "__main__":`` (``roofline serve`` and ``python -m`` need nothing).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import math
import multiprocessing
import os
import signal
import threading
import traceback

WORKER_NICE = 5  # the workers yield the CPU to the process answering requests (a third of its share)
ANSWER_MARGIN_S = 0.2  # of a request's wait_s, kept for answering it busy (on a loaded machine, ~0.2 s)
START_S = 60.0  # a worker's start (the fork server's first start imports the library: seconds on a busy machine)


@dataclasses.dataclass(frozen=True)
class PoolLimits:
    """``workers`` processes; at most ``queued`` requests waiting for one, each at most ``wait_s``
    seconds; a job at most ``job_s`` seconds; a worker idle ``idle_s`` seconds exits."""

    workers: int
    queued: int
    wait_s: float
    job_s: float
    idle_s: float = 300.0


class Busy(Exception):
    """No answer from the pool: ``reason`` is "queue_full", "queue_wait", "time_limit",
    "worker_died" or "closed"; ``limit_s`` the limit that was reached (None for the last two)."""

    def __init__(self, message: str, reason: str, limit_s: float | None = None):
        super().__init__(message)
        self.reason, self.limit_s = reason, limit_s


def _worker_main(conn, initializer, initargs, idle_s: float) -> None:
    """A worker's life: ``initializer(*initargs)``, then (fn, args) in and (ok, value) out until
    its pipe closes, it is sent None or it has waited ``idle_s`` for a job."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.nice(WORKER_NICE)
    except OSError:
        pass
    try:
        if initializer is not None:
            initializer(*initargs)
    except BaseException as exc:
        conn.send((False, exc))
        return
    conn.send((True, None))  # ready: a job's time limit counts from its own start, not the worker's
    while conn.poll(idle_s):
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        fn, args = message
        try:
            answer = (True, fn(*args))
        except BaseException as exc:  # the caller gets it, with where it was raised
            exc.add_note("in the worker:\n" + "".join(traceback.format_exception(exc)))
            answer = (False, exc)
        try:
            conn.send(answer)
        except Exception as exc:  # an answer that cannot be pickled
            conn.send((False, RuntimeError(f"the worker's answer could not be sent back: {exc!r}")))


class _Slot:
    """One place in the pool: a worker process (None until started, and after it is killed or
    found dead) and the parent's end of its pipe."""

    def __init__(self):
        self.proc = self.conn = None
        self.pending = None  # (loop, future) of the job in flight: close() ends it on its loop

    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def start(self, context, initializer, initargs, idle_s: float) -> None:
        self.stop()
        ours, theirs = context.Pipe()
        proc = context.Process(target=_worker_main, args=(theirs, initializer, initargs, idle_s), daemon=True,
                               name="roofline-web-worker")
        proc.start()
        theirs.close()
        self.proc, self.conn = proc, ours
        ready = ours.poll(START_S)
        try:
            ok, value = ours.recv() if ready else (False, None)
        except (EOFError, OSError):
            ok, value = False, None
        if not ok:
            self.stop()
            if isinstance(value, BaseException):
                raise value
            raise Busy(f"a worker process did not start ({'it exited' if ready else f'no word within {START_S:g} s'}: "
                       "see the server's log); retry", "worker_died")

    def stop(self, kill: bool = True) -> None:
        """The worker ended (killed, or asked to exit when ``kill`` is False) and its pipe closed."""
        proc, conn, self.proc, self.conn = self.proc, self.conn, None, None
        if proc is None:
            return
        if kill:
            proc.kill()
        else:
            try:
                conn.send(None)
            except OSError:
                proc.kill()
        conn.close()
        try:
            threading.Thread(target=proc.join, args=(5,), daemon=True).start()  # reaped off the event loop
        except RuntimeError:  # at interpreter shutdown: the fork server reaps it
            pass


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


class WorkerPool:
    """``limits.workers`` worker processes running jobs for async callers (:meth:`run`)."""

    def __init__(self, limits: PoolLimits, initializer=None, initargs: tuple = (), preload: tuple[str, ...] = ()):
        self.limits, self._initializer, self._initargs = limits, initializer, initargs
        self._context = _context()
        if preload and self._context.get_start_method() == "forkserver":
            self._context.set_forkserver_preload(list(preload))
        self._lock = threading.Lock()
        self._idle = [_Slot() for _ in range(limits.workers)]
        self._all = list(self._idle)
        self._waiters: collections.deque = collections.deque()  # (loop, future) of callers waiting for a slot
        self._mean_job_s = 0.0  # of recent jobs (exponentially weighted): the wait a caller would face
        self._closed = False

    def pids(self) -> list[int]:
        return [s.proc.pid for s in self._all if s.proc is not None]

    async def run(self, fn, *args):
        """``fn(*args)`` in a worker: its value, or its exception raised here; :class:`Busy` when
        the queue or a limit refuses it."""
        loop = asyncio.get_running_loop()
        slot = await self._acquire(loop)
        try:
            if self._closed:
                raise Busy("the server is shutting down", "closed")
            if not slot.alive():  # first use, or after a kill or an idle exit: a fork, off the event loop
                await loop.run_in_executor(None, slot.start, self._context, self._initializer, self._initargs,
                                           self.limits.idle_s)
            started = loop.time()
            ok, value = await self._call(loop, slot, fn, args)
            self._mean_job_s += 0.2 * (loop.time() - started - self._mean_job_s)
        except BaseException:
            slot.stop()  # whatever it was doing is no one's job now
            raise
        finally:
            self._release(slot)
        if not ok:
            raise value
        return value

    def refusal(self) -> Busy | None:
        """Why a caller arriving now would be refused at once, if it would (None: it would run or wait)."""
        with self._lock:
            return None if self._idle and not self._closed else self._refusal()

    def _refusal(self) -> Busy | None:
        """Why a caller that finds no free worker is refused at once, if it is (under the lock)."""
        lim = self.limits
        if self._closed:
            return Busy("the server is shutting down", "closed")
        if len(self._waiters) >= lim.queued:
            return Busy(f"busy: {lim.workers} computations are running and {len(self._waiters)} are waiting, "
                        f"the most this server queues; retry", "queue_full", lim.wait_s)
        ahead = math.ceil((len(self._waiters) + 1) / max(lim.workers, 1))
        if ahead * self._mean_job_s > lim.wait_s:
            return Busy(f"busy: {len(self._waiters)} computations are waiting for {lim.workers} running ones, "
                        f"about {ahead * self._mean_job_s:.1f} s, past this server's limit of {lim.wait_s:g} s; retry",
                        "queue_wait", lim.wait_s)
        return None

    async def _acquire(self, loop) -> _Slot:
        with self._lock:
            if self._idle and not self._closed:
                return self._idle.pop()
            refusal = self._refusal()
            if refusal is not None:
                raise refusal
            waiter = (loop, loop.create_future())
            self._waiters.append(waiter)
        try:  # the wait ends early enough for the busy answer itself to come within wait_s
            return await asyncio.wait_for(waiter[1], self.limits.wait_s - min(ANSWER_MARGIN_S, self.limits.wait_s / 4))
        except TimeoutError:
            raise Busy(f"busy: {self.limits.workers} computations are running and this one found no place within "
                       f"this server's limit of {self.limits.wait_s:g} s; retry", "queue_wait", self.limits.wait_s) from None
        finally:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def _release(self, slot: _Slot) -> None:
        """The slot to the first caller still waiting (woken on its own loop), else back to idle."""
        with self._lock:
            if self._closed:
                slot.stop(kill=False)
                return
            while self._waiters and not self._closed:
                loop, future = self._waiters.popleft()
                if not future.done() and not loop.is_closed():
                    loop.call_soon_threadsafe(self._hand, future, slot)
                    return
            self._idle.append(slot)

    def _hand(self, future, slot: _Slot) -> None:  # on the waiter's loop: it may have stopped waiting
        if future.done():
            self._release(slot)
        else:
            future.set_result(slot)

    async def _call(self, loop, slot: _Slot, fn, args):
        conn, done = slot.conn, loop.create_future()
        slot.pending = (loop, done)

        def readable():
            loop.remove_reader(conn.fileno())
            if not done.done():
                try:
                    done.set_result(conn.recv())
                except (EOFError, OSError) as exc:
                    done.set_exception(exc)

        try:
            conn.send((fn, args))
            loop.add_reader(conn.fileno(), readable)
            return await asyncio.wait_for(done, self.limits.job_s)
        except TimeoutError:
            raise Busy(f"the computation ran past this server's limit of {self.limits.job_s:g} s a request and was "
                       f"stopped; ask for less (fewer users or tokens), or retry when the server is less busy",
                       "time_limit", self.limits.job_s) from None
        except (EOFError, OSError):
            raise Busy("the worker computing this request stopped; retry", "worker_died") from None
        finally:
            slot.pending = None
            loop.remove_reader(conn.fileno())  # before the pipe may close: a closed fd stays in the selector

    def close(self) -> None:
        """Idle workers asked to exit; a job in flight and a waiting caller are answered Busy
        ("closed") on their loops, and the job's worker killed there (web.pool.WorkerPool.run)."""
        with self._lock:
            self._closed = True
            waiters, self._waiters = list(self._waiters), collections.deque()
            idle, self._idle = self._idle, []
        in_flight = [s.pending for s in self._all if s.pending is not None]
        for loop, future in waiters + in_flight:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_refuse, future, Busy("the server is shutting down", "closed"))
        for slot in idle:
            slot.stop(kill=False)


def _refuse(future, busy: Busy) -> None:
    if not future.done():
        future.set_exception(busy)
