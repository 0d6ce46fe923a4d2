"""A quantised checkpoint's matmuls as the serving engines run its format (issue 35): fp8 (quant_method
fp8, ModelOpt FP8, fbgemm, compressed-tensors W8A8) as W8A8 fp8 GEMMs where the GPU has fp8 arithmetic,
NVFP4 as W4A4 where it has fp4 (vLLM's Marlin W4A16 / W8A16 fallback elsewhere), weight-only formats
dequantised; the measured tables' fp8 rows picked by the checkpoint's weight_block_size; and the KV
cache under --dtype fp4 as the engines keep it (fp8), not fp4. Truths: the H100 SXM datasheet's dense
peaks (bf16 989, fp8 1,979 TFLOP/s) and FLOPs and bytes by hand in the comments."""

import pytest

from roofline import CostModel
from roofline.errors import RooflineError
from roofline.hf_configs import from_hf_config
from roofline.machines import get_machine
from roofline.plan import decode_step
from roofline.plan.precision import Precision

H100, A100, B200 = (get_machine(k) for k in ("h100-sxm", "a100-80gb", "b200"))
PURE = CostModel()  # the roofline: e_c = e_m = 1, no launch

# a small Llama: D 256, F 512, 4 heads of 64 (2 kv heads), 2 layers, vocab 100 (as test_quant_formats)
SMALL = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "torch_dtype": "bfloat16"}
# Qwen3-32B-FP8's and DeepSeek-R1's quantization_config (huggingface.co/Qwen/Qwen3-32B-FP8/blob/main/config.json)
BLOCK_FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]}
MODELOPT = {"quant_method": "modelopt", "exclude_modules": ["lm_head"]}


def resolved(q, machine, **flags) -> Precision:
    return Precision.resolve(from_hf_config(dict(SMALL, quantization_config=q)), machine, **flags)


def test_a_block_fp8_checkpoint_runs_w8a8_on_hopper_and_weight_only_on_an_a100():
    p = resolved(BLOCK_FP8, H100)
    assert [p.compute_for(part) for part in ("attention", "mlp", "lm_head")] == ["fp8", "fp8", "bf16"]
    assert p.compute == "fp8"  # the headline matmul dtype (its peak and ridge), as --dtype fp8's
    assert p.fp8_scaling == "block" and p.activations == p.kv_cache == "bf16"  # the engines' default KV: the model's
    assert {d["part"]: d["matmul"] for d in p.to_dict()["weights_stored"]} == {"attention": "fp8", "mlp": "fp8"}
    # an A100 has no fp8 arithmetic: vLLM's Fp8LinearMethod runs Marlin W8A16 there
    a = resolved(BLOCK_FP8, A100)
    assert a.compute_for("mlp") == "bf16" and a.fp8_scaling == "" and a.stored_matmul == ()
    # per tensor (no weight_block_size): the tables' per-tensor rows
    assert resolved({"quant_method": "fp8", "activation_scheme": "static"}, H100).fp8_scaling == "tensor"
    with pytest.raises(RooflineError, match="activation_scheme 'per_row'") as err:
        resolved(dict(BLOCK_FP8, activation_scheme="per_row"), H100)
    assert err.value.field == "model"


def test_an_fp8_checkpoints_matmuls_take_the_fp8_peak():
    # per token, each layer's matmuls: q, o 256 x 256, k, v 128 x 256, gate, up 512 x 256, down 256 x 512:
    # 2 x (2 x 65,536 + 2 x 32,768 + 3 x 131,072) = 1,179,648 FLOP; 2 layers 2,359,296 at fp8's 1,979 TFLOP/s; the
    # LM head (bf16) 2 x 100 x 256 = 51,200 at bf16's 989 TFLOP/s; 4 sequences
    step = decode_step(from_hf_config(dict(SMALL, quantization_config=BLOCK_FP8)), H100, 4, 64,
                       precision=resolved(BLOCK_FP8, H100), cost_model=PURE)
    assert step.totals.gemm_compute_s == pytest.approx(4 * (2_359_296 / 1979e12 + 51_200 / 989e12))
    # before: every matmul at the bf16 peak, what the same weights cost dequantised (the A100's W8A16)
    bf = decode_step(from_hf_config(dict(SMALL, quantization_config=BLOCK_FP8)), H100, 4, 64,
                     precision=resolved(BLOCK_FP8, H100, weights="bf16"), cost_model=PURE)
    assert bf.totals.gemm_compute_s == pytest.approx(4 * (2_359_296 + 51_200) / 989e12)


