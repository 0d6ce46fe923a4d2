"""Whether the machine held still while it was measured: a reference kernel between probe groups.

`roofline calibrate` times one fixed small matmul (REFERENCE_N) before its first probe group and
after every group. On a quiet machine its times agree within a few per cent; a co-running process
moves them (on the 2-core VM of issue 38 one other job moved every calibrated prediction by 25-40
points, and nothing said so). DriftGuard runs each group between two reference timings and keeps
the group's figures when both stay within DRIFT_BOUND of the quickest reference of the run; else it
measures the group again, at most MAX_REPEATS times, and once all groups are in, measures again the
ones kept beside a reference that a later, quieter one showed to be slow. A repeat waits for the
reference to come back within the bound (SETTLE_TRIES timings at most) before it starts. Figures still beside a
reference beyond the bound refuse the run (unless allowed: --allow-drift, said in the profile).

The machine's load is recorded with it: the 1-minute load average at the start and the end, and
the process's own CPU seconds per wall second per thread (under 1 when others took its cores).
`roofline check` and `roofline profile` time the reference again and say when it moved beyond the
bound since calibrating (ReferenceCheck). Numpy-free and torch-free: the kernel itself is timed in
reference.py.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from typing import Callable

from roofline.errors import RooflineError

DRIFT_BOUND = 0.10  # the reference may run this much slower than its quickest time in the run (0.10: 10%)
MAX_REPEATS = 2  # a probe group measured again at most this many times when its reference drifted
SETTLE_TRIES = 5  # before a repeat, the reference timed again at most this many times until back within the bound
REFERENCE_N = {"cpu": 128, "cuda": 1024}  # the reference: an fp32 (n, n) @ (n, n) matmul
REFERENCE_DTYPE = "fp32"
CPU_SHARE_FLOOR = 0.8  # a CPU calibration whose process ran less of the time per thread than this shared its cores


def load_average() -> float | None:
    """The 1-minute load average (runnable processes, this one included); None where the OS has none."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


