"""Hugging Face ``config.json`` files to Models, one loader per ``model_type``.

Each loader maps the keys its family's transformers config class defines, with that class's
default where a key is absent, and says what it did not use:

- a key the loader does not know is kept in ``Model.ignored_keys`` and said in ``Model.notes``
  ("not understood: ignored", shared.ignored_key_note), never
  silently dropped; keys that change no parameter, cache or FLOP count (epsilons, rotary bases,
  token ids, dropouts, initialisers) are listed as cost-neutral and pass without a word;
- an unknown ``model_type`` is refused with the list of supported ones, never read as a Llama; a
  family known but not yet modelled has a loader that refuses it saying what it lacks (``not_yet``);
- a nested ``text_config`` (Gemma 3 and 4, Llama 4, Qwen3-VL, Qwen3.5) is read, and the vision tower
  it sits beside is named in ``Model.omitted`` (a LeftOut: its part, its key, the words said);
- ``quantization_config`` sets the stored width of the modules the format quantises
  (WeightStorage); a quantisation method it does not know is refused by name.

Defaults are those of transformers' configuration_<family>.py (v4.5x-5.x) and the modules of
modeling_<family>.py; each loader's docstring says which.

    keys.py     Keys: a config dict that records the keys read and refuses malformed values;
                COST_NEUTRAL, the keys that change no count
    shared.py   the loader registry (SUPPORTED, @loader) and the pieces every loader builds with
    llama.py    Llama-like families: Llama, Mistral, Mixtral, Qwen2/3 (and MoE), Gemma 1-4
    moe.py      Llama 4, DeepSeek V2/V3 (and Kimi K2), gpt-oss
    gpt.py      Phi, Phi-3, GPT-2, GPT-NeoX
    ssm.py      state-space and hybrid: Mamba-2, mamba_ssm, Jamba, Nemotron-H (and Nemotron-3's MoE),
                Falcon-H1 (attention and Mamba-2 in parallel)
    mimo.py     Xiaomi's MiMo-7B and MiMo-V2-Flash
    minimax.py  MiniMax-M3 (MiniMax Sparse Attention: GQA with a block indexer)
    nvidia.py   Llama-Nemotron NAS models (nemotron-nas: per-layer block_configs)
    step.py     Step-3.7-Flash, refused by name as not yet supported
    hybrid.py   linear-attention hybrids: Qwen3-Next, Qwen3.5 / 3.6 (Gated DeltaNet + gated attention),
                Kimi Linear (Kimi Delta Attention + MLA)
    quant.py    the stored width of the weights: torch_dtype and quantization_config (mxfp4, fp8,
                gptq, awq), dispatch to the other formats
    quant_formats.py  compressed-tensors, modelopt (and hf_quant_config.json), fbgemm_fp8, bitsandbytes
    quant_parts.py    Scheme (one quantised matrix's bytes as stored), each part's matrices, skip lists
    load.py     from_hf_config: nesting (text_config), dispatch by model_type, storage

The names below are those the module roofline.hf_configs held before it became this package.
"""

from roofline.hf_configs.keys import COST_NEUTRAL, MAX_DIM
from roofline.hf_configs.shared import MAX_LAYERS, SUPPORTED, loader
from roofline.hf_configs.quant import QUANTISED_PARTS, TORCH_DTYPES
from roofline.hf_configs.load import NESTED, from_hf_config

__all__ = ["COST_NEUTRAL", "MAX_DIM", "MAX_LAYERS", "NESTED", "QUANTISED_PARTS", "SUPPORTED", "TORCH_DTYPES",
           "from_hf_config", "loader"]
