"""One engine step of a serving deployment, costed op by op and reduced to closed form (docs/serving.md).

A continuous-batching engine (vLLM, SGLang, TensorRT-LLM) runs steps: in one step every running
sequence that is decoding feeds its last token against its own context, and prompts are fed in
chunks of C tokens against the prefix already cached, under a budget of tokens per step. The step
is one forward pass over all those tokens:

- **token ops** (projections, MLP or experts, norms, residual adds, the embedding gather, the
  tensor-parallel all-reduces) run once over all M tokens of the step: each weight is read once
  per step, whatever mix of decodes and chunks makes up M. Their FLOPs and bytes depend on M only,
  so they are tabulated once per configuration for M = 1 .. the token budget;
- **sequence ops** (the attention core, SSM state updates) depend on each sequence's context:
  decode's, one query against S cached keys, has FLOPs and bytes linear in the number of decoding
  sequences n and in the sum of their contexts (of min(S, window) for a sliding window): they are
  reduced to c0 + c1 n + c2 sum(S) per op, checked exact at points the fit did not use; a chunk's
  (T = C queries at positions P+1..P+C) is costed from the same layer ops per (C, P) and cached;
  all decodes of a step are one batched kernel, and so are all chunks (varlen attention);
- **logit ops** (final norm and LM head) run on one row per token a decode feeds and the last row of
  every prompt chunk (the engines compute logits there for a partial chunk too and drop its sample):
  tabulated for R = 1 .. max sequences; the LM head priced on a measured GEMM table at R rows where
  the cost model has one.

Which ops are token ops is found, not assumed: an op of a layer kind whose FLOPs and bytes are the
same for one sequence of m tokens (prefill) and m sequences of one token (decode) at two m.

Launches: each op run pays the cost model's launch; a step of decodes only replays a CUDA graph
when ``cuda_graph`` (one launch for the step, as engines capture decode batches); a step with a
prefill chunk runs eagerly. Times use the cost model's arithmetic (max(F / (e_c peak), B / (e_m BW))
+ launch per op, with its overlap); a calibrated profile's per-op model is not used here.

The layout and the kernels it runs are step_layout.py's (StepLayout, which StepCost extends, with the
decode fits of step_decode.py and the chunk costs of step_chunks.py); the
KV cache one GPU has and one sequence holds, kv_budget.py's (both names importable from here).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from roofline.cost import binds, overlapped_s
from roofline.errors import RooflineError
from roofline.kernels import Kernel
from roofline.plan.kv_budget import kv_cache_budget, sequence_cache_bytes
from roofline.plan.model_ops import qk_norm_all_reduces, tp_all_reduces
from roofline.plan.step_chunks import ChunkCosts
from roofline.plan.step_decode import DecodeFits
from roofline.plan.step_layout import MAX_STEP_TOKENS, StepLayout


@dataclass(frozen=True)
class StepOp:
    """One op of a step: ``count`` runs (layers of its kind), FLOPs and bytes summed over them,
    seconds (launches included) and its bound."""

    name: str
    part: str  # "token", "decode", "chunk" or "logits"
    count: int
    flops: float
    bytes: float
    time_s: float
    bound: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class StepCost(DecodeFits, ChunkCosts, StepLayout):
    """Seconds of an engine step for one configuration (see the module docstring).

    ``StepCost(model, machine, ...)`` reduces the per-op costs once; ``seconds(decode_contexts,
    chunks)`` then costs a step in microseconds of Python: ``decode_contexts`` the contexts S of
    the decoding sequences (each feeds one token against S cached, S counted with the new one),
    ``chunks`` (C, P) pairs (C prompt tokens fed against P cached). ``ops(...)`` lists the same
    step op by op (``--breakdown``)."""

    # -- reducing the layout's ops to closed form ---------------------------------------------------
    def _op_time(self, k: Kernel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(compute_s, memory_s, body_s) of kernel ``k`` (arrays allowed), no launch."""
        c, m, t = self.cost_model.op_seconds(k, self.machine, 0.0)
        return np.asarray(c, dtype=float), np.asarray(m, dtype=float), np.asarray(t, dtype=float)

    def _rates(self, k: Kernel) -> tuple[float, float]:
        """Seconds per FLOP and per byte of an op of k's dtype and link (the cost model's e_c, e_m)."""
        cm = self.cost_model
        from roofline.cost import bytes_per_s

        bw = bytes_per_s(k, self.machine)
        return 1.0 / (cm.compute_efficiency * self.machine.peak(k.dtype)), 1.0 / (cm.memory_efficiency * bw)

    def _build(self):
        sh = self.sharded
        Ms = np.arange(0, self.max_tokens + 1, dtype=float)
        Mpos = np.maximum(Ms, 1.0)
        token_body = np.zeros_like(Ms)  # by the step's tokens; with expert parallelism by the busiest GPU's rows
        expert_body = np.zeros_like(Ms)  # expert parallelism: the routed experts by the step's tokens (else unused)
        self._token_kinds = []
        self._decode_fits = []  # per kind: (layers, span, [(name, category, dtype, link, F coefs, B coefs, rates)])
        self._chunk_names = []  # per kind: the names of its sequence ops in prefill
        self._chunk_cache: dict = {}
        self._block_cache: dict = {}  # (kind, C // _BLOCK) -> a block of prompt sizes' chunk ops (step_chunks)
        self._batch_cache: dict = {}  # (C, b) -> measured seconds of b prompts of C tokens in one kernel
        self._one_chunk_s: dict = {}  # (C, P) -> seconds of a step's chunk ops when that chunk is its only one
        self._dsa_cache: dict = {}  # a DSA kind's module setup and projections (step_chunks._dsa_setup)
        self._chunk_fits = []  # per kind: the chunk ops' FLOPs and bytes in closed form in (C, P), or None
        self._seq_notes: list[str] = []  # the sequence ops measured kernels could not price, and why
        runs = 0
        multi = len(sh.kinds) > 1
        for kind, n in sh.kind_counts():
            label = f"{'ABCDEFGHIJKLMNOPQRSTUVWXYZ'[sh.kinds.index(kind)]}: " if multi else ""
            token_names = self._token_names(kind)
            pre = self._token_kernels(kind, Mpos, Mpos)  # with expert parallelism: dense ops at Mpos rows of one GPU
            routed = self._routed_names(kind)
            for name in token_names:
                k = pre[name]
                if name in routed:
                    expert_body += self._op_time(k)[2] * n
                else:
                    token_body += self._op_time(k)[2] * n
                runs += n
            for k in self._all_to_alls(kind, Mpos):
                token_body += self._op_time(k)[2] * n
                runs += n
            for k in self._moe_gathers(kind, Mpos):  # by the step's tokens: every GPU's rows gathered
                expert_body += self._op_time(k)[2] * n
                runs += n
            self._token_kinds.append((kind, n, label, token_names))
            self._fit_decode_ops(kind, n, label, token_names)
            self._chunk_names.append([k.name for k in self._kernels(kind, False, 8, 1, 8) if k.name not in token_names])
            self._chunk_fits.append((self._chunk_fit(kind, self._chunk_names[-1], True),
                                     self._chunk_fit(kind, self._chunk_names[-1], False)))
        token_body += self._op_time(self._embedding(Mpos))[2]
        runs += 1
        for k in self._head_kernels(Mpos):
            token_body += self._op_time(k)[2]
            runs += 1
        self._reduces = reduces = tp_all_reduces(sh)
        self._qk_reduces = qk_norm_all_reduces(sh) if self.dense_tp() > 1 else 0
        if self.dense_tp() > 1:  # with expert parallelism the attention group's, at its rows
            token_body += self._op_time(self._tp_all_reduce(Mpos))[2] * reduces + \
                self._op_time(self._qk_norm_all_reduce(Mpos))[2] * self._qk_reduces
            runs += reduces + self._qk_reduces
        if self.pipeline_stages > 1:
            if self.pp_link is None:
                raise RooflineError(f"pipeline stages need a link between them; {self.machine.the_name} lists none",
                                    field="pipeline_stages")
            token_body += self._op_time(self._stage_send(Mpos))[2] * (self.pipeline_stages - 1)
            runs += self.pipeline_stages - 1
        token_body[0] = 0.0
        expert_body[0] = 0.0
        self._token_body = token_body
        self._expert_body = expert_body
        R = np.arange(0, self.max_seqs * self.verify_tokens + self.max_seqs + 1, dtype=float)
        Rp = np.maximum(R, 1.0)
        norm, head = self._logits(Rp)  # by one GPU's rows
        logits_body = self._op_time(norm)[2] + self._op_time(head)[2]
        logits_body[0] = 0.0
        self._logits_body = logits_body
        self._runs_token = runs + 2  # final norm and LM head
        self._runs_chunk = sum(n * len(names) for (_, n, _, _), names in zip(self._token_kinds, self._chunk_names))
        self._runs_decode = sum(layers * len(fits) for layers, _, _, fits in self._decode_fits)
        self._layers = sum(n for _, n, _, _ in self._token_kinds)  # a piecewise CUDA graph's pieces (eager_ops)
        # whether a step's decode time needs each context (a window or a top-k), not just their sum
        self.needs_contexts = any(span for _, span, _, _ in self._decode_fits)
        # the same as plain floats for a step's scalar arithmetic (numpy scalars cost more a step than the sum)
        self._token_s, self._logits_s = token_body.tolist(), logits_body.tolist()
        self._decode_terms = [(layers, span, [(*(float(x) for x in cf), *(float(x) for x in cb), float(rates[0]),
                                                float(rates[1]), table) for _, _, _, _, cf, cb, rates, table in fits])
                              for layers, span, _, fits in self._decode_fits]

    # -- costing a step --------------------------------------------------------------------------
    def _seq_time(self, F: float, B: float, rates) -> float:
        return overlapped_s(F * rates[0], B * rates[1], self.cost_model.overlap)

    def seconds(self, decode_contexts=(), chunks=(), sampled: int | None = None) -> float:
        """One step: the decoding sequences' contexts (positions attended by their last token fed:
        the cached ones plus what the step feeds, verify_tokens of them) and the prefill chunks
        (C, P); ``sampled`` rows of logits (default: every token a decode feeds, and every chunk)."""
        ctx = np.asarray(decode_contexts, dtype=float)
        n = int(ctx.size)
        M = n * self.verify_tokens + int(sum(c for c, _ in chunks))
        R = n * self.verify_tokens + len(chunks) if sampled is None else int(sampled)
        self._check_tokens(M, R)
        return self.step_seconds(n, float(ctx.sum()), ctx, M, R, chunks)

    def step_seconds(self, n: int, sum_s: float, contexts, M: int, R: int, chunks) -> float:
        """seconds() with the sums already taken (the simulator's hot path; no checks)."""
        if M <= 0:
            return 0.0
        if self.expert_parallel:  # the busiest GPU's dense rows, everyone's routed experts
            x = self.busiest_rows(n, chunks)
            body = self._token_body[x] + self._expert_body[M] + self._logits_body[min(-(-R // self._dp) + 0, R)]
            body += self._decode_seconds(n, sum_s, contexts) if n else 0.0
        else:
            body = self._token_s[M] + self._logits_s[R] + self._decode_seconds(n, sum_s, contexts) if n else \
                self._token_s[M] + self._logits_s[R]
        body += self._chunks_seconds(chunks)
        return body + self.launch_seconds(n, bool(chunks), R > 0)

    def decode_steps_seconds(self, ctx0: np.ndarray | None, K: int, totals: tuple[int, int] | None = None,
                             sums: np.ndarray | None = None) -> np.ndarray:
        """Seconds of K decode-only steps of the same n sequences, step k feeding each one token
        against ctx0 + 1 + k (the simulator's stretch between events). Same arithmetic as
        step_seconds, vectorised over the steps; the context sums in closed form (affine in k: sum
        ctx0 + n k; a window W: sum_i min(ctx0_i + 1 + k, W) from the sorted contexts' prefix sums).
        ``totals`` (n, sum of ctx0) stand for ctx0 (None) where the model needs no single context
        (not needs_contexts). ``sums``: the K steps' context sums given instead, each step feeding
        verify_tokens T tokens a sequence (speculation's verify steps, whose contexts grow by the
        tokens accepted: serving.stretch.verify_stretch); not with a window."""
        n = len(ctx0) if ctx0 is not None else totals[0]
        k1 = np.arange(1, K + 1, dtype=float)
        T = self.verify_tokens
        if sums is None and T != 1:
            raise ValueError("decode_steps_seconds is for one token per sequence and step, or given the steps' sums")
        if sums is not None and self.needs_contexts:
            raise ValueError("a window or a top-k needs each context, not the steps' sums")
        dp = self._dp
        ng = -(-n // dp)  # the busiest GPU's sequences (all of them without data-parallel attention)
        if self.expert_parallel:  # its rows ng T; everyone's n T routed to the experts
            t = (self._token_body[ng * T] + self._expert_body[n * T] + self._logits_body[-(-n * T // dp)]
                 + self.launch_seconds(n, False))
        else:
            t = self._token_body[n * T] + self._logits_body[n * T] + self.launch_seconds(n, False)
        sum0 = float(ctx0.sum()) if ctx0 is not None else float(totals[1])
        order = None
        for layers, span, _, fits in self._decode_fits:
            if span:
                if order is None:
                    order = np.sort(ctx0).astype(float)
                    prefix = np.concatenate(([0.0], np.cumsum(order)))
                below = np.searchsorted(order, span - k1, side="left")  # these stay under the window at step k
                s = prefix[below] + below * k1 + (n - below) * float(span)
                s = s * ng / n
            elif sums is not None:
                s = np.asarray(sums, dtype=float) * ng / n  # the busiest GPU's
            else:
                s = None  # the busiest GPU's context sum at step k: (sum0 + n k) ng / n
            for _, _, _, _, cf, cb, (rc, rm), table in fits:
                if table is not None:
                    t = t + layers * table.seconds(ng, ((sum0 + n * k1) * ng / n if s is None else s) / ng)
                    continue
                if s is None:  # c and m affine in k: two array ops each
                    c = (cf[0] + cf[1] * ng + cf[2] * (sum0 * ng / n)) * rc + (cf[2] * ng * rc) * k1
                    m = (cb[0] + cb[1] * ng + cb[2] * (sum0 * ng / n)) * rm + (cb[2] * ng * rm) * k1
                else:
                    c = (cf[0] + cf[1] * ng + cf[2] * s) * rc
                    m = (cb[0] + cb[1] * ng + cb[2] * s) * rm
                t = t + layers * overlapped_s(c, m, self.cost_model.overlap)
        return t if isinstance(t, np.ndarray) else np.full(K, t)

    def launch_seconds(self, n_decode: int, has_chunks: bool, samples: bool = True) -> float:
        """The step's launches: one CUDA graph replay for a decode-only step (with cuda_graph), else
        one launch per op run (no final norm and LM head when nothing samples a token)."""
        launch = self.cost_model.launch_overhead_s
        if self.cost_model.cuda_graph and not has_chunks:
            return launch
        runs = self._runs_token - (0 if samples else 2) + (self._runs_decode if n_decode else 0)
        return launch * (runs + (self._runs_chunk if has_chunks else 0))

    @property
    def piecewise_ops(self) -> int:
        """The host's launches in a step replayed as a piecewise CUDA graph: each layer's attention and the graph
        piece after it, and the first piece (the embedding; the last holds the final norm and LM head)."""
        return 2 * self._layers + 1

    def eager_ops(self, n_decode: int, has_chunks: bool, samples: bool = True, tokens: int = 0,
                  graph_tokens: int = 0) -> int:
        """The ops the host dispatches one by one in this step, each layer's counted: 0 for a
        decode-only step replayed as a CUDA graph (with cuda_graph; engines capture decode batches
        only), else the token ops, the attention once per layer (one call for the step's prompt chunks
        and decodes alike, as vLLM's and TensorRT-LLM's attention backends take a mixed batch) and the
        final norm and LM head where a token is sampled. A step with prompt chunks of at most
        ``graph_tokens`` ``tokens`` (an engine's piecewise CUDA graph: vLLM's) replays the layers
        between attention calls as graphs: each layer's attention and graph piece, two ops a layer,
        and the last piece (the final norm and LM head in it)."""
        if self.cost_model.cuda_graph and not has_chunks:
            return 0
        if self.cost_model.cuda_graph and 0 < tokens <= graph_tokens:
            return self.piecewise_ops
        runs = self._runs_token - (0 if samples else 2)
        return runs + (self._runs_chunk if has_chunks else self._runs_decode if n_decode else 0)

    def ops(self, decode_contexts=(), chunks=(), sampled: int | None = None) -> list[StepOp]:
        """The step op by op (each op summed over its layers), launches in each op's time."""
        ctx = np.asarray(decode_contexts, dtype=float)
        n = int(ctx.size)
        M = n * self.verify_tokens + int(sum(c for c, _ in chunks))
        R = n * self.verify_tokens + len(chunks) if sampled is None else int(sampled)
        self._check_tokens(M, R)
        graph = self.cost_model.cuda_graph and not chunks
        launch = 0.0 if graph else self.cost_model.launch_overhead_s
        out = []

        def add(name, part, count, F, B, rates_or_kernel, measured_s=None):
            if isinstance(rates_or_kernel, Kernel):
                c, m, t = (float(x) for x in self._op_time(rates_or_kernel))
            else:
                c, m = F * rates_or_kernel[0], B * rates_or_kernel[1]
                t = self._seq_time(F, B, rates_or_kernel)
            if measured_s is not None and measured_s == measured_s:  # a measured kernel's time, its bound the roofline's
                t = measured_s
            out.append(StepOp(name, part, count, F * count, B * count, (t + launch) * count,
                              binds(c, m)))

        dp = self._dp
        x = self.busiest_rows(n, chunks) if self.expert_parallel else M  # one GPU's rows
        if M:
            emb = self._embedding(x)
            add("embedding", "token", 1, float(emb.flops), float(emb.bytes), emb)
            for k in self._head_kernels(float(x)):
                add(k.name, "token", 1, float(k.flops), float(k.bytes), k)
            for kind, layers, label, names in self._token_kinds:
                ks = self._token_kernels(kind, float(M), float(x))
                for nm in names:
                    add(label + nm, "token", layers, float(ks[nm].flops), float(ks[nm].bytes), ks[nm])
                for k in self._all_to_alls(kind, float(x)) + self._moe_gathers(kind, float(M)):
                    add(label + k.name, "token", layers, float(k.flops), float(k.bytes), k)
            if self.pipeline_stages > 1:
                k = self._stage_send(float(M))
                add(k.name, "token", self.pipeline_stages - 1, float(k.flops), float(k.bytes), k)
            if self.dense_tp() > 1:
                ar = self._tp_all_reduce(x)
                add(ar.name, "token", self._reduces, float(ar.flops), float(ar.bytes), ar)
                if self._qk_reduces:
                    ar = self._qk_norm_all_reduce(x)
                    add(ar.name, "token", self._qk_reduces, float(ar.flops), float(ar.bytes), ar)
        if n:
            for layers, span, label, fits in self._decode_fits:
                ng = -(-n // dp)
                s = (float(ctx.sum()) if not span else float(np.minimum(ctx, span).sum())) * ng / n
                for name, _, _, _, cf, cb, rates, table in fits:
                    add(f"{label}{name} (decode)", "decode", layers, cf[0] + cf[1] * ng + cf[2] * s,
                        cb[0] + cb[1] * ng + cb[2] * s, rates, None if table is None else float(table.seconds(ng, s / ng)))
        if chunks:
            for name, (F, B, rates, layers, t) in self._chunk_share(chunks).items():
                add(f"{name} (chunks)", "chunk", layers, F, B, rates, t)
        if R:
            Rg = float(-(-R // dp))
            for k in self._logits(Rg):
                add(k.name, "logits", 1, float(k.flops), float(k.bytes), k)
        if graph and out:
            out.append(StepOp("CUDA graph launch", "launch", 1, 0.0, 0.0, self.cost_model.launch_overhead_s, "launch"))
        return out


__all__ = ["MAX_STEP_TOKENS", "StepCost", "StepOp", "kv_cache_budget", "sequence_cache_bytes"]
