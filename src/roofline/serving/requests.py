"""The requests a serving run is fed (docs/serving.md): open loop (Poisson arrivals at a rate) or
closed loop (a fixed number of users), with prompt and output lengths fixed or drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from roofline.errors import MAX_CONTEXT, MAX_REQUESTS, RooflineError, check_number
from roofline.serving.parameters import BY_NAME  # the declared ranges: the CLI's, the API's and these checks'



@dataclass(frozen=True)
class Requests:
    """The workload: per request its prompt and output lengths; ``arrival_s`` for open loop, or
    ``concurrency`` users for closed loop (arrival_s None)."""

    input_tokens: np.ndarray
    output_tokens: np.ndarray
    arrival_s: np.ndarray | None = None
    concurrency: int | None = None
    label: str = ""
    rate_per_s: float | None = None  # open loop: the rate the arrivals offer (poisson_requests)
    burstiness: float | None = None  # open loop: the gaps' gamma shape (1: Poisson)

    @property
    def settings(self) -> dict:
        """How the requests arrive, as keys of a result's JSON."""
        if self.arrival_s is None:
            return {"arrivals": "closed loop", "concurrency": self.concurrency}
        if self.rate_per_s is None:
            return {"arrivals": "given times"}
        return {"arrivals": "poisson" if self.burstiness in (None, 1.0) else "gamma", "rate_per_s": self.rate_per_s,
                "burstiness": 1.0 if self.burstiness is None else self.burstiness}

    def __post_init__(self):
        n = len(self.input_tokens)
        if n == 0 or len(self.output_tokens) != n or (self.arrival_s is not None and len(self.arrival_s) != n):
            raise RooflineError("requests need as many input lengths, output lengths and arrival times, at least one",
                                field="requests")
        if n > MAX_REQUESTS:
            raise RooflineError(f"{n:,} requests: at most {MAX_REQUESTS:,}", field="requests")
        for what, a in (("input_len", self.input_tokens), ("output_len", self.output_tokens)):
            a = np.asarray(a)
            if a.min() < 1 or a.max() > MAX_CONTEXT or not np.all(np.isfinite(a)):
                raise RooflineError(f"{what} lengths must be whole numbers of at least 1 token; got {a.min():g} to {a.max():g}",
                                    field=what)
        total = np.asarray(self.input_tokens, dtype=float) + np.asarray(self.output_tokens, dtype=float)
        if total.max() > MAX_CONTEXT:
            i = int(np.argmax(total))
            what = "output_len" if self.output_tokens[i] > self.input_tokens[i] else "input_len"
            raise RooflineError(f"a request of {int(self.input_tokens[i]):,} + {int(self.output_tokens[i]):,} tokens: at most "
                                f"{MAX_CONTEXT:,} in all (longer is a typo, not a workload)", field=what)
        if (self.arrival_s is None) == (self.concurrency is None):
            raise RooflineError("give either arrival times (open loop) or a concurrency (closed loop)", field="rate")

    @property
    def n(self) -> int:
        return len(self.input_tokens)


def lengths(spec, n: int, rng: np.random.Generator, what: str) -> np.ndarray:
    """n lengths from ``spec``: a whole number (all the same), (lo, hi) (uniform, inclusive), or an array."""
    if isinstance(spec, (int, np.integer)) or (isinstance(spec, float) and spec.is_integer()):
        v = int(BY_NAME[what].check(spec))
        return np.full(n, v, dtype=np.int64)
    if isinstance(spec, tuple) and len(spec) == 2:
        lo, hi = int(BY_NAME[what].check(spec[0])), int(BY_NAME[what].check(spec[1]))
        if hi < lo:
            raise RooflineError(f"{what} range {lo}-{hi}: the upper end is below the lower", field=what)
        return rng.integers(lo, hi + 1, size=n, dtype=np.int64)
    try:
        a = np.asarray(spec, dtype=float)
    except (TypeError, ValueError):
        raise RooflineError(f"{what}: expected a length, a range or a list of lengths, not {spec!r:.60}", field=what) from None
    if a.ndim != 1 or len(a) == 0:
        raise RooflineError(f"{what}: expected a length, a range or a list of lengths", field=what)
    bad = ~np.isfinite(a) | (a < 1) | (a > MAX_CONTEXT) | (a != np.round(a))
    if bad.any():
        raise RooflineError(f"{what}: {a[bad][0]:g} (item {int(np.flatnonzero(bad)[0])}) is not a whole number of tokens "
                            f"from 1 to {int(MAX_CONTEXT):,}", field=what)
    return np.resize(a.astype(np.int64), n)


