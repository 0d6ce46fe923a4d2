"""roofline.trace: the per-op rules (tiny shapes, arithmetic in the comment), the meta-device trace
against torch.utils.flop_counter.FlopCounterMode and against the analytic block, and the CLI.

Tests that need torch take the ``torch`` fixture, which skips them when it is not installed."""

import json
import math
from collections import defaultdict

import pytest

from roofline.blocks import block_kernels
from roofline.cli import main
from roofline.kernels import elementwise_kernel, flash_attention_kernel
from roofline.trace.rules import RULES, Call, TensorSpec, get_rule, rule
from roofline.transformer import get_model, uniform_config


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def cost(op, *args, outputs=()):
    tensors = tuple(a for a in args if isinstance(a, TensorSpec))
    return RULES[op].fn(Call(op, args, tensors, tuple(outputs)))


# ---------------------------------------------------------------------------------------------
# rules (no torch)
# ---------------------------------------------------------------------------------------------


def test_registry_refuses_a_second_rule():
    with pytest.raises(RuntimeError, match="two rules"):
        rule("aten::mm", category="matmul")(lambda call: None)


def test_mm_tiny():
    c = cost("aten::mm", TensorSpec((2, 4)), TensorSpec((4, 3)), outputs=[TensorSpec((2, 3))])
    assert c.flops == 48  # 2*2*3*4
    assert c.bytes == 4 * (8 + 12 + 6)  # fp32: A 2x4, B 4x3 read, C 2x3 written = 104


def test_addmm_and_bmm_tiny():
    c = cost("aten::addmm", TensorSpec((3,), "bf16"), TensorSpec((2, 4), "bf16"), TensorSpec((4, 3), "bf16"),
             outputs=[TensorSpec((2, 3), "bf16")])
    assert c.flops == 48  # the bias add is not counted, as FlopCounterMode
    assert c.bytes == 2 * (3 + 8 + 12 + 6)  # bias read too
    c = cost("aten::bmm", TensorSpec((5, 2, 4)), TensorSpec((5, 4, 3)), outputs=[TensorSpec((5, 2, 3))])
    assert c.flops == 5 * 48  # 2*5*2*3*4 = 240


def test_attention_counts_both_matmuls_in_full():
    # q (B=1, H=4, T=8, d=16), k and v (1, K=2, S=8, 16): 2*1*4*8*8*16 (QK^T) + the same for PV = 16,384
    q, kv = TensorSpec((1, 4, 8, 16), "bf16"), TensorSpec((1, 2, 8, 16), "bf16")
    out, lse = TensorSpec((1, 4, 8, 16), "bf16"), TensorSpec((1, 4, 8), "fp32")
    c = cost("aten::_scaled_dot_product_flash_attention", q, kv, kv, 0.0, True, outputs=[out, lse])
    assert c.flops == 16_384
    assert c.bytes == 2 * (512 + 256 + 256 + 512) + 4 * 32  # Q, K, V read, O written (bf16); lse (fp32)


def test_flash_and_efficient_attention_forward_read_their_own_argument_positions():
    # (B=1, T=8, H=4, d=16) layout, S = 8: 2*1*4*8*8*16 (QK^T) + the same for PV = 16,384 FLOPs
    q = kv = TensorSpec((1, 8, 4, 16), "bf16")
    out, lse = TensorSpec((1, 8, 4, 16), "bf16"), TensorSpec((1, 4, 8), "fp32")
    # _efficient_attention_forward(q, k, v, bias, cu_seqlens_q, cu_seqlens_k, max_q, max_k, dropout, mask type, lse)
    bias = TensorSpec((1, 4, 8, 8), "bf16")
    c = cost("aten::_efficient_attention_forward", q, kv, kv, bias, None, None, 8, 8, 0.0, 0, True, outputs=[out, lse])
    assert c.flops == 16_384
    # Q, K, V (512 elements each) and the bias (256) read, O (512) written, bf16; lse 32 x fp32
    assert c.bytes == 2 * (3 * 512 + 256) + 2 * 512 + 4 * 32  # 4,736
    ragged = TensorSpec((2,), "int32")
    assert cost("aten::_efficient_attention_forward", q, kv, kv, None, ragged, ragged, 8, 8, 0.0, 0, True,
                outputs=[out, lse]) is None
    # _flash_attention_forward(q, k, v, cum_seq_q, cum_seq_k, max_q, max_k, dropout, causal, debug mask)
    c = cost("aten::_flash_attention_forward", q, kv, kv, None, None, 8, 8, 0.0, True, False, outputs=[out, lse])
    assert c.flops == 16_384 and c.bytes == 2 * 3 * 512 + 2 * 512 + 4 * 32  # no bias: 4,224
    assert cost("aten::_flash_attention_forward", q, kv, kv, ragged, ragged, 8, 8, 0.0, True, False,
                outputs=[out, lse]) is None


