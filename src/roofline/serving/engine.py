"""The serving engine's settings (docs/serving.md): the scheduler's token and sequence budgets,
the KV cache's blocks and memory share, prefix caching, speculative decoding.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.errors import RooflineError, unknown_name
from roofline.serving.engine_memory import MemoryShare
from roofline.serving.engine_params import (ACCEPTANCE, ADP_BATCHING_STEPS, ADP_TIMEOUT_STEPS, BATCH_WAIT_RATIO, BATCH_WAIT_STEPS, BLOCK_SIZE, EAGER_OP,  # noqa: F401
                                           GRAPH_TOKENS, RECV_INTERVAL, SCHEDULE_AHEAD,
                                           ENGINE_MEMORY, ENGINE_PARAMS, MAX_REQUEST_OVERHEAD_S,
                                           MAX_SEQS, MAX_STEP_OVERHEAD_S, MAX_TOKENS, PREFIX_HIT, REQUEST_OVERHEAD,
                                           SPEC_TOKENS, STEP_OVERHEAD)


# how a request is admitted to the KV cache (engines.toml names each engine's; docs/serving.md): "on_demand", while
# blocks for its prompt are free, each decode taking a block as it fills one and the newest sequence preempted
# (recomputed) when the cache runs out (vLLM V1); "reserve_full", only while the blocks of its prompt and every output
# token can be reserved, so no sequence is ever preempted (TensorRT-LLM's GUARANTEED_NO_EVICT)
ADMISSIONS = ("on_demand", "reserve_full")


CHECKED = tuple(p.name for p in ENGINE_PARAMS)  # the settings checked against their declared ranges


@dataclass(frozen=True)
class Engine:
    """The scheduler's settings (vLLM's names: max_num_seqs, max_num_batched_tokens, block_size,
    gpu_memory_utilization, prefix caching)."""

    max_seqs: int = MAX_SEQS.default  # each setting's default and range: engine_params
    max_tokens: int = MAX_TOKENS.default
    block_size: int = BLOCK_SIZE.default
    memory_fraction: float = ENGINE_MEMORY.default  # vLLM's gpu_memory_utilization default, 0.9
    # the share is of what the weights and a step's activations leave (TensorRT-LLM's free_gpu_memory_fraction), not
    # of the whole memory (vLLM's gpu_memory_utilization, SGLang's mem_fraction_static)
    memory_of_free: bool = False
    prefix_hit: float = PREFIX_HIT.default
    spec_tokens: int = SPEC_TOKENS.default  # speculative decoding: draft tokens proposed per sequence and step (0: none)
    # the chance each draft token is accepted: one rate for every position (independent, as Leviathan et al. 2023), or
    # a rate per position (a_i: the chance draft i is accepted given drafts 1..i-1 were; an MTP draft's fall with i)
    acceptance: float | tuple[float, ...] = 0.0
    # the engine's own time per step that does not overlap the GPU's (scheduling, preparing inputs, sampling,
    # detokenising and streaming): 0 unless given, as the GPU's work alone is what the step costs
    step_overhead_s: float = STEP_OVERHEAD.default
    # the engine's host time per op it dispatches outside a CUDA graph (StepCost.eager_ops: every op run of a step with
    # prompt chunks, or of every step without CUDA graphs), not overlapped with the GPU: Python and the framework
    # launching each op one by one, where the GPU's kernels are too short to hide it; 0 unless given
    eager_op_s: float = EAGER_OP.default
    # the largest step with prompt chunks the engine replays as a piecewise CUDA graph (vLLM V1's max_cudagraph_capture_size:
    # a mixed batch of up to this many tokens runs each layer's attention from the host and the rest as graphs, so its
    # host time is StepCost.eager_ops's two ops a layer, not every op's); 0: none, every such step eager
    graph_tokens: int = GRAPH_TOKENS.default
    # the server's own time per request before the scheduler sees it (the HTTP request, the frontend's tokenising and
    # routing): a request joins the queue this long after it was sent, so its TTFT grows by it, and a closed-loop
    # user's next request joins it this long after the user's last one finished; 0 unless given
    request_overhead_s: float = REQUEST_OVERHEAD.default
    # TensorRT-LLM's delayed prompt batching (batch_wait_timeout_iters N, batch_wait_max_tokens_ratio r; 0: off, its
    # default): a step that has prompts and decodes runs the decodes alone while fewer than N steps in a row have held
    # prompts and the step's tokens are under r x max_tokens (serving.schedule)
    batch_wait_steps: int = BATCH_WAIT_STEPS.default
    batch_wait_ratio: float = BATCH_WAIT_RATIO.default
    # TensorRT-LLM's attention-DP balance (attention_dp_config enable_balance, timeout_iters N, batching_wait_iters W;
    # off, its default, where both are 0): with data-parallel attention, a step's new prompts wait until every rank has
    # one, at most until its counter, run every step, reaches N; then W steps more while every rank decodes too
    # (serving.schedule._adp_hold)
    adp_timeout_steps: int = ADP_TIMEOUT_STEPS.default
    adp_batching_steps: int = ADP_BATCHING_STEPS.default
    # SGLang's scheduler_recv_interval (1, its default: every step): the scheduler polls for new requests once its
    # count reaches this, a decode step counting 1 and a step with prompts past it (SchedulerRecvSkipper)
    recv_interval: int = RECV_INTERVAL.default
    # the steps the scheduler plans ahead of the GPU (0: each step planned once the last has ended; 1: while the one
    # before it runs, vLLM's async scheduling, SGLang's overlap schedule, TensorRT-LLM's overlap scheduler): a request
    # that arrives during step k starts in step k + 1 + schedule_ahead (state.RunState.takes)
    schedule_ahead: int = SCHEDULE_AHEAD.default
    # how a step is made (engines.toml names each engine's): chunked_prefill, a prompt fed in chunks within the step's
    # token budget (vLLM V1, SGLang) or whole in one step (TensorRT-LLM's default: enable_chunked_prefill False);
    # mixed_steps, decodes and prompt chunks in one step (vLLM, TensorRT-LLM) or a step of prompts alone that the
    # decodes wait out (SGLang without --enable-mixed-chunk: a new prefill batch runs before the decode batch)
    chunked_prefill: bool = True
    mixed_steps: bool = True
    admission: str = "on_demand"  # one of ADMISSIONS
    # where memory_fraction came from (given, an engine's fixed default, or sized from the GPU's memory and the layout as
    # SGLang sizes it: serving.engine_memory); None for Engine's own default
    memory_share: MemoryShare | None = None
    preset: str = ""  # the engine whose defaults these are (serving.engines: "vllm", "sglang", "trtllm"; "" for none)
    label: str = ""  # what set these (serving.engines: an engine's defaults, cited), said under a run
    # the engine's own note on a default it holds past a version (engines.toml `since`: vLLM's time per step hidden by
    # its async scheduling from v0.14.0), said under a run; "" for none
    since_note: str = ""

    @property
    def step_tokens(self) -> int:
        """The most tokens a step feeds: max_tokens, or a decode step of every sequence where prompt
        steps run apart (not mixed_steps: the budget bounds the prompts alone)."""
        return max(self.max_tokens, self.max_seqs * (self.spec_tokens + 1))

    @property
    def batch_waiting(self) -> bool:
        """Whether prompts may be held (TensorRT-LLM holds none unless both N and r are above 0)."""
        return self.batch_wait_steps > 0 and self.batch_wait_ratio > 0

    @property
    def adp_balance(self) -> bool:
        """Whether attention-DP balance may hold prompts (either of its counts above 0)."""
        return self.adp_timeout_steps > 0 or self.adp_batching_steps > 0

    @property
    def acceptance_rates(self) -> tuple[float, ...]:
        """Each draft position's acceptance rate as engines report it per position, the share of
        verifies whose draft i was accepted (so drafts 1..i all were: r_1 >= r_2 >= ...; vLLM's
        spec_decode_num_accepted_tokens_per_pos over spec_decode_num_drafts); one rate a for every
        draft, each accepted independently: r_i = a^i."""
        a = self.acceptance
        if isinstance(a, tuple):
            return tuple(float(x) for x in a)
        return tuple(float(a) ** i for i in range(1, self.spec_tokens + 1))

    @property
    def tokens_per_verify(self) -> float:
        """Expected tokens a sequence emits per step: the corrected or bonus token and the accepted
        drafts, 1 + sum_i r_i (the mean acceptance length engines report); one rate a gives
        sum_{i=0..k} a^i = (1 - a^(k+1)) / (1 - a) (Leviathan et al. 2023, arXiv:2211.17192,
        section 3). 1 without speculation."""
        return 1.0 + sum(self.acceptance_rates)

    def acceptance_words(self) -> str:
        """The acceptance as given, in words: "0.7" or "0.85, 0.7, 0.6 by position"."""
        a = self.acceptance
        return ", ".join(f"{x:g}" for x in a) + " by position" if isinstance(a, tuple) else f"{a:g}"

    def overhead_ops(self, step, n_decode: int = 1, has_chunks: bool = False, tokens: int = 0) -> list:
        """The engine's own time as rows of a step op by op (--breakdown, the web's step table): its
        time per step, and its host time for the ops it dispatches outside a CUDA graph (StepCost
        ``step``'s eager_ops of a step of ``n_decode`` decodes, with prompt chunks or not, of ``tokens``
        tokens: a piecewise CUDA graph's up to graph_tokens); each row only where it is not 0."""
        from roofline.plan.step import StepOp

        rows = []
        if self.step_overhead_s:
            rows.append(StepOp("engine time per step", "engine", 1, 0.0, 0.0, float(self.step_overhead_s), "engine"))
        ops = step.eager_ops(n_decode, has_chunks, True, tokens, self.graph_tokens) if self.eager_op_s else 0
        if ops:
            rows.append(StepOp("engine host time, ops outside a CUDA graph", "engine", ops, 0.0, 0.0,
                               float(self.eager_op_s) * ops, "engine"))
        return rows

    def __post_init__(self):
        if self.admission not in ADMISSIONS:
            raise unknown_name("admission", self.admission, ADMISSIONS)
        for param in ENGINE_PARAMS:  # the declared ranges (serving.engine_params)
            param.check(getattr(self, param.name))
        if isinstance(self.acceptance, list):  # a rate per position, as a library caller may give them
            object.__setattr__(self, "acceptance", tuple(self.acceptance))
        if self.spec_tokens:
            if isinstance(self.acceptance, tuple) and len(self.acceptance) != self.spec_tokens:
                raise RooflineError(f"acceptance lists {len(self.acceptance)} rates for {self.spec_tokens} draft "
                                    "positions: give one rate, or one per position", field="acceptance")
            for a in self.acceptance_rates:
                ACCEPTANCE.check(a)
            rates = self.acceptance_rates
            if any(later > earlier for earlier, later in zip(rates, rates[1:])):
                raise RooflineError(f"acceptance {self.acceptance_words()}: per-position rates, as engines report them "
                                    "(the share of verifies that accepted draft i, so drafts 1..i), cannot rise from "
                                    "one position to the next", field="acceptance")
        elif self.acceptance:
            raise RooflineError("acceptance applies to speculative decoding: give spec_tokens too", field="acceptance")
        if self.batch_waiting and not self.mixed_steps:
            raise RooflineError("batch waiting (batch_wait_steps, batch_wait_ratio) is TensorRT-LLM's, whose steps mix "
                                "prompts and decodes: it is not modelled for an engine that runs prompts apart",
                                field="batch_wait_steps", also=("batch_wait_ratio",))
        if self.adp_balance and not self.mixed_steps:
            raise RooflineError("attention-DP balance (adp_timeout_steps, adp_batching_steps) is TensorRT-LLM's, whose "
                                "steps mix prompts and decodes: it is not modelled for an engine that runs prompts apart",
                                field="adp_timeout_steps", also=("adp_batching_steps",))
        if self.mixed_steps and self.max_seqs * (self.spec_tokens + 1) > self.max_tokens:
            raise RooflineError(f"max_tokens {self.max_tokens:,} is under max_seqs {self.max_seqs:,} x "
                                f"{self.spec_tokens + 1} token{'s' if self.spec_tokens else ''} each: every decoding "
                                "sequence needs its tokens of the step's budget (raise the token budget or lower the "
                                "sequences)", field="max_tokens", also=("max_seqs", "spec_tokens"))
