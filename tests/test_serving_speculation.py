"""Speculative decoding in the serving simulator (serving/engine.py's acceptance, the verify step of
plan/step.py): the expected tokens per verify, its cost, the tokens a run emits, the flags that
come together and the drafts refused."""

import json

import numpy as np
import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.serving import Engine, closed_requests, poisson_requests, simulate
from roofline.plan.step import StepCost

from serving_common import EAGER  # noqa: E402 (tests/ is on sys.path)


def test_expected_tokens_per_verify_step():
    """k = 4 drafts each accepted with 0.8: 1 + 0.8 + 0.64 + 0.512 + 0.4096 = 3.3616
    = (1 - 0.8^5) / (1 - 0.8) (Leviathan et al. 2023)."""
    assert Engine(spec_tokens=4, acceptance=0.8, max_seqs=64).tokens_per_verify == pytest.approx(3.3616)
    assert Engine().tokens_per_verify == 1.0
    with pytest.raises(RooflineError) as refused:  # an acceptance without drafts to accept
        Engine(acceptance=0.5)
    assert refused.value.field == "acceptance"


def test_a_verify_step_costs_what_chunks_of_k_plus_1_tokens_cost():
    """Verifying 5 tokens per sequence against S attended positions is, op by op, a chunk of 5
    prompt tokens against S - 5 cached for each sequence, with 5 rows of logits each."""
    one = StepCost("llama3-8b", "h100-sxm", cost_model=EAGER)
    five = StepCost("llama3-8b", "h100-sxm", cost_model=EAGER, verify_tokens=5)
    assert five.seconds([1004] * 32) == pytest.approx(one.seconds([], [(5, 999)] * 32, sampled=160), rel=1e-12)


def test_speculation_emits_the_expected_tokens_per_step():
    """One request, 1,024 in, 337 out, 4 drafts at 0.8: the prefill emits the first token, then
    each step 3.3616 on average carried as a fraction: floor(100 x 3.3616) = 336, so exactly 100
    decode steps, each the target's verify step plus 4 draft decode steps."""
    engine = Engine(max_seqs=16, spec_tokens=4, acceptance=0.8)
    target = StepCost("llama3-70b", "h100-sxm", tensor_parallel=4, cost_model=EAGER, max_seqs=16, verify_tokens=5)
    draft = StepCost("llama3.2-1b", "h100-sxm", tensor_parallel=4, cost_model=EAGER, max_seqs=16)
    r = simulate(target, closed_requests(1, 1, 1024, 337), engine, draft=draft)
    assert r.steps == 101
    lo = target.seconds([1024 + 5]) + float(draft.decode_steps_seconds(np.array([1024]), 4).sum())
    assert 100 * lo <= r.e2e_s[0] - r.ttft_s[0] <= 100 * lo * 1.1  # contexts grow by ~336 of 1,024 over the run
    plain = simulate(StepCost("llama3-70b", "h100-sxm", tensor_parallel=4, cost_model=EAGER, max_seqs=16),
                     closed_requests(1, 1, 1024, 337), Engine(max_seqs=16))
    assert r.tpot_s[0] < plain.tpot_s[0] / 2  # at batch 1 verification is nearly free: 3.36 tokens per step
    assert any("speculative decoding" in n for n in r.notes)