def test_efficient_attention_with_a_bias_traced_on_meta(torch):
    # FlopCounterMode reads this kernel's (B, T, H, d) tensors as (B, H, T, d), so the reference
    # is arithmetic: B=2, T=16, S=24, H=4, d=8: 2*2*4*16*24*8 x 2 (QK^T and PV) = 98,304 FLOPs
    from roofline.trace import trace

    class Attend(torch.nn.Module):
        def forward(self, q, k, v, bias):
            return torch.ops.aten._efficient_attention_forward(q, k, v, bias, None, None, None, None, 0.0, 0, True)[0]

    q = torch.empty(2, 16, 4, 8, dtype=torch.float16)
    k = v = torch.empty(2, 24, 4, 8, dtype=torch.float16)
    bias = torch.empty(2, 4, 16, 24, dtype=torch.float16)
    (op,) = [o for o in trace(Attend(), q, k, v, bias).ops if "attention" in o.name]
    assert op.flops == 98_304
    # read: Q 1,024 + K 1,536 + V 1,536 + bias 3,072 elements, fp16 = 14,336 bytes; written: O 1,024
    # fp16 = 2,048, log-sum-exp (2, 4, 32) fp32 = 1,024, two int64 philox scalars = 16
    assert op.bytes == 14_336 + 2_048 + 1_024 + 16


def test_conv_matches_flop_counter_formula():
    # x (1, 3, 8, 8), w (4, 3, 3, 3), out (1, 4, 8, 8): 2 * 1 * 4 * 3 * 9 * 64 = 13,824
    c = cost("aten::convolution", TensorSpec((1, 3, 8, 8)), TensorSpec((4, 3, 3, 3)), None, [1, 1], [1, 1], [1, 1],
             False, [0, 0], 1, outputs=[TensorSpec((1, 4, 8, 8))])
    assert c.flops == 13_824


def test_elementwise_norm_softmax_per_element():
    x, w = TensorSpec((4, 8), "bf16"), TensorSpec((8,), "bf16")
    assert cost("aten::add", x, x, outputs=[x]).flops == 32  # 1 per element
    assert cost("aten::add", x, x, outputs=[x]).bytes == 2 * 96  # two read, one written
    assert cost("aten::silu", x, outputs=[x]).flops == 4 * 32
    assert cost("aten::_softmax", x, -1, False, outputs=[x]).flops == 5 * 32  # kernels.softmax_kernel
    assert cost("aten::_fused_rms_norm", x, [8], w, None, outputs=[x, TensorSpec((4, 1))]).flops == 4 * 32
    assert cost("aten::native_layer_norm", x, [8], w, w, 1e-5, outputs=[x]).flops == 8 * 32


def test_expanded_input_is_read_once():
    # a (4, 8) tensor expanded from (1, 8): stride 0 in the first dimension, 8 distinct elements
    t = TensorSpec((4, 8), "fp32", (0, 1))
    assert t.numel == 32 and t.distinct == 8 and t.read_bytes == 32


def test_embedding_reads_only_the_rows_it_gathers():
    table, ids, out = TensorSpec((50_000, 64), "bf16"), TensorSpec((2, 8), "int64"), TensorSpec((2, 8, 64), "bf16")
    c = cost("aten::embedding", table, ids, outputs=[out])
    assert c.flops == 0
    assert c.bytes == 8 * 16 + 2 * 2 * 16 * 64  # ids; 16 rows of 64 read and written (not the 50,000-row table)


def test_views_are_registered_at_zero():
    for name in ("aten::view", "aten::transpose", "aten::expand", "aten::t", "aten::empty", "aten::split"):
        assert get_rule(name).free
        assert cost(name, TensorSpec((4, 8)), outputs=[TensorSpec((8, 4))]).bytes == 0
    assert get_rule("aten::no_such_op") is None  # no rule: the recorder lists it, never costs it as zero


# ---------------------------------------------------------------------------------------------
# trace on the meta device against FlopCounterMode
# ---------------------------------------------------------------------------------------------


def _meta_model(torch, factory):
    with torch.device("meta"):
        return factory()


