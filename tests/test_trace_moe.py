"""roofline.trace on a mixture of experts and on MLA-style attention: the rule for torch._grouped_mm
(the op a MoE layer's routed experts run as) and attention whose V head dim is not Q's (DeepSeek's
MLA: d_qk 192, d_v 128). Tiny shapes, the arithmetic in the comments; references are per-group mm
calls counted by FlopCounterMode, FlopCounterMode itself where it has a formula, and arithmetic.

Tests that need torch take the ``torch`` fixture, which skips them when it is not installed."""

from collections import defaultdict

import pytest

from roofline.trace.rules import RULES, Call, TensorSpec


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def cost(op, *args, outputs=()):
    tensors = tuple(a for a in args if isinstance(a, TensorSpec))
    return RULES[op].fn(Call(op, args, tensors, tuple(outputs)))


def bf16(*shape):
    return TensorSpec(shape, "bf16")


# ---------------------------------------------------------------------------------------------
# the _grouped_mm rule (no torch)
# ---------------------------------------------------------------------------------------------


def test_grouped_mm_2d_by_3d_counts_every_row_once():
    # tokens sorted by expert: A (M=16, K=8) @ B (E=4, K=8, N=24), offs (4,) int32; out (16, 24)
    c = cost("aten::_grouped_mm", bf16(16, 8), bf16(4, 8, 24), TensorSpec((4,), "int32"), outputs=[bf16(16, 24)])
    assert c.flops == 6_144  # 2 x 16 rows x 8 x 24, however the 16 rows split between the 4 experts
    # bf16: A 128 + B 768 (all 4 experts) + out 384 elements = 1,280 x 2 = 2,560; offs 4 x 4 = 16
    assert c.bytes == 2_576


def test_grouped_mm_other_layouts():
    offs = TensorSpec((4,), "int32")
    # 3D x 3D, a bmm: A (4, 2, 8) @ B (4, 8, 24): 2 x 4 x 2 x 8 x 24 = 3,072
    c = cost("aten::_grouped_mm", bf16(4, 2, 8), bf16(4, 8, 24), None, outputs=[bf16(4, 2, 24)])
    assert c.flops == 3_072
    assert c.bytes == 2 * (64 + 768 + 192)  # A, B, out elements in bf16 = 2,048
    # 3D x 2D, offs splitting N: A (4, 2, 8) @ B (8, 32), out (2, 32): 2 x 2 x 8 x 32 = 1,024
    c = cost("aten::_grouped_mm", bf16(4, 2, 8), bf16(8, 32), offs, outputs=[bf16(2, 32)])
    assert c.flops == 1_024
    # 2D x 2D, offs splitting K (a weight gradient): A (2, 32) @ B (32, 24), out (4, 2, 24): 2 x 2 x 32 x 24 = 3,072
    c = cost("aten::_grouped_mm", bf16(2, 32), bf16(32, 24), offs, outputs=[bf16(4, 2, 24)])
    assert c.flops == 3_072
    assert c.bytes == 2 * (64 + 768 + 192) + 16  # out is (4, 2, 24) = 192 elements; offs 16 bytes


def test_grouped_mm_backward_is_the_forward_twice():
    # dX = dY (16, 24) @ B^T (4, 24, 8) and dB = X^T (8, 16) @ dY (16, 24) split over K (rows):
    # each 2 x 16 x 8 x 24 = 6,144, the forward's count
    offs = TensorSpec((4,), "int32")
    fwd = cost("aten::_grouped_mm", bf16(16, 8), bf16(4, 8, 24), offs, outputs=[bf16(16, 24)]).flops
    dx = cost("aten::_grouped_mm", bf16(16, 24), bf16(4, 24, 8), offs, outputs=[bf16(16, 8)]).flops
    dw = cost("aten::_grouped_mm", bf16(8, 16), bf16(16, 24), offs, outputs=[bf16(4, 8, 24)]).flops
    assert dx + dw == 2 * fwd


# ---------------------------------------------------------------------------------------------
# _grouped_mm in torch: the rule against per-group mm calls
# ---------------------------------------------------------------------------------------------


