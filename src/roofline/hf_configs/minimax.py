"""MiniMax-M3 (minimax_m3; minimax_m3_vl keeps it in text_config beside a vision tower): grouped-query
attention with MiniMax Sparse Attention (MSA) on most layers, dense MLPs on the first layers, then
a MoE with a shared expert. The weights are those vLLM's MiniMax-M3 implementations load (the
ATOM plugin's and vLLM-Kunlun's minimax_m3.py) and NVIDIA's MiniMax-M3-NVFP4 export names."""

from __future__ import annotations

import dataclasses

from roofline.architecture import MLP, Attention, Layer, LeftOut, Model, MoE
from roofline.errors import RooflineError
from roofline.hf_configs.keys import Keys
from roofline.hf_configs.shared import activation_name, assemble, loader

_SPARSE_KEYS = {"use_sparse_attention", "sparse_attention_freq", "sparse_block_size", "sparse_topk_blocks",
                "sparse_num_index_heads", "sparse_index_dim", "sparse_init_block", "sparse_local_block",
                "sparse_score_type", "sparse_disable_index_value"}


def _per_layer(c: Keys, values, key: str, L: int) -> list[int]:
    if not isinstance(values, list) or len(values) != L or any(v not in (0, 1) for v in values):
        raise RooflineError(f"{c.name}: {key} must list 0 or 1 for each of the {L} layers", field="model")
    return list(values)


def _msa(c: Keys, L: int) -> tuple[list[int], dict]:
    """Which layers run MSA, and its Attention fields, from sparse_attention_config; a setting
    whose weights or reads are not those modelled here is refused by name."""
    sc = c.get("sparse_attention_config")
    if not isinstance(sc, dict) or not sc.get("use_sparse_attention"):
        raise RooflineError(f"{c.name}: MiniMax-M3 without sparse_attention_config.use_sparse_attention is not "
                            "supported (its dense attention's weights are not known)", field="model")
    unknown = sorted(set(sc) - _SPARSE_KEYS)
    if unknown:
        raise RooflineError(f"{c.name}: sparse_attention_config keys {unknown} not understood", field="model")
    sparse = _per_layer(c, sc.get("sparse_attention_freq"), "sparse_attention_freq", L)
    no_value = _per_layer(c, sc.get("sparse_disable_index_value", [1] * L), "sparse_disable_index_value", L)
    if any(s and not v for s, v in zip(sparse, no_value)):
        raise RooflineError(f"{c.name}: sparse_disable_index_value 0 on an MSA layer (an index value projection) is not "
                            "modelled", field="model")
    if sc.get("sparse_init_block", 0) != 0:
        raise RooflineError(f"{c.name}: sparse_init_block {sc['sparse_init_block']!r} (blocks every query keeps at the "
                            "start) is not modelled", field="model")
    if sc.get("sparse_score_type", "max") != "max":
        raise RooflineError(f"{c.name}: sparse_score_type {sc['sparse_score_type']!r} is not modelled (read: max)",
                            field="model")
    keys = Keys(sc, f"{c.name}: sparse_attention_config")
    block, blocks = keys.pos("sparse_block_size"), keys.pos("sparse_topk_blocks")
    local = sc.get("sparse_local_block", 0)
    if not isinstance(local, int) or not 0 <= local <= blocks:
        raise RooflineError(f"{c.name}: sparse_local_block {local!r} must be 0 to sparse_topk_blocks", field="model")
    return sparse, dict(index_topk=blocks * block, index_block=block, index_heads=keys.pos("sparse_num_index_heads"),
                        index_head_dim=keys.pos("sparse_index_dim"))


