"""The declarations of serving.Engine's settings (issue 37: one declaration per parameter): each one's flag,
query, default, range and help. Engine's fields take their defaults from here and its check reads these ranges;
serving.parameters puts them among the other serving parameters, from which the CLI's flags, the API's queries and
the page's controls are made. Imports nothing of serving (Engine reads it at import).
"""

from __future__ import annotations

import dataclasses

from roofline.parameters import MEMORY_FRACTION, WEB_MAX_TOKENS, Param
from roofline.plan.limits import ENGINE_MEMORY_FRACTION, ENGINE_STEP_SEQS, ENGINE_STEP_TOKENS

MAX_STEP_OVERHEAD_S = 1.0  # an engine time per step past a second is a typo (the CLI's and the API's bound)
MAX_REQUEST_OVERHEAD_S = 10.0  # a server time per request past ten seconds is a typo
MAX_EAGER_OP_S = 1e-3  # a host time per op past a millisecond is a typo
WEB_MAX_SEQS = 4096  # the web view's tighter bound: it simulates a sweep within a budget per request (web.compute)

MAX_SEQS = Param("max_seqs", "--max-seqs", "max_seqs", "sequences running at once (vLLM max_num_seqs; default {default}, or "
      "--engine's)", ENGINE_STEP_SEQS, maximum=1 << 20, integer=True, engine=True,
      api_maximum=WEB_MAX_SEQS, api_help="sequences running at once (vLLM max_num_seqs; at most max_tokens)",
      label="Max sequences")
MAX_TOKENS = Param("max_tokens", "--max-tokens", "max_tokens", "tokens per step (vLLM max_num_batched_tokens; default {default}, "
      "or --engine's)", ENGINE_STEP_TOKENS, maximum=1 << 20, integer=True, engine=True,
      api_maximum=WEB_MAX_TOKENS, api_help="tokens per step (vLLM max_num_batched_tokens)", label="Max tokens per step")
BLOCK_SIZE = Param("block_size", "--block-size", None, "tokens per KV-cache block (default {default}, or --engine's)",
      16, maximum=1 << 16, integer=True, engine=True)
# the planning commands' range (roofline.parameters.MEMORY_FRACTION), the engine's default
ENGINE_MEMORY = dataclasses.replace(MEMORY_FRACTION, help="share of GPU memory the engine takes (vLLM gpu_memory_utilization; "
                    "default {default}, or --engine's)", default=ENGINE_MEMORY_FRACTION, engine=True,
                    api_help="share of GPU memory the engine takes (vLLM gpu_memory_utilization)",
                    label="Memory fraction")
STEP_OVERHEAD = Param("step_overhead_s", "--step-overhead", "step_overhead_ms", "the engine's own time per step, not overlapped "
      "with the GPU (scheduling, sampling, detokenising), e.g. 2ms (default {default}: the GPU's work alone; "
      "--engine's fitted one)", 0.0, strictly=False, maximum=MAX_STEP_OVERHEAD_S,
      unit="s", engine=True,
      api_help="the engine's own time per step in ms, not overlapped with the GPU (scheduling, sampling, "
               "detokenising), as `roofline serving --step-overhead`", label="Engine time per step (ms)")
REQUEST_OVERHEAD = Param("request_overhead_s", "--request-overhead", None, "the server's own time per request before the scheduler "
      "sees it (HTTP, tokenising, routing), added to each TTFT, e.g. 20ms (default {default})",
      0.0, strictly=False, maximum=MAX_REQUEST_OVERHEAD_S, unit="s", engine=True)
EAGER_OP = Param("eager_op_s", "--eager-op", None, "the engine's host time per op it runs outside a CUDA graph "
      "(every op of a step with prompt chunks, as engines capture decode batches only): Python and the framework "
      "dispatching it, not overlapped with the GPU, e.g. 60us (default {default}: the GPU's work alone; --engine's "
      "fitted one)", 0.0, strictly=False, maximum=MAX_EAGER_OP_S, unit="s", engine=True)
GRAPH_TOKENS = Param("graph_tokens", "--graph-tokens", None, "the largest step with prompt chunks the engine replays as "
      "a piecewise CUDA graph (vLLM's max_cudagraph_capture_size: each layer's attention launched by the host, the "
      "rest graphed), counted against --eager-op as two ops a layer; a larger step runs every op eagerly (default "
      "{default}: none, or --engine's)", 0, strictly=False, maximum=1 << 20, integer=True, engine=True, metavar="N")
PREFIX_HIT = Param("prefix_hit", "--prefix-hit", "prefix_hit", "share of each prompt found in the prefix cache (default {default})",
      0.0, strictly=False, maximum=1.0,
      api_help="share of each prompt found in the prefix cache", label="Prefix-cache hits (share of each prompt)")