def test_torch_has_grouped_mm_and_flop_counter_mode_has_no_formula_for_it(torch):
    from torch.utils.flop_counter import flop_registry

    assert hasattr(torch, "_grouped_mm")  # torch 2.13, the version test.sh installs
    # grouped_mm's docstring says FlopCounterMode counts this op as zero; once torch registers a
    # formula, the rule must agree with it: compare them here and update the docstring
    assert torch.ops.aten._grouped_mm not in flop_registry
    assert torch.ops.aten._grouped_mm.default not in flop_registry


def _small_ints(torch, *shape):
    # values in {-2, ..., 2}: every product and sum is exact in bf16 inputs with fp32 accumulation
    return torch.randint(-2, 3, shape).to(torch.bfloat16)


def _per_group(torch, a, b, offs):
    """The same product as torch._grouped_mm(a, b, offs), one mm per group."""
    ends = offs.tolist() if offs is not None else []
    starts = [0] + ends[:-1]
    if a.dim() == 3 and b.dim() == 3:
        return torch.stack([a[g] @ b[g] for g in range(a.shape[0])])
    if a.dim() == 2 and b.dim() == 3:  # groups of rows of A
        return torch.cat([a[s:e] @ b[g] for g, (s, e) in enumerate(zip(starts, ends))])
    if a.dim() == 3:  # groups of columns of B
        return torch.cat([a[g] @ b[:, s:e] for g, (s, e) in enumerate(zip(starts, ends))], dim=1)
    return torch.stack([a[:, s:e] @ b[s:e] for s, e in zip(starts, ends)])  # groups of the contraction


@pytest.mark.parametrize("a_shape,b_shape,ends", [
    ((32, 16), (4, 16, 24), [8, 8, 24, 32]),  # 2D x 3D: experts get 8, 0, 16, 8 of 32 tokens
    ((4, 8, 16), (4, 16, 24), None),  # 3D x 3D
    ((4, 8, 16), (16, 32), [8, 16, 24, 32]),  # 3D x 2D: N split
    ((8, 32), (32, 24), [8, 16, 16, 32]),  # 2D x 2D: K split
])
def test_grouped_mm_flops_equal_the_per_group_mm_calls(torch, a_shape, b_shape, ends):
    from torch.utils.flop_counter import FlopCounterMode

    from roofline.trace import trace

    class Grouped(torch.nn.Module):
        def forward(self, a, b, offs):
            return torch._grouped_mm(a, b, offs=offs)

    torch.manual_seed(0)
    a, b = _small_ints(torch, *a_shape), _small_ints(torch, *b_shape)
    offs = None if ends is None else torch.tensor(ends, dtype=torch.int32)
    with FlopCounterMode(display=False) as counter:
        reference = _per_group(torch, a, b, offs)  # on the CPU, with data
    assert torch.equal(torch._grouped_mm(a, b, offs=offs), reference)  # the semantics the rule assumes

    result = trace(Grouped(), a, b, offs)
    (op,) = result.ops
    assert op.name == "aten::_grouped_mm" and result.unsupported == ()
    assert op.flops == counter.get_total_flops()
    assert op.bytes == 2 * (a.numel() + b.numel() + reference.numel()) + (0 if offs is None else 4 * len(ends))


# ---------------------------------------------------------------------------------------------
# a MoE layer on the meta device
# ---------------------------------------------------------------------------------------------

D, F, E, TOP_K = 16, 32, 4, 2  # d_model, expert d_ff, experts, experts per token


def _experts(torch):
    class Experts(torch.nn.Module):
        """The routed experts of a SwiGLU MoE layer, transformers 5's grouped_mm path: tokens come
        sorted by expert, offs (E,) ends each expert's rows."""

        def __init__(self):
            super().__init__()
            self.gate_up = torch.nn.Parameter(torch.empty(E, D, 2 * F))
            self.down = torch.nn.Parameter(torch.empty(E, F, D))

        def forward(self, x, offs):
            gate, up = torch._grouped_mm(x, self.gate_up, offs=offs).chunk(2, dim=-1)
            return torch._grouped_mm(torch.nn.functional.silu(gate) * up, self.down, offs=offs)

    return Experts()


