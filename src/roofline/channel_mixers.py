"""Channel mixers (mixers.py re-exports them): MLP (gated or not) and MoE (routed experts, shared
experts, router, a latent width), each counting its parameters at a model width D.

Dimension letters: D d_model, F d_ff, E experts, R latent.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.errors import RooflineError, check_counts, check_counts_or_zero


@dataclass(frozen=True)
class MLP:
    """Feed-forward: gated (gate, up, down: 3 D F) or plain (up, down: 2 D F), optional biases.
    ``activation`` is a label (silu, gelu, relu2) costed as one elementwise op."""

    d_ff: int
    gated: bool = True
    bias: bool = False
    activation: str = "silu"

    def __post_init__(self):
        check_counts("mlp", d_ff=self.d_ff)

    @property
    def kind(self) -> str:
        return f"{'gated ' if self.gated else ''}MLP {self.d_ff}"

    def params(self, d_model: int) -> int:
        D, F = d_model, self.d_ff
        if self.gated:
            return 3 * D * F + ((2 * F + D) if self.bias else 0)
        return 2 * D * F + ((F + D) if self.bias else 0)


@dataclass(frozen=True)
class MoE:
    """Mixture of experts: a router (D, E) picks ``top_k`` of ``n_experts`` routed experts, each an
    MLP of ``d_ff``; ``shared_d_ff`` > 0 adds an always-active shared MLP of that width (DeepSeek's
    n_shared_experts x moe_intermediate_size; Llama 4's and Qwen2-MoE's shared expert), with a
    sigmoid gate (D, 1) when ``shared_gate`` (Qwen2-MoE). ``router_bias``: the router's bias (E).
    ``router_scales``: Gemma 4's router scales its normed input (D) and each expert's weight (E).
    DeepSeek-V3's e_score_correction_bias is a buffer, not a parameter, and is not counted.
    ``latent`` R > 0: the routed experts work at width R, between a down projection (D, R) and an up
    projection (R, D) every token takes (Nemotron-3 Super/Ultra's moe_latent_size; no biases); the
    router and the shared expert still read width D."""

    n_experts: int
    top_k: int
    d_ff: int
    gated: bool = True
    bias: bool = False  # biases inside each expert (gpt-oss)
    shared_d_ff: int = 0
    shared_gate: bool = False
    router_bias: bool = False
    activation: str = "silu"
    latent: int = 0
    router_scales: bool = False

    def __post_init__(self):
        check_counts("moe", n_experts=self.n_experts, top_k=self.top_k, d_ff=self.d_ff)
        check_counts_or_zero("moe", shared_d_ff=self.shared_d_ff, latent=self.latent)
        if self.top_k > self.n_experts:
            raise RooflineError(f"moe: top_k {self.top_k} exceeds n_experts {self.n_experts}")

    @property
    def kind(self) -> str:
        shared = f" + shared {self.shared_d_ff}" if self.shared_d_ff else ""
        latent = f" at latent {self.latent}" if self.latent else ""
        return f"MoE {self.top_k} of {self.n_experts} x {self.d_ff}{latent}{shared}"

    def expert_width(self, d_model: int) -> int:
        """The width the routed experts read and write: the latent R, or D."""
        return self.latent or d_model

    def latent_params(self, d_model: int) -> int:
        """The latent down and up projections: 2 D R (0 without a latent)."""
        return 2 * d_model * self.latent

    @property
    def expert(self) -> MLP:
        return MLP(self.d_ff, self.gated, self.bias, self.activation)

    @property
    def shared(self) -> MLP | None:
        return MLP(self.shared_d_ff, self.gated, False, self.activation) if self.shared_d_ff else None

    def router_params(self, d_model: int) -> int:
        return (d_model * self.n_experts + (self.n_experts if self.router_bias else 0)
                + (d_model + self.n_experts if self.router_scales else 0))

    def shared_params(self, d_model: int) -> int:
        return (self.shared.params(d_model) if self.shared_d_ff else 0) + (d_model if self.shared_gate else 0)

    def params(self, d_model: int) -> int:
        return (self.n_experts * self.expert.params(self.expert_width(d_model)) + self.latent_params(d_model)
                + self.shared_params(d_model) + self.router_params(d_model))