@loader("minimax_m3")
def _minimax_m3(c: Keys) -> Model:
    """MiniMax-M3: num_attention_heads x head_dim over num_key_value_heads (q, k, v, o without
    biases), a Gemma RMSNorm of head_dim on q and k (use_qk_norm, qk_norm_type per_head), partial
    rotary (no weights). Layers with sparse_attention_freq 1 run MSA: a block indexer
    (index_q_proj D -> sparse_num_index_heads x sparse_index_dim, index_k_proj D -> sparse_index_dim,
    a norm of sparse_index_dim on each) picks each query's sparse_topk_blocks blocks of
    sparse_block_size keys (the local block forced among them: a query reads at most k = blocks x
    block keys, its own block only up to itself; min(p, k) is counted, at most one block over). moe_layer_freq 0 layers have a dense gated MLP of
    dense_intermediate_size, 1 layers a MoE: num_local_experts of intermediate_size (w1, w3, w2),
    top num_experts_per_tok, a router (D, E) with sigmoid scores and a per-expert correction bias
    (use_routing_bias: a buffer, not counted, as MiniMax-M2's), one shared expert of
    shared_intermediate_size; swigluoai (a clamped gated activation: swiglu_alpha, swiglu_limit, no
    weights). Two Gemma RMSNorms a layer, a final norm, an untied LM head. The multi-token-prediction
    modules (num_mtp_modules / num_nextn_predict_layers) are left out, said."""
    D, L, V = c.pos("hidden_size"), c.pos("num_hidden_layers"), c.pos("vocab_size")
    H, K, d = c.pos("num_attention_heads"), c.pos("num_key_value_heads"), c.pos("head_dim")
    if c.flag("attention_output_gate", False):
        raise RooflineError(f"{c.name}: attention_output_gate true (a gate's projection of unknown width) is not "
                            "modelled", field="model")
    if c.flag("use_qk_norm", True) is not True or c.get("qk_norm_type", "per_head") != "per_head":
        raise RooflineError(f"{c.name}: MiniMax-M3 with use_qk_norm {c.raw.get('use_qk_norm')!r} / qk_norm_type "
                            f"{c.raw.get('qk_norm_type')!r} is not modelled (read: true, per_head)", field="model")
    sparse, msa = _msa(c, L)
    moe_at = _per_layer(c, c.get("moe_layer_freq"), "moe_layer_freq", L)
    first = c.int("first_k_dense_replace", moe_at.index(1) if 1 in moe_at else L)
    if moe_at != [0] * first + [1] * (L - first):
        raise RooflineError(f"{c.name}: moe_layer_freq disagrees with first_k_dense_replace {first}", field="model")
    F = c.pos("intermediate_size")
    if c.int("moe_intermediate_size", F) != F:
        raise RooflineError(f"{c.name}: moe_intermediate_size {c.raw['moe_intermediate_size']} differs from "
                            f"intermediate_size {F}, which vLLM gives the experts: which one is stored is not known",
                            field="model")
    if c.int("n_shared_experts", 1) != 1:
        raise RooflineError(f"{c.name}: n_shared_experts {c.raw['n_shared_experts']} (read: 1) is not modelled",
                            field="model")
    if c.flag("tie_word_embeddings", False):
        raise RooflineError(f"{c.name}: tie_word_embeddings true is not modelled for MiniMax-M3", field="model")
    for key in ("use_routing_bias", "scoring_func", "swiglu_alpha", "swiglu_limit", "use_gemma_norm", "rotary_dim"):
        c.get(key)  # no weights of their own
    act = activation_name(c, "swigluoai")
    moe = MoE(c.pos("num_local_experts"), c.pos("num_experts_per_tok"), F, shared_d_ff=c.pos("shared_intermediate_size"),
              activation=act)
    dense = MLP(c.pos("dense_intermediate_size"), activation=act)
    full = Attention(H, K, d, qk_norm="rmsnorm")
    msa_attention = dataclasses.replace(full, **msa)
    layers = [Layer(msa_attention if sparse[i] else full, moe if moe_at[i] else dense) for i in range(L)]
    mtp = c.int("num_nextn_predict_layers", 0) + c.int("num_mtp_modules", 0)
    omitted = (LeftOut("mtp", "num_mtp_modules", f"multi-token-prediction modules (num_mtp_modules {c.raw.get('num_mtp_modules')}, "
                       f"num_nextn_predict_layers {c.raw.get('num_nextn_predict_layers')}): not counted"),) if mtp else ()
    return assemble(c, layers, D, V, False, omitted=omitted)