def _moe(torch):
    class MoE(torch.nn.Module):
        """Router, top-k, sort by expert, the experts, weighted scatter back."""

        def __init__(self):
            super().__init__()
            self.router = torch.nn.Linear(D, E, bias=False)
            self.experts = _experts(torch)

        def forward(self, x):
            weights, ids = torch.topk(self.router(x).softmax(dim=-1), TOP_K, dim=-1)
            order = torch.argsort(ids.reshape(-1))
            counts = torch.histc(ids.reshape(-1).float(), bins=E, min=0, max=E - 1)
            offs = torch.cumsum(counts, dim=0).to(torch.int32)
            token = order // TOP_K
            y = self.experts(x[token], offs) * weights.reshape(-1)[order, None]
            return torch.zeros_like(x).index_add_(0, token, y)

    return MoE()


def test_experts_trace_in_full(torch):
    from roofline.trace import trace

    with torch.device("meta"):
        experts = _experts(torch)
    T = 8 * TOP_K  # 8 tokens, each routed to 2 experts: 16 rows
    result = trace(experts, torch.empty(T, D), torch.empty(E, dtype=torch.int32), dtype="bf16")
    assert result.unsupported == ()
    flops = defaultdict(float)
    for op in result.ops:
        flops[op.name] += op.flops
    # gate+up 2 x 16 x 16 x 64 = 32,768; down 2 x 16 x 32 x 16 = 16,384
    assert flops["aten::_grouped_mm"] == 49_152
    assert flops["aten::silu"] == 4 * 16 * 32  # 4 per element: 2,048
    assert flops["aten::mul"] == 16 * 32  # 512
    assert result.total_flops == 49_152 + 2_048 + 512
    # the weights are read once each, whichever experts the rows go to: 2 x 4 x (16 x 64 + 32 x 16) bytes
    weights = sum(op.bytes for op in result.ops if op.name == "aten::_grouped_mm") - 2 * (
        16 * 16 + 16 * 64 + 16 * 32 + 16 * 16) - 2 * 4 * 4  # less A and out of each (bf16), and the offs
    assert weights == 2 * 4 * (16 * 64 + 32 * 16)  # 12,288


def test_moe_layer_counts_the_experts_and_reports_what_it_cannot_cost(torch):
    from torch.utils.flop_counter import FlopCounterMode

    from roofline.trace import trace

    with torch.device("meta"):
        moe = _moe(torch)
    with FlopCounterMode(display=False) as counter:
        result = trace(moe, torch.empty(8, D), dtype="bf16")
    theirs = {str(k).replace("aten.", "aten::"): v for k, v in counter.get_flop_counts()["Global"].items()}
    ours = defaultdict(float)
    for op in result.ops:
        ours[op.name] += op.flops
    assert theirs == {"aten::mm": 2 * 8 * 16 * 4}  # the router, 1,024; FlopCounterMode skips _grouped_mm
    assert ours["aten::mm"] == theirs["aten::mm"]
    assert ours["aten::_grouped_mm"] == 49_152  # as above: 2 x 16 rows x 16 x 64 + 2 x 16 x 32 x 16
    assert result.total_flops > sum(theirs.values()) + 49_152  # plus softmax, silu, mul
    # the routing ops (topk, sort, histc, index, the index_add_ combine) all have rules now
    assert not result.unsupported, result.unsupported
    assert not any(op.name in result.unsupported for op in result.ops)


# ---------------------------------------------------------------------------------------------
# attention with d_qk != d_v (MLA)
# ---------------------------------------------------------------------------------------------

# q, k (B=1, H=4, T=S=16, d_qk=192), v (1, 4, 16, d_v=128):
# QK^T 2 x 1 x 4 x 16 x 16 x 192 = 393,216; PV 2 x 1 x 4 x 16 x 16 x 128 = 262,144; total 655,360
MLA_FLOPS = 393_216 + 262_144
# elements: q and k 1 x 4 x 16 x 192 = 12,288 each, v and out 1 x 4 x 16 x 128 = 8,192 each
Q, V = 12_288, 8_192


