"""`roofline trace CONFIG.json` against transformers' own modules: for a small config of each family,
the package's decoder (roofline.trace.build.from_config) and transformers'
AutoModelForCausalLM.from_config are both built on the meta device and traced at 8 tokens; their
parameters and their matmul + attention FLOPs must be equal, and equal to the analytic count's
(count_params, T x flops_per_token). transformers is not a dependency of the package: without it
only the analytic side is compared, and the line says so. Asserts nothing; prints a table.

    python benchmarks/trace_vs_transformers.py

transformers' masks look for packed sequences in position_ids (data the meta device does not
have): that check is turned off here, as no batch is packed. Gemma 2 runs transformers' eager
attention (its SDPA path is refused by transformers), so its attention is in the matmul column
there: the sum is compared.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

from smoke import announce  # benchmarks/ is on sys.path when run as a script

T = 8
BASE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, vocab_size=256, max_position_embeddings=512, tie_word_embeddings=False)
MOE = dict(num_experts_per_tok=2, moe_intermediate_size=32)
MLA = dict(kv_lora_rank=32, q_lora_rank=48, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
           n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1, **MOE)
FAMILIES = {
    "qwen3": {}, "olmo2": {}, "phi3": {}, "mistral": dict(sliding_window=8),
    "gemma2": dict(sliding_window=8, query_pre_attn_scalar=16, tie_word_embeddings=True),
    "gemma3_text": dict(sliding_window=8, sliding_window_pattern=2, query_pre_attn_scalar=16, tie_word_embeddings=True),
    "qwen2_moe": dict(num_experts=4, shared_expert_intermediate_size=64, **MOE),
    "qwen3_moe": dict(num_experts=4, **MOE),
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2),
    "glm4_moe": dict(n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=1, use_qk_norm=True,
                     attention_bias=True, partial_rotary_factor=0.5, n_group=1, topk_group=1, **MOE),
    "minimax_m2": dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, use_qk_norm=True,
                       qk_norm_type="per_layer", rotary_dim=8),
    "deepseek_v3": dict(MLA, head_dim=8),  # transformers' DeepseekV3Config: head_dim = qk_rope_head_dim
}


def costed(result) -> float:
    return sum(op.flops for op in result.ops if op.category in ("matmul", "attention"))


def transformers_side(torch, config: dict, dtype: str):
    """transformers' module of ``config`` traced on meta: (parameters, matmul + attention FLOPs)."""
    import transformers
    import transformers.masking_utils as masking

    from roofline.trace import trace

    masking.find_packed_sequence_indices = lambda position_ids: None  # data-dependent; nothing is packed
    hf_config = transformers.AutoConfig.for_model(**config)
    hf_config.pad_token_id = hf_config.eos_token_id = hf_config.bos_token_id = None
    attention = "eager" if config["model_type"] == "gemma2" else "sdpa"
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config, attn_implementation=attention).eval()
    result = trace(model, torch.zeros(1, T, dtype=torch.long), dtype=dtype, use_cache=False)
    return sum(p.numel() for p in model.parameters()), costed(result), result.unsupported


def main() -> int:
    announce()
    import torch

    from roofline.trace import trace
    from roofline.trace.build import from_config
    from roofline.transformer import count_params, flops_per_token

    try:
        import transformers
        have = transformers.__version__
    except ImportError:
        have = None
    print(f"transformers {have}" if have else "transformers not installed: compared with the analytic count only")
    print(f"{'family':<12} {'builder':<9} {'params':>8} {'FLOPs':>10}  analytic  transformers bf16 / fp32")
    agree = 0
    with tempfile.TemporaryDirectory() as tmp:
        for family, changes in FAMILIES.items():
            config = {**BASE, "model_type": family, **changes}
            path = os.path.join(tmp, f"{family}.json")
            with open(path, "w") as f:
                json.dump(config, f)
            with torch.device("meta"):
                ours = from_config(path)
            params, flops = sum(p.numel() for p in ours.parameters()), costed(trace(ours, torch.zeros(1, T, dtype=torch.long), dtype="bf16"))
            same = params == count_params(path)["total"] and flops == T * flops_per_token(path, T, mode="forward")
            theirs = ""
            if have:
                try:
                    runs = [transformers_side(torch, config, dt) for dt in ("bf16", "fp32")]
                except Exception as exc:  # noqa: BLE001 - a family transformers cannot run on meta: say which
                    runs = [(0, 0.0, (f"{type(exc).__name__}: {str(exc)[:80]}",))] * 2
                theirs = " / ".join("same" if (p, c, u) == (params, flops, ()) else f"{p:,} {c:,.0f} {u}"
                                    for p, c, u in runs)
                same = same and theirs == "same / same"
            agree += same
            print(f"{family:<12} {type(ours).__name__:<9} {params:>8,} {flops:>10,.0f}  "
                  f"{'same' if same or not have else '?':<8}  {theirs}")
    print(f"{agree} of {len(FAMILIES)} families agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
