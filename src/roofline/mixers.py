"""The parts of a layer: token mixers (attention and state-space) and channel mixers (MLP, MoE).

    token mixers    Attention (full causal, sliding window W, chunked local C; GQA, q/k norms,
                    biases, sinks, a sigmoid output gate, MiniMax's block-sparse MSA), LatentAttention (DeepSeek's MLA), Mamba2
                    (SSD), Mamba (v1, Jamba's), GatedDeltaNet (Qwen3-Next's linear attention), each
                    with its parameters, cache and per-token cost; ParallelMixer (attention and
                    Mamba-2 side by side on one input: Falcon-H1);
    channel mixers  MLP (gated or not), MoE (routed experts, shared experts, router).

Each part counts its parameters at a model width D (``params(d_model)``) and each token mixer its
cache, by the conventions in architecture.py's docstring; architecture.Layer puts one of each
together.

Dimension letters: D d_model, H heads, K kv heads, d head dim, F d_ff, E experts, N SSM state
size, G SSM groups, W window, C chunk.
"""

from __future__ import annotations

from typing import Union

from roofline.attention_mixers import Attention, LatentAttention
from roofline.channel_mixers import MLP, MoE
from roofline.state_mixers import GatedDeltaNet, Mamba, Mamba2, ParallelMixer


Mixer = Union[Attention, LatentAttention, Mamba2, Mamba, GatedDeltaNet, ParallelMixer]
ChannelMixer = Union[MLP, MoE]
SSM_MIXERS = (Mamba2, Mamba, GatedDeltaNet)
ATTENTION_MIXERS = (Attention, LatentAttention)


def token_mixers(mixer) -> tuple:
    """The single mixers a layer's token mixer runs: a parallel mixer's two, else the mixer itself
    (none for a layer without one)."""
    if mixer is None:
        return ()
    return mixer.parts if isinstance(mixer, ParallelMixer) else (mixer,)


__all__ = ["Attention", "LatentAttention", "Mamba2", "Mamba", "GatedDeltaNet", "ParallelMixer", "MLP", "MoE",
           "Mixer", "ChannelMixer", "SSM_MIXERS", "ATTENTION_MIXERS", "token_mixers"]