def test_attention_rules_write_the_output_at_the_value_head_dim():
    # the flash meta kernel returns O shaped like Q (d_qk); O is (B, H, T, d_v) all the same
    q, v = bf16(1, 4, 16, 192), bf16(1, 4, 16, 128)
    lse = TensorSpec((1, 4, 16), "fp32")
    for out in (bf16(1, 4, 16, 192), bf16(1, 4, 16, 128)):
        c = cost("aten::_scaled_dot_product_flash_attention", q, q, v, 0.0, True, outputs=[out, lse])
        assert c.flops == MLA_FLOPS
        assert c.bytes == 2 * (2 * Q + V) + 2 * V + 4 * 64  # Q, K, V read, O written (bf16); lse 64 x fp32
    # (B, T, H, d) layout: q, k (1, 16, 4, 192), v (1, 16, 4, 128)
    q, v = bf16(1, 16, 4, 192), bf16(1, 16, 4, 128)
    c = cost("aten::_flash_attention_forward", q, q, v, None, None, 16, 16, 0.0, True, False,
             outputs=[bf16(1, 16, 4, 192), lse])
    assert c.flops == MLA_FLOPS and c.bytes == 2 * (2 * Q + V) + 2 * V + 4 * 64


def _attend(torch):
    class Attend(torch.nn.Module):
        def forward(self, q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    return Attend()


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("fused", [True, False])
def test_sdpa_with_a_smaller_value_head_dim_traces_on_meta(torch, dtype, fused):
    from torch.utils.flop_counter import FlopCounterMode

    from roofline.trace import trace

    q, v = torch.empty(1, 4, 16, 192, device="meta"), torch.empty(1, 4, 16, 128, device="meta")
    with FlopCounterMode(display=False) as counter:
        result = trace(_attend(torch), q, q, v, dtype=dtype, fused=fused)
    assert result.unsupported == ()
    matmuls = [op for op in result.ops if op.category in ("attention", "matmul")]
    assert sum(op.flops for op in matmuls) == MLA_FLOPS == counter.get_total_flops()
    if fused:
        (op,) = matmuls
        assert op.name == "aten::_scaled_dot_product_efficient_attention"  # flash needs one head dim
        w = 2 if dtype == "bf16" else 4
        # Q, K, V read and O written at their own head dims; two int64 philox scalars (16 bytes);
        # the log-sum-exp is (1, 4, 0): not computed for inference
        assert op.bytes == w * (2 * Q + V + V) + 16
    else:  # the math path: QK^T (4, 16, 192) @ (4, 192, 16), then PV (4, 16, 16) @ (4, 16, 128)
        assert [op.flops for op in matmuls] == [393_216, 262_144]


def test_sdpa_with_equal_head_dims_still_takes_the_flash_kernel(torch):
    from roofline.trace import trace

    q = torch.empty(1, 4, 16, 128, device="meta")
    (op,) = [o for o in trace(_attend(torch), q, q, q, dtype="bf16").ops if o.category == "attention"]
    assert op.name == "aten::_scaled_dot_product_flash_attention"
    assert op.flops == 2 * 262_144  # 2 x 1 x 4 x 16 x 16 x 128, twice


def test_mla_block_traces_on_meta(torch):
    from roofline.trace import trace

    H, d_qk, d_v, T, Dm = 4, 192, 128, 16, 64

    class MLA(torch.nn.Module):
        """The shape of DeepSeek-V3's attention: Q and K at d_qk, V and O at d_v, o_proj from H d_v."""

        def __init__(self):
            super().__init__()
            self.q = torch.nn.Linear(Dm, H * d_qk, bias=False)
            self.kv = torch.nn.Linear(Dm, H * (d_qk + d_v), bias=False)
            self.o = torch.nn.Linear(H * d_v, Dm, bias=False)

        def forward(self, x):
            B = x.shape[0]
            q = self.q(x).view(B, T, H, d_qk).transpose(1, 2)
            k, v = self.kv(x).view(B, T, H, d_qk + d_v).transpose(1, 2).split([d_qk, d_v], dim=-1)
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o(out.transpose(1, 2).reshape(B, T, H * d_v))  # fails if O came back at d_qk

    with torch.device("meta"):
        mla = MLA()
    result = trace(mla, torch.empty(1, T, Dm), dtype="bf16")
    assert result.unsupported == ()
    assert sum(op.flops for op in result.ops if op.category == "attention") == MLA_FLOPS
    by_module = {op.module: op.flops for op in result.ops if op.name == "aten::mm"}
    # 2 T D N: q 2 x 16 x 64 x 768 = 1,572,864; kv 2 x 16 x 64 x 1,280 = 2,621,440; o 2 x 16 x 512 x 64 = 1,048,576
    assert by_module == {"q": 1_572_864, "kv": 2_621_440, "o": 1_048_576}


# ---------------------------------------------------------------------------------------------
# a Mixtral-like model from a config (trace.models.LlamaMoE), uniform routing on meta
# ---------------------------------------------------------------------------------------------


def test_a_mixtral_like_config_traces_with_its_experts_flops_by_hand(torch):
    """tiny_mixtral: d 64, 4 heads of 16 over 2 kv heads (qkv out 64 + 2 x 32 = 128), 8 experts of
    128 with top-2, vocab 256, 2 layers. A prefill of N = 16 tokens, 2 FLOPs per multiply-add:
    qkv 2 x 16 x 64 x 128 = 262,144; out 2 x 16 x 64 x 64 = 131,072; router 2 x 16 x 64 x 8 =
    16,384; the experts see N k = 32 rows in all: gate+up 2 x 32 x 64 x 256 = 1,048,576, down
    2 x 32 x 128 x 64 = 524,288. Per layer 1,982,464; two layers 3,964,928; LM head 2 x 16 x 64 x
    256 = 524,288: 4,489,216 matmul FLOPs."""
    from roofline.trace import trace
    from roofline.trace.models import tiny_mixtral

    with torch.device("meta"):
        model = tiny_mixtral().eval()
    result = trace(model, torch.zeros(1, 16, dtype=torch.int64, device="meta"), cast_inputs=False)
    assert sum(op.flops for op in result.ops if op.category == "matmul") == 4_489_216
    assert not result.unsupported
    assert any("uniform" in n for n in model.notes)
    # 32 (token, expert) pairs over 8 experts: every expert runs, 4 rows each
    experts = {op.module.split(".experts.")[1].split(".")[0] for op in result.ops
               if ".experts." in op.module and op.category == "matmul"}
    assert experts == {str(e) for e in range(8)}


def test_a_decode_step_reads_only_the_top_k_experts(torch):
    """One token at batch 1 makes 2 (token, expert) pairs: two experts run in each layer, so the
    expert matmuls read 2 x 2 layers x (64 x 256 + 128 x 64) = 98,304 weight elements, not 8 experts'."""
    from roofline.trace import trace
    from roofline.trace.models import tiny_mixtral

    with torch.device("meta"):
        model = tiny_mixtral().eval()
        cache = [torch.zeros(1, 2, 32, 16, device="meta") for _ in range(4)]
    result = trace(model, torch.zeros(1, 1, dtype=torch.int64, device="meta"), *cache, cast_inputs=False)
    ran = {(op.module.split(".experts.")[0], op.module.split(".experts.")[1].split(".")[0]) for op in result.ops
           if ".experts." in op.module and op.category == "matmul"}
    assert len(ran) == 4 and {e for _, e in ran} == {"0", "1"}


def test_roofline_trace_takes_a_mixtral_config_and_says_routing_is_assumed(torch, tmp_path, capsys):
    """A Mixtral config.json (the published Mixtral-8x7B config's keys, shrunk) traces from the CLI;
    the output says the routing was assumed uniform, in the text and in the JSON."""
    import json

    from roofline.cli import main

    cfg = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 64,
           "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 256, "max_position_embeddings": 4096,
           "rms_norm_eps": 1e-5, "rope_theta": 1e6, "tie_word_embeddings": False, "hidden_act": "silu"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main(["trace", str(path), "--tokens", "16"]) == 0
    out = capsys.readouterr().out
    assert "note: MoE routing assumed uniform: the tokens x 2 (token, expert) pairs are spread evenly over the 8" in out and "aten::index_add_" in out
    assert main(["trace", str(path), "--phase", "decode", "--context", "64", "--json"]) == 0
    assert any("uniform" in n for n in json.loads(capsys.readouterr().out)["notes"])


def test_experts_trace_in_fp32_on_meta_at_fp32_width(torch):
    """torch._grouped_mm's meta kernel accepts bf16 only ("Expected inputs of BF16 type", what a
    transformers 5 MoE traced in fp32 stopped at); the trace takes the output's shape from bf16
    stand-ins and costs the call at the fp32 it runs at (the CPU and CUDA kernels run fp32)."""
    from roofline.trace import trace

    with torch.device("meta"):
        experts = _experts(torch)
    result = trace(experts, torch.empty(16, D), torch.empty(E, dtype=torch.int32), dtype="fp32")
    assert result.unsupported == ()
    grouped = [op for op in result.ops if op.name == "aten::_grouped_mm"]
    assert sum(op.flops for op in grouped) == 49_152  # as in bf16 (test_experts_trace_in_full)
    assert {op.dtype for op in grouped} == {"fp32"}
    # 4 bytes an element: rows 16 x 16 and 16 x 32 read, 16 x 64 and 16 x 16 written, the weights
    # 4 x (16 x 64 + 32 x 16), the offs 2 x 4 int32
    assert sum(op.bytes for op in grouped) == 4 * (16 * 16 + 16 * 32 + 16 * 64 + 16 * 16) + 4 * 4 * (16 * 64 + 32 * 16) + 2 * 16


# ---------------------------------------------------------------------------------------------
# MoE families from a config.json (trace.decoder.Decoder, models.LlamaLike)
# ---------------------------------------------------------------------------------------------

# 2 layers, d_model 64, 4 heads of 16 over 2 kv heads, dense d_ff 128, vocab 256, 4 experts of 32, top 2
MOE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
           head_dim=16, vocab_size=256, tie_word_embeddings=False, torch_dtype="bfloat16", num_experts=4,
           num_experts_per_tok=2, moe_intermediate_size=32)