def _flop_counter_and_trace(torch, model, *inputs, fused=True):
    from torch.utils.flop_counter import FlopCounterMode

    from roofline.trace import trace

    with FlopCounterMode(display=False) as counter:  # the same run: both modes see every op
        result = trace(model, *inputs, dtype="bf16", fused=fused)
    theirs = {str(k).replace("aten.", "aten::"): v for k, v in counter.get_flop_counts()["Global"].items()}
    ours = defaultdict(float)
    for op in result.ops:
        ours[op.name] += op.flops
    return result, theirs, ours


@pytest.mark.parametrize("factory", ["gpt2", "llama3_8b", "tiny_llama"])
@pytest.mark.parametrize("fused", [True, False])
def test_flops_equal_flop_counter_mode(torch, factory, fused):
    from roofline.trace import models

    model = _meta_model(torch, getattr(models, factory))
    ids = torch.zeros(2, 64, dtype=torch.long)
    result, theirs, ours = _flop_counter_and_trace(torch, model, ids, fused=fused)
    assert theirs, "FlopCounterMode counted nothing"
    for op, flops in theirs.items():
        assert ours[op] == flops, op
    assert result.unsupported == ()
    covered = sum(theirs.values())
    assert result.total_flops > covered  # plus the elementwise ops FlopCounterMode does not count


def test_conv_net_flops_equal_flop_counter_mode(torch):
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3, stride=2),
                              torch.nn.ConvTranspose2d(4, 4, 2, stride=2))
    _, theirs, ours = _flop_counter_and_trace(torch, net, torch.zeros(2, 3, 16, 16))
    assert theirs and all(ours[op] == f for op, f in theirs.items())


def test_llama2_7b_traces_with_published_parameters_and_closed_form_flops(torch):
    import tracemalloc

    from roofline.trace import models, trace

    model = _meta_model(torch, models.llama2_7b)
    assert sum(p.numel() for p in model.parameters()) == 6_738_415_616  # Llama 2 7B, published
    tracemalloc.start()
    result = trace(model, torch.zeros(1, 128, dtype=torch.long), dtype="bf16")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 200e6  # meta tensors hold no data: far under 1 GB of Python allocations
    mm = sum(op.flops for op in result.ops if op.name == "aten::mm")
    # every weight but the embedding (32,000 x 4,096) and the 65 norm vectors (4,096 each) is a matmul:
    # 2 x 128 tokens x (6,738,415,616 - 131,072,000 - 266,240) = 1,691,411,808,256
    assert mm == 2 * 128 * 6_607_077_376
    attn = sum(op.flops for op in result.ops if op.category == "attention")
    assert attn == 4 * 32 * 4096 * 128 * 128  # 4 L h T^2, in full (the PaLM / FlopCounterMode convention)
    # bytes: bf16 weights read once (2 x 6,607,077,376) plus each matmul's input and output rows,
    # 2 T (K + N) per matmul: per layer (4096 + 12288) + (4096 + 4096) + (4096 + 22016) + (11008 + 4096)
    # = 65,792 -> 2 x 128 x 65,792 x 32 layers = 538,968,064; LM head 2 x 128 x (4096 + 32000) = 9,240,576
    mm_bytes = sum(op.bytes for op in result.ops if op.name == "aten::mm")
    assert mm_bytes == 13_214_154_752 + 538_968_064 + 9_240_576
    assert result.unsupported == ()


def test_the_package_is_callable(torch):
    import roofline.trace
    from roofline.trace import models

    result = roofline.trace(models.tiny_gpt2(), torch.zeros(1, 4, dtype=torch.long))
    assert result.total_flops == roofline.trace.trace(models.tiny_gpt2(), torch.zeros(1, 4, dtype=torch.long)).total_flops
    assert roofline.trace.models is models


def test_unsupported_ops_are_listed_not_dropped(torch):
    from roofline.trace import trace

    class CumMax(torch.nn.Module):
        def forward(self, x):
            return torch.cummax(x * 2, 1).values

    result = trace(CumMax(), torch.zeros(4, 16))
    assert "aten::cummax" in result.unsupported
    assert dict(result.unsupported_calls)["aten::cummax"] == 1
    assert [op.name for op in result.ops] == ["aten::mul"]  # the costed op; cummax is not among them at zero


def test_trace_leaves_the_module_alone(torch):
    from roofline.trace import models, trace

    torch.manual_seed(0)
    model = models.tiny_llama()  # real weights on the CPU
    before = model.lm_head.weight.clone()
    result = trace(model, torch.zeros(1, 8, dtype=torch.long), dtype="bf16")
    assert model.lm_head.weight.device.type == "cpu" and model.lm_head.weight.dtype == torch.float32
    assert torch.equal(model.lm_head.weight, before)
    assert {op.dtype for op in result.ops if op.name == "aten::mm"} == {"bf16"}
    assert {op.module for op in result.ops if op.name == "aten::mm"} >= {"layers.0.attn.wqkv", "lm_head"}


