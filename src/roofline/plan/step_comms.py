"""The collectives of expert parallelism in an engine step (docs/serving.md): the all-to-all dispatch and
combine of each MoE layer (DeepEP's, within a node and across nodes), or, with each expert split over several
GPUs, TensorRT-LLM's all-gather and reduce-scatter. ``ExpertComms`` is a part of plan.step_layout.StepLayout: its
methods read the layout's fields (precision, link, tensor_parallel as the group's GPUs, attention_tp, expert_tp,
expert_parallel, gpus_per_node, sharded)."""

from __future__ import annotations

from roofline.kernels import ALL_GATHER, ALL_TO_ALL, REDUCE_SCATTER, Kernel
from roofline.units import DTYPE_BYTES


class ExpertComms:
    """The expert-parallel collectives of StepLayout (see the module docstring)."""

    def dispatch_dtype(self) -> tuple[str, float]:
        """(dtype, bytes per value) the expert-parallel dispatch sends: under fp8 W8A8, fp8 with an
        fp32 scale per 128 values (DeepEP's fp8 dispatch, the expert GEMM's input quantised before
        it is sent: 1 + 4/128 B); else the activations (an int8 or fp4 dispatch is not modelled: no
        kernel we cite sends one). The combine sends the activations."""
        p = self.precision
        if p.matmul == "fp8" and DTYPE_BYTES[p.matmul] < DTYPE_BYTES[p.activations]:
            return p.matmul, DTYPE_BYTES[p.matmul] + 4.0 / 128
        return p.activations, DTYPE_BYTES[p.activations]

    def one_group(self) -> bool:
        """Expert parallelism under one attention group (attention_tp = G, no data-parallel attention): every GPU
        holds the step's tokens after the attention's all-reduce, runs its experts on the rows routed to them, and
        the all-reduce after the MoE layer (the tensor-parallel one, counted in the layer's two) sums the outputs: no
        all-to-all and no all-gather (TensorRT-LLM's alltoall needs attention DP; vLLM's FusedMoEParallelConfig
        uses all2all kernels only with dp_size > 1; SGLang's default moe_a2a_backend none)."""
        return self.expert_parallel and self.attention_tp == self.tensor_parallel

    def ep_nodes(self) -> int:
        """Nodes the expert-parallel group spans (1 within a node)."""
        from roofline.plan.parallel import CROSS_NODE_LINKS

        if not self.expert_parallel or self.link not in CROSS_NODE_LINKS:
            return 1
        return -(-self.tensor_parallel // self.gpus_per_node)

    @staticmethod
    def remote_nodes_per_token(n_experts: int, top_k: int, nodes: int) -> float:
        """Expected remote nodes holding at least one of a token's k distinct experts, E experts
        spread evenly over N nodes: (N - 1) (1 - C(E - E/N, k) / C(E, k)). DeepSeek-V3 (E 256,
        k 8) over 2 nodes: 1 - C(128, 8) / C(256, 8) = 0.9965."""
        from math import comb

        if nodes <= 1:
            return 0.0
        per = n_experts // nodes
        return (nodes - 1) * (1.0 - comb(n_experts - per, top_k) / comb(n_experts, top_k))

    def _all_to_alls(self, kind, M) -> list[Kernel]:
        """Expert parallelism: the dispatch and the combine of one MoE layer for the busiest GPU's M
        rows (with attention_tp t, M the busiest group's rows, each of its t GPUs dispatching M / t of
        them: the sequence-parallel MoE of _tp_all_reduce). None under one attention group (one_group), and with expert_tp > 1 (_moe_gathers'
        all-gather and reduce-scatter instead: TensorRT-LLM's all-to-alls cannot split an expert).
        Within a node: each row's k hidden vectors go to the experts' GPUs ((g - 1) / g of
        them elsewhere) and as many come back, M k D w (g - 1) / g bytes each way over the link.
        Across N nodes (DeepEP's internode kernels): a row crosses the scale-out link once per
        remote node holding one of its experts (remote_nodes_per_token), its forwarding inside that
        node over NVLink overlapped with the transfer and not costed; the combine reduces on the
        node and returns once per node the same way: M D w R bytes each way. The dispatch sends
        dispatch_dtype's width (fp8 with its scales under W8A8), the combine the activations'. D is the
        experts' width: a latent MoE (Nemotron-3 Super) projects to its latent R before the dispatch."""
        from roofline.architecture import MoE

        if not self.expert_parallel or not isinstance(kind.mlp, MoE) or self.expert_tp > 1 or self.one_group():
            return []
        M = M / self.attention_tp
        g, D, k = self.tensor_parallel, kind.mlp.expert_width(self.sharded.d_model), kind.mlp.top_k  # a latent MoE sends R wide
        nodes = self.ep_nodes()
        share = k * (g - 1) / g if nodes == 1 else self.remote_nodes_per_token(kind.mlp.n_experts, k, nodes)
        out = []
        for what, (dtype, w) in (("dispatch", self.dispatch_dtype()),
                                 ("combine", (self.precision.activations, DTYPE_BYTES[self.precision.activations]))):
            sent = M * D * w * share  # M: the busiest GPU's rows
            out.append(Kernel.trusted(f"EP all-to-all {what} ({self.link})", 0.0 * sent, sent, "collective", dtype,
                                      self.link, shape=(ALL_TO_ALL, g, sent)))
        return out

    def _moe_gathers(self, kind, M) -> list[Kernel]:
        """Expert parallelism with expert_tp > 1 (each expert split over several GPUs): TensorRT-LLM
        all-gathers every GPU's rows of an MoE layer over the G GPUs, each runs its experts' slices on
        all of them, and a reduce-scatter sums the partial outputs and returns each GPU its rows
        (tensorrt_llm/_torch/modules/fused_moe/communication/communication_factory.py: "AlltoAll cannot
        support MoE TP", AllGatherReduceScatter); none under one attention group (one_group). A step of M tokens: ring all-gather and
        reduce-scatter of (M, D), (G - 1) / G M D w bytes sent per GPU each; the gather sends
        dispatch_dtype's width (post-quant, fp8 with its scales under W8A8), the reduce-scatter the
        activations'. D the experts' width. Ranks' padding to the largest (use_dp_padding) not modelled."""
        from roofline.architecture import MoE

        if not self.expert_parallel or not isinstance(kind.mlp, MoE) or self.expert_tp == 1 or self.one_group():
            return []
        g, D = self.tensor_parallel, kind.mlp.expert_width(self.sharded.d_model)
        a = self.precision.activations
        out = []
        share = (g - 1) / g
        for what, shape, (dtype, w), adds in (("all-gather dispatch", ALL_GATHER, self.dispatch_dtype(), 0.0),
                                              ("reduce-scatter combine", REDUCE_SCATTER, (a, DTYPE_BYTES[a]), 1.0)):
            out.append(Kernel.trusted(f"MoE {what} ({self.link})", adds * share * M * D, share * M * D * w, "collective",
                                      dtype, self.link, shape=(shape, g, M * D * w)))
        return out
