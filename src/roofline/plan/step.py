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
- **logit ops** (final norm and LM head) run on one row per sequence that samples a token this step
  (every decode and every chunk that completes its prompt): tabulated for R = 1 .. max sequences.

Which ops are token ops is found, not assumed: an op of a layer kind whose FLOPs and bytes are the
same for one sequence of m tokens (prefill) and m sequences of one token (decode) at two m.

Launches: each op run pays the cost model's launch; a step of decodes only replays a CUDA graph
when ``cuda_graph`` (one launch for the step, as engines capture decode batches); a step with a
prefill chunk runs eagerly. Times use the cost model's arithmetic (max(F / (e_c peak), B / (e_m BW))
+ launch per op, with its overlap); a calibrated profile's per-op model is not used here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from roofline.blocks import layer_kernels
from roofline.cost import CostModel, binds, overlapped_s, seed_cost_model
from roofline.errors import RooflineError, check_number
from roofline.kernels import ALL_TO_ALL, SEND, Kernel, all_reduce_kernel, norm_flops_per_element
from roofline.machines import get_machine
from roofline.plan.precision import Precision
from roofline.plan.model_ops import _requantised
from roofline.plan.parallel import shard, tp_link
from roofline.transformer import get_model
from roofline.units import DTYPE_BYTES

MAX_STEP_TOKENS = 1 << 20  # a token budget past a million per step is a typo
_PROBE_M = (4, 16)  # token counts at which token ops are told from sequence ops
_PROBE_S = (64, 96, 160, 224)  # decode contexts of the linear fit (under any window of 256 or more)


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


