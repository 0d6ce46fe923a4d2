"""The commands over the core: `roofline layer`, `kernel`, `machines`, `models` and `plot`.
"""

from __future__ import annotations

import json
import sys

from roofline.cli.args import calibrated_or_cost_model, cost_model_from_args, kernel_params, machine_from_args
from roofline.errors import RooflineError
from roofline.tables import dump_json
from roofline.units import GIGA, TERA, US


def _layers(args):
    from roofline.blocks import layer_reports

    args.cost_notes = getattr(args, "cost_notes", [])  # calibrated_or_cost_model says here what it chose over a profile
    machine = machine_from_args(args)
    dtype = args.dtype or machine.default_dtype
    model, t, all_reduce, link = args.model, int(getattr(args, "tp", 1) or 1), None, ""
    if t == 1 and getattr(args, "tp_link", None):
        raise RooflineError(f"--tp-link {args.tp_link} names the link of tensor-parallel all-reduces: give --tp 2 or more",
                            field="tp_link")
    if t > 1:  # one GPU's slice and its all-reduces, as the plan commands and serving shard it
        from roofline.kernels import all_reduce_kernel
        from roofline.plan.parallel import shard, tp_link
        from roofline.units import DTYPE_BYTES

        model = shard(model, t)
        link = tp_link(machine, args.tp_link, t, args.gpus_per_node)

        def all_reduce(rows, i):  # named as the layer's other repeated ops are: "residual add 2"
            return all_reduce_kernel(rows * model.d_model, t, link, DTYPE_BYTES[dtype],
                                     name=f"TP all-reduce{' ' + str(i) if i > 1 else ''} ({link})")
    return layer_reports(model, machine, args.phase, args.tokens, args.batch, args.context, args.attention,
                         dtype, calibrated_or_cost_model(args, machine), getattr(args, "layer", None), t, all_reduce, link)


def _layer(args):
    """The one report a plot draws: the layer asked for, or the model's only kind."""
    reports = _layers(args)
    if len(reports) > 1:
        from roofline.transformer import get_model

        get_model(args.model).only_kind("a layer plot")
    return reports[0]


def layer_dtype_notes(dtype: str, machine) -> list[str]:
    """What `layer --dtype` assumes for a dtype narrower than bf16: the workshop plate's one dtype for
    every tensor (activations and attention scores too), not the W8A8 engines run (the plan commands'
    --dtype); for a storage-only dtype (int4, fp4 without a peak), the bf16 peak as well."""
    from roofline.machines import STORAGE_ONLY
    from roofline.units import DTYPE_BYTES

    if DTYPE_BYTES.get(dtype, 2.0) >= 2.0:
        return []
    every = (f"every tensor here is {dtype} ({DTYPE_BYTES[dtype]:g} byte{'s' if DTYPE_BYTES[dtype] != 1 else ''} an "
             "element: weights, activations and attention scores), the workshop plate's convention")
    if dtype in STORAGE_ONLY and dtype not in machine.dtypes:
        return [f"{every}; {dtype} has no compute peak on {machine.the_name}, so the matmuls are priced at its "
                f"{STORAGE_ONLY[dtype]} peak. Weight-only {dtype} ({dtype} weights, {STORAGE_ONLY[dtype]} activations) is "
                f"`roofline decode --dtype {dtype}`"]
    bits = round(8 * DTYPE_BYTES[dtype])
    return [f"{every}; engines run {dtype} as W{bits}A{bits}, with bf16 activations between ops: `roofline decode "
            f"--dtype {dtype}` and the web's Whole model view price that"]




def cmd_layer(args):
    from roofline.blocks import storage_note
    from roofline.transformer import get_model

    reports = _layers(args)
    cfg = get_model(args.model)
    if args.json:
        return _print_layer_json(args, cfg, reports)
    if args.csv:
        return _print_layer_csv(args, cfg, reports)
    for line in cfg.header_lines():
        print(line)
    dtype_notes = layer_dtype_notes(reports[0].dtype, machine_from_args(args))
    stored = storage_note(cfg, reports[0].dtype, getattr(args, 'dtype', None) is not None)
    if stored:
        print(f"note: {stored}")
    for i, report in enumerate(reports):
        if i:
            print()
        _print_layer_report(args, cfg, report, i, len(reports))
    if len(reports) > 1:
        total = sum(r.prediction.total_s * r.layer_count for r in reports)
        print(f"\nall {cfg.n_layers} layers: {total / US:,.0f} us ("
              + ", ".join(f"{r.layer_count} x {r.prediction.total_s / US:,.1f} us" for r in reports)
              + "); embedding and LM head not included (see `roofline decode` / `roofline memory`)")
    for line in dtype_notes:
        print(f"\nnote: {line}")
    for line in dict.fromkeys(args.cost_notes):
        print(f"note: {line}")


