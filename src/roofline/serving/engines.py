"""Serving engines as they run by default (``roofline serving --engine ENGINE[@VERSION]``): the settings
of data/engines.toml, each an engine's own default cited to the source that sets it, resolved for a
GPU (some defaults follow its memory) into the Engine the simulator takes.

``preset(name, machine, tensor_parallel, pipeline_stages, attention_dp)`` is an EnginePreset: the
engine's key, its Engine settings, the version asked (for its measured kernels: ``--kernels`` defaults
to the engine's tables), each setting's value with its source (``sources``), and the memory share with
what it was sized from (``memory``: SGLang sizes its share and its prefill chunk from the GPU's memory
and the layout, serving.engine_memory), so that a run can say what it assumed and why.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from importlib import resources

from roofline.errors import RooflineError, unknown_name
from roofline.machines import Machine
from roofline.serving.engine import Engine
from roofline.serving.engine_memory import MemoryShare, sized_share

SETTINGS = ("max_seqs", "max_tokens", "block_size", "memory_fraction", "memory_of_free", "step_overhead_s",
            "eager_op_s", "graph_tokens", "schedule_ahead", "chunked_prefill", "mixed_steps", "admission")
FITTED = ("step_overhead_s", "eager_op_s")  # the settings fitted on measured deployments (engines.toml: FIT)
GIB = 2.0**30


@functools.cache
def _doc() -> dict:
    import tomllib

    return tomllib.loads(resources.files("roofline").joinpath("data/engines.toml").read_text(encoding="utf-8"))


def names() -> tuple[str, ...]:
    return tuple(_doc()["engines"])


def fitted_step_overhead_s(key: str) -> float:
    """Engine ``key``'s time per step as data/engines.toml holds it (fitted on measured deployments)."""
    return float(_doc()["engines"][key]["step_overhead_s"]["value"])


def fitted_eager_op_s(key: str) -> float:
    """Engine ``key``'s host time per op outside a CUDA graph as data/engines.toml holds it (fitted)."""
    return float(_doc()["engines"][key]["eager_op_s"]["value"])


