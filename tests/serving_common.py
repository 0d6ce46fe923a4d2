"""What the serving tests share: the eager cost model (no CUDA graph, every op pays the seed's 3 us)
and the step they mostly run (Llama 3 8B on an H100 with vLLM's token and sequence budgets)."""

from roofline.cost import seed_cost_model

EAGER = seed_cost_model(launch_overhead_s=3e-6)  # no CUDA graph: every op pays 3 us


def llama_step():
    from roofline.plan.step import StepCost

    return StepCost("llama3-8b", "h100-sxm", cost_model=EAGER, max_tokens=8192, max_seqs=256)