def _print_layer_json(args, cfg, reports) -> None:
    """layer --json: one LayerReport's dict, or the model's with one per layer kind; with the notes."""
    from roofline.blocks import storage_note

    if len(reports) == 1:
        out = reports[0].to_dict()
    else:
        out = {"model": reports[0].model, "machine": reports[0].machine_key, "n_layers": cfg.n_layers,
               "pattern": cfg.pattern(), "layer_kinds": [r.to_dict() for r in reports]}
    stored = storage_note(cfg, reports[0].dtype, getattr(args, 'dtype', None) is not None)
    out["omitted"], out["notes"] = [x.words for x in cfg.omitted], (list(cfg.notes) + ([stored] if stored else [])
                                                       + layer_dtype_notes(reports[0].dtype, machine_from_args(args))
                                                       + list(dict.fromkeys(args.cost_notes)))
    print(dump_json(out))


def _print_layer_csv(args, cfg, reports) -> None:
    """layer --csv: the notes as # lines, then a row per op (with its layer kind where there are several)."""
    from roofline.blocks import storage_note
    from roofline.cli.args import print_csv_notes
    from roofline.cost import OP_FIELDS
    from roofline.tables import rows_to_csv

    stored = storage_note(cfg, reports[0].dtype, getattr(args, 'dtype', None) is not None)
    print_csv_notes([*cfg.header_lines(), *([stored] if stored else []),
                     *layer_dtype_notes(reports[0].dtype, machine_from_args(args)), *dict.fromkeys(args.cost_notes)])
    if len(reports) == 1:
        sys.stdout.write(reports[0].prediction.to_csv())
    else:
        rows = [{"layer_kind": r.layer_kind, "layers": r.layer_count, **op.to_dict()} for r in reports
                for op in r.prediction.ops]
        sys.stdout.write(rows_to_csv(rows, ("layer_kind", "layers", *OP_FIELDS)))


def _print_layer_report(args, cfg, report, i: int, kinds: int) -> None:
    """One layer (kind ``i`` of ``kinds``) as text: what ran, the cost model, the op table, its notes."""
    from roofline.measure.calibrated_predictions import calibration_notes
    from roofline.measured.model import measured_notes

    pred = report.prediction
    if report.phase == "prefill":
        where = f"T={report.tokens:,}" + (f" of context S={report.context:,}" if report.context != report.tokens else "")
    else:
        where = f"context S={report.context:,}"
    if cfg.is_uniform:
        what = "one block"
    elif getattr(args, "layer", None) is not None:
        what = f"layer {report.layer_index} ({report.layer_kind}; {report.layer_count} of {report.n_layers} layers are this kind)"
    else:
        what = f"layer kind {i + 1} of {kinds}: {report.layer_kind}, {report.layer_count} of {report.n_layers} layers"
    m = pred.model
    tp = ""
    if report.tensor_parallel > 1:
        from roofline.blocks import layer_qk_norm_all_reduces

        layer = cfg.layer(report.layer_index)
        n = layer.tp_all_reduces
        qk = layer_qk_norm_all_reduces(layer, cfg.model_type)  # a layer-wide q/k norm's variances (model_ops.qk_norm_all_reduce_op)
        tp = (f", one GPU's 1/{report.tensor_parallel} (tensor parallel; {n} all-reduce{'s' if n > 1 else ''} "
              + (f"and {qk} of the q/k norm's variances " if qk else "") + f"over {report.tp_link})")
    # naive is the plate's own view (its unfused layer); the plan commands and serving run flash, as engines do
    attention = ("naive attention (the plate's unfused layer; engines run flash)" if report.attention == "naive"
                 else f"{report.attention} attention")
    print(f"{cfg.name}: {what}, {report.phase} {where}, batch {report.batch}, {attention}, "
          f"{report.dtype}{tp}, on {pred.machine}")
    if getattr(m, "compute_efficiency", None) is not None:
        measured = m.priced_by(cfg, report.tensor_parallel) if hasattr(m, "measured_on") else m.priced_by()
        print(f"e_c {m.compute_efficiency:.2f}, e_m {m.memory_efficiency:.2f}, launch {m.launch_overhead_s / US:g} us"
              f"{' (CUDA graph)' if m.cuda_graph else ''}, overlap {m.overlap:g}" + (f"\n{measured}" if measured else "")
              + "\n")
    else:  # a calibrated profile: its own description (one home: CalibratedModel.describe)
        print(f"{m.describe()}; each op's compute and memory columns include its fitted correction\n")
    print(report.to_table())
    for line in calibration_notes(pred.ops) + measured_notes(pred.ops):
        print(f"note: {line}")


