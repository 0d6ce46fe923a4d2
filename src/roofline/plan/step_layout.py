"""The layout of a serving deployment and the kernels one GPU of it runs in an engine step
(docs/serving.md): StepLayout holds the model, machine, precision, tensor / expert / pipeline
parallelism, the links their collectives cross, the cost model and the step's budgets (tokens,
sequences, verify tokens), checked once; and builds the ops one GPU runs for a step's tokens
(layer ops, the embedding, the all-reduces, all-to-alls and pipeline sends) and its logits (final
norm and LM head). plan.step's StepCost reduces those ops to closed form and costs steps.
"""

from __future__ import annotations

import numpy as np

from roofline.cost import CostModel, seed_cost_model
from roofline.errors import RooflineError, check_number
from roofline.parameters import TENSOR_PARALLEL
from roofline.kernels import SEND, Kernel
from roofline.machines import get_machine
from roofline.plan.precision import Precision
from roofline.blocks import QK_NORM_REDUCED, layer_kernels, qk_norm_all_reduce_op
from roofline.plan.model_ops import embedding_op, logits_ops, requantised as _requantised, tp_all_reduce_op
from roofline.plan.parallel import shard, tp_link
from roofline.plan.step_comms import ExpertComms
from roofline.transformer import get_model
from roofline.units import DTYPE_BYTES

MAX_STEP_TOKENS = 1 << 20  # a token budget past a million per step is a typo


