"""Tensor parallelism: one GPU's slice of a model (Megatron-LM, Shoeybi et al. 2019,
arXiv:1909.08053, section 3) and the link its all-reduces cross.

The tensor-parallel all-reduces default to the machine's scale-up link (nvlink, else xgmi, else
ici, else roce, else pcie); a link named explicitly must be one the machine lists; past one node
of ``gpus_per_node`` GPUs the ring crosses the scale-out network.
"""

from __future__ import annotations

import dataclasses

from roofline.architecture import (Attention, GatedDeltaNet, LatentAttention, Layer, Mamba, Mamba2, MoE, Model,
                                   ParallelMixer)
from roofline.errors import RooflineError
from roofline.machines import Machine
from roofline.parameters import GPUS_PER_NODE as SCALE_UP_DOMAIN, TENSOR_PARALLEL
from roofline.transformer import get_model


SCALE_UP_LINKS = ("nvlink", "xgmi", "ici", "roce", "pcie")  # the tensor-parallel default, first listed wins


def _shard_layer(layer: Layer, t: int, name: str, experts: bool = True) -> Layer:
    def need(what, n):
        if n % t:
            raise RooflineError(f"tensor_parallel {t} must divide {name}'s {what} {n}", field="tensor_parallel",
                                also=("model",))
        return n // t

    mix, ff = layer.mixer, layer.mlp
    if isinstance(mix, ParallelMixer):  # both split: attention by heads, the SSM by heads and inner width
        parts = [_shard_layer(Layer(m, None), t, name).mixer for m in mix.parts]
        rest = _shard_layer(dataclasses.replace(layer, mixer=None), t, name, experts) if ff is not None else layer
        return dataclasses.replace(rest, mixer=ParallelMixer(*parts))
    if isinstance(mix, Attention):
        H, K = mix.heads, mix.kv_heads
        need("attention heads", H)
        if K % t and t % K:
            raise RooflineError(f"tensor_parallel {t} must divide {name}'s {K} kv heads or be a multiple of them",
                                field="tensor_parallel", also=("model",))
        mix = dataclasses.replace(mix, heads=H // t, kv_heads=max(1, K // t))
        if mix.index_heads:  # MSA: the indexer's query heads split as the kv heads (vLLM), its one key head replicated
            HI = layer.mixer.index_heads
            if HI % t and t % HI:
                raise RooflineError(f"tensor_parallel {t} must divide {name}'s {HI} index heads or be a multiple of them",
                                    field="tensor_parallel", also=("model",))
            mix = dataclasses.replace(mix, index_heads=max(1, HI // t))
    elif isinstance(mix, LatentAttention):
        mix = dataclasses.replace(mix, heads=need("attention heads", mix.heads))  # the latent is replicated
    elif isinstance(mix, Mamba2):
        G = mix.n_groups  # one group: every GPU keeps its B and C (vLLM's MambaMixer2 takes n_groups 1 or a multiple of t)
        groups = 1 if G == 1 else need("SSM groups", G)
        mix = dataclasses.replace(mix, d_inner=need("SSM d_inner", mix.d_inner), heads=need("SSM heads", mix.heads),
                                  n_groups=groups)
    elif isinstance(mix, Mamba):
        mix = dataclasses.replace(mix, d_inner=need("SSM d_inner", mix.d_inner))
    elif isinstance(mix, GatedDeltaNet):  # vLLM splits the key and the value heads (and their conv channels)
        mix = dataclasses.replace(mix, k_heads=need("linear-attention key heads", mix.k_heads),
                                  v_heads=need("linear-attention value heads", mix.v_heads))
    if isinstance(ff, MoE):
        ff = dataclasses.replace(ff, d_ff=need("expert d_ff", ff.d_ff) if experts else ff.d_ff,
                                 shared_d_ff=need("shared expert d_ff", ff.shared_d_ff) if ff.shared_d_ff else 0)
    elif ff is not None:
        ff = dataclasses.replace(ff, d_ff=need("d_ff", ff.d_ff))
    return dataclasses.replace(layer, mixer=mix, mlp=ff)


def shard(model, tensor_parallel: int = 1, experts: bool = True) -> Model:
    """One GPU's slice under Megatron-LM tensor parallelism t: query heads, d_ff (of each expert,
    and of the shared expert), SSM heads and inner width, Gated DeltaNet's key and value heads, and
    the vocabulary split t ways (``experts`` False: the routed experts whole, as attention tensor
    parallelism inside an expert-parallel group holds them); kv heads (and MSA's index heads) split too, or replicated once t exceeds
    them; MLA's latent projections, norms, the router, a latent MoE's D <-> R projections and a single SSM
    group's B and C (Falcon-H1's n_groups 1, as vLLM keeps it) replicated. count_params of
    the slice is the weights one GPU holds."""
    cfg = get_model(model)
    if type(tensor_parallel) is int and tensor_parallel == 1:
        return cfg
    TENSOR_PARALLEL.check(tensor_parallel)
    t = int(tensor_parallel)
    if t == 1:
        return cfg
    kinds = tuple(_shard_layer(k, t, cfg.name, experts) for k in cfg.kinds)
    return dataclasses.replace(cfg, name=f"{cfg.name} (1/{t} tensor-parallel)", key="", kinds=kinds,
                               vocab=-(-cfg.vocab // t))


def default_link(machine: Machine, order=SCALE_UP_LINKS) -> str | None:
    """The first link in ``order`` that the machine lists (None when it lists none of them)."""
    names = [n for n, _ in machine.links]
    return next((n for n in order if n in names), None)


def resolve_link(machine: Machine, link: str | None, field: str = "link", order=SCALE_UP_LINKS) -> str:
    """``link`` checked against the machine's links, or the first of ``order`` it lists when None."""
    names = [n for n, _ in machine.links]
    if link is None:
        chosen = default_link(machine, order)
        if chosen is None:  # nothing given, nothing to choose: the parallelism that needs it is what to name
            blame = "tensor_parallel" if field == "link" else field
            raise RooflineError(f"{blame} > 1 needs a link for its collectives, and {machine.the_name} lists none of "
                                f"{', '.join(order)}; add one to its machine file", field=blame)
        return chosen
    name = str(link).strip().lower()
    if name not in names:
        raise RooflineError(f"{field} {link!r}: {machine.the_name} has no such link; it has {', '.join(names) or 'none'}",
                            field=field)
    return name


GPUS_PER_NODE = 8  # GPUs one scale-up domain joins by default (an HGX / DGX node)
NODE_LINKS = ("nvlink", "xgmi")  # scale-up links that do not leave a node
CROSS_NODE_LINKS = ("infiniband", "roce")


def check_scale_up(machine: Machine, gpus_per_node: int, gpus: int, what: str) -> None:
    """Refuse a ``gpus_per_node`` past the machine's scale_up_gpus (an HGX board's 8) when a group
    of ``gpus`` (``what``) would need it to stay on the scale-up link."""
    domain = machine.scale_up_gpus
    if domain and gpus_per_node > domain and gpus > domain:
        raise RooflineError(f"--gpus-per-node {gpus_per_node}: {machine.the_name}'s scale-up link joins at most {domain} "
                            f"GPUs (a node), so {what} cannot ride it: give --gpus-per-node {domain} or less (the "
                            "collectives then cross the scale-out network), or a machine file with a larger "
                            "scale_up_gpus", field="gpus_per_node")


def tp_link(machine: Machine, link: str | None, tensor_parallel: int, gpus_per_node: int = GPUS_PER_NODE) -> str:
    """The link tensor-parallel all-reduces cross: resolve_link's within a node; past
    ``gpus_per_node`` GPUs a ring leaves the node, so it is the scale-out network (the slowest
    link of the ring bounds it): the machine's infiniband or roce by default, and a node-only link
    named (nvlink, xgmi) is refused rather than silently stretched across nodes. A
    ``gpus_per_node`` past the machine's scale_up_gpus (an HGX board's 8) is refused when the ring
    would need it: NVLink does not join 16 H100s because a flag says so."""
    t = int(tensor_parallel)
    g = int(SCALE_UP_DOMAIN.check(gpus_per_node))
    check_scale_up(machine, g, t, f"tensor parallel {t}")
    pair = machine.nvlink_gpus
    if pair and pair < t <= g:  # bridged cards: NVLink joins only a pair, the ring crosses PCIe
        if link is not None and str(link).strip().lower() == "nvlink":
            raise RooflineError(f"tensor_parallel {t}: {machine.the_name}'s NVLink bridge joins {pair} cards, so a ring of "
                                f"{t} crosses PCIe: give --tp-link pcie (or at most --tp {pair} over nvlink)", field="tensor_parallel")
        return resolve_link(machine, link or "pcie")
    if t <= g:
        return resolve_link(machine, link)
    nodes = -(-t // g)
    if link is not None and str(link).strip().lower() in NODE_LINKS:
        raise RooflineError(f"tensor_parallel {t} spans {nodes} nodes of {g} GPUs and {link} does not leave a node: give "
                            f"--tp-link {' or '.join(CROSS_NODE_LINKS)}, or --gpus-per-node for a larger domain "
                            "(a GB200 NVL72 joins 72)", field="tensor_parallel")
    if link is None:
        names = [n for n, _ in machine.links]
        chosen = next((n for n in CROSS_NODE_LINKS if n in names), None)
        if chosen is None:
            domain = machine.scale_up_gpus
            larger = (f"give --gpus-per-node {domain} (its scale-up link joins {domain}), or "
                      if domain and domain > g and t <= domain else "")
            raise RooflineError(f"tensor_parallel {t} spans {nodes} nodes of {g} GPUs, and {machine.the_name} lists no "
                                f"{' or '.join(CROSS_NODE_LINKS)} link to cross them; {larger}add one to its machine "
                                "file", field="tensor_parallel")
        return chosen
    return resolve_link(machine, link)