def test_result_predicts_on_any_machine_and_renders(torch):
    from roofline.cost import CostModel
    from roofline.machines import get_machine
    from roofline.trace import models, trace

    result = trace(_meta_model(torch, models.tiny_gpt2), torch.zeros(2, 16, dtype=torch.long), dtype="bf16")
    for key in ("h100-sxm", "tpu-v5e", "a100-80gb"):
        m = get_machine(key)
        pred = result.predict(m)
        assert pred.total_s == pytest.approx(CostModel().predict(result.to_kernels(m), m).total_s)
        assert len(pred.ops) == sum(1 for op in result.ops if op.bytes > 0)  # free views launch nothing
        assert len(result.to_kernels(key)) == len(pred.ops)
    d = json.loads(result.to_json())
    assert {"total_flops", "total_bytes", "ops", "unsupported"} <= set(d)
    assert d["total_flops"] == result.total_flops and {"name", "flops", "bytes"} <= set(d["ops"][0])
    assert result.to_csv().count("\n") == len(result.ops) + 1
    assert "aten::addmm" in result.to_table("h100-sxm")


# ---------------------------------------------------------------------------------------------
# a traced Llama block against the analytic block (blocks.block_kernels)
# ---------------------------------------------------------------------------------------------


def _traced_block(torch, cfg, T):
    from roofline.trace import trace
    from roofline.trace.models import LlamaBlock, rope_tables

    with torch.device("meta"):
        block = LlamaBlock(cfg)
        cos, sin = rope_tables(T, cfg.head_dim, device="meta")
    return trace(block, torch.empty(1, T, cfg.d_model, device="meta"), cos, sin, dtype="bf16")


def _reference(cfg, T):
    """blocks.block_kernels (flash attention), made comparable to an eager PyTorch block:

    - attention counted non-causal: SDPA's FLOPs convention (and FlopCounterMode's) is the full
      T x S square; the analytic block halves it for causal masking;
    - SiLU-and-multiply unfused: eager PyTorch runs silu and mul as two kernels (read F, write F;
      read 2F, write F) where the analytic block has one (read 2F, write F)."""
    ops = {k.name: k for k in block_kernels(cfg, "prefill", T, 1, attention="flash", dtype="bf16")}
    ops["flash attention"] = flash_attention_kernel(T, cfg.head_dim, "bf16", heads=cfg.n_heads, kv_heads=cfg.n_kv_heads)
    n = T * cfg.d_ff
    del ops["silu*mul"]
    ops["silu"] = elementwise_kernel(n, 1, 1, 4.0, "bf16")
    ops["mul"] = elementwise_kernel(n, 2, 1, 1.0, "bf16")
    return ops


# traced module path (and op) for each analytic op
PAIRS = {
    "attn norm": ("attn_norm", None), "QKV proj": ("attn.wqkv", None), "flash attention": ("attn", "attention"),
    "out proj": ("attn.wo", None), "ffn norm": ("ffn_norm", None), "gate+up proj": ("mlp.w13", None),
    "silu": ("mlp", "aten::silu"), "mul": ("mlp", "aten::mul"), "down proj": ("mlp.w2", None),
}


