"""StepCost's prefill chunks (plan/step.py's module docstring): each chunk op in closed form in (C, P) or
costed from its kernels, cached by (C, P), summed over a step's chunks (one varlen kernel), and split
over data-parallel attention. A mixin: StepCost (step.py) sets what it reads.
"""

from __future__ import annotations

import numpy as np

from roofline.cost import overlapped_s
from roofline.errors import RooflineError
from roofline.kernels import Kernel

_BLOCK = 256  # prompt sizes whose chunk ops are built and looked up together (_fresh_block)


class ChunkCosts:
    """StepCost's prefill chunk ops (a mixin: it reads StepCost's and StepLayout's state)."""

    @staticmethod
    def _chunk_basis(C, P) -> np.ndarray:
        """The closed form's terms: (1, C, P, C P, C^2)."""
        return np.array([1.0, C, P, C * P, C * C])

    def _chunk_fit(self, kind, names, fresh: bool):
        """Each chunk op of ``kind`` as F, B = c . _chunk_basis(C, P), C prompt tokens after P cached,
        for P = 0 (``fresh``: a prompt with no prefix, T = S, whose causal count is its own) or P > 0,
        from exact points, checked at three more, two of them far past any window or attention chunk
        (a windowed op, not polynomial there, fails the check): {name: (F coefs, B coefs, rates,
        category)}, or None when an op is not of that form (its chunks are then costed from their
        kernels, per (C, P))."""
        if fresh:  # P = 0: three terms (1, C, C^2); the P columns stay 0
            pts, checks = [(8, 0), (16, 0), (32, 0)], [(24, 0), (8192, 0), (1 << 20, 0)]
            cols = [0, 1, 4]
        else:
            pts, checks = [(8, 8), (16, 8), (8, 32), (16, 64), (32, 16)], [(24, 48), (8192, 1), (4096, 1 << 20)]
            cols = [0, 1, 2, 3, 4]
        basis = [self._chunk_basis(C, P)[cols] for C, P in pts]
        evals = [{k.name: k for k in self._kernels(kind, False, C, 1, P + C)} for C, P in pts + checks]
        out = {}
        for nm in names:
            cf, cb = np.zeros(5), np.zeros(5)
            cf[cols] = np.linalg.solve(basis, [float(e[nm].flops) for e in evals[:len(pts)]])
            cb[cols] = np.linalg.solve(basis, [float(e[nm].bytes) for e in evals[:len(pts)]])
            for (C, P), e in zip(checks, evals[len(pts):]):
                row = self._chunk_basis(C, P)
                if not (np.isclose(row @ cf, float(e[nm].flops), rtol=1e-9) and np.isclose(row @ cb, float(e[nm].bytes), rtol=1e-9)):
                    return None
            out[nm] = (cf, cb, self._rates(evals[0][nm]), evals[0][nm].category)
        return out

    def _chunk_costs(self, C: int, P: int):
        """Per kind, per sequence op: (F, B, rates, layers, name, category, measured seconds) of one
        chunk (cached by (C, P)): from the closed form where the kind has one (_chunk_fit), else from
        the chunk's kernels."""
        key = (C, P)
        got = self._chunk_cache.get(key)
        if got is None:
            got = []
            row = self._chunk_basis(C, P)
            for (kind, n, label, _), names, fits in zip(self._token_kinds, self._chunk_names, self._chunk_fits):
                fit = fits[0] if P == 0 else fits[1]  # (no prefix, after a prefix)
                block = self._fresh_block(len(got), C) if P == 0 and self.measured else None
                if block is not None:  # measured, no prefix: the chunk's row of its block of sizes
                    j = C % _BLOCK
                    got.append([(float(F[j]), float(B[j]), rates, n, label + nm, category, float(t[j]))
                                for nm, (F, B, rates, category, t) in zip(names, block)])
                    continue
                # measured kernels time a prompt with no prefix (the context tables measured T = S only): its chunks
                # read them per C; a chunk after a prefix has no measured time (NaN), its cost the closed form's, but
                # for the ops whose prefix is in their state (_prefix_free_s)
                if fit is not None and not (P == 0 and self.measured):
                    kept = self._prefix_free_s(C, len(got)) if P and self.measured and any(
                        fit[nm][3] != "attention" for nm in names) else {}  # (attention's never kept: not costed)
                    got.append([(float(row @ fit[nm][0]), float(row @ fit[nm][1]), fit[nm][2], n, label + nm, fit[nm][3],
                                 kept.get(label + nm, float("nan"))) for nm in names])
                    continue
                ks = {k.name: k for k in self._kernels(kind, False, C, 1, P + C, set(names))}
                module = self._dsa_module_s(len(got), C, 1, P)  # a DSA layer's measured module
                got.append([(float(ks[nm].flops), float(ks[nm].bytes), self._rates(ks[nm]), n, label + nm, ks[nm].category,
                             module.get(nm, self._measured_chunk(ks[nm]))) for nm in names])
            if len(self._chunk_cache) < 1_000_000:
                self._chunk_cache[key] = got
        return got

    def _fresh_block(self, i: int, C: int):
        """The i-th kind's chunk ops for every prompt of _BLOCK sizes with no prefix, C's among them, each
        op's [F, B, rates, category, measured seconds] as arrays over the block (its kernels built and its
        tables read once, in one numpy pass, as a decode op's grid: the same figures as one size at a time,
        tests/test_step_chunks_block.py); None where the sizes go one at a time: DeepSeek Sparse Attention's
        measured module (_dsa_module_s), or an op whose tables refuse the block (each size then says why) for
        its sizes, not for what it is (MLA's latent expansion, a matmul of no (batch, M, N, K) shape: no size
        priced, its time NaN in the block as alone). Cached by (i, block)."""
        key = (i, C // _BLOCK)
        if key in self._block_cache:
            return self._block_cache[key]
        kind, names = self._token_kinds[i][0], self._chunk_names[i]
        got = None
        if not self._dsa_kind(i):
            from roofline.measured.gemm import unpriced_at_every_size

            Cs = np.maximum(np.arange(key[1] * _BLOCK, (key[1] + 1) * _BLOCK, dtype=float), 1.0)
            ks = {k.name: k for k in self._kernels(kind, False, Cs, 1, Cs, set(names))}
            cm = self.cost_model
            got = []
            for nm in names:
                k = ks[nm]
                t = np.broadcast_to(np.asarray(cm._measured_s(k, self.machine) if cm.family_of(k) else np.nan,
                                               dtype=float), Cs.shape)
                # refused as a block (each size then says why), unless the tables price the op at no size at all
                if cm.family_of(k) and np.isnan(t).all() and not unpriced_at_every_size(k, cm.family_of(k)):
                    got = None
                    break
                got.append((np.broadcast_to(np.asarray(k.flops, dtype=float), Cs.shape),
                            np.broadcast_to(np.asarray(k.bytes, dtype=float), Cs.shape), self._rates(k), k.category, t))
        self._block_cache[key] = got
        return got

    def _dsa_kind(self, i: int) -> bool:
        """Whether the i-th kind's attention is DeepSeek Sparse Attention whose prompt module the measured
        kernels read (_dsa_module_s)."""
        from roofline.attention_mixers import LatentAttention

        a = self._token_kinds[i][0].mixer
        return bool(self.measured and isinstance(a, LatentAttention) and a.index_topk and a.index_heads)

    def _prefix_free_s(self, C: int, i: int) -> dict:
        """name -> measured seconds of the i-th kind's chunk ops that a cached prefix leaves at a prompt of C
        tokens' time: the measured sequence ops other than attention (Gated DeltaNet's conv and rule, whose
        prefix is their state, not re-read; the tables time them from a zero state)."""
        return {name: t for *_, name, category, t in self._chunk_costs(C, 0)[i] if category != "attention" and t == t}

    def _measured_chunk(self, k: Kernel) -> float:
        """A chunk's sequence op's measured body seconds (its attention: a prompt with no cached
        prefix, as the context tables measured it), NaN where the cost model has no measured kernels
        or its tables do not price the op (then the chunk ops' summed FLOPs and bytes are costed)."""
        cm = self.cost_model
        if not self.measured or not cm.family_of(k):
            return float("nan")
        return float(cm._measured_s(k, self.machine))

    def _dsa_module_s(self, i: int, C: int, b: int, P: int = 0) -> dict:
        """name -> measured seconds of the i-th kind's chunk ops for b whole prompts of C tokens (or one chunk of C
        after P cached), where the kind is DeepSeek Sparse Attention and the engine's tables measured its prompt
        module (measured.dsa): the module's kernels' time (measured.dsa.DsaModuleTable.kernels_s: its host floor
        taken out) less its projections' and norms' (the kind's token ops the module holds, priced as the step
        prices them), for a chunk after a prefix the growth of both from P to P + C tokens (the module is timed on
        whole prompts only), split over the chunk ops by their cost-model times; where that is less than the cost
        model's (a short prompt, the module at its floor) the cost model's. {} elsewhere (and where the tables lack
        the layer: said once in the run's notes)."""
        kind = self._token_kinds[i][0]
        if not self._dsa_kind(i):
            return {}
        ks = self._kernels(kind, False, C, b, P + C)
        setup = self._dsa_setup(i, ks)
        if setup is None:
            return {}
        mine, table, key = setup
        if P + C > table.longest(key):
            note = (f"DSA prompt attention: {P + C:,} tokens is past the module table's longest prompt "
                    f"({table.longest(key):,}): extrapolated at its edge's throughput")
            self._say(note)

        def projections(tokens: int) -> float:
            rows = tokens * (1 if P else b)  # the projections are token ops: their time is their rows'
            if rows <= self.max_tokens:
                return self._dsa_projections(i, mine)[rows]
            return sum(float(self._op_time(k)[2]) for k in self._kernels(kind, False, tokens, 1 if P else b, tokens)
                       if k.name in mine)

        kernels_s = table.kernels_s(key, b, P + C) - (table.kernels_s(key, 1, P) if P else 0.0)
        left = kernels_s - projections(P + C) + (projections(P) if P else 0.0)
        seq = {k.name: k for k in ks if k.name in self._chunk_names[i]}
        model = {nm: float(self._seq_time(float(k.flops), float(k.bytes), self._rates(k))) for nm, k in seq.items()}
        total = sum(model.values())
        if total <= 0 or left <= total:
            return {}
        return {nm: left * t / total for nm, t in model.items()}

    def _dsa_setup(self, i: int, ks) -> tuple | None:
        """The i-th kind's DeepSeek Sparse Attention module as _dsa_module_s reads it, once per kind: (the names of
        its projections and norms among the kind's token ops, the module table, its site), or None where the tables
        lack the layer (said once in the run's notes). ``ks``: the kind's prompt kernels (their matmuls' dtype)."""
        if ("setup", i) in self._dsa_cache:
            return self._dsa_cache[("setup", i)]
        from roofline.attention_ops import latent_ops
        from roofline.measured.dsa import dsa_module_table
        from roofline.op_builder import builder_for

        kind, _, _, token_names = self._token_kinds[i]
        a = kind.mixer
        mine = {k.name for k in latent_ops(builder_for(self.precision.activations), a, 1, 8, 8, False,
                                           self.sharded.d_model)} & set(token_names)
        dtype = next(k.dtype for k in ks if k.name in mine and k.category == "matmul")
        gemm = ("bfloat16" if dtype == "bf16" == self.precision.weights else self.cost_model.table_dtype(dtype)
                if dtype == "fp8" else f"{self.precision.weights} weights computing in {dtype}")  # the table's gemm_type
        try:
            table = dsa_module_table(self.cost_model._source(self.machine), self.cost_model.kernels)
            key = table.site(self.sharded.d_model, a, gemm, self.precision.kv_cache)
        except RooflineError as exc:
            note = f"DSA prompt attention: the cost model ({exc})"
            self._say(note)
            got = None
        else:
            note = (f"DSA prompt attention: {table.source}, the module's kernels' time less its projections' (as this "
                    "step prices them), split over the indexer, top-k, expansion and attention ops (a chunk after a "
                    "cached prefix: the module's growth from the prefix to the prefix and chunk); where that is less "
                    "than the cost model's (short prompts, whose module is the host's dispatch) the cost model's")
            self._say(note)
            got = (mine, table, key)
        self._dsa_cache[("setup", i)] = got
        return got

    def _dsa_projections(self, i: int, mine: set) -> list:
        """The i-th kind's DSA module's projections and norms (``mine``), their body seconds summed in the layer's
        order at every row count of a step (0 .. max_tokens; the token ops' tables read once), as plain floats."""
        got = self._dsa_cache.get(("projections", i))
        if got is None:
            kind = self._token_kinds[i][0]
            Ms = np.maximum(np.arange(0, self.max_tokens + 1, dtype=float), 1.0)
            total = np.zeros_like(Ms)
            for k in self._kernels(kind, False, Ms, 1, Ms):
                if k.name in mine:
                    total = total + self._op_time(k)[2]
            got = self._dsa_cache[("projections", i)] = total.tolist()
        return got

    def _chunk_sums(self, chunks) -> dict:
        """name -> [FLOPs, bytes, rates, layers, seconds] of each chunk op summed over the step's chunks (one
        varlen kernel runs them all). The seconds: the measured times of the chunks the tables price, and the
        cost model's for the rest together (a chunk after a cached prefix, which the context tables do not time);
        NaN where no chunk was measured (the op then costed on its summed FLOPs and bytes). So a step with one
        more chunk never costs less than without it. On measured kernels, b > 1 whole prompts of C tokens (no
        prefix) take the table's time for a batch of b (_batched_measured), not b times one prompt's: the
        context tables measured batches, and one short prompt leaves part of the GPU idle (vLLM's H200 table,
        8 query heads and 1 KV head of 128 over 1,024 tokens: 8 prompts take 2.8x less than 8 times one; Llama
        3.1 8B's 32 and 8, 1.26x less)."""
        sums: dict = {}  # name -> [F, B, rates, layers, measured seconds, unmeasured F, unmeasured B, any measured]
        batches: dict = {}
        if self.measured:
            for C, P in chunks:
                if P == 0:
                    batches[int(C)] = batches.get(int(C), 0) + 1
        grouped: dict = {}  # (name, C) -> [F, B] of a batch of b > 1 whole prompts of C tokens
        for C, P in chunks:
            batched = P == 0 and batches.get(int(C), 0) > 1
            for per_kind in self._chunk_costs(int(C), int(P)):
                for F, B, rates, n, name, _, t in per_kind:
                    acc = sums.setdefault(name, [0.0, 0.0, rates, n, 0.0, 0.0, 0.0, False])
                    acc[0] += F
                    acc[1] += B
                    if batched:
                        g = grouped.setdefault((name, int(C)), [0.0, 0.0])
                        g[0] += F
                        g[1] += B
                    elif t == t:
                        acc[4] += t
                        acc[7] = True
                    else:
                        acc[5] += F
                        acc[6] += B
        for C, b in batches.items():
            if b > 1:
                for name, t in self._batched_measured(C, b).items():
                    acc = sums[name]
                    if t == t:
                        acc[4] += t
                        acc[7] = True
                    else:
                        acc[5] += grouped[(name, C)][0]
                        acc[6] += grouped[(name, C)][1]
        return {name: [F, B, rates, n, (t + (self._seq_time(Fu, Bu, rates) if Fu or Bu else 0.0)) if any_t else float("nan")]
                for name, (F, B, rates, n, t, Fu, Bu, any_t) in sums.items()}

    def _batched_measured(self, C: int, b: int) -> dict:
        """name -> measured body seconds of b prompts of C tokens with no prefix in one kernel (NaN where
        the tables do not price the op), from the layer's kernels at batch b; cached by (C, b)."""
        got = self._batch_cache.get((C, b))
        if got is None:
            got = {}
            for i, ((kind, _, label, _), names) in enumerate(zip(self._token_kinds, self._chunk_names)):
                ks = {k.name: k for k in self._kernels(kind, False, C, b, C, set(names))}
                module = self._dsa_module_s(i, C, b)
                got.update({label + nm: module.get(nm, self._measured_chunk(ks[nm])) for nm in names})
            if len(self._batch_cache) < 100_000:
                self._batch_cache[(C, b)] = got
        return got

    def _chunks_seconds(self, chunks) -> float:
        if not chunks:
            return 0.0
        if len(chunks) == 1:  # the common step: one chunk, its seconds kept by (C, P)
            got = self._one_chunk_s.get(chunks[0])
            if got is not None:
                return got
            if chunks[0][1] == 0 and self.measured and self._one_chunk_block(int(chunks[0][0])):
                return self._one_chunk_s[(int(chunks[0][0]), 0)]
        t = sum(n * (t if t == t else self._seq_time(F, B, rates)) for F, B, rates, n, t in
                self._chunk_share(chunks).values())
        if len(chunks) == 1 and len(self._one_chunk_s) < 1_000_000:
            self._one_chunk_s[(int(chunks[0][0]), int(chunks[0][1]))] = t
        return t

    def _one_chunk_block(self, C: int) -> bool:
        """Keep (in _one_chunk_s) the seconds of a step whose only chunk is a whole prompt of c tokens, for every c
        of C's block of _BLOCK sizes, from the kinds' blocks (_fresh_block) in one numpy pass: each op's measured
        time, or where its tables do not time it the cost model's on its FLOPs and bytes, times its layers, summed
        over the ops in their order (the same arithmetic, element by element, as _chunk_sums and _chunks_seconds
        take for one chunk: tests/test_step_chunks_block.py). False where a kind has no block (DeepSeek Sparse
        Attention's module, an op its tables refuse as a block): the sizes then go one at a time."""
        blocks = [self._fresh_block(i, C) for i in range(len(self._token_kinds))]
        if any(b is None for b in blocks):
            return False
        total = None
        overlap = self.cost_model.overlap
        for (_, n, _, _), block in zip(self._token_kinds, blocks):
            for F, B, rates, _, t in block:
                x = np.where(t == t, t, overlapped_s(F * rates[0], B * rates[1], overlap))
                total = n * x if total is None else total + n * x
        if total is None or len(self._one_chunk_s) >= 1_000_000:  # (a full cache: the size alone, not kept)
            return False
        lo = C // _BLOCK * _BLOCK
        self._one_chunk_s.update(zip(zip(range(lo, lo + _BLOCK), [0] * _BLOCK), total.tolist()))
        return True

    def _chunk_share(self, chunks) -> dict:
        """The chunk ops one GPU runs: all of them, or with data-parallel attention 1/g of them but
        at least the largest chunk's (it runs on one GPU)."""
        sums = self._chunk_sums(chunks)
        dp = self._dp
        if dp == 1:
            return sums
        big = self._chunk_sums([max(chunks)])
        return {k: [max(F / dp, big[k][0]), max(B / dp, big[k][1]), r, n, max(t / dp, big[k][4])]
                for k, (F, B, r, n, t) in sums.items()}