class StepLayout(ExpertComms):
    """A deployment as one engine step sees it (see the module docstring). ``StepLayout(model,
    machine, ...)`` checks the layout and ends with ``_build()``: StepCost's reduction (plan.step)."""

    def __init__(self, model="llama3-8b", machine="h100-sxm", precision: Precision | None = None, tensor_parallel: int = 1,
                 link: str | None = None, cost_model: CostModel | None = None, attention: str = "flash",
                 max_tokens: int = 8192, max_seqs: int = 256, gpus_per_node: int = 8, verify_tokens: int = 1,
                 expert_parallel: bool = False, pipeline_stages: int = 1, attention_tp: int = 1, expert_tp: int = 1):
        self.model = get_model(model)
        self.machine = get_machine(machine)
        self.precision = precision or Precision(*(3 * (self.machine.default_dtype,)))
        self.precision.check_machine(self.machine)
        cm = cost_model or seed_cost_model(launch_overhead_s=self.machine.launch_overhead_s)
        from roofline.measured.model import MeasuredKernels  # numpy only: its tables are read when an op is priced

        if type(cm) is not CostModel and not isinstance(cm, MeasuredKernels):
            cm = seed_cost_model(launch_overhead_s=self.machine.launch_overhead_s)
            self.note_model = ("a calibrated profile's per-op model is not used for serving: its measured peaks and "
                               "bandwidth with the workshop's e_c 0.70, e_m 0.85")
        else:
            self.note_model = ""
        self.cost_model = cm
        self.measured = isinstance(cm, MeasuredKernels)  # an engine's (or a profile's) measured kernels price the ops
        self.attention = attention
        self.max_tokens = int(check_number("max_tokens", max_tokens, maximum=MAX_STEP_TOKENS, integer=True))
        self.max_seqs = int(check_number("max_seqs", max_seqs, maximum=MAX_STEP_TOKENS, integer=True))
        # speculative decoding: each decoding sequence feeds T = k + 1 tokens (its last token and k drafts) per step
        self.verify_tokens = int(check_number("verify_tokens", verify_tokens, maximum=64, integer=True))
        self.tensor_parallel = int(TENSOR_PARALLEL.check(tensor_parallel))
        self.link = tp_link(self.machine, link, self.tensor_parallel, gpus_per_node) if self.tensor_parallel > 1 else None
        self.gpus_per_node = int(gpus_per_node)
        # expert parallelism with data-parallel attention (DeepSeek-V3's, SGLang's and vLLM's layout for MoE): each of
        # the g GPUs runs attention and the dense ops for its own 1/g of the sequences with the whole weights, holds
        # E/g whole experts, and the routed tokens go to their experts' GPUs and back (two all-to-alls per MoE layer)
        self.expert_parallel = bool(expert_parallel)
        # inside the group (SGLang's --tp G --dp G/t --enable-dp-attention, TensorRT-LLM's moe_tp_size): attention and the
        # dense ops tensor-parallel over t GPUs in each of G / t data-parallel groups; each expert's matrices split over
        # expert_tp GPUs, the experts over G / expert_tp
        self.attention_tp = int(check_number("attention_tp", attention_tp, maximum=4096, integer=True))
        self.expert_tp = int(check_number("expert_tp", expert_tp, maximum=4096, integer=True))
        if not self.expert_parallel and (self.attention_tp > 1 or self.expert_tp > 1):
            raise RooflineError("attention_tp and expert_tp split an expert-parallel group (expert_parallel); without one "
                                "tensor_parallel splits everything", field="attention_tp" if self.attention_tp > 1 else "expert_tp")
        if self.expert_parallel:
            self._check_expert_layout()
        self._dp = self.tensor_parallel // self.attention_tp if self.expert_parallel else 1  # sequences per GPU: 1/dp of the step's
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
        self.sharded = self._expert_parallel_slice() if self.expert_parallel else shard(self.model, self.tensor_parallel)
        # the attention group's all-reduces stay on the scale-up link where the group fits a node
        self.attention_link = (None if not self.expert_parallel or self.attention_tp == 1 else self.link
                               if self.tensor_parallel <= self.gpus_per_node else
                               tp_link(self.machine, None, self.attention_tp, self.gpus_per_node))
        self._build()

    def _check_expert_layout(self):
        """Refuse by name an expert-parallel layout that does not divide: an MoE model on 2 or more GPUs,
        attention_tp and expert_tp dividing them, the experts dividing over G / expert_tp groups, each
        expert's d_ff over expert_tp."""
        from roofline.architecture import MoE

        g, t, mt = self.tensor_parallel, self.attention_tp, self.expert_tp
        moes = [k.mlp for k in self.model.kinds if isinstance(k.mlp, MoE)]
        if g < 2 or not moes:
            raise RooflineError(f"expert parallelism needs an MoE model and 2 or more GPUs ({self.model.name}, "
                                f"{g} GPU(s))", field="expert_parallel")
        for name, x in (("attention_tp", t), ("expert_tp", mt)):
            if g % x:
                raise RooflineError(f"{name} {x} must divide the expert-parallel group's {g} GPUs", field=name)
        bad = [m.n_experts for m in moes if m.n_experts % (g // mt)]
        if bad:
            raise RooflineError(f"expert parallelism over {g // mt} GPUs must divide {self.model.name}'s {bad[0]} experts"
                                + (f" (expert_tp {mt} of the {g})" if mt > 1 else ""),
                                field="tensor_parallel" if mt == 1 else "expert_tp")
        bad = [m.d_ff for m in moes if m.d_ff % mt]
        if bad:
            raise RooflineError(f"expert_tp {mt} must divide {self.model.name}'s expert d_ff {bad[0]}", field="expert_tp")

    def _expert_parallel_slice(self):
        """One GPU's model under expert parallelism: whole, or with attention_tp t its attention, dense
        MLPs, shared experts and vocabulary split t ways (plan.parallel.shard), the routed experts
        whole (_token_kernels splits them)."""
        t = self.attention_tp
        if t == 1:
            return self.model
        try:
            return shard(self.model, t, experts=False)
        except RooflineError as exc:
            raise RooflineError(f"attention_tp {t}: {exc}", field="attention_tp") from None

    def _build(self):
        """Tabulate the step's costs once the layout is set: StepCost (plan.step) does; nothing here."""

    # -- the kernels one GPU runs ------------------------------------------------------------------
    def _kernels(self, kind, decode: bool, T, B, S, only=None) -> list[Kernel]:
        """The layer's kernels one GPU runs, at their stored widths; with ``only`` (a set of names) just
        those, the rest not requantised (a prefill chunk's sequence ops, costed per chunk size)."""
        return [_requantised(k, self.precision)[0]
                for k in layer_kernels(kind, self.sharded.d_model, decode, T, B, S, self.attention, self.precision.activations)
                if only is None or k.name in only]

    def _embedding(self, M) -> Kernel:
        """The embedding gather of M rows (model_ops.embedding_op), at the stored width of the embedding's weights."""
        return _requantised(embedding_op(M, self.sharded.d_model, self.precision.activations), self.precision)[0]

    def _head_kernels(self, M) -> list[Kernel]:
        """Token ops of M rows that run once a step before the layers, beside the embedding: none for a
        model (a multi-token-prediction draft's norms and projection: plan.step_mtp)."""
        return []

    def dense_tp(self) -> int:
        """GPUs the attention and the dense ops are split over: the tensor-parallel group, or with expert
        parallelism the attention group (attention_tp)."""
        return self.attention_tp if self.expert_parallel else self.tensor_parallel

    def _tp_all_reduce(self, M) -> Kernel:
        """One tensor-parallel all-reduce of the (M, D) activations over the link (model_ops.tp_all_reduce_op);
        with expert parallelism among the attention group's t GPUs over attention_link. Around an MoE layer
        the engines reduce-scatter the attention's output over the group, dispatch each GPU's 1/t of the
        rows and all-gather the combined rows (vLLM's sequence-parallel MoE, ParallelConfig.
        use_sequence_parallel_moe in vllm/config/parallel.py, on with data parallelism, tensor parallelism
        and expert parallelism together): the bytes of one ring all-reduce, counted as one."""
        if self.expert_parallel:
            return tp_all_reduce_op(M, self.sharded.d_model, self.attention_tp, self.attention_link,
                                    self.precision.activations)
        return tp_all_reduce_op(M, self.sharded.d_model, self.tensor_parallel, self.link, self.precision.activations)

    def _qk_norm_all_reduce(self, M) -> Kernel:
        """A layer-wide q/k norm's all-reduce of M rows' variances (model_ops.qk_norm_all_reduce_op) among the attention's
        tensor-parallel GPUs (dense_tp) over their link."""
        link = self.attention_link if self.expert_parallel else self.link
        return qk_norm_all_reduce_op(M, self.dense_tp(), link)

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
        rows; with expert parallelism the dense ops at ``rows`` (the busiest data-parallel group's
        rows; default M / d, d = G / attention_tp groups) and the routed experts as a local MoE of
        E / e experts (e = G / expert_tp) taking k / e of every token (the same expected rows and
        touched experts as a GPU's share of the routing) at M rows, each expert's d_ff / expert_tp
        wide (MoE tensor parallelism splits each expert's N of gate+up and K of down)."""
        if not self.expert_parallel:
            return {k.name: k for k in self._kernels(kind, False, M, 1, M)}
        from roofline.architecture import MoE

        x = M / self._dp if rows is None else rows
        g = self.tensor_parallel // self.expert_tp  # the groups the experts split over
        dense = {k.name: k for k in self._kernels(kind, False, x, 1, x)}
        if not isinstance(kind.mlp, MoE):
            return dense
        import types

        from roofline.blocks import routed_ops
        from roofline.op_builder import OpBuilder
        from roofline.kernels import dtype_name
        from roofline.units import dtype_bytes

        # the routed experts only (the shared expert, the router and any latent projections are dense ops above): E / g experts, k / g of each token
        E, top = kind.mlp.n_experts, kind.mlp.top_k
        moe = types.SimpleNamespace(n_experts=E / g, top_k=top / g, d_ff=kind.mlp.d_ff / self.expert_tp,
                                    gated=kind.mlp.gated, activation=kind.mlp.activation, shared_d_ff=0)
        # the step waits for the GPU that touches the most of its experts (routing.expected_busiest_touched:
        # the expected maximum over the g GPUs), at least ceil(T / g) of the T experts touched (pigeonhole)
        from roofline.routing import expected_busiest_touched, expected_experts_touched

        whole = expected_experts_touched(E, top, M)
        busiest = np.minimum(E / g, np.maximum(expected_busiest_touched(E, top, M, g), np.ceil(whole / g - 1e-9)))
        wa = self.precision.activations
        width = kind.mlp.expert_width(self.sharded.d_model)  # a latent MoE's projections are dense ops above
        for k in routed_ops(OpBuilder(dtype_bytes(wa), dtype_name(wa)), moe, M, width, touched=busiest):
            dense[k.name] = _requantised(k, self.precision)[0]
        return dense

    def _stage_send(self, M) -> Kernel:
        """One send between pipeline stages: the (M, D) activations (each GPU of the tensor-parallel
        group sends its copy's 1/t) over the stages' link, with its latency."""
        w = DTYPE_BYTES[self.precision.activations]
        sent = M * self.sharded.d_model * w / self.tensor_parallel
        return Kernel.trusted(f"PP send ({self.pp_link})", 0.0 * sent, sent, "collective", self.precision.activations,
                              self.pp_link, shape=(SEND, 2, sent))

    def _logits(self, R) -> list[Kernel]:
        """The final norm and the LM head on R rows (model_ops.logits_ops), the head's weights at their
        stored width. The head carries its GEMM's shape (1, R, V / t, D): one GPU's share of the
        vocabulary (vLLM's and SGLang's ParallelLMHead is vocab-parallel), so measured kernels price it
        on the GEMM table at its R rows (R a scalar, or the whole table of sizes the step tabulates)."""
        return [_requantised(k, self.precision)[0] for k in logits_ops(R, self.sharded, self.precision.activations)]

    # -- what the layout bounds --------------------------------------------------------------------
    def _check_tokens(self, M: int, R: int):
        if M > self.max_tokens:
            raise RooflineError(f"a step of {M:,} tokens is past the token budget {self.max_tokens:,}", field="max_tokens")
        if R > self.max_seqs * (self.verify_tokens + 1):
            raise RooflineError(f"a step sampling {R:,} rows is past max_seqs {self.max_seqs:,}", field="max_seqs")

    def busiest_rows(self, n: int, chunks) -> int:
        """Expert parallelism with data-parallel attention: the rows of the busiest GPU, which sets
        the step's pace: a share of the step's tokens, at least its own ceil(n / g) decodes and the
        largest chunk (a sequence runs on one GPU)."""
        M = n * self.verify_tokens + sum(c for c, _ in chunks)
        g = self._dp
        return max(-(-M // g), -(-n // g) * self.verify_tokens, max((c for c, _ in chunks), default=0))

    def rank_budget(self) -> tuple[int, int]:
        """(tokens, sequences) of a full step on one GPU: the step's budgets, or with data-parallel
        attention its group's share, ceil(max_tokens / d) and ceil(max_seqs / d) (each rank schedules its
        own: vLLM's data-parallel ranks are engine cores of their own, TensorRT-LLM's attention-DP ranks
        schedule apart), what the engine's profiling run sizes its activations at."""
        d = self._dp
        return -(-self.max_tokens // d), -(-self.max_seqs // d)

    def describe(self) -> str:
        cm = self.cost_model
        layout = (f"expert-parallel {self.tensor_parallel} with data-parallel attention" if self.expert_parallel
                  else f"tensor-parallel {self.tensor_parallel}")
        if self.one_group() and self.tensor_parallel > 1:
            layout = f"expert-parallel {self.tensor_parallel} under tensor-parallel attention (one attention group)"
        elif self.expert_parallel and self.attention_tp > 1:
            d = self._dp
            layout += f" ({d} group{'s' if d > 1 else ''} of attention tensor-parallel {self.attention_tp})"
        if self.link:
            layout += f" over {self.link}"
        if self.expert_parallel and self.expert_tp > 1:
            layout += f", each expert tensor-parallel over {self.expert_tp}"
        if self.pipeline_stages > 1:
            layout += f" x {self.pipeline_stages} pipeline stages" + (f" (sends over {self.pp_link})"
                                                                        if self.pp_link and self.pp_link != self.link else "")
        from roofline.cost import CostModel

        costs = (cm.describe("decode-only step") if type(cm) is CostModel else
                 cm.describe("decode-only step", model=self.model, tensor_parallel=self.tensor_parallel) if self.measured
                 else cm.describe())
        return f"{self.model.name} on {self.machine.name}, {self.precision.label()}, {layout}; {costs}"

    def weight_bytes_per_gpu(self) -> float:
        """Weights one GPU holds: its tensor-parallel slice, or with expert parallelism its slice of
        the model (whole, or 1/t of attention, dense MLPs, shared experts and vocabulary under
        attention_tp t) but 1/G of the routed experts (E / e experts, each 1/expert_tp of one)."""
        from roofline.plan.memory import inference_weight_bytes

        if not self.expert_parallel:
            return inference_weight_bytes(self.model, self.precision, self.tensor_parallel) / self.pipeline_stages
        from roofline.transformer import count_params

        p = count_params(self.sharded)  # the routed experts whole in it
        whole = float(sum(v * self.precision.weight_width(k) for k, v in p.items() if k != "total"))
        experts = p["experts"] * self.precision.weight_width("experts")
        return whole - experts * (1.0 - 1.0 / self.tensor_parallel)

    def notes(self) -> tuple[str, ...]:
        """What the step's costs assume beyond the cost model's line."""
        from roofline.links import all_reduce_note, latency_note

        reduces = self.attention_link if self.expert_parallel else self.link  # the all-reduces' link (none under plain EP)
        table = all_reduce_note(reduces) if reduces and self.dense_tp() > 1 else None
        if table:  # the generic latency is then the other collectives' (all-to-all, pipeline sends)
            out = (table, latency_note(self.link).replace("collectives over", "other collectives over", 1))
        else:
            out = (latency_note(self.link),) if self.link else ()
        if self.expert_parallel:
            out += (f"expert parallelism over {self.tensor_parallel} GPUs: each runs attention and the dense ops for 1/"
                    f"{self.tensor_parallel} of the sequences with whole weights and holds 1/{self.tensor_parallel} of "
                    "the experts; two all-to-alls per MoE layer; a step runs at its busiest GPU's pace (its ceil(n/g) "
                    "decodes, the largest prompt chunk, the experts the busiest GPU touches under uniform routing: the "
                    "expected maximum over the GPUs, at least ceil(T/g) of the T touched); the routed rows spread evenly",) if self.attention_tp == self.expert_tp == 1 else ()
            g, t, mt = self.tensor_parallel, self.attention_tp, self.expert_tp
            if self.one_group():
                out += (f"expert parallelism over {g} GPUs under tensor-parallel attention (one attention group): every "
                        f"GPU runs attention and the dense ops tensor-parallel over the {g} and its "
                        + (f"1/{g // mt} of the experts, each expert's matrices over {mt} GPUs," if mt > 1 else
                           f"1/{g} of the experts whole")
                        + " on the step's rows routed to them; the tensor-parallel all-reduce after the MoE layer sums "
                        "the experts' outputs (no all-to-all); every GPU holds the step's tokens, and a step runs at the "
                        "pace of the GPU touching the most of its experts (uniform routing's expected maximum over the GPUs, at "
                        "least ceil(T/g) of the T touched); the routed rows spread evenly",)
            elif t > 1 or mt > 1:
                out += (f"expert parallelism over {g} GPUs: {self._dp} data-parallel attention group(s) of {t} GPU(s), each "
                        f"group running attention and the dense ops for its 1/{self._dp} of the sequences"
                        + (f", tensor-parallel over its {t} GPUs ({2 + bool(getattr(self, '_qk_reduces', 0))} all-reduces a layer over "
                           f"{self.attention_link}; around "
                           f"an MoE layer each GPU dispatches 1/{t} of its group's rows, vLLM's sequence-parallel MoE)"
                           if t > 1 else " with whole weights")
                        + (f"; the experts split over {g // mt} groups of {mt} GPUs" if mt > 1 else
                           f"; the experts split over the {g} GPUs")
                        + (f", each expert's matrices over a group's {mt} GPUs, its tokens all-gathered over the {g} GPUs and the "
                           "outputs reduce-scattered back (TensorRT-LLM's AllGatherReduceScatter: its all-to-alls cannot "
                           "split an expert)" if mt > 1 else ", two all-to-alls per MoE layer")
                        + "; a step runs at its busiest group's pace (uniform routing's expected maximum of the experts a GPU "
                        "touches); the routed rows spread evenly",)
            from roofline.architecture import MoE
            from roofline.plan.parallel import CROSS_NODE_LINKS

            dtype, w = self.dispatch_dtype()
            a = self.precision.activations
            if self.one_group():
                pass  # no dispatch: the tokens are on every GPU
            elif dtype != a:
                out += (f"the expert-parallel dispatch sends {dtype} with an fp32 scale per 128 values ({w:g} B a value; "
                        f"DeepEP's fp8 dispatch under W8A8), the combine {a}",)
            elif self.precision.matmul is not None and self.precision.matmul != a:
                out += (f"the expert-parallel all-to-alls send {a} both ways: an {self.precision.matmul} dispatch is not "
                        "modelled (DeepEP's narrow dispatch is fp8)",)
            elif DTYPE_BYTES[a] < 2:
                out += (f"the expert-parallel all-to-alls send the activations' {a} both ways",)
            if self.link in CROSS_NODE_LINKS and not self.one_group():  # one group: its all-reduce crosses the nodes
                nodes = self.ep_nodes()
                moe = next(kd.mlp for kd in self.model.kinds if isinstance(kd.mlp, MoE))
                r = self.remote_nodes_per_token(moe.n_experts, moe.top_k, nodes)
                out += (f"the expert-parallel group spans {nodes} nodes of {self.gpus_per_node}: a token crosses "
                        f"{self.link} once per remote node holding one of its {moe.top_k} experts ({r:.2f} of {nodes - 1} "
                        "on average, uniform routing), as DeepEP's internode kernels send it, and the combine returns the "
                        "same way; the forwarding inside a node over NVLink is taken as overlapped with the transfer "
                        "(DeepEP pipelines the two) and not costed",)
        if self.dense_tp() > 1 and self.model.model_type not in QK_NORM_REDUCED and any(
                getattr(m, "qk_norm", "") == "rmsnorm_full" for kind in self.model.kinds for m in kind.mixers):
            out += (f"{self.model.name}'s q/k norm spans all heads: under tensor parallelism vLLM and SGLang all-gather q "
                    "and k for it, two all-gathers a layer (their Olmo2Attention._apply_qk_norm), not costed here",)
        stored = self.precision.storage_note(self.machine)
        out += tuple(getattr(self, "_seq_notes", ()))
        return out + ((stored,) if stored else ()) + ((self.note_model,) if self.note_model else ())

    def _say(self, note: str) -> None:
        """Add a sequence op's note to notes(), once (two layer kinds, or two chunk sizes, say the same)."""
        if note not in self._seq_notes:
            self._seq_notes.append(note)
