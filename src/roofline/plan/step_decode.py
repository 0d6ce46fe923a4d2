"""StepCost's decode sequence ops (plan/step.py's module docstring): which ops are token ops, each decode
sequence op reduced to F, B = c0 + c1 n + c2 sum(S) and checked, or tabulated from measured kernels
(MeasuredSeqOp), and their seconds in a step. A mixin: StepCost (step.py) sets what it reads.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from roofline.blocks import SPARSE_ATTENTION, SPARSE_GQA
from roofline.errors import RooflineError
from roofline.kernels import Kernel
from roofline.mixers import Attention, LatentAttention

_PROBE_M = (4, 16)  # token counts at which token ops are told from sequence ops
_PROBE_S = (64, 96, 160, 224)  # decode contexts of the linear fit (under any window of 256 or more)


MEASURED_CONTEXTS = np.geomspace(1.0, 2.0**21, 64)  # the decode attention grid's contexts (log-spaced to 2M)
EXACT_SEQUENCES = 64  # the grid's sequence counts: every one up to this, then log-spaced to max_seqs


@dataclass(frozen=True)
class MeasuredSeqOp:
    """A decode sequence op (a fused attention) priced from measured kernels: its body seconds for
    n sequences at a mean context s, tabulated once on a grid of (n, s) from the cost model's
    measured tables (MeasuredKernels: each point that table's kernel time, at least the op's
    roofline) and interpolated log-linearly in n and in s. A step's sequences have different
    contexts; the measured kernel ran n of one length: the step is priced at their mean (decode
    attention reads each sequence's keys once, so its bytes follow the sum)."""

    counts: np.ndarray  # the sequence counts of the grid (sorted)
    log_s: np.ndarray  # log of MEASURED_CONTEXTS
    log_t: np.ndarray  # (len(counts), len(log_s)): log body seconds
    lo: np.ndarray  # for n = 0 .. max: the grid row at or below n
    w: np.ndarray  # and the weight of the row above it (log n)
    basis: str  # "measured per size", as the op's prediction says
    source: str
    _lists: tuple = field(init=False, repr=False, compare=False)  # the grid as Python lists, for one context

    def __post_init__(self):
        object.__setattr__(self, "_lists", (self.log_s.tolist(), self.log_t.tolist(), self.lo.tolist(), self.w.tolist()))

    def seconds(self, n: int, mean_s):
        """Body seconds of n sequences at mean context ``mean_s`` (a float or an array of them). One
        context (a step's) is interpolated in plain Python, as np.interp does (clamped at the grid's ends),
        without numpy's per-call cost."""
        if not isinstance(mean_s, np.ndarray):
            xs, ys, lo, ws = self._lists
            n = min(int(n), len(lo) - 1)
            i, w = lo[n], ws[n]
            x = math.log(max(float(mean_s), 1.0))
            j = bisect_right(xs, x)
            if j == 0 or j == len(xs):
                k = 0 if j == 0 else -1
                t = ys[i][k] if w <= 0 else (1.0 - w) * ys[i][k] + w * ys[i + 1][k]
                return math.exp(t)
            f = (x - xs[j - 1]) / (xs[j] - xs[j - 1])
            a, b = ys[i][j - 1], ys[i][j]
            t = a + (b - a) * f
            if w > 0:
                a, b = ys[i + 1][j - 1], ys[i + 1][j]
                t = (1.0 - w) * t + w * (a + (b - a) * f)
            return math.exp(t)
        n = min(int(n), len(self.lo) - 1)
        i, w = int(self.lo[n]), float(self.w[n])
        x = np.log(np.maximum(mean_s, 1.0))
        t = np.interp(x, self.log_s, self.log_t[i])
        if w > 0:
            t = (1.0 - w) * t + w * np.interp(x, self.log_s, self.log_t[i + 1])
        return np.exp(t)


class DecodeFits:
    """StepCost's decode sequence ops (a mixin: it reads StepCost's and StepLayout's state)."""

    def _fit_decode_ops(self, kind, n: int, label: str, token_names: list[str]):
        """Append the decode sequence ops of ``kind`` (``n`` layers) to self._decode_fits: one group, or for a
        top-k attention (DSA, MSA) two (the indexer's ops over all S, the attention over min(S, k))."""
        span = int(getattr(kind.mixer, "span", 0) or 0)
        if span and self.verify_tokens > 1:
            raise RooflineError(f"{self.model.name}: speculative decoding over sliding-window layers is not modelled (a "
                                "verify step's window sums are not linear in the contexts)", field="spec_tokens")
        topk = int(getattr(kind.mixer, "index_topk", 0) or 0)
        if topk:  # DSA, MSA: the indexer's ops read all S, the attention min(S, k): two groups of one kind
            msa = isinstance(kind.mixer, Attention)
            sparse, family = (SPARSE_GQA, "MiniMax") if msa else (SPARSE_ATTENTION, "DeepSeek")
            if topk < 4:
                raise RooflineError(f"{self.model.name}: index_topk {topk}: the serving model fits the sparse attention "
                                    "at contexts under k and needs k of at least 4", field="model")
            if self.verify_tokens > 1:
                raise RooflineError(f"{self.model.name}: speculative decoding over {family} Sparse Attention is not "
                                    "modelled (a verify step's top-k selections are not linear in the contexts)",
                                    field="spec_tokens")
            self._decode_fits.append((n, 0, label, self._decode_fit(kind, token_names + [sparse], 0)))
            self._decode_fits.append((n, topk, label, self._decode_fit(kind, token_names, topk, only=sparse)))
            note = (f"{sparse} (decode): the cost model at the min(S, {topk}) {'keys' if msa else 'latents'} it reads "
                    f"(the measured {'attention' if msa else 'MLA'} tables time dense decode attention)")
            if self.measured:
                self._say(note)
        else:
            self._decode_fits.append((n, span, label, self._decode_fit(kind, token_names, span)))

    def _token_names(self, kind) -> list[str]:
        """Names of the kind's ops whose FLOPs and bytes depend on the step's token count only."""
        same = None
        for m in _PROBE_M:
            pre = {k.name: (float(k.flops), float(k.bytes)) for k in self._kernels(kind, False, m, 1, m)}
            dec = {k.name: (float(k.flops), float(k.bytes)) for k in self._kernels(kind, True, 1, m, _PROBE_S[0])}
            here = {n for n in pre if n in dec and np.allclose(pre[n], dec[n], rtol=1e-12, atol=0.0)}
            same = here if same is None else same & here
        order = [k.name for k in self._kernels(kind, False, 4, 1, 4)]
        return [n for n in order if n in same]

    def _decode_fit(self, kind, token_names, span, only: str = ""):
        """Each decode sequence op of ``kind`` (or the one named ``only``) as F, B = c0 + c1 n + c2 sum(S),
        from exact points, checked at one more; refused by name when it is not linear there."""
        probe = _PROBE_S
        if only and span < _PROBE_S[2]:  # a top-k under the probes: contexts inside it (k >= 4)
            probe = tuple(max(1, span * j // 4) for j in (1, 2, 3, 4))
        pts = [(1, probe[0]), (2, probe[0]), (1, probe[1])]
        check = (3, probe[2])
        if span:
            pts = [(b, min(s, span)) for b, s in pts]
            check = (3, min(check[1], span))
        design = np.array([[1.0, b, b * s] for b, s in pts])
        T = self.verify_tokens
        if T == 1:
            evals = [{k.name: k for k in self._kernels(kind, True, 1, b, s) if k.name not in token_names} for b, s in pts + [check]]
        else:  # a verify step: T queries at the positions S - T + 1 .. S, causal among themselves; MLA's through
            # the absorbed decode kernel over the latent cache, as engines verify (FlashMLA takes T queries a
            # sequence), each query reading all S latents (the T (T - 1) / 2 causal pairs it skips are not taken off)
            absorbed = isinstance(kind.mixer, LatentAttention)
            evals = [{k.name: k for k in self._kernels(kind, absorbed, T, b, s) if k.name not in token_names}
                     for b, s in pts + [check]]
        out = []
        for name, k0 in evals[0].items():
            if only and name != only:
                continue
            Fs = np.array([float(e[name].flops) for e in evals[:3]])
            Bs = np.array([float(e[name].bytes) for e in evals[:3]])
            cf, cb = np.linalg.solve(design, Fs), np.linalg.solve(design, Bs)
            b, s = check
            row = np.array([1.0, b, b * s])
            k3 = evals[3][name]
            if not (np.isclose(row @ cf, float(k3.flops), rtol=1e-9) and np.isclose(row @ cb, float(k3.bytes), rtol=1e-9)):
                raise RooflineError(f"{self.model.name}: the decode op {name!r} is not linear in the sequences and their "
                                    "contexts; the serving model cannot reduce it", field="model")
            out.append((name, k0.category, k0.dtype, k0.link, cf, cb, self._rates(k0),
                        self._measured_decode(kind, name, k0) if T == 1 else None))
        return out

    def _measured_decode(self, kind, name: str, k0: Kernel) -> MeasuredSeqOp | None:
        """The decode op ``name`` of ``kind`` tabulated from the cost model's measured kernels over
        (sequences, mean context) (MeasuredSeqOp), or None where the model has none or its tables
        do not price the op (then the op keeps the linear fit and the cost model, and notes() says
        why)."""
        cm = self.cost_model
        if not self.measured:
            return None
        top = max(-(-self.max_seqs // self._dp), 1)
        counts = np.unique(np.concatenate([np.arange(1.0, min(top, EXACT_SEQUENCES) + 1.0),
                                           np.round(np.geomspace(1.0, top, 48))]))
        B, S = np.meshgrid(counts, MEASURED_CONTEXTS, indexing="ij")
        k = {x.name: x for x in self._kernels(kind, True, 1, B.ravel(), S.ravel())}[name]
        if not cm.family_of(k0):
            return self._floored_decode(name, k, counts, B.shape, top)
        measured = np.asarray(cm._measured_s(k, self.machine), dtype=float)
        one = cm.predict_op({x.name: x for x in self._kernels(kind, True, 1, 1, 1024)}[name], self.machine)
        if not np.isfinite(measured).all() or one.basis == "cost model":
            note = f"{name} (decode): the cost model ({one.source or 'not in the tables'})"
            self._say(note)
            return self._floored_decode(name, k, counts, B.shape, top)
        body = measured.reshape(B.shape)  # _op_time's body (no launch): every size measured, its time the table's
        return self._seq_table(counts, body, top, "measured per size", one.source)

    def _floored_decode(self, name: str, k: Kernel, counts, shape, top: int) -> MeasuredSeqOp | None:
        """A decode op no measured table prices (DeepSeek Sparse Attention's indexer, top-k and sparse attention,
        MLA's absorbed batched matmuls): the cost model's body on the grid, each size at least the engine's
        kernel floor inside a CUDA graph (MeasuredKernels._floor, as a norm's: a kernel of a few hundred bytes
        still takes it, where the bandwidth alone prices it at a fraction of a microsecond); None where the floor
        is not read (moved to another GPU, no GEMM table) or under the body at every size: the linear fit, said."""
        est, why = self.cost_model._floor(k, self.machine)
        if est is None:
            note = f"decode ops no table measures: the cost model ({why})"
            self._say(note)
            return None
        note = f"decode ops no table measures: the cost model, {est.source}"
        self._say(note)
        return self._seq_table(counts, np.asarray(est.time_s, dtype=float).reshape(shape), top, "floor", est.source)

    @staticmethod
    def _seq_table(counts, body, top: int, basis: str, source: str) -> MeasuredSeqOp:
        """A MeasuredSeqOp of ``body`` seconds on the grid (counts x MEASURED_CONTEXTS)."""
        ns = np.arange(0, top + 1, dtype=float)
        lo = np.clip(np.searchsorted(counts, np.maximum(ns, 1.0), side="right") - 1, 0, len(counts) - 1)
        hi = np.minimum(lo + 1, len(counts) - 1)
        span = np.log(counts[hi]) - np.log(counts[lo])
        w = np.divide(np.log(np.maximum(ns, 1.0)) - np.log(counts[lo]), span, out=np.zeros_like(ns), where=span > 0)
        return MeasuredSeqOp(counts, np.log(MEASURED_CONTEXTS), np.log(body), lo, w, basis, source)

    def _decode_seconds(self, n: int, sum_s: float, contexts) -> float:
        """The decode sequence ops of one GPU: all n sequences, or with data-parallel attention the
        busiest GPU's ceil(n / g), at the mean context."""
        t = 0.0
        dp = self._dp
        scale = (-(-n // dp)) / n if dp > 1 and n else 1.0
        n = -(-n // dp) if dp > 1 else n
        keep = 1.0 - self.cost_model.overlap
        for layers, span, terms in self._decode_terms:
            s = (sum_s if not span else float(np.minimum(contexts, span).sum())) * scale
            for f0, f1, f2, b0, b1, b2, rc, rm, table in terms:
                if table is not None:
                    t += layers * float(table.seconds(n, s / n)) if n else 0.0
                    continue
                c, m = (f0 + f1 * n + f2 * s) * rc, (b0 + b1 * n + b2 * s) * rm  # overlapped_s, inline
                t += layers * (m + keep * c if m > c else c + keep * m)
        return t
