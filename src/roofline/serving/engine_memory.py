"""An engine's memory share as the engine sets it (docs/serving.md): a fixed default (vLLM's
gpu_memory_utilization 0.9, TensorRT-LLM's free_gpu_memory_fraction 0.9), or one sized from the GPU's
memory and the layout (SGLang's mem_fraction_static when --mem-fraction-static is not given), or the
user's. ``MemoryShare`` records which and why; ``sized_share`` is SGLang's rule, its numbers read from
data/engines.toml's ``memory_rule`` (each cited there). Imports nothing of serving.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 2.0**20
BASES = ("given", "fixed", "sized")  # the user's share; the engine's constant default; sized from the GPU and layout


@dataclass(frozen=True)
class MemoryShare:
    """The share of each GPU's memory the engine takes and why: ``basis`` one of BASES, ``source`` the
    citation. Where it was sized (``basis`` "sized"), what it was sized from: the GPU's memory as the
    driver reports it (``gpu_mib``, MiB as nvidia-smi prints it), the memory set aside for activations
    and CUDA graphs (``reserved_mib``), the chunked-prefill size and the largest CUDA-graph batch the
    engine picks for that memory, and the layout (tensor_parallel, pipeline_stages, attention_dp)."""

    fraction: float
    basis: str
    source: str = ""
    gpu_mib: float | None = None
    reserved_mib: float | None = None
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    tensor_parallel: int = 1
    pipeline_stages: int = 1
    attention_dp: int = 1
    speculative: bool = False
    rule_versions: str = ""  # the engine versions whose rule sized it ("0.5.6-0.5.9")
    version_asked: str = ""  # an engine version asked that the rule does not cover ("" where it does)
    left_out: str = ""  # a term of the engine's rule this GPU may take that is not applied, in words

    def words(self) -> str:
        """One line: the share and where it came from."""
        if self.basis == "given":
            return f"memory share {self.fraction:g}: given (--memory-fraction), over the engine's default"
        if self.basis == "fixed":
            return f"memory share {self.fraction:g}: the engine's fixed default"
        if self.gpu_mib is None:
            return f"memory share {self.fraction:g}: the engine's default where the GPU's memory is unknown"
        layout = f"tp {self.tensor_parallel}" + (f" x pp {self.pipeline_stages}" if self.pipeline_stages > 1 else "") + (
            f", DP attention {self.attention_dp}" if self.attention_dp > 1 else "") + (", a draft" if self.speculative else "")
        asked = (f" (version {self.version_asked} asked sizes it by another rule, not modelled: this is "
                 f"{self.rule_versions}'s)" if self.version_asked else "")
        return (f"memory share {self.fraction:g}: sized as the engine {self.rule_versions} sizes it, (GPU "
                f"{self.gpu_mib:,.0f} MiB - reserved {self.reserved_mib:,.0f} MiB) / GPU, for chunked prefill "
                f"{self.chunked_prefill_size:,}, CUDA graphs up to batch {self.cuda_graph_max_bs:,} and {layout}" + asked
                + (f"; not applied: {self.left_out}" if self.left_out else ""))


def _band(rule: dict, gpu_mib: float) -> dict:
    """The rule's band for a GPU of ``gpu_mib`` MiB: the first whose ``below_mib`` it is under, else the last."""
    for band in rule["bands"]:
        if "below_mib" not in band or gpu_mib < band["below_mib"]:
            return band
    return rule["bands"][-1]


def sized_share(rule: dict, capacity_bytes: float | None, tensor_parallel: int = 1, pipeline_stages: int = 1,
                attention_dp: int = 1, speculative: bool = False, source: str = "", version_asked: str = "") -> MemoryShare:
    """SGLang's mem_fraction_static, chunked_prefill_size and cuda_graph_max_bs where none is given
    (server_args.py, ServerArgs._handle_gpu_memory_settings; ``rule`` holds its numbers), for a GPU of
    ``capacity_bytes`` as the driver reports it. In MiB, as SGLang reckons (G the GPU's memory, C the
    chunk, B the largest CUDA-graph batch, T x P the tensor x pipeline GPUs, D the DP-attention ranks):

        reserved = 512 + 1.5 max(C, 2048) + 2 B + (T P / 8) 1024
                   [+ 3 B D, and 1.5 B D more where B > 300, with DP attention]
        reserved = max(reserved, 10240) where G > 60 GiB;  [+ 2048 with a draft model]
        fraction = round((G - reserved) / G, 3)

    Its other terms (a piecewise CUDA graph, off by default to v0.5.9; a vision model's adjustment)
    are not counted. Without a capacity: the rule's fallback share and chunk, as SGLang's.
    ``version_asked``: an engine version outside the rule's versions, said in the share's words."""
    if not capacity_bytes:
        return MemoryShare(rule["fallback_fraction"], "sized", source, chunked_prefill_size=rule["fallback_chunk"],
                           cuda_graph_max_bs=rule["fallback_graph_bs"], tensor_parallel=tensor_parallel,
                           pipeline_stages=pipeline_stages, attention_dp=attention_dp, speculative=speculative,
                           rule_versions=rule["versions"], version_asked=version_asked)
    gpu_mib = capacity_bytes / MIB
    band = _band(rule, gpu_mib)
    chunk = int(band["chunked_prefill"])
    graph_bs = int(band["graph_bs_tp4"] if tensor_parallel >= rule["graph_bs_tp_from"] else band["graph_bs"])
    reserved = (rule["base_mib"] + rule["per_chunk_token_mib"] * max(chunk, rule["min_chunk_tokens"])
                + rule["per_graph_seq_mib"] * graph_bs + tensor_parallel * pipeline_stages * rule["per_gpu_mib"])
    if attention_dp > 1:
        reserved += rule["dp_per_graph_seq_mib"] * graph_bs * attention_dp
        if graph_bs > rule["dp_large_graph_over"]:
            reserved += rule["dp_large_per_graph_seq_mib"] * graph_bs * attention_dp
    if gpu_mib > rule["floor_above_mib"]:
        reserved = max(reserved, rule["floor_mib"])
    if speculative:
        reserved += rule["draft_mib"]
    fraction = round((gpu_mib - reserved) / gpu_mib, rule["digits"])
    return MemoryShare(fraction, "sized", source, gpu_mib, reserved, chunk, graph_bs, tensor_parallel, pipeline_stages,
                       attention_dp, speculative, rule["versions"], version_asked)