def cmd_machines(args):
    if args.measured:
        return _measured_tables(args)
    from roofline.machines import list_machines

    ms = list_machines()
    if args.json:
        print(dump_json([_machine_dict(m) for m in ms]))
        return
    from roofline.tables import grid

    rows = []
    for m in ms:
        rows.append([m.key, m.name, m.default_dtype, f"{m.peak_flops / TERA:,.1f}", f"{m.bandwidth / TERA:.2f}",
                     f"{m.ridge_point:,.0f}", f"{m.memory_bytes / GIGA:,.0f}" if m.memory_bytes else "-",
                     f"{m.usable_memory_bytes / GIGA:,.1f}" if m.usable_memory_bytes else "-",
                     f"{m.launch_overhead_s / US:g}" if m.launch_overhead_s else "-"])
    print(grid(["key", "name", "dtype", "dense TFLOP/s", "TB/s", "ridge FLOP/B", "GB", "driver GB", "launch us"], rows,
               [False, False, False, True, True, True, True, True, True]))
    print("\nDense peaks (no 2:4 sparsity) at the default dtype. GB: the datasheet's memory; driver GB: what nvidia-smi "
          "reports, where a source gives it (plans size the KV cache and check fits against it). Every figure's source: "
          "`roofline machines --json`.")


def _measured_tables(args):
    """`roofline machines --measured`: each GPU and engine with measured kernel tables, its versions,
    and per op family the points of its newest version (measured.inventory)."""
    from roofline.measured import inventory
    from roofline.measured.tables import ENGINES
    from roofline.measured.tables import resolve, version_key

    sets = inventory()
    groups: dict = {}
    for ts in sets:
        groups.setdefault((ts.gpu, ts.engine), []).append(ts)
    out = []
    for (gpu, engine), items in sorted(groups.items()):
        newest = {f: resolve(items[0].machine, engine, f) if items[0].machine and engine in ENGINES else
                  max((t for t in items if t.family == f), key=lambda t: version_key(t.version))
                  for f in {t.family for t in items}}
        versions = sorted({t.version for t in items}, key=version_key)
        out.append({"gpu": gpu, "machine": items[0].machine, "engine": engine, "versions": versions,
                    # what --kernels / --engine ENGINE@VERSION take: a version with GEMM tables (for_machine resolves them)
                    "selectable_versions": [v for v in versions if any(t.version == v and t.family == "gemm" for t in items)]
                    if engine in ENGINES else [],
                    "families": {f: {"version": t.version, "points": t.rows} for f, t in sorted(newest.items())}})
    if args.json:
        print(dump_json(out))
        return
    from roofline.tables import grid

    rows = [[o["machine"] or f"({o['gpu']})", o["engine"], ", ".join(o["selectable_versions"]) or "-",
             ", ".join(v for v in o["versions"] if v not in o["selectable_versions"]) or "-",
             ", ".join(f"{f} {v['points']:,}" for f, v in o["families"].items())] for o in out]
    print(grid(["machine", "engine", "@VERSION takes", "other versions (no GEMM tables)",
                "op families: points of the version used by default"], rows, [False] * 5))
    print("\nMeasured kernel latencies of aiconfigurator-core (Apache-2.0), read directly. A GPU in parentheses has no "
          "preset here and cannot be chosen; `--kernels ENGINE[@VERSION]` picks an engine: by default the version the package queries (trtllm 1.3.0rc20, "
          "vllm 0.24.0, sglang 0.5.14 on most GPUs) where it holds the family, else the newest that does. `--kernels` and "
          "`--engine ENGINE@VERSION` take a version with GEMM tables (\"@VERSION takes\"); the other versions hold "
          "other families only (an engine's defaults of another version run with --kernels ENGINE: its default tables).")


