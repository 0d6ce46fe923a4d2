"""The flags the planning commands repeat (issue 37), each declared once in roofline.parameters and made
into its flag by cli.args.add_declared: every command that takes one has its declared default, range and
help, read back from argparse (a command's own words for the help, where it says more, are named here)."""

from __future__ import annotations

import argparse

import pytest

from roofline.cli import build_parser
from roofline import tool_parameters as T
from roofline.cli.args import PREFIXES
from roofline.parameters import (BANDWIDTH_SCALE, COMPUTE_SCALE, DECODE_BATCHES, DECODE_BREAKDOWN, DP_LINK,
                                 FLOPS_CONVENTION, GLOBAL_BATCH, GPUS, GPUS_PER_NODE, HFU, MEMORY_FRACTION, MEMORY_MODE,
                                 MFU, MICRO_BATCH, MTP, NO_SEQUENCE_PARALLEL, PEAK_DTYPE, PLAN_ATTENTION, PRICE,
                                 RECOMPUTE, SEQ_LEN, SWEEP_OVER, SWEEP_PHASE, SWEEP_VALUES, TENSOR_PARALLEL, TP_LINK,
                                 TRAIN_GPUS_PER_NODE, TRAIN_PIPELINE_PARALLEL, TRAIN_TOKENS, VIEW_BY_NAME, ZERO)

ATTENTION = VIEW_BY_NAME["attention"]
# (the declaration, the commands whose flag it is, the commands that word its help their own way)
DECLARED = [
    (COMPUTE_SCALE, ("layer", "kernel", "plot", "decode", "train", "memory", "sweep", "serving"), ()),
    (BANDWIDTH_SCALE, ("layer", "kernel", "plot", "decode", "train", "memory", "sweep", "serving"), ()),
    (DECODE_BATCHES, ("decode",), ()),
    (TP_LINK, ("layer", "decode", "sweep", "serving", "train"), ("train",)),
    (DP_LINK, ("train",), ()),
    (GPUS_PER_NODE, ("layer", "decode", "sweep", "serving"), ()),
    (TRAIN_GPUS_PER_NODE, ("train",), ()),
    (TRAIN_PIPELINE_PARALLEL, ("train", "memory"), ("memory",)),
    (MEMORY_FRACTION, ("decode", "memory"), ("memory",)),
    (PRICE, ("train",), ()),
    (MTP, ("memory",), ()),
    (GPUS, ("train", "memory"), ("memory",)),
    (SEQ_LEN, ("train", "memory"), ("memory",)),
    (ZERO, ("train", "memory"), ("memory",)),
    (MICRO_BATCH, ("train", "memory"), ("memory",)),
    (GLOBAL_BATCH, ("train", "memory"), ("memory",)),
    (RECOMPUTE, ("train", "memory"), ("memory",)),
    # each command's own (train's --tokens adds the SI-prefix note to its help)
    (TRAIN_TOKENS, ("train",), ("train",)),
    (MFU, ("train",), ()),
    (HFU, ("train",), ()),
    (FLOPS_CONVENTION, ("train",), ()),
    (PEAK_DTYPE, ("train",), ()),
    (NO_SEQUENCE_PARALLEL, ("train",), ()),
    (MEMORY_MODE, ("memory",), ()),
    (DECODE_BREAKDOWN, ("decode",), ()),
    (SWEEP_OVER, ("sweep",), ()),
    (SWEEP_VALUES, ("sweep",), ()),
    (SWEEP_PHASE, ("sweep",), ()),
    # the commands that measure or read a measurement (roofline.tool_parameters), and the views' sizes they take
    (T.THREADS, ("calibrate", "check"), ()),
    (T.CALIBRATE_BUDGET, ("calibrate",), ()),
    (T.CHECK_BUDGET, ("check",), ()),
    (T.D_MODEL, ("check",), ()),
    (T.TRACE_BATCH, ("trace",), ()),
    (T.FORWARDS, ("profile",), ()),
    (T.MEASURED, ("diagnose",), ()),
    (T.RANK, ("diagnose",), ()),
    (T.FLOPS, ("diagnose",), ()),
    (T.BYTES, ("diagnose",), ()),
    (T.LIMIT, ("profile", "nsight"), ()),
    (VIEW_BY_NAME["tokens"], ("check", "trace"), ("check", "trace")),
    (VIEW_BY_NAME["context"], ("check", "trace"), ("check", "trace")),
    (VIEW_BY_NAME["batch"], ("check",), ("check",)),
    (VIEW_BY_NAME["phase"], ("check",), ()),
]


def _command(name):
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _action(command, flag):
    return next(a for a in _command(command)._actions if flag in a.option_strings)


@pytest.mark.parametrize("p, commands, worded", DECLARED, ids=lambda x: getattr(x, "name", ""))
def test_each_repeated_flag_has_its_declared_default_range_and_help(p, commands, worded):
    for command in commands:
        action = _action(command, p.flag)
        assert action.default == p.flag_default, (command, p.flag)
        if command not in worded:
            assert action.help == (p.cli_help() or None), (command, p.flag)
        if p.choices:
            assert tuple(action.choices) == p.choices, (command, p.flag)  # the default listed first
        if p.text or p.switch:
            continue
        typed = (lambda v: f"{v}s") if p.unit == "s" else str  # a time with its unit
        if p.maximum is not None:
            top = int(p.maximum) if p.integer else p.maximum
            taken = action.type(typed(top))
            assert (taken[-1] if p.many else taken) == top, (command, p.flag)
            with pytest.raises(argparse.ArgumentTypeError):
                action.type(typed(top + 1 if p.integer else top * 1.01))
        if p.strictly:
            with pytest.raises(argparse.ArgumentTypeError):
                action.type(typed(p.minimum))
        else:
            assert action.type(typed(p.minimum)) == p.minimum