@dataclass(frozen=True)
class EnginePreset:
    """An engine's defaults on one GPU: ``settings`` (the Engine's fields), ``sources`` ({setting:
    'value: the source's text'}), the engine's ``key`` and display ``name``, and ``version`` as asked
    ("" for the default)."""

    key: str
    name: str
    version: str
    versions: str  # the versions whose defaults the file gives
    settings: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)
    memory: MemoryShare | None = None  # the share and what it was sized from (None: no share on file)
    rule: dict | None = None  # the engine's rule for its share (engines.toml memory_rule), where it sizes one
    capacity_bytes: float | None = None  # the GPU's memory the rule reads
    since: dict = field(default_factory=dict)  # {setting: the note of a default the engine changed at a version}

    def graph_tokens_for(self, max_seqs: int, max_tokens: int, spec_tokens: int = 0) -> int:
        """The engine's largest step it replays as a piecewise CUDA graph at these batch limits: engines.toml's
        graph_tokens, at most per_seq x ``max_seqs`` x the tokens a decode verifies (1 + ``spec_tokens``) and
        ``max_tokens`` where the engine sizes it so (vLLM's max_cudagraph_capture_size: min(2 x max_num_seqs x
        decode_query_len, 512), at most max_num_batched_tokens)."""
        entry = _doc()["engines"][self.key]["graph_tokens"]
        value = int(self.settings["graph_tokens"])
        if "per_seq" not in entry:
            return value
        return min(value, int(entry["per_seq"]) * int(max_seqs) * (1 + int(spec_tokens)), int(max_tokens))

    def engine(self, **given) -> Engine:
        """The Engine of these defaults, with ``given`` (the settings a user gave) over them; its
        ``memory_share`` says where its memory fraction came from (given, fixed or sized)."""
        given = {k: v for k, v in given.items() if v is not None}
        memory = self.memory
        if "memory_fraction" in given:
            memory = MemoryShare(float(given["memory_fraction"]), "given")
        elif self.rule is not None and given.get("spec_tokens"):  # a draft model: the rule reserves for it
            m = self.memory
            memory = sized_share(self.rule, self.capacity_bytes, m.tensor_parallel, m.pipeline_stages, m.attention_dp,
                                 True, m.source, m.version_asked)
            given = {**given, "memory_fraction": memory.fraction}
        shown = tuple(k for k in given if k in SETTINGS and not (k == "memory_fraction" and memory.basis != "given"))
        # the notes of defaults changed at a version, but planning ahead's: the engine line says it (render.planning_words)
        since = "; ".join(f"{k.removesuffix('_s')}: {v}" for k, v in self.since.items()
                          if k not in given and k != "schedule_ahead")
        if "schedule_ahead" in given and "schedule_ahead" in self.since and "step_overhead_s" in self.since \
                and "step_overhead_s" not in given and int(given["schedule_ahead"]) != int(self.settings["schedule_ahead"]):
            # the engine's version switches both (vLLM's async scheduling): one given, the other stays the version's
            since += ("; " if since else "") + (
                f"--schedule-ahead {int(given['schedule_ahead'])} given: the time per step stays this version's "
                f"({self.settings['step_overhead_s'] * 1e3:g} ms), not the other scheduler's")
        settings = {**self.settings, **given}
        if "graph_tokens" not in given:  # sized from the batch limits where the engine sizes it so (vLLM)
            settings["graph_tokens"] = self.graph_tokens_for(settings["max_seqs"], settings["max_tokens"],
                                                             settings.get("spec_tokens", 0))
        return Engine(**settings, preset=self.key, memory_share=memory, label=self.note(shown, memory, settings),
                      since_note=since)

    @property
    def kernels(self) -> str:
        """The engine's measured kernels, ENGINE[@VERSION]."""
        return f"{self.key}@{self.version}" if self.version else self.key

    def note(self, given=(), memory: MemoryShare | None = None, settings: dict | None = None) -> str:
        """One line: the engine's defaults this run took (the settings in ``given`` left out: the user's; ``settings``
        the run's, where a default was sized from the user's: the graph tokens from --max-seqs), and where its memory
        share came from."""
        shown = []
        memory = memory or self.memory
        settings = settings or self.settings
        for k in SETTINGS:
            if k in given:
                continue
            v = memory.fraction if k == "memory_fraction" and memory else settings[k]
            text = (f"{v * 1e3:g} ms" if k == "step_overhead_s" else f"{v * 1e6:g} us" if k == "eager_op_s"
                    else ("on" if v else "off") if isinstance(v, bool)
                    else f"{v:,}" if isinstance(v, int) else v if isinstance(v, str) else f"{v:g}")
            shown.append(f"{k.removesuffix('_s') if k in FITTED else k} {text}")
        fitted = [k.removesuffix("_s") for k in FITTED if k not in given and k not in self.since]
        asked = ""
        if self.version:
            outside = not covers(self.versions.split(" ")[0], self.version)
            asked = (f" (as {self.key}@{self.version}" + (", outside the versions these defaults were read for: "
                                                           "assumed unchanged" if outside else "") + ")")
        return (f"engine: {self.name} {self.versions}{asked} as it runs by default (data/engines.toml, each cited): "
                + ", ".join(shown) + (f" ({' and '.join(fitted)} fitted on measured deployments, not documented)"
                                      if fitted else "")
                + (f"; {memory.words()}" if memory and memory.basis == "sized" else ""))


def parse(text: str) -> tuple[str, str]:
    """(engine, version) of ``ENGINE[@VERSION]``; an unknown engine is refused with the known ones."""
    engine, at, version = str(text).strip().partition("@")
    engine, version = engine.strip().lower(), version.strip()
    if engine not in names():
        raise unknown_name("engine", engine, names(), field="engine")
    if at and not version:
        raise RooflineError(f"--engine {text!r}: a version after @, or no @ for the default one", field="engine")
    if version and not _release(version):
        raise RooflineError(f"--engine {text!r}: a version is numbers, as the engine numbers its releases (e.g. "
                            f"{engine}@0.12.0)", field="engine")
    return engine, version


