"""The multi-token-prediction module: counted apart from the model (architecture.MtpModule, the
DeepSeek loader) and run as the draft of speculative decoding (plan.step_mtp, `serving --draft mtp`)."""

import json

import numpy as np
import pytest

from roofline.cli import main
from roofline.cost import seed_cost_model
from roofline.errors import RooflineError
from roofline.hf_configs import from_hf_config
from roofline.plan.step import StepCost
from roofline.plan.step_mtp import MtpStepCost, mtp_model
from roofline.serving import Engine, closed_requests, simulate
from roofline.transformer import count_params, get_model, model_summary

EAGER = seed_cost_model(launch_overhead_s=3e-6)

# a DeepSeek-V3-shaped config at toy sizes: MLA, one dense layer then MoE (4 experts, top 2, one shared), one MTP layer
SMALL = {"model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
         "vocab_size": 1000, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
         "v_head_dim": 8, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
         "n_shared_experts": 1, "first_k_dense_replace": 1, "intermediate_size": 128, "num_nextn_predict_layers": 1}


def test_small_deepseek_mtp_module_by_hand():
    """D 64, H 4, q_lora 32, kv_lora 16, nope 8, rope 4, v 8; 4 experts of 16, one shared.
    MLA: q_a 64 x 32 = 2,048; q_a_norm 32; q_b 32 x 4 x (8 + 4) = 1,536; kv_a 64 x (16 + 4) = 1,280;
    kv_a_norm 16; kv_b 16 x 4 x (8 + 8) = 1,024; o 4 x 8 x 64 = 2,048: 7,984.
    MoE: 4 experts x 3 x 64 x 16 = 12,288; shared 3 x 64 x 16 = 3,072; router 4 x 64 = 256: 15,616.
    Block norms 2 x 64 = 128. eh_proj 2 x 64 x 64 = 8,192; enorm, hnorm, shared_head.norm 3 x 64 = 192.
    7,984 + 15,616 + 128 + 8,192 + 192 = 32,112."""
    m = from_hf_config(SMALL, "small")
    assert m.mtp is not None and m.mtp.depth == 1 and m.mtp.layer.is_moe
    assert m.mtp.params(m.d_model) == 32_112
    # the model's own total is unchanged by the MTP module (the published convention: counted apart)
    without = from_hf_config({k: v for k, v in SMALL.items() if k != "num_nextn_predict_layers"}, "small")
    assert without.mtp is None and count_params(m)["total"] == count_params(without)["total"]
    assert model_summary(m)["mtp"]["params"] == 32_112
    assert from_hf_config({**SMALL, "num_nextn_predict_layers": 2}, "small").mtp.params(64) == 2 * 32_112


def test_deepseek_v3_mtp_module_is_the_checkpoints_extra_weights():
    """DeepSeek-V3's MTP module (model.layers.61), D 7168, V 129,280:
    MLA: q_a 7168 x 1536 = 11,010,048; q_a_norm 1,536; q_b 1536 x 128 x 192 = 37,748,736;
      kv_a 7168 x 576 = 4,128,768; kv_a_norm 512; kv_b 512 x 128 x 256 = 16,777,216;
      o 128 x 128 x 7168 = 117,440,512: 187,107,328.
    MoE: 256 x 3 x 7168 x 2048 = 11,274,289,152; shared 3 x 7168 x 2048 = 44,040,192;
      router 256 x 7168 = 1,835,008: 11,320,164,352. Block norms 2 x 7168 = 14,336.
      The block: 11,507,286,016 (README_WEIGHTS.md's "11.5B unique parameters, excluding the shared
      0.9B Embedding and 0.9B output Head", https://github.com/deepseek-ai/DeepSeek-V3/blob/main/README_WEIGHTS.md).
    eh_proj 2 x 7168 x 7168 = 102,760,448; 3 norms 21,504. Module: 11,610,067,968.
    The Hugging Face checkpoint stores a copy of the embedding and the head in layer 61 (2 x 129,280 x 7168
    = 1,853,358,080): 671,026,404,352 + 11,610,067,968 + 1,853,358,080 = 684,489,830,400, exactly the
    safetensors metadata's BF16 3,918,786,560 + F8_E4M3 680,571,043,840 (its F32 41,555,600 are the FP8
    scales and the routers' correction biases; total 684,531,386,000, the card's "685B" = 671B main + 14B
    MTP, https://huggingface.co/deepseek-ai/DeepSeek-V3). The BF16 part checks the module's small weights:
    4 x 926,679,040 embeddings and heads + 59 routers x 1,835,008 + eh_proj 102,760,448 + norms (61 x 16,384
    + 7,168 final + 16,384 + 21,504 MTP = 1,044,480) = 3,918,786,560."""
    m = get_model("deepseek-v3")
    assert count_params(m)["total"] == 671_026_404_352
    assert m.mtp.params(m.d_model) == 11_610_067_968
    assert sum(m.mtp.layer.parts(m.d_model).values()) == 11_507_286_016
    assert count_params(m)["total"] + m.mtp.params(m.d_model) + 2 * 129_280 * 7168 == 3_918_786_560 + 680_571_043_840