def _machine_dict(m):
    return {
        "key": m.key, "name": m.name, "vendor": m.vendor, "default_dtype": m.default_dtype,
        "peak_flops": m.peak_flops, "bandwidth": m.bandwidth, "ridge_point": m.ridge_point,
        "peaks_flops_per_s": dict(m.peaks), "memory_bytes": m.memory_bytes,
        "usable_memory_bytes": m.usable_memory_bytes, "capacity_bytes": m.capacity_bytes, "l2_bytes": m.l2_bytes,
        "sm_count": m.sm_count, "links_bytes_per_s": dict(m.links), "launch_overhead_s": m.launch_overhead_s,
        "sources": dict(m.sources),
    }


def cmd_models(args):
    from roofline.transformer import get_model, list_models, model_summary

    models = [get_model(args.model)] if getattr(args, "model", None) else list_models()
    if args.json:
        print(dump_json([model_summary(m) for m in models]))
        return
    from roofline.tables import grid

    if getattr(args, "model", None):
        m = models[0]
        d = model_summary(m)
        print(f"{m.name} ({m.model_type}): {d['params']:,} parameters"
              + (f", {d['active_params']:,} active per token (embedding and LM head in)" if m.is_moe else ""))
        print(f"layers: {m.pattern()}")
        if d["mtp"]:
            t = d["mtp"]
            print(f"multi-token prediction: {t['depth']} x ({t['layer_kind']} + eh_proj 2D -> D + 3 RMSNorms), "
                  f"{t['params']:,} parameters of its own, not in the total above (the embedding and LM head shared "
                  f"with the model; {t['source']})" + ("" if any(getattr(k.mixer, "index_topk", 0) for k in m.kinds) else
                                                      "; `roofline serving --draft mtp` drafts with it"))
        print(f"weights as stored: {d['weights_stored']}")
        for line in m.header_lines():
            print(line)
        return
    rows = []
    for m in models:
        d = model_summary(m)
        kinds = "; ".join(f"{k['count']} x {k['kind']}" for k in d["layer_kinds"])
        active = f"{d['active_params']:,}" if m.is_moe else "-"
        rows.append([m.key, m.name, f"{d['params']:,}", active, m.n_layers, kinds])
    print(grid(["key", "name", "params", "active", "L", "layer kinds"], rows, [False, False, True, True, True, False]))
    from roofline.model_sources import preset_aliases

    if preset_aliases():
        print("\nAliases (older keys that still work): " + ", ".join(f"{a} = {k}" for a, k in preset_aliases().items()) + ".")
    print("\nActive: parameters one token touches, embedding and LM head in. `roofline models MODEL` for one model's "
          "layer pattern, storage and notes; --json for every count.")


WIDTH_PARAMS = ("bytes_per_elem", "bytes_per_param")  # the kernels' element-width parameters


def _with_dtype(name: str, params: dict, dtype: str | None) -> dict:
    """``params`` with --dtype (or a dtype=NAME parameter) as the kernel's element width
    (bytes_per_elem or bytes_per_param): one width, refused where two disagree."""
    from roofline.kernels import kernel_parameters

    given = params.pop("dtype", None)
    if given is not None and dtype is not None and given != dtype:
        raise RooflineError(f"dtype={given} and --dtype {dtype} disagree: give one", field="dtype")
    dtype = dtype or given
    if dtype is None:
        return params
    width = next((p.name for p in kernel_parameters(name) if p.name in WIDTH_PARAMS), None)
    if width is None:
        raise RooflineError(f"kernel {name} takes no element width: --dtype {dtype} does not apply", field="dtype")
    if width in params:
        raise RooflineError(f"--dtype {dtype} and {width}={params[width]} both give the element width: give one",
                            field="dtype")
    return {**params, width: dtype}