def test_modelopt_fp8_and_nvfp4_run_as_the_engines_run_them():
    fp8 = resolved(dict(MODELOPT, quant_algo="FP8"), H100)
    assert fp8.compute_for("mlp") == "fp8" and fp8.fp8_scaling == "tensor"
    # NVFP4: W4A4 on a B200 (fp4 arithmetic); weight-only on an H100 (vLLM's Marlin fallback), said in the label
    nv = dict(MODELOPT, quant_algo="NVFP4", group_size=16)
    assert resolved(nv, B200).compute_for("mlp") == "fp4" and resolved(nv, B200).fp8_scaling == ""
    hopper = resolved(nv, H100)
    assert hopper.compute_for("mlp") == "bf16" and hopper.stored_matmul == ()
    assert "fp4 matmuls need fp4 arithmetic this machine lacks" in hopper.label()
    # W4A16_NVFP4 keeps 16-bit activations: weight-only even on a B200
    assert resolved(dict(MODELOPT, quant_algo="W4A16_NVFP4", group_size=16), B200).compute_for("mlp") == "bf16"


def test_compressed_tensors_w8a8_fp8_and_w8a16():
    fp8 = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}
    ct = {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": fp8, "input_activations": None}}}
    assert resolved(ct, H100).compute_for("mlp") == "bf16"  # weights only: W8A16
    ct["config_groups"]["group_0"]["input_activations"] = {"num_bits": 8, "type": "float", "strategy": "token",
                                                           "dynamic": True}
    assert resolved(ct, H100).compute_for("mlp") == "fp8" and resolved(ct, H100).fp8_scaling == "tensor"


def test_the_measured_tables_fp8_rows_follow_the_checkpoints_scaling():
    pytest.importorskip("aiconfigurator_core")
    from roofline.measured.model import MeasuredKernels

    cm = MeasuredKernels.for_machine(H100, "vllm")
    block = cm.scaled_for(resolved(BLOCK_FP8, H100))
    assert block.fp8_scaling == "block" and block.table_dtype("fp8") == "fp8_block"  # the tables' fp8_block rows
    assert cm.scaled_for(resolved(BLOCK_FP8, H100), chosen="tensor") is cm  # --fp8-scaling given: kept
    assert cm.scaled_for(Precision.uniform("fp8", H100)).fp8_scaling == "tensor"  # --dtype fp8: no checkpoint


def test_dtype_fp4_keeps_an_fp8_kv_cache_as_the_engines_do():
    p = Precision.uniform("fp4", B200)
    assert (p.weights, p.compute, p.activations, p.kv_cache) == ("fp4", "fp4", "bf16", "fp8")
    assert "kv_cache_source" in p.to_dict() and "kv_cache_source" not in Precision.uniform("fp8", B200).to_dict()
    # Llama 3 8B at 1,024 tokens: 32 layers x K and V x 8 heads x 128 x 1 B (fp8) = 65,536 B a token
    step = decode_step("llama3-8b", B200, 1, 1024, precision=p, cost_model=PURE)
    assert step.kv_bytes == 1024 * 32 * 2 * 8 * 128 * 1
    four = Precision.resolve("llama3-8b", B200, "fp4", kv_cache="fp4")
    assert four.kv_cache == "fp4" and four.check_engine("sglang") is four and four.check_engine("trtllm") is four
    with pytest.raises(RooflineError, match="KV cache fp4 under --engine vllm") as err:
        four.check_engine("vllm")
    assert err.value.field == "kv_cache"
    assert p.check_engine("vllm") is p


def test_serving_refuses_an_fp4_kv_cache_under_vllm(capsys):
    from roofline.cli import main

    assert main(["serving", "--model", "llama3.1-8b", "--machine", "b200", "--engine", "vllm", "--dtype", "fp4",
                 "--kv-cache", "fp4", "--concurrency", "4", "--requests", "8"]) == 2
    assert "KV cache fp4 under --engine vllm" in capsys.readouterr().err