SPEC_TOKENS = Param("spec_tokens", "--spec-tokens", None, "speculative decoding: draft tokens per sequence and step (with --draft "
      "and --acceptance)", 0, strictly=False, maximum=16, integer=True)

# TensorRT-LLM's delayed prompt batching (its LLM API's batch_wait_timeout_iters and batch_wait_max_tokens_ratio, both
# 0 by default: off; tensorrt_llm/_torch/pyexecutor/scheduler RequestScheduler._apply_batch_waiting): a step with
# prompts and decodes whose tokens are under the ratio of max_tokens runs its decodes alone, at most this many steps
BATCH_WAIT_STEPS = Param("batch_wait_steps", "--batch-wait-steps", None, "TensorRT-LLM's batch_wait_timeout_iters: "
      "steps in a row new prompts may be held back while decodes run, to batch more of them (with --batch-wait-ratio; "
      "default {default}: off)", 0, strictly=False, maximum=100_000, integer=True, engine=True, metavar="N")
BATCH_WAIT_RATIO = Param("batch_wait_ratio", "--batch-wait-ratio", None, "TensorRT-LLM's batch_wait_max_tokens_ratio: "
      "prompts are held while the step's tokens (the prompts' whole lengths and a token per decode) are under this "
      "share of --max-tokens (with --batch-wait-steps; default {default}: off)", 0.0, strictly=False, maximum=1.0,
      engine=True, metavar="R")
# TensorRT-LLM's attention-DP balance (its LLM API's attention_dp_config: enable_balance, off by default; timeout_iters,
# 50 by default, and batching_wait_iters, 10; tensorrt_llm/_torch/pyexecutor's _balance_adp_requests): with data-parallel
# attention, new prompts start only in a step where every rank has one (or after the timeout), so that no step runs a
# prompt on one rank while the others wait on it; both 0 here: off
ADP_TIMEOUT_STEPS = Param("adp_timeout_steps", "--adp-timeout-steps", None, "TensorRT-LLM's attention_dp_config "
      "timeout_iters with enable_balance (its default 50): with --attention-dp, new prompts wait until every rank has "
      "one, at most this many steps (its counter runs every step, so a prompt waits for its next turn); default "
      "{default}: off", 0, strictly=False, maximum=100_000, integer=True, engine=True, metavar="N")
ADP_BATCHING_STEPS = Param("adp_batching_steps", "--adp-batching-steps", None, "TensorRT-LLM's attention_dp_config "
      "batching_wait_iters with enable_balance (its default 10): once every rank has a prompt, steps more they wait to "
      "batch more of them; default {default}", 0, strictly=False, maximum=100_000, integer=True, engine=True, metavar="N")
RECV_INTERVAL = Param("recv_interval", "--recv-interval", None, "SGLang's scheduler_recv_interval: decode steps "
      "between the scheduler's polls for new requests (after a step with prompts it polls at once; default {default}: "
      "every step)", 1, maximum=10_000, integer=True, engine=True, metavar="N")

# The scheduler planning a step while the one before it runs (vLLM's async scheduling, SGLang's overlap schedule,
# TensorRT-LLM's overlap scheduler): the plan for step k+1 is made as step k starts, so a request that arrives while
# step k runs starts in step k+2, not k+1 (RunState.takes)
SCHEDULE_AHEAD = Param("schedule_ahead", "--schedule-ahead", None, "steps the scheduler plans ahead of the GPU: 1, "
      "each step planned while the one before it runs (vLLM's async scheduling, SGLang's overlap schedule, "
      "TensorRT-LLM's overlap scheduler), so a request that arrives during a step starts in the step after next; 0, "
      "each planned once the last has ended (default {default}, or --engine's)", 0, strictly=False, maximum=1,
      integer=True, engine=True, metavar="N")

# speculative decoding's acceptance: one rate, or a rate per draft position (cli.serving_args.acceptance_arg), each
# in this range, which serving.Engine checks too (below 1: a draft always accepted is not a draft)
ACCEPTANCE = Param("acceptance", "--acceptance", None, "the chance each draft token is accepted, e.g. 0.7; or the rate "
                   "per draft position as engines report it (vLLM's accepted tokens per position over drafts: "
                   "non-increasing), e.g. 0.85,0.7,0.6 (no default: measure it for your data)", maximum=0.999,
                   metavar="A or A1,...,AK")

# the settings Engine checks against these ranges (the flags', the queries' and its own, one and the same)
ENGINE_PARAMS = (MAX_SEQS, MAX_TOKENS, BLOCK_SIZE, ENGINE_MEMORY, STEP_OVERHEAD, EAGER_OP, GRAPH_TOKENS, REQUEST_OVERHEAD, PREFIX_HIT, SPEC_TOKENS,
                 BATCH_WAIT_STEPS, BATCH_WAIT_RATIO, RECV_INTERVAL, ADP_TIMEOUT_STEPS, ADP_BATCHING_STEPS, SCHEDULE_AHEAD)