@pytest.mark.parametrize("key", ["llama2-7b", "llama3-8b"])
@pytest.mark.parametrize("T", [128, 2048])
def test_traced_llama_block_matches_the_analytic_block(torch, key, T):
    cfg = uniform_config(key)  # the preset's one layer kind, as the torch builders take it
    traced = _traced_block(torch, cfg, T)
    ref = _reference(cfg, T)
    ops = [op for op in traced.ops if op.bytes > 0]

    def pick(module, which):
        return [op for op in ops if op.module == module and which in (None, op.name, op.category)]

    matched = []
    for name, (module, which) in PAIRS.items():
        got = pick(module, which)
        matched += got
        flops, moved = sum(o.flops for o in got), sum(o.bytes for o in got)
        assert flops == pytest.approx(ref[name].flops, rel=0.02), name
        assert moved == pytest.approx(ref[name].bytes, rel=0.02), name
        if ref[name].category == "matmul":
            assert (flops, moved) == (ref[name].flops, ref[name].bytes), name  # matmuls: exactly
    residual = [op for op in ops if op.module == "" and op.name == "aten::add"]
    assert sum(o.bytes for o in residual) == ref["residual add"].bytes + ref["residual add 2"].bytes
    matched += residual

    # What is left is RoPE, which the analytic block does not model. Rotate-half on q (B H T d = n_q
    # elements) moves, in bf16 (w = 2): q*cos (2 n_q + T d), neg of half (n_q), cat (2 n_q),
    # rot*sin (2 n_q + T d), add (3 n_q) = 10 n_q + 2 T d elements; the same for k (n_k).
    rope = [op for op in ops if op not in matched]
    assert {op.module for op in rope} == {"attn"}
    n_q, n_k, Td = T * cfg.attn_dim, T * cfg.kv_dim, T * cfg.head_dim
    assert sum(o.bytes for o in rope) == 2 * (10 * (n_q + n_k) + 4 * Td)

    # Block totals: FLOPs within 2% (the analytic flash kernel adds 5 FLOPs per score for the
    # softmax, which the trace does not count); bytes within 2% once RoPE is set aside.
    ref_flops, ref_bytes = sum(k.flops for k in ref.values()), sum(k.bytes for k in ref.values())
    assert traced.total_flops == pytest.approx(ref_flops, rel=0.02)
    assert traced.total_bytes - sum(o.bytes for o in rope) == pytest.approx(ref_bytes, rel=0.02)


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_trace_table_and_json(torch, capsys):
    code, out, _ = run(capsys, "trace", "roofline.trace.models:tiny_llama", "--input-shape", "2,16")
    assert code == 0
    assert "aten::mm" in out and "_scaled_dot_product_flash_attention" in out and "unsupported: none" in out
    code, out, _ = run(capsys, "trace", "roofline.trace.models:tiny_gpt2", "--input-shape", "1,8", "--json",
                       "--machine", "a100-80gb")
    d = json.loads(out)
    assert code == 0 and d["machine"] == "a100-80gb" and d["inputs"] == [[1, 8]]
    assert d["total_flops"] == sum(op["flops"] for op in d["ops"]) and d["unsupported"] == []
    code, out, _ = run(capsys, "trace", "roofline.trace.models:tiny_llama", "--by", "module", "--csv")
    assert code == 0 and out.startswith("name,module,")


def test_cli_trace_of_a_config_says_its_stored_width_and_trained_length_in_every_mode(torch, capsys, tmp_path):
    """A reviewer's fp32 config was traced at bf16 without a word, a 100,000-token cache of a model
    trained on 2,048 likewise, and --csv dropped every note."""
    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
           "num_attention_heads": 4, "vocab_size": 100, "torch_dtype": "float32", "max_position_embeddings": 2048}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    argv = ["trace", str(path), "--phase", "decode", "--context", "100000"]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "the checkpoint stores fp32" in out and "max_position_embeddings 2,048" in out
    code, out, err = run(capsys, *argv, "--csv")
    assert code == 0 and "stores fp32" not in out and "stores fp32" in err and "2,048" in err
    code, out, _ = run(capsys, *argv, "--json")
    assert any("stores fp32" in n for n in json.loads(out)["notes"])
    code, out, _ = run(capsys, *argv, "--dtype", "fp32")  # traced as stored: nothing to say
    assert code == 0 and "the checkpoint stores" not in out


@pytest.mark.parametrize("argv,needle", [
    (["roofline.trace.models"], "PACKAGE.MODULE:FACTORY"),
    (["no_such_package:f"], "cannot import"),
    (["roofline.trace.models:nothing"], "no callable"),
    (["roofline.trace.models:rotate_half"], "failed on the meta device"),
    (["roofline.trace.models:gpt2", "--input-shape", "1,-4"], "--input-shape"),
    (["roofline.trace.models:gpt2", "--dtype", "fp9"], "--dtype"),
])
def test_cli_trace_bad_input_is_one_line(torch, capsys, argv, needle):
    code, out, err = run(capsys, "trace", *argv)
    assert code == 2 and needle in err and err.count("\n") == 1