class StepCost:
    """Seconds of an engine step for one configuration (see the module docstring).

    ``StepCost(model, machine, ...)`` reduces the per-op costs once; ``seconds(decode_contexts,
    chunks)`` then costs a step in microseconds of Python: ``decode_contexts`` the contexts S of
    the decoding sequences (each feeds one token against S cached, S counted with the new one),
    ``chunks`` (C, P) pairs (C prompt tokens fed against P cached). ``ops(...)`` lists the same
    step op by op (``--breakdown``)."""

    def __init__(self, model="llama3-8b", machine="h100-sxm", precision: Precision | None = None, tensor_parallel: int = 1,
                 link: str | None = None, cost_model: CostModel | None = None, attention: str = "flash",
                 max_tokens: int = 8192, max_seqs: int = 256, gpus_per_node: int = 8, verify_tokens: int = 1,
                 expert_parallel: bool = False, pipeline_stages: int = 1):
        self.model = get_model(model)
        self.machine = get_machine(machine)
        self.precision = precision or Precision(*(3 * (self.machine.default_dtype,)))
        self.precision.check_machine(self.machine)
        cm = cost_model or seed_cost_model(launch_overhead_s=self.machine.launch_overhead_s)
        if type(cm) is not CostModel:
            cm = seed_cost_model(launch_overhead_s=self.machine.launch_overhead_s)
            self.note_model = ("a calibrated profile's per-op model is not used for serving: its measured peaks and "
                               "bandwidth with the workshop's e_c 0.70, e_m 0.85")
        else:
            self.note_model = ""
        self.cost_model = cm
        self.attention = attention
        self.max_tokens = int(check_number("max_tokens", max_tokens, maximum=MAX_STEP_TOKENS, integer=True))
        self.max_seqs = int(check_number("max_seqs", max_seqs, maximum=MAX_STEP_TOKENS, integer=True))
        # speculative decoding: each decoding sequence feeds T = k + 1 tokens (its last token and k drafts) per step
        self.verify_tokens = int(check_number("verify_tokens", verify_tokens, maximum=64, integer=True))
        self.tensor_parallel = int(check_number("tensor_parallel", tensor_parallel, maximum=4096, integer=True))
        self.link = tp_link(self.machine, link, self.tensor_parallel, gpus_per_node) if self.tensor_parallel > 1 else None
        # expert parallelism with data-parallel attention (DeepSeek-V3's, SGLang's and vLLM's layout for MoE): each of
        # the g GPUs runs attention and the dense ops for its own 1/g of the sequences with the whole weights, holds
        # E/g whole experts, and the routed tokens go to their experts' GPUs and back (two all-to-alls per MoE layer)
        self.expert_parallel = bool(expert_parallel)
        if self.expert_parallel:
            from roofline.architecture import MoE

            g = self.tensor_parallel
            moes = [k.mlp for k in self.model.kinds if isinstance(k.mlp, MoE)]
            if g < 2 or not moes:
                raise RooflineError(f"expert parallelism needs an MoE model and 2 or more GPUs ({self.model.name}, "
                                    f"{g} GPU(s))", field="expert_parallel")
            bad = [m.n_experts for m in moes if m.n_experts % g]
            if bad:
                raise RooflineError(f"expert parallelism over {g} GPUs must divide {self.model.name}'s {bad[0]} experts",
                                    field="tensor_parallel")
        self._dp = self.tensor_parallel if self.expert_parallel else 1  # sequences per GPU: 1/dp of the step's
        # pipeline parallelism: p stages of L / p layers (each on the tensor-parallel group); a micro-batch's step passes
        # every stage in turn, so its time is the whole model's plus p - 1 activation sends between stages
        self.pipeline_stages = int(check_number("pipeline_stages", pipeline_stages, maximum=1024, integer=True))
        if self.pipeline_stages > self.model.n_layers:
            raise RooflineError(f"pipeline_stages {self.pipeline_stages} is more stages than {self.model.name}'s "
                                f"{self.model.n_layers} layers", field="pipeline_stages")
        if self.pipeline_stages > 1 and self.expert_parallel:
            raise RooflineError("pipeline stages with expert parallelism are not modelled", field="pipeline_stages")
        self.pp_link = None
        if self.pipeline_stages > 1:
            from roofline.plan.parallel import CROSS_NODE_LINKS, check_scale_up, resolve_link

            gpus = self.tensor_parallel * self.pipeline_stages
            check_scale_up(self.machine, gpus_per_node, gpus, f"tensor x pipeline parallel {gpus}")
            within = gpus <= gpus_per_node
            self.pp_link = resolve_link(self.machine, None if within else
                                        next((n for n in CROSS_NODE_LINKS if n in dict(self.machine.links)), None),
                                        field="pipeline_stages") if self.machine.links else None
        self.sharded = self.model if self.expert_parallel else shard(self.model, self.tensor_parallel)
        self._build()

    # -- building --------------------------------------------------------------------------------
    def _kernels(self, kind, decode: bool, T, B, S) -> list[Kernel]:
        return [_requantised(k, self.precision)[0]
                for k in layer_kernels(kind, self.sharded.d_model, decode, T, B, S, self.attention, self.precision.activations)]

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
        sh, w_a = self.sharded, DTYPE_BYTES[self.precision.activations]
        D = sh.d_model
        Ms = np.arange(0, self.max_tokens + 1, dtype=float)
        Mpos = np.maximum(Ms, 1.0)
        token_body = np.zeros_like(Ms)  # by the step's tokens; with expert parallelism by the busiest GPU's rows
        expert_body = np.zeros_like(Ms)  # expert parallelism: the routed experts by the step's tokens (else unused)
        self._token_kinds = []
        self._decode_fits = []  # per kind: (layers, span, [(name, category, dtype, link, F coefs, B coefs, rates)])
        self._chunk_names = []  # per kind: the names of its sequence ops in prefill
        self._chunk_cache: dict = {}
        runs = 0
        reduces = 0
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
            self._token_kinds.append((kind, n, label, token_names))
            span = int(getattr(kind.mixer, "span", 0) or 0)
            if span and self.verify_tokens > 1:
                raise RooflineError(f"{self.model.name}: speculative decoding over sliding-window layers is not modelled (a "
                                    "verify step's window sums are not linear in the contexts)", field="spec_tokens")
            self._decode_fits.append((n, span, label, self._decode_fit(kind, token_names, span)))
            self._chunk_names.append([k.name for k in self._kernels(kind, False, 8, 1, 8) if k.name not in token_names])
            reduces += n * (1 if kind.parallel else (kind.mixer is not None) + (kind.mlp is not None))
        emb = Kernel.trusted("embedding", 0.0 * Mpos, 2.0 * w_a * Mpos * D, "gather", self.precision.activations,
                             weight_elems=Mpos * D, part="embedding")
        token_body += self._op_time(_requantised(emb, self.precision)[0])[2]
        runs += 1
        self._reduces = reduces
        if self.tensor_parallel > 1 and not self.expert_parallel:
            ar = all_reduce_kernel(Mpos * D, self.tensor_parallel, self.link, w_a, name=f"TP all-reduce ({self.link})")
            token_body += self._op_time(ar)[2] * reduces
            runs += reduces
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
        logits_body = self._op_time(self._final_norm(Rp))[2] + self._op_time(self._lm_head(Rp))[2]  # by one GPU's rows
        logits_body[0] = 0.0
        self._logits_body = logits_body
        self._runs_token = runs + 2  # final norm and LM head
        self._runs_chunk = sum(n * len(names) for (_, n, _, _), names in zip(self._token_kinds, self._chunk_names))
        self._runs_decode = sum(layers * len(fits) for layers, _, _, fits in self._decode_fits)

    ROUTED = ("expert gate+up proj", "expert up proj", "expert down proj")

    def _routed_names(self, kind) -> set:
        """The kind's routed-expert ops (expert parallelism splits them by expert, not by sequence)."""
        from roofline.architecture import MoE

        if not self.expert_parallel or not isinstance(kind.mlp, MoE):
            return set()
        names = [k.name for k in self._kernels(kind, False, 8, 1, 8)]
        first = names.index("router") + 1
        last = max(names.index(n) for n in self.ROUTED if n in names)
        return set(names[first:last + 1])

    def _token_kernels(self, kind, M, rows=None) -> dict:
        """name -> kernel of the kind's ops over a step of M tokens, as one GPU runs them: all at M
        rows; with expert parallelism the dense ops at ``rows`` (the busiest GPU's rows; default
        M / g) and the routed experts as a local MoE of E / g experts taking k / g of every token
        (the same expected rows and touched experts as a GPU's share of the routing) at M rows."""
        if not self.expert_parallel:
            return {k.name: k for k in self._kernels(kind, False, M, 1, M)}
        from roofline.architecture import MoE

        g = self._dp
        x = M / g if rows is None else rows
        dense = {k.name: k for k in self._kernels(kind, False, x, 1, x)}
        if not isinstance(kind.mlp, MoE):
            return dense
        import types

        from roofline.blocks import _moe_ops, _Ops
        from roofline.kernels import dtype_name
        from roofline.units import dtype_bytes

        # the routed experts only (the shared expert and the router are dense ops above): E / g experts, k / g of each token
        E, top = kind.mlp.n_experts, kind.mlp.top_k
        moe = types.SimpleNamespace(n_experts=E / g, top_k=top / g, d_ff=kind.mlp.d_ff,
                                    gated=kind.mlp.gated, activation=kind.mlp.activation, shared_d_ff=0)
        # the busiest GPU holds at least ceil(T / g) of the T experts the step touches (pigeonhole),
        # more than the mean T / g when few are touched: one token's 2 of 8 experts over 4 GPUs put a
        # whole expert on one GPU, not half an expert on each
        from roofline.blocks import expected_experts_touched

        whole = expected_experts_touched(E, top, M)
        busiest = np.minimum(E / g, np.maximum(expected_experts_touched(E / g, top / g, M), np.ceil(whole / g - 1e-9)))
        wa = self.precision.activations
        for k in _moe_ops(_Ops(dtype_bytes(wa), dtype_name(wa)), moe, M, self.sharded.d_model, touched=busiest)[1:]:
            dense[k.name] = _requantised(k, self.precision)[0]
        return dense

    def _stage_send(self, M) -> Kernel:
        """One send between pipeline stages: the (M, D) activations (each GPU of the tensor-parallel
        group sends its copy's 1/t) over the stages' link, with its latency."""
        w = DTYPE_BYTES[self.precision.activations]
        sent = M * self.sharded.d_model * w / self.tensor_parallel
        return Kernel.trusted(f"PP send ({self.pp_link})", 0.0 * sent, sent, "collective", self.precision.activations,
                              self.pp_link, shape=(SEND, 2, sent))

    def _all_to_alls(self, kind, M) -> list[Kernel]:
        """Expert parallelism: the dispatch and the combine of one MoE layer, the busiest GPU sending
        its M rows' k hidden vectors to the experts' GPUs ((g - 1) / g of them elsewhere) and getting
        as many back: M k D w (g - 1) / g bytes each way, over the link, plus its latency."""
        from roofline.architecture import MoE

        if not self.expert_parallel or not isinstance(kind.mlp, MoE):
            return []
        g, w = self._dp, DTYPE_BYTES[self.precision.activations]
        sent = M * kind.mlp.top_k * self.sharded.d_model * w * (g - 1) / g  # M: the busiest GPU's rows
        return [Kernel.trusted(f"EP all-to-all {what} ({self.link})", 0.0 * sent, sent, "collective",
                               self.precision.activations, self.link, shape=(ALL_TO_ALL, g, sent))
                for what in ("dispatch", "combine")]

    def _final_norm(self, R) -> Kernel:
        sh, wa = self.sharded, self.precision.activations
        w = DTYPE_BYTES[wa]
        return Kernel.trusted("final norm", norm_flops_per_element(sh.final_norm) * R * sh.d_model,
                              2.0 * w * R * sh.d_model, "norm", wa)

    def _lm_head(self, R) -> Kernel:
        sh = self.sharded
        D, V = sh.d_model, sh.vocab
        w = DTYPE_BYTES[self.precision.activations]
        k = Kernel.trusted("LM head", 2.0 * R * V * D, w * (R * D + D * V + R * V), "matmul", self.precision.activations,
                           weight_elems=D * V, part="embedding" if self.model.tied_embeddings else "lm_head")
        return _requantised(k, self.precision)[0]

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

    def _decode_fit(self, kind, token_names, span):
        """Each decode sequence op of ``kind`` as F, B = c0 + c1 n + c2 sum(S), from exact points,
        checked at one more; refused by name when it is not linear there."""
        pts = [(1, _PROBE_S[0]), (2, _PROBE_S[0]), (1, _PROBE_S[1])]
        check = (3, _PROBE_S[2])
        if span:
            pts = [(b, min(s, span)) for b, s in pts]
            check = (3, min(check[1], span))
        design = np.array([[1.0, b, b * s] for b, s in pts])
        T = self.verify_tokens
        if T == 1:
            evals = [{k.name: k for k in self._kernels(kind, True, 1, b, s) if k.name not in token_names} for b, s in pts + [check]]
        else:  # a verify step: T queries at the positions S - T + 1 .. S, causal among themselves
            evals = [{k.name: k for k in self._kernels(kind, False, T, b, s) if k.name not in token_names}
                     for b, s in pts + [check]]
        out = []
        for name, k0 in evals[0].items():
            Fs = np.array([float(e[name].flops) for e in evals[:3]])
            Bs = np.array([float(e[name].bytes) for e in evals[:3]])
            cf, cb = np.linalg.solve(design, Fs), np.linalg.solve(design, Bs)
            b, s = check
            row = np.array([1.0, b, b * s])
            k3 = evals[3][name]
            if not (np.isclose(row @ cf, float(k3.flops), rtol=1e-9) and np.isclose(row @ cb, float(k3.bytes), rtol=1e-9)):
                raise RooflineError(f"{self.model.name}: the decode op {name!r} is not linear in the sequences and their "
                                    "contexts; the serving model cannot reduce it", field="model")
            out.append((name, k0.category, k0.dtype, k0.link, cf, cb, self._rates(k0)))
        return out

    # -- costing a step --------------------------------------------------------------------------
    def _check_tokens(self, M: int, R: int):
        if M > self.max_tokens:
            raise RooflineError(f"a step of {M:,} tokens is past the token budget {self.max_tokens:,}", field="max_tokens")
        if R > self.max_seqs * (self.verify_tokens + 1):
            raise RooflineError(f"a step sampling {R:,} rows is past max_seqs {self.max_seqs:,}", field="max_seqs")

    def _seq_time(self, F: float, B: float, rates) -> float:
        return overlapped_s(F * rates[0], B * rates[1], self.cost_model.overlap)

    def busiest_rows(self, n: int, chunks) -> int:
        """Expert parallelism with data-parallel attention: the rows of the busiest GPU, which sets
        the step's pace: a share of the step's tokens, at least its own ceil(n / g) decodes and the
        largest chunk (a sequence runs on one GPU)."""
        M = n * self.verify_tokens + sum(c for c, _ in chunks)
        g = self._dp
        return max(-(-M // g), -(-n // g) * self.verify_tokens, max((c for c, _ in chunks), default=0))

    def _decode_seconds(self, n: int, sum_s: float, contexts) -> float:
        """The decode sequence ops of one GPU: all n sequences, or with data-parallel attention the
        busiest GPU's ceil(n / g), at the mean context."""
        t = 0.0
        dp = self._dp
        scale = (-(-n // dp)) / n if dp > 1 and n else 1.0
        n = -(-n // dp) if dp > 1 else n
        for layers, span, _, fits in self._decode_fits:
            s = (sum_s if not span else float(np.minimum(contexts, span).sum())) * scale
            for _, _, _, _, cf, cb, rates in fits:
                t += layers * self._seq_time(cf[0] + cf[1] * n + cf[2] * s, cb[0] + cb[1] * n + cb[2] * s, rates)
        return t

    def _chunk_costs(self, C: int, P: int):
        """Per kind, per sequence op: (F, B, rates, name, category) of one chunk (cached by (C, P))."""
        key = (C, P)
        got = self._chunk_cache.get(key)
        if got is None:
            got = []
            for (kind, n, label, _), names in zip(self._token_kinds, self._chunk_names):
                ks = {k.name: k for k in self._kernels(kind, False, C, 1, P + C)}
                got.append([(float(ks[nm].flops), float(ks[nm].bytes), self._rates(ks[nm]), n, label + nm, ks[nm].category)
                            for nm in names])
            if len(self._chunk_cache) < 1_000_000:
                self._chunk_cache[key] = got
        return got

    def _chunk_sums(self, chunks) -> dict:
        """name -> [FLOPs, bytes, rates, layers] of each chunk op summed over the step's chunks (one
        varlen kernel runs them all)."""
        sums: dict = {}
        for C, P in chunks:
            for per_kind in self._chunk_costs(int(C), int(P)):
                for F, B, rates, n, name, _ in per_kind:
                    acc = sums.setdefault(name, [0.0, 0.0, rates, n])
                    acc[0] += F
                    acc[1] += B
        return sums

    def _chunks_seconds(self, chunks) -> float:
        if not chunks:
            return 0.0
        return sum(n * self._seq_time(F, B, rates) for F, B, rates, n in self._chunk_share(chunks).values())

    def _chunk_share(self, chunks) -> dict:
        """The chunk ops one GPU runs: all of them, or with data-parallel attention 1/g of them but
        at least the largest chunk's (it runs on one GPU)."""
        sums = self._chunk_sums(chunks)
        dp = self._dp
        if dp == 1:
            return sums
        big = self._chunk_sums([max(chunks)])
        return {k: [max(F / dp, big[k][0]), max(B / dp, big[k][1]), r, n] for k, (F, B, r, n) in sums.items()}

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
        if self._dp > 1:  # expert parallelism: the busiest GPU's dense rows, everyone's routed experts
            x = self.busiest_rows(n, chunks)
            body = self._token_body[x] + self._expert_body[M] + self._logits_body[min(-(-R // self._dp) + 0, R)]
            body += self._decode_seconds(n, sum_s, contexts) if n else 0.0
        else:
            body = self._token_body[M] + self._logits_body[R] + self._decode_seconds(n, sum_s, contexts) if n else \
                self._token_body[M] + self._logits_body[R]
        body += self._chunks_seconds(chunks)
        return body + self.launch_seconds(n, bool(chunks), R > 0)

    def decode_steps_seconds(self, ctx0: np.ndarray, K: int) -> np.ndarray:
        """Seconds of K decode-only steps of the same n sequences, step k feeding each one token
        against ctx0 + 1 + k (the simulator's stretch between events). Same arithmetic as
        step_seconds, vectorised over the steps; the context sums in closed form (a window W:
        sum_i min(ctx0_i + 1 + k, W) from the sorted contexts' prefix sums)."""
        n = len(ctx0)
        k1 = np.arange(1, K + 1, dtype=float)
        if self.verify_tokens != 1:
            raise ValueError("decode_steps_seconds is for one token per sequence and step")
        dp = self._dp
        ng = -(-n // dp)  # the busiest GPU's sequences (all of them without data-parallel attention)
        if dp > 1:
            t = np.full(K, self._token_body[ng] + self._expert_body[n] + self._logits_body[ng] + self.launch_seconds(n, False))
        else:
            t = np.full(K, self._token_body[n] + self._logits_body[n] + self.launch_seconds(n, False))
        sums = float(ctx0.sum()) + n * k1
        order = None
        for layers, span, _, fits in self._decode_fits:
            if span:
                if order is None:
                    order = np.sort(ctx0).astype(float)
                    prefix = np.concatenate(([0.0], np.cumsum(order)))
                below = np.searchsorted(order, span - k1, side="left")  # these stay under the window at step k
                s = prefix[below] + below * k1 + (n - below) * float(span)
                s = s * ng / n
            else:
                s = sums * ng / n
            for _, _, _, _, cf, cb, (rc, rm) in fits:
                c = (cf[0] + cf[1] * ng + cf[2] * s) * rc
                m = (cb[0] + cb[1] * ng + cb[2] * s) * rm
                t += layers * overlapped_s(c, m, self.cost_model.overlap)
        return t

    def launch_seconds(self, n_decode: int, has_chunks: bool, samples: bool = True) -> float:
        """The step's launches: one CUDA graph replay for a decode-only step (with cuda_graph), else
        one launch per op run (no final norm and LM head when nothing samples a token)."""
        launch = self.cost_model.launch_overhead_s
        if self.cost_model.cuda_graph and not has_chunks:
            return launch
        runs = self._runs_token - (0 if samples else 2) + (self._runs_decode if n_decode else 0)
        return launch * (runs + (self._runs_chunk if has_chunks else 0))

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

        def add(name, part, count, F, B, rates_or_kernel):
            if isinstance(rates_or_kernel, Kernel):
                c, m, t = (float(x) for x in self._op_time(rates_or_kernel))
            else:
                c, m = F * rates_or_kernel[0], B * rates_or_kernel[1]
                t = self._seq_time(F, B, rates_or_kernel)
            out.append(StepOp(name, part, count, F * count, B * count, (t + launch) * count,
                              binds(c, m)))

        dp = self._dp
        x = self.busiest_rows(n, chunks) if dp > 1 else M  # one GPU's rows
        if M:
            w_a = DTYPE_BYTES[self.precision.activations]
            emb = _requantised(Kernel.trusted("embedding", 0.0, 2.0 * w_a * x * self.sharded.d_model, "gather",
                                              self.precision.activations, weight_elems=x * self.sharded.d_model,
                                              part="embedding"), self.precision)[0]
            add("embedding", "token", 1, float(emb.flops), float(emb.bytes), emb)
            for kind, layers, label, names in self._token_kinds:
                ks = self._token_kernels(kind, float(M), float(x))
                for nm in names:
                    add(label + nm, "token", layers, float(ks[nm].flops), float(ks[nm].bytes), ks[nm])
                for k in self._all_to_alls(kind, float(x)):
                    add(label + k.name, "token", layers, float(k.flops), float(k.bytes), k)
            if self.pipeline_stages > 1:
                k = self._stage_send(float(M))
                add(k.name, "token", self.pipeline_stages - 1, float(k.flops), float(k.bytes), k)
            if self.tensor_parallel > 1 and not self.expert_parallel:
                ar = all_reduce_kernel(M * self.sharded.d_model, self.tensor_parallel, self.link,
                                       DTYPE_BYTES[self.precision.activations], name=f"TP all-reduce ({self.link})")
                add(ar.name, "token", self._reduces, float(ar.flops), float(ar.bytes), ar)
        if n:
            for layers, span, label, fits in self._decode_fits:
                ng = -(-n // dp)
                s = (float(ctx.sum()) if not span else float(np.minimum(ctx, span).sum())) * ng / n
                for name, _, _, _, cf, cb, rates in fits:
                    add(f"{label}{name} (decode)", "decode", layers, cf[0] + cf[1] * ng + cf[2] * s,
                        cb[0] + cb[1] * ng + cb[2] * s, rates)
        if chunks:
            for name, (F, B, rates, layers) in self._chunk_share(chunks).items():
                add(f"{name} (chunks)", "chunk", layers, F, B, rates)
        if R:
            Rg = float(-(-R // dp))
            fn = self._final_norm(Rg)
            add("final norm", "logits", 1, float(fn.flops), float(fn.bytes), fn)
            lm = self._lm_head(Rg)
            add("LM head", "logits", 1, float(lm.flops), float(lm.bytes), lm)
        if graph and out:
            out.append(StepOp("CUDA graph launch", "launch", 1, 0.0, 0.0, self.cost_model.launch_overhead_s, "launch"))
        return out

    def describe(self) -> str:
        cm = self.cost_model
        layout = (f"expert-parallel {self.tensor_parallel} with data-parallel attention" if self.expert_parallel
                  else f"tensor-parallel {self.tensor_parallel}")
        if self.link:
            layout += f" over {self.link}"
        if self.pipeline_stages > 1:
            layout += f" x {self.pipeline_stages} pipeline stages" + (f" (sends over {self.pp_link})"
                                                                        if self.pp_link and self.pp_link != self.link else "")
        return f"{self.model.name} on {self.machine.name}, {self.precision.label()}, {layout}; {cm.describe()}"

    def weight_bytes_per_gpu(self) -> float:
        """Weights one GPU holds: its tensor-parallel slice, or with expert parallelism the whole
        model but 1/g of the routed experts."""
        from roofline.plan.memory import inference_weight_bytes

        if not self.expert_parallel:
            return inference_weight_bytes(self.model, self.precision, self.tensor_parallel) / self.pipeline_stages
        from roofline.transformer import count_params

        whole = inference_weight_bytes(self.model, self.precision, 1)
        experts = count_params(self.model)["experts"] * self.precision.weight_width("experts")
        return whole - experts * (1.0 - 1.0 / self.tensor_parallel)

    def notes(self) -> tuple[str, ...]:
        """What the step's costs assume beyond the cost model's line."""
        from roofline.links import all_reduce_note, latency_note

        table = all_reduce_note(self.link) if self.link and self.tensor_parallel > 1 else None
        if table:  # the generic latency is then the other collectives' (all-to-all, pipeline sends)
            out = (table, latency_note(self.link).replace("collectives over", "other collectives over", 1))
        else:
            out = (latency_note(self.link),) if self.link else ()
        if self.expert_parallel:
            out += (f"expert parallelism over {self.tensor_parallel} GPUs: each runs attention and the dense ops for 1/"
                    f"{self.tensor_parallel} of the sequences with whole weights and holds 1/{self.tensor_parallel} of "
                    "the experts; two all-to-alls per MoE layer; a step runs at its busiest GPU's pace (its ceil(n/g) "
                    "decodes, the largest prompt chunk, at least ceil(T/g) of the T experts the step touches); routing "
                    "otherwise assumed balanced",)
        return out + ((self.note_model,) if self.note_model else ())


def kv_cache_budget(step: StepCost, memory_fraction: float) -> tuple[float, dict]:
    """(bytes, parts): what one GPU has for the KV cache: its memory times ``memory_fraction`` less
    the weights and the activations of a full step (``max_tokens`` rows of the widest op, 2 d_ff
    for a gated MLP or 4 d_model, plus 4 d_model of residual and attention rows, and fp32 logits
    for ``max_seqs`` rows: an estimate, said in the output). Parts in bytes."""
    m = step.machine
    if not m.memory_bytes:
        raise RooflineError(f"{m.the_name} gives no memory capacity: the KV cache cannot be sized", field="machine")
    sh = step.sharded
    weights = step.weight_bytes_per_gpu()
    w = DTYPE_BYTES[step.precision.activations]
    widest = max([getattr(k.mlp, "d_ff", 0) * 2 for k in sh.kinds] + [sh.d_model * 4])
    activations = step.max_tokens * (widest + 4 * sh.d_model) * w + step.max_seqs * sh.vocab * 4.0
    capacity = m.memory_bytes * memory_fraction
    free = (capacity - weights - activations) * step._dp  # data-parallel attention: each GPU caches its sequences
    return max(free, 0.0), {"capacity_bytes": capacity, "weights_bytes": weights, "activations_bytes": activations,
                            "kv_cache_bytes": max(free, 0.0)}


def sequence_cache_bytes(step: StepCost, block_size: int, max_blocks: int) -> np.ndarray:
    """bytes[k]: the cache one sequence holds in k blocks of ``block_size`` tokens (k = 0 ..
    max_blocks): K and V of every full-attention layer, sliding windows up to their window, MLA
    latents, SSM states (plan.kv_bytes_per_sequence at k x block_size tokens)."""
    from roofline.plan.memory import kv_bytes_per_sequence

    k = np.arange(0, max_blocks + 1)
    out = np.asarray(kv_bytes_per_sequence(step.model, np.maximum(k * block_size, 1), step.precision,
                                           1 if step.expert_parallel else step.tensor_parallel),
                     dtype=float)
    out = np.broadcast_to(out, k.shape).copy()
    out[0] = 0.0
    return out