def test_a_switch_is_false_unless_given():
    # `memory --mtp`: a flag without a value, False by default (memory's inference-only flags read the default)
    from roofline.cli.plan import MEMORY_INFERENCE_ONLY

    assert _action("memory", "--mtp").nargs == 0 and MTP.default is False
    assert MEMORY_INFERENCE_ONLY["mtp"] == MTP.default and MEMORY_INFERENCE_ONLY["memory_fraction"] == MEMORY_FRACTION.default


@pytest.mark.parametrize("command", ["decode", "train", "memory", "sweep", "serving"])
def test_the_planning_commands_take_the_declared_attention_flash_first(command):
    action = _action(command, "--attention")
    assert action.default == PLAN_ATTENTION and set(action.choices) == set(ATTENTION.choices)
    assert action.choices[0] == PLAN_ATTENTION  # --help lists the default first: {flash,naive}


def test_the_memory_fraction_is_the_librarys_bound_and_serving_takes_the_same_range():
    from roofline.plan.limits import ENGINE_MEMORY_FRACTION, MIN_MEMORY_FRACTION, check_memory_fraction
    from roofline.serving.parameters import BY_NAME

    assert (MEMORY_FRACTION.minimum, MEMORY_FRACTION.maximum, MEMORY_FRACTION.default) == (MIN_MEMORY_FRACTION, 1.0,
                                                                                          ENGINE_MEMORY_FRACTION)
    assert check_memory_fraction(MEMORY_FRACTION.minimum) == MEMORY_FRACTION.minimum
    serving = BY_NAME["memory_fraction"]
    assert (serving.minimum, serving.maximum, serving.strictly) == (MEMORY_FRACTION.minimum, MEMORY_FRACTION.maximum,
                                                                   MEMORY_FRACTION.strictly)
    assert (BY_NAME["price_per_gpu_hour"].minimum, BY_NAME["price_per_gpu_hour"].maximum) == (PRICE.minimum, PRICE.maximum)


def test_a_memory_train_flag_is_refused_in_inference_only_off_its_declared_default():
    """memory's training-only flags are refused with --mode inference when given: their defaults, the declared."""
    from roofline.cli.plan import MEMORY_TRAIN_ONLY

    for dest, p in (("gpus", GPUS), ("pp", TRAIN_PIPELINE_PARALLEL), ("zero", ZERO), ("micro_batch", MICRO_BATCH),
                    ("global_batch", GLOBAL_BATCH), ("seq_len", SEQ_LEN), ("recompute", RECOMPUTE)):
        assert MEMORY_TRAIN_ONLY[dest] == p.default == _action("memory", p.flag).default, dest


# lists whose items are a declared parameter's: serving's --sweep (concurrencies), --tp-search (tensor-parallel sizes)
# and decode's --breakdown (a batch of the table's)
@pytest.mark.parametrize("command, flag, p", [("serving", "--tp-search", TENSOR_PARALLEL),
                                              ("decode", "--breakdown", DECODE_BATCHES)])
def test_a_list_of_a_declared_parameter_takes_its_range(command, flag, p):
    action = _action(command, flag)
    taken = action.type(str(p.maximum))
    assert (taken[-1] if isinstance(taken, list) else taken) == p.maximum
    with pytest.raises(argparse.ArgumentTypeError):
        action.type(str(p.maximum + 1))


def test_the_serving_sweep_takes_the_declared_concurrency_range():
    from roofline.serving.parameters import BY_NAME

    p, action = BY_NAME["concurrency"], _action("serving", "--sweep")
    assert action.type(f"1,{p.maximum}") == [1, p.maximum]
    with pytest.raises(argparse.ArgumentTypeError):
        action.type(str(p.maximum + 1))


def test_a_commands_own_choices_and_defaults_are_the_librarys():
    from roofline.plan.sweep import AXES
    from roofline.plan.train_memory import CONVENTIONS
    from roofline.plan.training import train_plan

    assert SWEEP_OVER.choices == AXES and FLOPS_CONVENTION.choices == CONVENTIONS
    assert _action("train", "--tokens").help == TRAIN_TOKENS.cli_help() + PREFIXES
    assert _action("train", "--tokens").required and _action("sweep", "--over").required
    # no --mfu or --hfu: the declared MFU, 0.40 (the library's plan reports the one it ran at)
    assert MFU.default == 0.40
    assert train_plan("llama3-8b", tokens=1e12, gpus=8).mfu == pytest.approx(MFU.default)


def test_sweep_values_take_ranges_within_the_declared_range():
    action = _action("sweep", "--values")
    assert action.type("1:8:log:4") == [1, 2, 4, 8]
    with pytest.raises(argparse.ArgumentTypeError):
        action.type(f"1:{int(SWEEP_VALUES.maximum) + 1}:lin:2")


def test_every_declared_parameter_of_the_measuring_commands_is_held_to_its_flags():
    assert set(T.TOOL_PARAMS) <= {p for p, _, _ in DECLARED}


@pytest.mark.parametrize("command, flag, words", [("check", "--tokens", "(CPU default 512, CUDA 4096)"),
                                                  ("check", "--context", "(default --tokens)"),
                                                  ("trace", "--tokens", "(default 128)"),
                                                  ("trace", "--context", "(default 4096)")])
def test_a_measuring_commands_sizes_say_its_own_default_and_take_prefixes(command, flag, words):
    assert _action(command, flag).help.endswith(words + PREFIXES)