MOE_FAMILIES = {
    "qwen2_moe": dict(model_type="qwen2_moe", shared_expert_intermediate_size=64),
    "qwen3_moe": dict(model_type="qwen3_moe"),
    "qwen3_moe_dense_first": dict(model_type="qwen3_moe", mlp_only_layers=[0]),  # two layer kinds
    "mixtral": dict(model_type="mixtral", num_local_experts=4, intermediate_size=32),
    # latent attention: q latent 48, kv latent 32, heads of 16 nope + 8 rope, values 16; layer 0 dense
    "deepseek_v3": dict(model_type="deepseek_v3", kv_lora_rank=32, q_lora_rank=48, qk_nope_head_dim=16,
                        qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=4, n_shared_experts=1,
                        first_k_dense_replace=1, n_group=1, topk_group=1),
}


def _traced_config(torch, tmp_path, changes, tokens=8, dtype="bf16"):
    import json

    from roofline.trace import trace
    from roofline.trace.build import from_config

    path = tmp_path / "config.json"
    path.write_text(json.dumps({**MOE, **changes}))
    with torch.device("meta"):
        model = from_config(str(path))
    return str(path), model, trace(model, torch.zeros(1, tokens, dtype=torch.long), dtype=dtype)


@pytest.mark.parametrize("family", sorted(MOE_FAMILIES))
def test_moe_family_config_traces_and_agrees_with_the_analytic_model(torch, tmp_path, family):
    """Every op has a rule; the parameters are the analytic count's; matmul and attention FLOPs are
    T x the analytic forward FLOPs per token (the top-k experts' share of every token, uniform)."""
    from roofline.transformer import count_params, flops_per_token

    path, model, result = _traced_config(torch, tmp_path, MOE_FAMILIES[family])
    assert result.unsupported == ()
    assert sum(p.numel() for p in model.parameters()) == count_params(path)["total"]
    flops = sum(op.flops for op in result.ops if op.category in ("matmul", "attention"))
    assert flops == 8 * flops_per_token(path, 8, mode="forward")
    assert any("MoE routing assumed uniform" in n for n in model.notes)