def test_cli_speculation_flags_come_together(capsys):
    assert main(["serving", "--spec-tokens", "4", "--requests", "4"]) == 2
    assert "--draft" in capsys.readouterr().err
    assert main(["serving", "--spec-tokens", "2", "--acceptance", "0.6", "--draft", "llama3.2-1b", "--concurrency", "2",
                 "--requests", "4", "--output-len", "64", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 4
    assert main(["serving", "--model", "gemma3-27b", "--spec-tokens", "2", "--acceptance", "0.5", "--draft", "gemma3-1b",
                 "--requests", "4"]) == 2
    assert "sliding-window" in capsys.readouterr().err


def test_review_refusals_for_drafts_and_kv_links(step):
    """A draft with another vocabulary, or one not smaller than the target, is refused; NVLink as
    the KV link of pools spanning two nodes is refused; with expert parallelism a sequence's cache
    moves whole (one GPU holds it): twice TP 2's per-GPU shard."""
    from roofline.serving import kv_transfer_seconds, simulate_disaggregated

    target = StepCost("llama3-8b", "h100-sxm", cost_model=EAGER, max_seqs=16, verify_tokens=3)
    engine = Engine(max_seqs=16, spec_tokens=2, acceptance=0.5)
    with pytest.raises(RooflineError) as refused:  # GPT-2's 50,257 tokens, Llama 3's 128,256: both named
        simulate(target, closed_requests(1, 1, 64, 4), engine, draft=StepCost("gpt2", "h100-sxm", max_seqs=16))
    assert refused.value.field == "draft" and "50,257" in str(refused.value) and "128,256" in str(refused.value)
    with pytest.raises(RooflineError) as refused:  # the target itself as its draft
        simulate(target, closed_requests(1, 1, 64, 4), engine, draft=StepCost("llama3-8b", "h100-sxm", max_seqs=16))
    assert refused.value.field == "draft"
    with pytest.raises(RooflineError) as refused:  # 5 + 5 replicas of 1 GPU: 10 GPUs, past a node of 8
        simulate_disaggregated(step, step, poisson_requests(5, 4, 64, 4), prefill_replicas=5, decode_replicas=5,
                               kv_link="nvlink")
    assert refused.value.field == "kv_link" and "10 GPUs" in str(refused.value)
    tp = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=2)
    ep = StepCost("mixtral-8x7b", "h100-sxm", tensor_parallel=2, expert_parallel=True)
    t_tp, _ = kv_transfer_seconds(tp, tp, np.array([1024]))
    t_ep, _ = kv_transfer_seconds(ep, ep, np.array([1024]))
    assert (t_ep[0] - 46e-6) == pytest.approx(2 * (t_tp[0] - 46e-6))


def _spec_cache(target, draft, engine, gb):
    """The memory fraction that leaves ``gb`` GB for the target's and the draft's KV cache after the
    weights (the draft's too) and the activations."""
    from roofline.plan.step import kv_cache_budget
    from roofline.plan.step_mtp import MtpStepCost
    from roofline.plan.memory import inference_weight_bytes

    _, parts = kv_cache_budget(target, 1.0)
    held = draft.held_weight_bytes() if isinstance(draft, MtpStepCost) else inference_weight_bytes(draft.model, draft.precision)
    return (parts["weights_bytes"] + parts["activations_bytes"] + held + gb * 1e9) / parts["capacity_bytes"]


@pytest.mark.parametrize("case", ["closed, rates by position", "poisson, step overhead", "closed, preempting",
                                  "mtp draft", "reserving in full"])
def test_speculating_stretches_give_the_step_by_step_runs_figures(case, monkeypatch):
    """Issue 35: speculative decoding's decode-only steps run at once between events (stretch.verify_stretch:
    each sequence's tokens after k verify steps floor((v + k) E), the steps' context sums and cache in closed
    form) give the same steps, tokens, preemptions, every step's seconds and the same percentiles as
    simulate(..., stepwise=True), which advances every slot every step; and stretches did run."""
    from roofline.serving import advance

    ran = []
    real = advance.verify_stretch
    monkeypatch.setattr(advance, "verify_stretch", lambda *a: ran.append(real(*a)) or ran[-1])
    target = StepCost("llama3-8b", "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=64, verify_tokens=4)
    draft = StepCost("llama3.2-1b", "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=64)
    engine = Engine(max_seqs=64, spec_tokens=3, acceptance=(0.8, 0.6, 0.5))
    reqs = closed_requests(16, 60, (100, 1500), (10, 800), seed=2)
    if case == "poisson, step overhead":
        reqs = poisson_requests(10, 200, (64, 1500), (8, 400), seed=1)
        engine = Engine(max_seqs=64, spec_tokens=3, acceptance=0.7, step_overhead_s=2e-3)
    elif case == "closed, preempting":  # 0.6 GB: ~3,660 tokens of 131,072 + 32,768 B (the 1B draft's: 16 layers x 2 x
        reqs = closed_requests(8, 40, (500, 1500), (200, 1000), seed=3)  # 8 x 64 x 2 B) for 8 users of up to 2,500
        engine = Engine(max_seqs=64, spec_tokens=3, acceptance=0.7, memory_fraction=_spec_cache(target, draft, engine, 0.6))
    elif case == "mtp draft":  # a DeepSeek-V3-shaped model at toy sizes with its own MTP module (tests/test_mtp.py)
        from roofline.hf_configs import from_hf_config
        from roofline.plan.step_mtp import MtpStepCost
        from test_mtp import SMALL

        m = from_hf_config(SMALL, "small")
        target = StepCost(m, "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=64, verify_tokens=3)
        draft = MtpStepCost(m, "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=64)
        engine = Engine(max_seqs=64, spec_tokens=2, acceptance=(0.9, 0.7))
    elif case == "reserving in full":
        reqs = closed_requests(8, 40, (500, 1500), (200, 1000), seed=3)
        engine = Engine(max_seqs=64, spec_tokens=3, acceptance=0.7, admission="reserve_full", chunked_prefill=False,
                        memory_fraction=_spec_cache(target, draft, engine, 0.6))
    fast, plain = simulate(target, reqs, engine, draft=draft), simulate(target, reqs, engine, draft=draft, stepwise=True)
    assert any(r is not None for r in ran)
    if case == "closed, preempting":
        assert plain.preemptions > 0
    a, b = fast.metrics(), plain.metrics()
    for key in ("steps", "preemptions", "computed_prompt_tokens", "requests"):
        assert a[key] == b[key], key
    assert fast.output_tokens == plain.output_tokens and fast.input_tokens == plain.input_tokens
    for key, value in b.items():
        assert a[key] == pytest.approx(value, rel=1e-12, nan_ok=True), key
    np.testing.assert_allclose(fast.e2e_s, plain.e2e_s, rtol=1e-12)
    np.testing.assert_allclose(fast.step_durations_s, plain.step_durations_s, rtol=1e-12)
    np.testing.assert_array_equal(fast.step_decodes, plain.step_decodes)


@pytest.mark.parametrize("layout", [{}, {"expert_parallel": True}, {"expert_parallel": True, "attention_tp": 2}])
def test_verify_steps_priced_from_their_sums_are_the_steps_own_seconds(layout):
    """StepCost.decode_steps_seconds given the steps' context sums (the speculating stretch's): each verify step
    of T = 3 tokens a sequence costs what seconds() gives for those contexts, with expert parallelism (the
    busiest GPU's ceil(n / d) sequences, T rows each) and attention tensor parallelism too."""
    from roofline.plan import Precision

    step = StepCost("deepseek-v3", "h200", Precision.uniform("fp8"), 8, max_tokens=8192, max_seqs=64, verify_tokens=3,
                    **layout)
    ctx = np.array([1000, 2000, 3000, 4000, 500, 600, 700, 800, 900, 1000, 1100, 1200, 50])
    n = len(ctx)
    got = step.decode_steps_seconds(None, 2, (n, 0.0), sums=np.array([ctx.sum() + 3 * n, ctx.sum() + 13 * n]))
    assert got == pytest.approx([step.seconds(ctx + 3), step.seconds(ctx + 13)], rel=1e-12)
    with pytest.raises(ValueError):  # a verify step's contexts are not ctx0 + k
        step.decode_steps_seconds(ctx, 2)