def test_cli_trace_without_torch_names_the_extra(capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    code, _, err = run(capsys, "trace", "roofline.trace.models:gpt2")
    assert code == 2 and "pip install 'roofline[torch]'" in err


MODULE = """
import torch

class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2

class Reads(torch.nn.Module):
    def forward(self, x):
        return x[: int(x.sum().item())]

class Fails(torch.nn.Module):
    def forward(self, x):
        raise ValueError("this model is broken")

def double():
    return Double()

def reads():
    return Reads()

def fails():
    return Fails()
"""


@pytest.fixture
def user_models(tmp_path, monkeypatch):
    (tmp_path / "roofline_test_user_models.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)  # the current directory is importable, as with `python -m`
    return "roofline_test_user_models"


def test_cli_trace_keeps_the_input_dtype_it_was_given(torch, capsys, user_models):
    code, out, _ = run(capsys, "trace", f"{user_models}:double", "--input-shape", "2,16", "--input-dtype", "fp32",
                       "--dtype", "bf16", "--json")
    (mul,) = json.loads(out)["ops"]
    # x * 2 on fp32 2 x 16: 32 elements read and written at 4 bytes = 256 (bf16 would be 128)
    assert code == 0 and mul["dtype"] == "fp32" and mul["bytes"] == 256
    code, out, _ = run(capsys, "trace", f"{user_models}:double", "--input-shape", "2,16", "--input-dtype", "fp32",
                       "--dtype", "bf16")
    assert code == 0 and "inputs 2x16 fp32, weights bf16" in out


def test_cli_trace_says_data_dependent_only_when_it_is(torch, capsys, user_models):
    code, _, err = run(capsys, "trace", f"{user_models}:reads", "--input-shape", "4", "--input-dtype", "fp32")
    assert code == 2 and "data-dependent" in err and err.count("\n") == 1
    code, _, err = run(capsys, "trace", f"{user_models}:fails", "--input-shape", "4", "--input-dtype", "fp32")
    assert code == 2 and "this model is broken" in err and "data-dependent" not in err and err.count("\n") == 1


def test_gather_ops_read_only_what_they_gather():
    """index_select of 16 rows of a (1024, 1024) fp32 table with int64 ids: the ids (16 x 8 B) are
    read, the 16 rows read and written: 128 + 2 x 16 x 1024 x 4 = 131,200 bytes, not the table."""
    torch = pytest.importorskip("torch")
    from roofline.trace import trace

    class Pick(torch.nn.Module):
        def forward(self, table, idx):
            return table.index_select(0, idx)

    r = trace(Pick(), torch.zeros(1024, 1024), torch.zeros(16, dtype=torch.int64), cast_inputs=False)
    costed = [op for op in r.ops if op.bytes > 0]
    assert [op.name for op in costed] == ["aten::index_select"] and costed[0].category == "gather"
    assert costed[0].bytes == 128 + 2 * 16 * 1024 * 4


def test_matmul_shapes_are_read_for_the_calibrated_gemm_rate():
    from roofline.trace.rules import gemm_shape

    assert gemm_shape("aten::mm", [(4, 64), (64, 32)]) == (1, 4, 32, 64)
    assert gemm_shape("aten::addmm", [(32,), (4, 64), (64, 32)]) == (1, 4, 32, 64)
    assert gemm_shape("aten::bmm", [(8, 4, 64), (8, 64, 32)]) == (8, 4, 32, 64)
    assert gemm_shape("aten::add", [(4, 4), (4, 4)]) == ()
    assert gemm_shape("aten::mm", [(4,)]) == ()


def test_trace_from_a_preset_builds_a_decode_step_against_a_kv_cache(capsys):
    """`roofline trace llama3.2-1b --phase decode --context 1024 --batch 2`: the matmuls of one
    step are 2 x batch x their weights: every weight but the norms' (the LM head is the tied
    embedding). Llama 3.2 1B: 1,235,814,400 parameters (Hugging Face), norms (2 x 16 + 1) x 2,048
    = 67,584, so 2 x 2 x 1,235,746,816 = 4,942,987,264 FLOPs."""
    pytest.importorskip("torch")
    from roofline.cli import main

    assert main(["trace", "llama3.2-1b", "--phase", "decode", "--context", "1024", "--batch", "2", "--json"]) == 0
    ops = json.loads(capsys.readouterr().out)["ops"]
    assert sum(o["flops"] for o in ops if o["category"] == "matmul") == 4_942_987_264
    # the cache is read: each layer's K and V cat reads batch 2 x 8 kv heads x 1,024 x 64 x 2 B
    # (and writes 1,025 positions); RoPE's rotate-half cats are the small ones
    cache_cats = [o for o in ops if o["name"] == "aten::cat" and o["bytes"] >= 2 * 8 * 1024 * 64 * 2]
    assert len(cache_cats) == 2 * 16
    assert all(o["bytes"] == 2 * 8 * 64 * 2 * (1024 + 1 + 1025) for o in cache_cats)
    assert main(["trace", "llama3.2-1b", "--tokens", "64"]) == 0
    assert "a prefill of 64 tokens at batch 1" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# config.json of the families LlamaLike does not build (trace.decoder.Decoder): q/k norms, layer
# kinds, sandwich and post norms, agreeing with the analytic Model they are built from
# ---------------------------------------------------------------------------------------------

# 2 layers, d_model 64, 4 heads of 16 over 2 kv heads, d_ff 128, vocab 256 (untied unless said)
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=256, tie_word_embeddings=False, torch_dtype="bfloat16")
FAMILIES = {
    "qwen3": dict(model_type="qwen3"),
    "olmo2": dict(model_type="olmo2"),
    "gemma2": dict(model_type="gemma2", sliding_window=8, query_pre_attn_scalar=16, attn_logit_softcapping=50.0,
                   final_logit_softcapping=30.0, tie_word_embeddings=True),
    "gemma3_text": dict(model_type="gemma3_text", sliding_window=8, sliding_window_pattern=2,
                        query_pre_attn_scalar=16, tie_word_embeddings=True),
    "mistral": dict(model_type="mistral", sliding_window=8),  # a window on every layer
    "phi3": dict(model_type="phi3"),
    "llama": dict(model_type="llama"),
}


def family_config(tmp_path, family, **changes):
    path = tmp_path / f"{family}.json"
    path.write_text(json.dumps({**TINY, **FAMILIES.get(family, {}), **changes}))
    return str(path)


def traced_family(torch, path, tokens=8, *cache):
    from roofline.trace import trace
    from roofline.trace.build import from_config

    with torch.device("meta"):
        model = from_config(path)
    return model, trace(model, torch.zeros(1, tokens, dtype=torch.long), *cache, dtype="bf16")


def flops_by(result, key="name"):
    out = defaultdict(float)
    for op in result.ops:
        out[getattr(op, key)] += op.flops
    return out


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_config_traces_and_agrees_with_the_analytic_model(torch, tmp_path, family):
    """Every op has a rule; the module's parameters are the analytic count's; its matmul and
    attention FLOPs are T x the analytic forward FLOPs per token (2 N_matmul + attention's context
    term), at T = 8 tokens within every window (both sides count the full T x T square then)."""
    from roofline.transformer import count_params, flops_per_token

    path = family_config(tmp_path, family)
    model, result = traced_family(torch, path)
    assert result.unsupported == ()
    assert sum(p.numel() for p in model.parameters()) == count_params(path)["total"]
    by = flops_by(result, "category")
    assert by["matmul"] + by["attention"] == 8 * flops_per_token(path, 8, mode="forward")


def test_qwen3_by_hand(torch, tmp_path):
    """Qwen3, 2 layers of width 64: q/k norms per head of 16."""
    path = family_config(tmp_path, "qwen3")
    model, result = traced_family(torch, path)
    assert type(model).__name__ == "Decoder"
    # embed 256 x 64 = 16,384, untied LM head 16,384; a layer: qkv 64 x (64 + 32 + 32) = 8,192,
    # o 64 x 64 = 4,096, q_norm and k_norm 16 + 16, MLP 3 x 64 x 128 = 24,576, 2 norms 128:
    # 37,024; 2 layers 74,048; final norm 64: 106,880
    assert sum(p.numel() for p in model.parameters()) == 106_880
    by = flops_by(result)
    # T = 8, each matmul 2 M N K: qkv 2 x 8 x 64 x 128 = 131,072, o 2 x 8 x 64 x 64 = 65,536,
    # gate+up 2 x 8 x 64 x 256 = 262,144, down 2 x 8 x 128 x 64 = 131,072: 589,824 a layer,
    # 1,179,648 for 2; LM head 2 x 8 x 64 x 256 = 262,144: 1,441,792
    assert by["aten::mm"] == 1_441_792
    # attention 2 B H T S (d + d_v) = 2 x 4 x 8 x 8 x 32 = 16,384 a layer
    assert by["aten::_scaled_dot_product_flash_attention"] == 2 * 16_384
    # RMSNorm elements: 2 a layer x 8 x 64 = 1,024 (2,048 for 2 layers), final 512, q_norm 8 x 4 x 16 =
    # 512 and k_norm 8 x 2 x 16 = 256 a layer (1,536 for 2): 4,096 elements
    norms = [op for op in result.ops if op.name == "aten::_fused_rms_norm"]
    assert sum(math.prod(op.shapes[0]) for op in norms) == 2_048 + 512 + 1_536
    assert {op.shapes[0] for op in norms if op.module.endswith("q_norm")} == {(1, 8, 4, 16)}  # per head


def test_olmo2_normalises_q_and_k_over_the_whole_projection_after_each_sublayer(torch, tmp_path):
    path = family_config(tmp_path, "olmo2")
    model, result = traced_family(torch, path)
    # a layer: qkv 8,192, o 4,096, q_norm 4 x 16 = 64 and k_norm 2 x 16 = 32 wide, MLP 24,576, norms
    # 128: 37,088; 2 layers 74,176; embed + LM head 32,768; final norm 64: 107,008
    assert sum(p.numel() for p in model.parameters()) == 107_008
    norms = {op.module: op.shapes[0] for op in result.ops if op.name == "aten::_fused_rms_norm"}
    assert norms["layers.0.attn.q_norm"] == (1, 8, 64) and norms["layers.0.attn.k_norm"] == (1, 8, 32)
    order = [op.module for op in result.ops if op.module.startswith("layers.0.") and op.flops]
    # post-norm: the attention's norm comes after its output projection, the MLP's after its down projection
    assert order.index("layers.0.attn_norm") > order.index("layers.0.attn.wo")
    assert order.index("layers.0.ffn_norm") > order.index("layers.0.mlp.w2")


def test_gemma2_sliding_and_full_layers_prefill_and_decode(torch, tmp_path, capsys):
    """Gemma 2, layer 0 sliding (window 4), layer 1 full; four norms a layer."""
    from roofline.transformer import attention_flops_per_token_forward

    path = family_config(tmp_path, "gemma2", sliding_window=4)
    model, result = traced_family(torch, path)
    # a layer: qkv 8,192, o 4,096, MLP 24,576, 4 norms 256: 37,120; 2 layers 74,240; tied
    # embedding 16,384; final norm 64: 90,688
    assert sum(p.numel() for p in model.parameters()) == 90_688
    attn = {op.module: op for op in result.ops if op.category == "attention"}
    # 8 tokens past the window of 4: layer 0 runs with a band mask (the efficient kernel), layer 1 causal (flash);
    # both count the full square, 2 x 4 x 8 x 8 x 32 = 16,384
    assert attn["layers.0.attn"].name == "aten::_scaled_dot_product_efficient_attention"
    assert attn["layers.1.attn"].name == "aten::_scaled_dot_product_flash_attention"
    assert [op.flops for op in attn.values()] == [16_384, 16_384]
    assert result.unsupported == ()

    # decode against 10 cached tokens: the sliding layer keeps 4 and attends the last 4 positions,
    # 2 x 4 x 1 x 4 x 32 = 1,024; the full layer keeps 10 and attends 11: 2 x 4 x 11 x 32 = 2,816
    from roofline.cli.trace_model import cache_shapes

    shapes = cache_shapes(model, 1, 10)
    assert shapes == [(1, 2, 4, 16)] * 2 + [(1, 2, 10, 16)] * 2
    cache = [torch.zeros(s, dtype=torch.bfloat16) for s in shapes]
    _, step = traced_family(torch, path, 1, *cache)
    decode = [op.flops for op in step.ops if op.category == "attention"]
    assert decode == [1_024, 2_816]
    assert sum(decode) == attention_flops_per_token_forward(path, 11)  # the analytic count at position 10

    assert main(["trace", path, "--tokens", "8"]) == 0
    out = capsys.readouterr().out
    assert "Decoder (" in out and "band mask" in out and "final_logit_softcapping 30" in out
    assert main(["trace", path, "--phase", "decode", "--context", "10"]) == 0
    out = capsys.readouterr().out
    assert "band mask" not in out  # a decode step reads the window's cache, no mask
    assert "against a KV cache of 10 tokens (4 cache tensors, sliding layers keeping their window" in out


@pytest.mark.parametrize("preset,needle", [("gpt-oss-20b", "attention sinks"), ("llama4-scout", "chunked attention"),
                                           ("mamba2-2.7b", "token mixer mamba2 (SSD)"),
                                           ("pythia-6.9b", "parallel attention + MLP")])
def test_a_family_the_decoder_cannot_build_is_refused_by_name(capsys, torch, preset, needle):
    assert main(["trace", preset]) == 2
    err = capsys.readouterr().err
    assert needle in err and "PACKAGE.MODULE:FACTORY" in err


def test_an_op_without_a_rule_in_a_family_trace_is_named(torch, tmp_path, capsys, monkeypatch):
    """OLMo-2's q/k norms with the RMSNorm rule taken away: listed by name and count, not costed."""
    monkeypatch.delitem(RULES, "aten::_fused_rms_norm")
    path = family_config(tmp_path, "olmo2")
    _, result = traced_family(torch, path)
    # 2 layers x (2 post norms + q_norm + k_norm) + the final norm = 9 calls
    assert dict(result.unsupported_calls) == {"aten::_fused_rms_norm": 9}
    assert not any(op.name == "aten::_fused_rms_norm" for op in result.ops)
    assert main(["trace", path, "--tokens", "8"]) == 0
    assert "unsupported (no rule; not counted): aten::_fused_rms_norm x9" in capsys.readouterr().out