def test_qwen2_moe_shared_expert_gate_by_hand(torch, tmp_path):
    _, model, result = _traced_config(torch, tmp_path, MOE_FAMILIES["qwen2_moe"])
    # a layer: qkv 64 x 128 = 8,192 and its bias 128, o 4,096, router 64 x 4 = 256, experts 4 x 3 x
    # 64 x 32 = 24,576, shared expert 3 x 64 x 64 = 12,288, its gate 64 x 1 = 64, norms 128: 49,728;
    # 2 layers 99,456; embedding and head 2 x 16,384; final norm 64: 132,288
    assert sum(p.numel() for p in model.parameters()) == 132_288
    flops = defaultdict(float)
    for op in result.ops:
        flops[op.module.split(".", 2)[-1] if op.module.startswith("layers.") else op.module] += (
            op.flops if op.category == "matmul" else 0)
    # T = 8, 2 layers, each matmul 2 M N K
    assert flops["attn.wqkv"] == 2 * (2 * 8 * 64 * 128)  # 131,072 a layer (the bias add not counted)
    assert flops["mlp.router"] == 2 * (2 * 8 * 64 * 4)  # 4,096
    assert flops["mlp.shared_gate"] == 2 * (2 * 8 * 64 * 1)  # 1,024
    assert flops["mlp.shared.w13"] == 2 * (2 * 8 * 64 * 128)  # 131,072
    # 8 tokens x top 2 = 16 rows, 4 for each of 4 experts: gate+up 2 x 4 x 64 x 64 = 32,768, down
    # 2 x 4 x 32 x 64 = 16,384, by 4 experts
    experts = sum(v for k, v in flops.items() if k.startswith("mlp.experts."))
    assert experts == 2 * 4 * (32_768 + 16_384)
    sigmoid = [op for op in result.ops if op.name == "aten::sigmoid"]
    assert [op.shapes[0] for op in sigmoid] == [(8, 1)] * 2  # the gate's one value a token


