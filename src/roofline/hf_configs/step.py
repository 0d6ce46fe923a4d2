"""StepFun's Step-3.7-Flash (step3p7): refused by name, as not yet supported (see the loader)."""

from __future__ import annotations

from roofline.errors import RooflineError
from roofline.hf_configs.keys import Keys
from roofline.hf_configs.shared import loader


@loader("step3p7")
def _step3p7(c: Keys):
    """Step-3.7-Flash (transformers' Step3p7TextConfig / Step3p7Attention): its attention gates
    each head's output by sigmoid(g_proj x), a (D, H) projection this tool has no op for, and its
    sliding-window layers run their own query-head count (attention_other_setting /
    num_sliding_attention_heads: 96 against the full layers' 64 in the published checkpoint). A
    config that omits those keys (the flattened copy aiconfigurator-core ships) cannot say the
    sliding layers' size, and defaulting it to num_attention_heads would undercount them. Refused:
    not yet supported."""
    other = c.get("attention_other_setting") or c.get("num_sliding_attention_heads")
    missing = "" if other else ("; this config also lacks attention_other_setting (the sliding layers' query heads), "
                                "so even their attention cannot be sized from it")
    raise RooflineError(f"{c.name}: model_type 'step3p7' (Step-3.7-Flash) is not yet supported: its head-wise "
                        f"attention gate (g_proj, D x heads, sigmoid on each head's output) has no op here{missing}",
                        field="model")


_step3p7.not_yet = True  # left out of the supported list that an unknown model_type's refusal prints