LENGTHS_MAX_BYTES = 64 * 2**20  # a lengths file of MAX_REQUESTS rows is well under this


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_lengths(path) -> tuple[np.ndarray, np.ndarray]:
    """(input lengths, output lengths) per request from a text file of two columns: a request a
    line, its prompt and output tokens separated by a comma, a tab or spaces (a dataset's measured
    lengths, e.g. ShareGPT's as vLLM's benchmark samples them). An optional header line names the
    columns (any words: 'input_len,output_len'; one that names them the other way round,
    'output_tokens,input_tokens', is read by its names); blank lines and lines starting with '#' are
    skipped. Every length must be a whole number of at least 1 token; a bad line is refused by
    its number. Requests take the rows in order (repeated when more are simulated than the file has)."""
    from roofline.files import read_text

    text = read_text(path, "lengths file", "lengths", LENGTHS_MAX_BYTES)
    rows, first, swapped = [], True, False
    for no, line in enumerate(text.splitlines(), 1):
        t = line.strip()
        if not t or t.startswith("#"):
            continue
        cells = t.replace(",", " ").split()
        header, first = first and not any(_is_number(c) for c in cells), False
        if header:  # the first line names the columns: read by name where the names say which is which
            roles = [_length_role(c) for c in cells]
            if len(cells) == 2 and roles == ["output", "input"]:
                swapped = True
            elif len(cells) == 2 and roles[0] == roles[1] and roles[0] is not None:
                raise RooflineError(f"lengths file {str(path)!r}, line {no}: both columns are named as {roles[0]} "
                                    f"lengths: {t[:60]!r}", field="lengths")
            continue
        if len(cells) != 2:
            raise RooflineError(f"lengths file {str(path)!r}, line {no}: expected two lengths (input, output), got "
                                f"{len(cells)} field(s): {t[:60]!r}", field="lengths")
        pair = []
        for c in cells:
            try:
                v = float(c)
            except ValueError:
                v = float("nan")
            if not math.isfinite(v) or v < 1 or v != int(v) or v > MAX_CONTEXT:
                raise RooflineError(f"lengths file {str(path)!r}, line {no}: {c!r} is not a whole number of tokens from 1 to "
                                    f"{int(MAX_CONTEXT):,}", field="lengths")
            pair.append(int(v))
        if sum(pair) > MAX_CONTEXT:
            raise RooflineError(f"lengths file {str(path)!r}, line {no}: {pair[0]:,} + {pair[1]:,} tokens is past "
                                f"{MAX_CONTEXT:,} in all", field="lengths")
        rows.append(pair)
        if len(rows) > MAX_REQUESTS:
            raise RooflineError(f"lengths file {str(path)!r}: more than {MAX_REQUESTS:,} requests", field="lengths")
    if not rows:
        raise RooflineError(f"lengths file {str(path)!r} holds no lengths (two columns a line: input, output)",
                            field="lengths")
    a = np.array(rows, dtype=np.int64)
    i, o = (1, 0) if swapped else (0, 1)
    return a[:, i].copy(), a[:, o].copy()


def _length_role(name: str) -> str | None:
    """'input' or 'output' for a header cell that says which ('input_len', 'prompt_tokens',
    'output_tokens', 'completion'), else None (any other word: the columns are input, output)."""
    n = name.lower()
    if any(w in n for w in ("output", "completion", "response", "generat", "decode")) or n in ("out", "out_len", "o"):
        return "output"
    if any(w in n for w in ("input", "prompt", "prefill", "context")) or n in ("in", "in_len", "i"):
        return "input"
    return None


# gamma shapes accepted, from near-simultaneous bursts to near-constant gaps: the declared range (serving.parameters)
BURSTINESS_RANGE = (BY_NAME["burstiness"].minimum, BY_NAME["burstiness"].maximum)


def check_burstiness(burstiness) -> float:
    """``burstiness`` as a float within BURSTINESS_RANGE, else a RooflineError naming it."""
    b = float(check_number("burstiness", burstiness, maximum=BURSTINESS_RANGE[1]))  # below the least, said as a shape
    if b < BURSTINESS_RANGE[0]:
        raise RooflineError(f"burstiness must be at least {BURSTINESS_RANGE[0]:g} (1 is Poisson, below it burstier), "
                            f"got {b:g}", field="burstiness")
    return b


def poisson_requests(rate_per_s: float, n: int, input_tokens, output_tokens, seed: int = 0,
                     burstiness: float = 1.0) -> Requests:
    """n requests arriving at ``rate_per_s`` on average, lengths from ``lengths``: a Poisson
    process (exponential gaps) at ``burstiness`` 1; else gaps drawn from a gamma distribution of
    shape ``burstiness`` and mean 1 / rate (scale 1 / (rate x burstiness)), as vLLM's serving
    benchmark draws them for its --burstiness (benchmarks/benchmark_serving.py, get_request):
    below 1 the arrivals come in bursts (coefficient of variation of the gaps 1 / sqrt(burstiness)),
    above 1 more evenly. The arrival times are then scaled so that the sample offers exactly
    ``rate_per_s`` (the last of n at (n - 1) / rate), as vLLM's get_request rescales its delays to
    n / rate "to stabilize the throughput data from different random seeds": 500 Poisson
    arrivals at 10/s offered 9.1 to 10.6/s by seed, and an SLO search read that spread as the
    answer."""
    BY_NAME["rate"].check(rate_per_s)
    b = check_burstiness(burstiness)
    n = int(BY_NAME["requests"].check(n))
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate_per_s, size=n) if b == 1.0 else rng.gamma(b, 1.0 / (rate_per_s * b), size=n)
    arrivals = np.cumsum(gaps)
    arrivals -= arrivals[0]
    if n > 1 and arrivals[-1] > 0:
        arrivals *= (n - 1) / rate_per_s / arrivals[-1]
    label = f"Poisson {rate_per_s:g} req/s" if b == 1.0 else f"{rate_per_s:g} req/s, gamma gaps of burstiness {b:g}"
    return Requests(lengths(input_tokens, n, rng, "input_len"), lengths(output_tokens, n, rng, "output_len"), arrivals,
                    label=label, rate_per_s=float(rate_per_s), burstiness=b)


def closed_requests(concurrency: int, n: int, input_tokens, output_tokens, seed: int = 0) -> Requests:
    """n requests from ``concurrency`` users, each sending its next when its last one finishes."""
    c = int(BY_NAME["concurrency"].check(concurrency))
    n = int(BY_NAME["requests"].check(n))
    rng = np.random.default_rng(seed)
    label = f"concurrency {c:,}" if c <= n else (f"concurrency {c:,}, but {n:,} in flight at most (only {n:,} "
                                                 f"request{'s' if n != 1 else ''}: give --requests {c:,} or more)")
    return Requests(lengths(input_tokens, n, rng, "input_len"), lengths(output_tokens, n, rng, "output_len"), None, c,
                    label=label)
