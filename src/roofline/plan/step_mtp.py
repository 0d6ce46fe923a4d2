"""A model's multi-token-prediction module as the draft of speculative decoding (docs/serving.md).

DeepSeek-V3's MTP module (arXiv:2412.19437 section 2.2; Model.mtp) predicts the token after next
from the main model's last hidden state h and the next token's embedding e:
h' = Block(M [RMSNorm(h); RMSNorm(e)]), logits = Head(RMSNorm(h')), with M (2D -> D) its eh_proj,
Block a transformer block of the main model's MoE layer kind, and the embedding and Head the main
model's own. As a draft (vLLM's and SGLang's "MTP"/"NEXTN" speculation) it runs k times in sequence
per decode step, each run one token per decoding sequence against that sequence's context (its
block keeps its own cache of the context), before the main model verifies the k + 1 tokens.

MtpStepCost prices one such run with StepCost's machinery: a one-layer model of the module's block
with the main model's embedding gather, final norm and LM head, plus the two RMSNorms and M as token
ops of the step (_head_kernels). Its weights held on a GPU are the module's own (held_weight_bytes):
the shared embedding and head are already counted with the main model.
"""

from __future__ import annotations

from roofline.architecture import Model
from roofline.errors import RooflineError
from roofline.kernels import Kernel
from roofline.op_counts import matmul_counts, norm_flops_per_element, row_op_counts
from roofline.plan.step import StepCost
from roofline.plan.model_ops import requantised
from roofline.transformer import get_model
from roofline.units import DTYPE_BYTES

MTP_DRAFT = "mtp"  # the --draft value that names the target's own multi-token-prediction module


def mtp_model(model) -> Model:
    """The MTP module of ``model`` as a one-layer model: its block, the main model's embedding and LM
    head (shared: the same weights) and the module's RMSNorm before the head as its final norm;
    refused by name when ``model`` has none."""
    m = get_model(model)
    if m.mtp is None:
        left_out = m.leaves_out("mtp")
        raise RooflineError(f"{m.name}" + ("'s multi-token-prediction module is left out of the count and not "
                                           "modelled yet (DeepSeek-V3/R1's is)" if left_out else
                                           " has no multi-token-prediction module")
                            + ": --draft mtp needs one; give --draft a draft model (a preset or config.json)",
                            field="draft")
    return m.mtp.as_model(m)


class MtpStepCost(StepCost):
    """One run of ``target``'s multi-token-prediction module over a step's tokens (the module
    docstring): StepCost of mtp_model(target), one token per sequence (verify_tokens 1), and the
    module's norms and projection M per step."""

    def __init__(self, target, *args, **kwargs):
        self.target = get_model(target)
        super().__init__(mtp_model(self.target), *args, **kwargs)

    def _head_kernels(self, M) -> list[Kernel]:
        """enorm and hnorm: two RMSNorms of (M, D), F = f_norm 2 M D, B = w (2 M D + 2 M D), each row
        read and written; M: (M, 2D) @ (2D, D), F = 4 M D^2, B = w (2 M D + 2 D D + M D), replicated on
        every GPU (an unsharded Linear in vLLM's deepseek_mtp). The concatenation is taken as fused
        into M's read (not costed)."""
        wa = self.precision.activations
        w, D = DTYPE_BYTES[wa], self.model.d_model
        norms = Kernel.trusted("MTP enorm+hnorm", *row_op_counts(2 * M * D, norm_flops_per_element("rmsnorm"), w), "norm", wa)
        proj = Kernel.trusted("MTP eh_proj", *matmul_counts(M, D, 2 * D, w), "matmul", wa, weight_elems=2 * D * D, part="mtp")
        return [norms, requantised(proj, self.precision)[0]]

    def held_weight_bytes(self) -> float:
        """The module's own weights one GPU holds (plan.memory.mtp_weight_bytes): with expert
        parallelism laid out as the target's MoE layers (attention and dense parts over attention_tp,
        1/G of the routed experts)."""
        from roofline.plan.memory import mtp_weight_bytes

        return mtp_weight_bytes(self.target, self.precision, self.tensor_parallel, self.expert_parallel, self.attention_tp)


__all__ = ["MTP_DRAFT", "MtpStepCost", "mtp_model"]