def test_moe_family_in_fp32(torch, tmp_path):
    """--dtype fp32: the same FLOPs, the weights' bytes twice bf16's."""
    _, _, bf16_run = _traced_config(torch, tmp_path, MOE_FAMILIES["qwen3_moe"])
    _, _, fp32_run = _traced_config(torch, tmp_path, MOE_FAMILIES["qwen3_moe"], dtype="fp32")
    assert fp32_run.unsupported == () and fp32_run.total_flops == bf16_run.total_flops
    mm = [sum(op.bytes for op in r.ops if op.category == "matmul") for r in (bf16_run, fp32_run)]
    assert mm[1] == 2 * mm[0]


def test_deepseek_v3_latent_attention_prefill_by_hand_and_no_decode(torch, tmp_path, capsys):
    from roofline.cli import main

    path, model, result = _traced_config(torch, tmp_path, MOE_FAMILIES["deepseek_v3"])
    mm = defaultdict(float)
    for op in result.ops:
        if op.category == "matmul" and op.module.startswith("layers.0.attn."):
            mm[op.module.rsplit(".", 1)[-1]] += op.flops
    # T = 8, each matmul 2 M N K: q_a 2 x 8 x 64 x 48 = 49,152, q_b 2 x 8 x 48 x (4 x 24) = 73,728,
    # kv_a 2 x 8 x 64 x (32 + 8) = 40,960, kv_b 2 x 8 x 32 x (4 x (16 + 16)) = 65,536, o 2 x 8 x 64 x 64 = 65,536
    assert dict(mm) == {"q_a": 49_152, "q_b": 73_728, "kv_a": 40_960, "kv_b": 65_536, "wo": 65_536}
    # attention 2 B H T S (d_qk + d_v) = 2 x 4 x 8 x 8 x (24 + 16) = 20,480 a layer
    assert [op.flops for op in result.ops if op.category == "attention"] == [20_480, 20_480]
    # a decode step of MLA is refused by name (engines run it absorbed over the latent cache)
    assert main(["trace", path, "--phase", "decode", "--context", "16"]) == 2
    assert "latent attention (MLA) is not built" in capsys.readouterr().err