@dataclass(frozen=True)
class ReferenceRun:
    """The reference kernel over one calibration: ``reference_s`` every timing in order (seconds,
    medians), ``kept_s`` the timings on either side of the figures kept, ``repeats`` the probe
    groups measured again, ``allowed`` true when --allow-drift kept figures beyond ``bound``;
    ``load_start``/``load_end`` the 1-minute load average, ``cpu_share`` the process's CPU seconds
    per wall second per thread over the run (None where unknown)."""

    kernel: str
    n: int
    reference_s: tuple[float, ...]
    kept_s: tuple[float, ...]
    bound: float = DRIFT_BOUND
    repeats: int = 0
    allowed: bool = False
    load_start: float | None = None
    load_end: float | None = None
    cpu_share: float | None = None

    @property
    def drift(self) -> float:
        """max / min of every reference timing of the run (1.0: no drift)."""
        return max(self.reference_s) / min(self.reference_s)

    @property
    def kept_drift(self) -> float:
        """The slowest reference beside a kept figure over the run's quickest."""
        return max(self.kept_s) / min(self.reference_s)

    @property
    def beyond(self) -> bool:
        return self.kept_drift > 1.0 + self.bound

    @property
    def shared(self) -> bool:
        """The process ran under CPU_SHARE_FLOOR of the wall time per thread: others took turns on its
        cores (a CPU calibration's; a GPU run's process waits on the device, which is no sign)."""
        return self.cpu_share is not None and self.cpu_share < CPU_SHARE_FLOOR

    @property
    def settled_s(self) -> float:
        """The reference's time as the kept figures saw it: the median of ``kept_s``."""
        s = sorted(self.kept_s)
        return (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2

    def load_text(self) -> str:
        parts = []
        if self.load_start is not None and self.load_end is not None:
            parts.append(f"load average {self.load_start:.2f} at the start, {self.load_end:.2f} at the end")
        if self.cpu_share is not None:
            parts.append(f"this process ran {self.cpu_share:.0%} of the time per thread")
        return "; ".join(parts) or "load not known"

    def text(self) -> str:
        """One line: the reference's range, its drift against the bound, the load."""
        lo, hi = min(self.reference_s), max(self.reference_s)
        return (f"reference {self.kernel} {lo * 1e6:,.1f}-{hi * 1e6:,.1f} us over {len(self.reference_s)} timings, "
                f"drift {self.drift - 1:.1%}, kept figures {self.kept_drift - 1:.1%} (bound {self.bound:.0%})"
                + (f", {self.repeats} probe group(s) measured again" if self.repeats else "") + f"; {self.load_text()}")


class DriftError(RooflineError):
    """A calibration whose reference drifted beyond the bound after the repeats; ``run`` its record."""

    def __init__(self, message: str, run: ReferenceRun):
        super().__init__(message, field="allow_drift")
        self.run = run


def refusal(run: ReferenceRun) -> DriftError:
    return DriftError(
        f"the machine moved during calibration: the reference {run.kernel} took {min(run.reference_s) * 1e6:,.1f} us at "
        f"its quickest and {max(run.kept_s) * 1e6:,.1f} us beside figures kept (+{run.kept_drift - 1:.0%}, bound "
        f"{run.bound:.0%}) after {run.repeats} repeat(s); {run.load_text()}. Calibrate again on a quieter machine, or "
        "give --allow-drift to keep these figures (the profile says so)", run)


class DriftGuard:
    """Runs probe groups between reference timings (see the module docstring). ``timer()`` times the
    reference once and returns seconds; ``loadavg``, ``cpu_clock`` and ``wall_clock`` are injectable
    for tests. ``results[name]`` holds each group's kept figures."""

    def __init__(self, timer: Callable[[], float], kernel: str, n: int, *, bound: float = DRIFT_BOUND,
                 max_repeats: int = MAX_REPEATS, allow: bool = False, threads: int = 1,
                 loadavg: Callable[[], float | None] = load_average, cpu_clock: Callable[[], float] = time.process_time,
                 wall_clock: Callable[[], float] = time.perf_counter):
        self.timer, self.kernel, self.n, self.bound = timer, kernel, n, bound
        self.max_repeats, self.allow, self.threads = max_repeats, allow, max(1, int(threads))
        self.loadavg, self.cpu_clock, self.wall_clock = loadavg, cpu_clock, wall_clock
        self.load_start, self.cpu0, self.wall0 = loadavg(), cpu_clock(), wall_clock()
        self.times: list[float] = []
        self.kept: dict[str, tuple[float, float]] = {}
        self.attempts: dict[str, int] = {}
        self.fns: dict[str, Callable[[], object]] = {}
        self.results: dict[str, object] = {}

    def _reference(self) -> float:
        t = float(self.timer())
        self.times.append(t)
        return t

    def _steady(self, brackets: tuple[float, float]) -> bool:
        return max(brackets) <= (1.0 + self.bound) * min(self.times)

    def _settled(self, last: float) -> float:
        """The reference timed again (at most SETTLE_TRIES times) until it is back within the bound:
        a repeat that starts on a busy machine would be disturbed as the first was."""
        for _ in range(SETTLE_TRIES):
            if self._steady((last, last)):
                break
            last = self._reference()
        return last

    def _measure(self, name: str, before: float) -> None:
        while True:
            out = self.fns[name]()
            after = self._reference()
            self.attempts[name] = self.attempts.get(name, 0) + 1
            self.kept[name], self.results[name] = (before, after), out
            if self._steady((before, after)) or self.attempts[name] > self.max_repeats:
                return
            before = self._settled(after)

    def run(self, name: str, fn: Callable[[], object]):
        """Measure one group (its reference before it is the previous group's after) and return its figures."""
        self.fns[name] = fn
        before = self.times[-1] if self.times else self._reference()
        self._measure(name, before)
        return self.results[name]

    def settle(self) -> None:
        """Measure again the groups kept beside a reference beyond the bound of the run's quickest,
        while their repeats last."""
        for name in list(self.kept):
            if not self._steady(self.kept[name]) and self.attempts[name] <= self.max_repeats:
                self._measure(name, self._settled(self._reference()))

    def finish(self) -> ReferenceRun:
        """The run's record; a DriftError (nothing written) when figures kept are beyond the bound
        and the guard does not allow it. No group is measured again here (settle first): the figures
        the caller took from ``results`` are the ones the record describes."""
        if not self.times:  # no group was run: the reference once, for the record
            self._reference()
        wall = self.wall_clock() - self.wall0
        kept = tuple(t for pair in self.kept.values() for t in pair) or tuple(self.times)
        run = ReferenceRun(self.kernel, self.n, tuple(self.times), kept, self.bound,
                           sum(a - 1 for a in self.attempts.values()), False, self.load_start, self.loadavg(),
                           (self.cpu_clock() - self.cpu0) / (wall * self.threads) if wall > 0 else None)
        if run.beyond:
            if not self.allow:
                raise refusal(run)
            run = dataclasses.replace(run, allowed=True)
        return run


@dataclass(frozen=True)
class ReferenceCheck:
    """The reference timed again (``now_s``) against the calibration's (``then_s``, its settled
    time): ``moved`` when the ratio leaves [1 / (1 + bound), 1 + bound]."""

    kernel: str
    then_s: float
    now_s: float
    bound: float
    load_then: float | None = None
    load_now: float | None = None

    @property
    def ratio(self) -> float:
        return self.now_s / self.then_s

    @property
    def moved(self) -> bool:
        return not 1.0 / (1.0 + self.bound) <= self.ratio <= 1.0 + self.bound

    def text(self) -> str:
        load = ("" if self.load_then is None or self.load_now is None else
                f"; load average {self.load_now:.2f} now, {self.load_then:.2f} when calibrating")
        return (f"the machine moved since calibrating: the reference {self.kernel} takes {self.now_s * 1e6:,.1f} us now "
                f"against {self.then_s * 1e6:,.1f} us in the profile ({self.ratio - 1:+.0%}, bound {self.bound:.0%})"
                f"{load}; the calibrated predictions assume the machine as it was")


def compare(run: ReferenceRun, now_s: float, load_now: float | None = None) -> ReferenceCheck:
    return ReferenceCheck(run.kernel, run.settled_s, float(now_s), run.bound, run.load_end, load_now)


def kernel_name(n: int) -> str:
    return f"{REFERENCE_DTYPE} matmul {n}x{n}x{n}"