def test_models_cli_reports_the_mtp_module_apart(capsys):
    assert main(["models", "deepseek-v3"]) == 0
    out = capsys.readouterr().out
    assert "671,026,404,352 parameters" in out and "11,610,067,968 parameters of its own" in out
    assert main(["models", "deepseek-v3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["mtp"]["params"] == 11_610_067_968


def test_expected_tokens_per_step_with_a_rate_per_position():
    """Per-position rates as vLLM reports them (spec_decode_num_accepted_tokens_per_pos[i] / num_drafts:
    the share of verifies that accepted draft i, drafts before it too): 0.85, 0.7, 0.6 give the mean
    acceptance length 1 + 0.85 + 0.7 + 0.6 = 3.15; one rate a for all k, each draft accepted
    independently, gives the geometric sum (Leviathan et al. 2023): 0.8, k 2: 1 + 0.8 + 0.64 = 2.44."""
    assert Engine(spec_tokens=3, acceptance=(0.85, 0.7, 0.6)).tokens_per_verify == pytest.approx(3.15, rel=1e-12)
    assert Engine(spec_tokens=2, acceptance=(0.8, 0.64)).tokens_per_verify == pytest.approx(2.44, rel=1e-12)
    assert Engine(spec_tokens=2, acceptance=0.8).tokens_per_verify == pytest.approx(2.44, rel=1e-12)
    with pytest.raises(RooflineError) as refused:  # rates by position cannot rise: drafts 1..i accepted
        Engine(spec_tokens=2, acceptance=(0.6, 0.7))
    assert refused.value.field == "acceptance" and "0.6, 0.7" in str(refused.value)
    with pytest.raises(RooflineError, match="3 rates for 2") as refused:
        Engine(spec_tokens=2, acceptance=(0.8, 0.7, 0.6))
    assert refused.value.field == "acceptance"
    with pytest.raises(RooflineError) as refused:
        Engine(spec_tokens=2, acceptance=(0.8, 1.5))
    assert refused.value.field == "acceptance"


def test_an_mtp_run_is_the_main_models_moe_block_plus_its_projection_and_the_head():
    """One MTP run over n = 8 decoding sequences is, op by op, one layer of the main model's MoE kind
    (B) in a plain decode step at the same contexts, plus enorm and hnorm (2 RMSNorms of 8 x 64), eh_proj
    (8, 128) @ (128, 64): 2 x 8 x 128 x 64 = 131,072 FLOPs, bytes 2 x (8 x 128 + 128 x 64 + 8 x 64) =
    19,456 in bf16; and the embedding gather, final norm and LM head of the main model's shape."""
    m = from_hf_config(SMALL, "small")
    main_step = {o.name: o for o in StepCost(m, "h100-sxm", cost_model=EAGER, max_seqs=16).ops([100] * 8)}
    draft = {o.name: o for o in MtpStepCost(m, "h100-sxm", cost_model=EAGER, max_seqs=16).ops([100] * 8)}
    proj = draft.pop("MTP eh_proj")
    assert (proj.flops, proj.bytes, proj.count) == (131_072, 19_456, 1)
    norms = draft.pop("MTP enorm+hnorm")
    assert norms.bytes == 2 * 2 * 8 * 64 * 2  # read and written, 2 x (8 x 64) elements of 2 bytes
    B = [k for k in main_step if k.startswith("B: ")]
    assert B and sorted(draft) == sorted([k[3:] for k in B] + ["embedding", "final norm", "LM head"])
    for k in B:  # the main step sums its 2 MoE layers: one layer's share is the MTP block's op
        assert draft[k[3:]].flops == pytest.approx(main_step[k].flops / 2, rel=1e-12)
        assert draft[k[3:]].bytes == pytest.approx(main_step[k].bytes / 2, rel=1e-12)
    for k in ("embedding", "final norm", "LM head"):
        assert (draft[k].flops, draft[k].bytes) == (main_step[k].flops, main_step[k].bytes)


def test_mtp_draft_weights_are_its_own():
    """Held weights: the module's own 32,112 parameters at 2 bytes (bf16): 64,224 bytes; the shared
    embedding and head are the target's, not held twice."""
    m = from_hf_config(SMALL, "small")
    assert MtpStepCost(m, "h100-sxm", max_seqs=16).held_weight_bytes() == 2 * 32_112


def test_mtp_weights_under_attention_tensor_parallelism_follow_the_main_layers():
    """Expert parallelism over 4 GPUs, attention tensor-parallel over 2 (2 data-parallel groups): the
    MTP block is the main model's decoder-layer class in both engines (vLLM deepseek_mtp.py:
    mtp_block = DeepseekV2DecoderLayer(...); SGLang deepseek_nextn.py: decoder =
    DeepseekV2DecoderLayer(...), https://github.com/vllm-project/vllm and
    https://github.com/sgl-project/sglang), so its attention, shared expert and its 1/G of the routed
    experts follow the main layers; eh_proj is a plain nn.Linear (whole on every GPU).
    Per GPU: MLA q_a 2,048 + q_a_norm 32 + kv_a 1,280 + kv_a_norm 16 (latent parts whole) + q_b 1,536 / 2
    + kv_b 1,024 / 2 + o 2,048 / 2 = 5,680; routed 12,288 / 4 = 3,072; shared 3,072 / 2 = 1,536; router
    256; block norms 128; eh_proj 8,192 and 3 norms 192 whole: 19,056 parameters x 2 B = 38,112 B.
    Attention whole (attention_tp 1): 32,112 - 12,288 x 3 / 4 = 22,896 x 2 B = 45,792 B."""
    from roofline.plan.memory import mtp_weight_bytes

    m = from_hf_config(SMALL, "small")
    kw = dict(max_seqs=16, expert_parallel=True)
    assert MtpStepCost(m, "h100-sxm", None, 4, attention_tp=2, **kw).held_weight_bytes() == 38_112
    assert mtp_weight_bytes(m, None, 4, True, 2) == 38_112
    assert MtpStepCost(m, "h100-sxm", None, 4, **kw).held_weight_bytes() == 45_792
    # the serving replica takes that from each GPU's cache: 2 data-parallel groups' caches, 2 x 38,112 B
    from roofline.serving.cache import replica_cache

    engine = Engine(max_seqs=16, spec_tokens=1, acceptance=0.8)
    target = StepCost(m, "h100-sxm", None, 4, verify_tokens=2, attention_tp=2, **kw)
    lens = np.array([64]), np.array([32])
    with_mtp, parts, _, _ = replica_cache(target, engine, *lens, draft=MtpStepCost(m, "h100-sxm", None, 4, attention_tp=2, **kw))
    alone, _, _, _ = replica_cache(target, engine, *lens)
    assert parts["draft_weights_bytes"] == 38_112 and alone - with_mtp == pytest.approx(2 * 38_112, abs=1e-3)


def test_serving_breakdown_adds_exactly_the_mtp_runs(tmp_path, capsys):
    """`serving --draft mtp --spec-tokens 3 --breakdown`: the decode step's ops are the target's verify
    step (4 tokens a sequence) and, part "draft", the MTP module's ops summed over its 3 runs (run i at
    context + i); the step's time is their sum, and the draft's share equals the simulator's
    vectorised draft steps."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(SMALL))
    args = ["serving", "--model", str(path), "--spec-tokens", "3", "--draft", "mtp", "--acceptance", "0.85,0.7,0.6",
            "--concurrency", "4", "--requests", "8", "--input-len", "64", "--output-len", "32", "--max-seqs", "16",
            "--breakdown", "--json", "--eager"]
    assert main(args) == 0
    d = json.loads(capsys.readouterr().out)
    s = d["breakdown"]["decode_step"]
    n, ctx = s["decode_batch"], s["context"]
    m = from_hf_config(SMALL, str(path))
    target = StepCost(m, "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=16, verify_tokens=4)
    draft = MtpStepCost(m, "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=16)
    own = [o for o in s["ops"] if o["part"] != "draft"]
    assert own == [o.to_dict() for o in target.ops([ctx + 3] * n)]
    drafted = {o["name"]: o for o in s["ops"] if o["part"] == "draft"}
    runs = [{o.name: o for o in draft.ops([ctx + i] * n)} for i in range(3)]
    assert sorted(drafted) == sorted(f"draft: {k}" for k in runs[0])
    for k in runs[0]:
        assert drafted[f"draft: {k}"]["flops"] == pytest.approx(sum(r[k].flops for r in runs), rel=1e-12)
        assert drafted[f"draft: {k}"]["count"] == 3 * runs[0][k].count
    assert s["draft_s"] == pytest.approx(sum(o["time_s"] for o in drafted.values()), rel=1e-9)
    assert s["draft_s"] == pytest.approx(float(draft.decode_steps_seconds(np.full(n, ctx - 1), 3).sum()), rel=1e-9)
    assert s["time_s"] == pytest.approx(sum(o["time_s"] for o in s["ops"]), rel=1e-12)
    assert any("3.15 tokens per sequence and step" in x and "0.85, 0.7, 0.6 by position" in x for x in d["notes"])


def test_speculation_with_mtp_emits_the_expected_tokens():
    """One request, 64 in, 281 out, rates 0.85, 0.7, 0.6: 3.15 a step carried as a fraction;
    floor(89 x 3.15) = 280 (88 steps give 277), so the 280 tokens after the first take 89 decode steps,
    90 with the prompt's."""
    m = from_hf_config(SMALL, "small")
    engine = Engine(max_seqs=16, spec_tokens=3, acceptance=(0.85, 0.7, 0.6))
    target = StepCost(m, "h100-sxm", cost_model=EAGER, max_seqs=16, verify_tokens=4)
    r = simulate(target, closed_requests(1, 1, 64, 281), engine, draft=MtpStepCost(m, "h100-sxm", cost_model=EAGER,
                                                                                    max_seqs=16))
    assert r.steps == 90


def test_mtp_draft_refused_without_an_mtp_module(capsys):
    with pytest.raises(RooflineError, match="Llama 3 8B has no multi-token-prediction module"):
        mtp_model("llama3-8b")
    assert main(["serving", "--model", "llama3-8b", "--spec-tokens", "2", "--draft", "mtp", "--acceptance", "0.8",
                 "--requests", "4"]) == 2
    assert "no multi-token-prediction module" in capsys.readouterr().err
    other = from_hf_config({**SMALL, "hidden_size": 128}, "other")
    with pytest.raises(RooflineError) as refused:
        simulate(StepCost(from_hf_config(SMALL, "small"), "h100-sxm", max_seqs=16, verify_tokens=2),
                 closed_requests(1, 1, 64, 8), Engine(max_seqs=16, spec_tokens=1, acceptance=0.8),
                 draft=MtpStepCost(other, "h100-sxm", max_seqs=16))
    assert refused.value.field == "draft"


def test_memory_holds_the_mtp_module_when_asked(capsys):
    """The small model at bf16, one GPU: the module's own 32,112 parameters x 2 B = 64,224 B; the cache
    per token of its 3 MLA layers, 3 x (16 + 4) x 2 B = 120 B, and with the MTP block's 4 x 20 x 2 = 160 B:
    a sequence of 1,000 tokens 160,000 B."""
    from roofline.plan.memory import inference_memory, mtp_weight_bytes

    m = from_hf_config(SMALL, "small")
    plain = dict((p.name, p.bytes) for p in inference_memory(m, "h100-sxm", 1, 1000).parts)
    held = dict((p.name, p.bytes) for p in inference_memory(m, "h100-sxm", 1, 1000, mtp=True).parts)
    assert mtp_weight_bytes(m) == held["mtp_weights"] == 64_224 and "mtp_weights" not in plain
    assert (plain["kv_cache"], held["kv_cache"]) == (120_000, 160_000)
    assert plain["weights"] == held["weights"]
    # two modules: twice the weights, and two blocks caching 20 x 2 B a token each: 120 + 80 = 200 B
    two = dict((p.name, p.bytes) for p in inference_memory(from_hf_config({**SMALL, "num_nextn_predict_layers": 2}),
                                                             "h100-sxm", 1, 1000, mtp=True).parts)
    assert (two["mtp_weights"], two["kv_cache"]) == (2 * 64_224, 200_000)
    assert main(["memory", "--model", "llama3-8b", "--mtp"]) == 2
    assert "no multi-token-prediction module" in capsys.readouterr().err


def test_serving_replica_holds_the_mtp_weights_and_cache():
    """The small model, bf16, blocks of 16: a block of the model's cache is 16 x 120 B = 1,920 B, with
    the MTP block's 16 x 40 B = 2,560 B; the draft's weights the module's own 64,224 B."""
    from roofline.serving.cache import replica_cache

    m = from_hf_config(SMALL, "small")
    engine = Engine(max_seqs=16, spec_tokens=2, acceptance=0.8)
    target = StepCost(m, "h100-sxm", max_seqs=16, verify_tokens=3)
    lens = np.array([64]), np.array([32])
    _, parts, table, _ = replica_cache(target, engine, *lens, draft=MtpStepCost(m, "h100-sxm", max_seqs=16))
    _, alone, plain, _ = replica_cache(target, engine, *lens)
    assert parts["draft_weights_bytes"] == 64_224 and "draft_weights_bytes" not in alone
    assert (plain[1], table[1]) == (1_920, 2_560)


def test_a_verify_step_over_mla_runs_the_absorbed_kernel():
    """Engines verify k + 1 tokens a sequence through MLA's absorbed decode kernel over the latent cache
    (FlashMLA takes several queries a sequence), not by expanding every cached latent to per-head keys
    (the prefill form: DeepSeek-V3's kv_b proj would turn each of S latents into 128 heads x 256)."""
    from roofline.plan import Precision
    from roofline.plan.step import StepCost

    kw = dict(precision=Precision.uniform("fp8"), tensor_parallel=8, max_tokens=8192, max_seqs=64)
    verify = StepCost("deepseek-v3", "h200", verify_tokens=4, **kw)
    names = {op.name for op in verify.ops([4096] * 8)}
    assert {"B: latent attention (decode)", "B: q absorb (W_UK) (decode)"} <= names
    assert not any("expand" in n for n in names)
    # 4 queries a sequence each read the whole latent cache: the attention's bytes are a plain decode's (one
    # query) plus 3 more queries' q and output rows, far under the expanded form's S x 128 x 256 keys per layer
    plain = StepCost("deepseek-v3", "h200", **kw)
    one = {op.name: op for op in plain.ops([4096] * 8)}["B: latent attention (decode)"]
    four = {op.name: op for op in verify.ops([4096] * 8)}["B: latent attention (decode)"]
    assert one.bytes < four.bytes < 1.1 * one.bytes