def cmd_kernel(args):
    from roofline.cost import roofline_bound, time_lower_bound
    from roofline.kernels import build_kernel

    machine = machine_from_args(args)
    kernel = build_kernel(args.name, _with_dtype(args.name, kernel_params(args.param), args.dtype))
    model = cost_model_from_args(args, machine)
    op = model.predict_op(kernel, machine)
    bound = float(time_lower_bound(kernel, machine))
    if args.json:
        print(json.dumps({"machine": machine.key or machine.name, "kernel": args.name, **op.to_dict(),
                          "roofline_s": bound, "ridge_point": machine.ridge(kernel.dtype),
                          "attainable_flops_per_s": machine.attainable(kernel.intensity, kernel.dtype)}, indent=2))
        return
    from roofline.units import format_intensity, format_si

    print(f"{kernel.name} on {machine.name} ({kernel.dtype})")
    print(f"  FLOPs      {format_si(kernel.flops, 'FLOP')}")
    print(f"  bytes      {format_si(kernel.bytes, 'B')}")
    if getattr(kernel, "link", None):
        print(f"  link       {kernel.link} at {format_si(machine.link(kernel.link), 'B/s')} per direction: link-bound")
        print(f"  roofline   {bound / US:,.2f} us (speed of light)")
        print(f"  predicted  {op.time_s / US:,.2f} us at e_m {model.memory_efficiency:g}, launch {model.launch_overhead_s / US:g} us")
        return
    side = roofline_bound(kernel, machine)
    print(f"  intensity  {format_intensity(kernel.intensity)} FLOP/B, {'left' if side == 'memory' else 'right'} of the "
          f"ridge at {machine.ridge(kernel.dtype):,.0f}: {side}-bound")
    print(f"  attainable {format_si(machine.attainable(kernel.intensity, kernel.dtype), 'FLOP/s')}")
    print(f"  roofline   {bound / US:,.2f} us (speed of light)")
    print(f"  predicted  {op.time_s / US:,.2f} us at e_c {model.compute_efficiency:g}, e_m {model.memory_efficiency:g},"
          f" launch {model.launch_overhead_s / US:g} us")


def cmd_plot(args):
    from roofline.cli.args import check_output

    out = check_output(args.output, (".png", ".svg"))
    if args.what == "roofline":
        from roofline.plots import plot_roofline, seed_kernels

        from roofline.cli.args import machine_names

        names = machine_names(args.machine)
        machines = [machine_from_args(args, m) for m in names]
        if args.kernels in ("seed", "layer"):  # the old spelling of --ops, kept for a release
            args.deprecation_notes.append(f"--kernels {args.kernels} is deprecated and goes in the next release: use "
                                          f"--ops {args.kernels} (--kernels names an engine's measured kernels)")
            args.ops = args.kernels
        elif args.kernels is not None:
            raise RooflineError("--kernels draws measured kernels in `roofline plot atlas`; the roofline's kernel set "
                                "is --ops seed|layer", field="kernels")
        if args.ops == "seed":
            kernels = seed_kernels()
        else:
            from roofline.blocks import block_kernels

            kernels = block_kernels(args.model, args.phase, args.tokens, args.batch, args.context, args.attention,
                                    args.dtype or machines[0].default_dtype)
        plot_roofline(machines, kernels, out)
    elif args.what == "atlas":
        if not args.kernels:
            raise RooflineError("plot atlas draws an engine's measured kernels: give --kernels trtllm, vllm or sglang "
                                "(`roofline machines --measured` lists them)", field="kernels")
        from roofline.measured.atlas import atlas
        from roofline.plots import plot_atlas

        m = machine_from_args(args)
        result = atlas(args.model, m, args.kernels, args.dtype)  # None: as stored, else the machine's dtype
        plot_atlas(result, out)
        shares = sorted({p.family for p in result.points})
        print(f"{len(result.points)} measured ops of {result.model} ({', '.join(shares)}) from {result.tables} on {m.name}")
        for name, why in result.left_out:
            print(f"note: {name} left out: {why}")
    else:
        from roofline.plots import plot_layer

        plot_layer(_layer(args), out)
    print(f"wrote {out}")