def preset(text: str, machine: Machine, tensor_parallel: int = 1, pipeline_stages: int = 1,
           attention_dp: int = 1, draft_model: bool = False) -> EnginePreset:
    """The defaults of ``ENGINE[@VERSION]`` on ``machine``, for a replica of ``tensor_parallel`` x
    ``pipeline_stages`` GPUs with ``attention_dp`` data-parallel attention ranks (an engine that sizes its
    memory share from the GPU's memory and the layout reads them: SGLang), drafting with a model of its own
    (``draft_model``: speculative decoding by a draft model, not the target's MTP module) or not."""
    key, version = parse(text)
    from roofline.measured.tables import NVIDIA_ONLY

    if key in NVIDIA_ONLY and machine.vendor and machine.vendor.upper() != "NVIDIA":
        raise RooflineError(f"{key} runs on NVIDIA GPUs only, not the {machine.vendor} {machine.name}: vllm and sglang "
                            "run on it", field="engine", also=("machine",))
    doc = _doc()
    spec = doc["engines"][key]
    gib = machine.capacity_bytes / GIB if machine.capacity_bytes else None
    settings, sources, changed = {}, {}, {}
    for name in SETTINGS:
        entry = spec[name]
        value = entry["value"]
        below, above = entry.get("below"), entry.get("above")
        if machine.key in entry.get("small_gpus", ()) and below:
            value = below["value"]
        elif gib is not None and below and gib < below["gib"]:
            value = below["value"]
        elif gib is not None and above and gib >= above["gib"]:
            value = above["value"]
        since = entry.get("since")  # a default the engine changed at a version: the asked one's, or the newest's
        if since and "with_pipeline" in since and pipeline_stages > 1:  # a change that does not hold with pipeline stages
            changed[name] = since["with_pipeline"]
        elif since and "with_draft" in since and draft_model:  # ... nor with a draft model
            changed[name] = since["with_draft"]
        elif since and not (version and _release(version)[:2] < _release(since["version"])[:2]):
            value, entry = since["value"], {**entry, **since}
            changed[name] = since["note"]
        elif since:  # a version before the change: the older default, and what changed after it
            changed[name] = since["before"]
        settings[name] = value
        sources[name] = doc["sources"][entry["source"]] + (f" ({entry['note']})" if "note" in entry else "")
    rule = spec.get("memory_rule")
    if rule is None:
        memory = MemoryShare(settings["memory_fraction"], "fixed", sources["memory_fraction"])
    else:
        memory = sized_share(rule, machine.capacity_bytes, tensor_parallel, pipeline_stages, attention_dp,
                             source=rule["cite"], version_asked="" if not version or covers(rule["versions"], version)
                             else version)
        if machine.vendor and machine.vendor.upper() == "AMD" and rule.get("amd_left_out"):
            memory = dataclasses.replace(memory, left_out=rule["amd_left_out"])
        settings["memory_fraction"], settings["max_tokens"] = memory.fraction, memory.chunked_prefill_size
    return EnginePreset(key, spec["name"], version, spec["versions"], settings, sources, memory, rule,
                        machine.capacity_bytes, changed)


def _release(text: str) -> tuple[int, ...]:
    """The leading numbers of a version ("0.24.0" -> (0, 24, 0), "1.3.0rc20" -> (1, 3, 0))."""
    import re

    return tuple(int(x) for x in re.findall(r"\d+", re.match(r"[\d.]*", text.strip()).group(0)))


def versions_cover(key: str, version: str) -> bool:
    """Whether ``version`` lies in the versions engines.toml read ``key``'s defaults for ("0.9-0.19",
    "0.5": compared on as many numbers as the range gives)."""
    return covers(str(_doc()["engines"][key]["versions"]).split(" ")[0], version)


def covers(span: str, version: str) -> bool:
    """Whether ``version`` lies in ``span`` ("0.5.6-0.5.9", "0.5"), compared on as many numbers as the span gives."""
    lo, _, hi = span.partition("-")
    lo, hi = _release(lo), _release(hi or lo)
    v = _release(version)
    return bool(v) and lo <= v[:len(lo)] and v[:len(hi)] <= hi


def engine_precision(precision, engine: str | None, machine: Machine):
    """``precision`` as ``engine`` (ENGINE[@VERSION] or its key; None or "": no engine) runs it on ``machine``:
    the engine's ``experts_matmul`` rule (data/engines.toml, cited there) applied where the precision serves a
    checkpoint as stored (Precision.as_stored: no --dtype or --weights, which win) whose routed experts are stored
    in the rule's format, on a machine with the rule's arithmetic (TensorRT-LLM: MXFP4 experts with MXFP8
    activations on Blackwell); else ``precision`` unchanged. The one home of the rule: the CLI, /api/serving and
    benchmarks/silicon_validation.py call it. Sets Precision.experts_matmul, with why (experts_source) for its label."""
    if not engine or precision.stored is None or precision.experts_matmul is not None:
        return precision
    spec = _doc()["engines"][parse(engine)[0]]
    rule = spec.get("experts_matmul")
    if (rule is None or precision.weight_format("experts") != rule["stored"]
            or not {rule["on"], rule["value"]} <= set(machine.dtypes)):
        return precision
    return dataclasses.replace(precision, experts_matmul=rule["value"], experts_source=f"{rule['said']} (data/engines.toml)")
