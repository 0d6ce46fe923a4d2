"""A whole model's forward pass as counted ops, and their sums (docs/planning.md).

A model is L blocks (``blocks.layer_kernels``) + the embedding gather + the final norm + the LM
head and, with tensor parallelism t > 1, two all-reduces per block over a link (Megatron-LM: one
after attention's output projection, one after the MLP's down projection; Shoeybi et al. 2019,
arXiv:1909.08053, section 3). Each kind of op is predicted once and multiplied by its count
(max(L c, L m) = L max(c, m)), so a sweep over batch, tokens or context is one numpy call.

Traffic split. An op's bytes are weights (a matmul's K x N operand; the embedding rows gathered),
KV cache (keys and values that decode attention reads) and activations (everything else).
blocks.py prices all three at one width; ``requantised_row`` re-prices the weight and KV parts at
their own: bytes' = bytes + (w_w - w_a) weight_elems + (w_kv - w_a) kv_elems. Matmuls run at the
peak of the wider of the weight and activation dtypes (the narrower operand is up-converted, as
in weight-only int4 kernels); every other op at the activation dtype.

Letters: B batch, T prompt tokens, S context (keys cached), D d_model, h = H d_head, K kv heads,
F d_ff, V vocab, L layers, E experts, t tensor-parallel degree.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from roofline.blocks import Workload, check_size, layer_qk_norm_all_reduces, layer_rows, qk_norm_all_reduce_op
from roofline.cost import (CostModel, WorkloadPrediction, bytes_bind, bytes_per_s, link_latency_s,
                           seed_cost_model)
from roofline.errors import RooflineError
from roofline.kernels import FUSED_ATTENTION, MOE_EXPERTS, PLAIN_SCALARS, Kernel, all_reduce_kernel, kernel_row
from roofline.op_counts import gather_bytes, matmul_counts, norm_flops_per_element, row_op_counts
from roofline.machines import Machine, get_machine
from roofline.plan.parallel import shard
from roofline.plan.precision import Precision
from roofline.transformer import get_model
from roofline.units import DTYPE_BYTES


@dataclass(frozen=True)
class CountedOp:
    """A kernel run ``count`` times per forward pass, with its weight and KV-cache bytes (per run)
    and the layer kind it belongs to (``group``: a letter of Model.pattern(), "" outside layers)."""

    kernel: Kernel
    count: int
    weight_bytes: object = 0.0
    kv_bytes: object = 0.0
    group: str = ""


def counted_op(row: tuple) -> CountedOp:
    """The CountedOp of a model_rows row, its kernel made from the row's kernel fields."""
    k, n, weight_bytes, kv_bytes, group = row
    return CountedOp(Kernel.of_row(k), n, weight_bytes, kv_bytes, group)


def requantised(k: Kernel, precision: Precision) -> tuple[Kernel, object, object]:
    """The kernel with its weight and cache parts at their own widths (requantised_row), and those
    parts in bytes; ``k`` itself when it is already priced at them."""
    row = k.as_row()
    q, weight_bytes, kv_bytes = requantised_row(row, precision)
    return (k if q is row else Kernel.of_row(q)), weight_bytes, kv_bytes


def requantised_row(row: tuple, precision: Precision) -> tuple[tuple, object, object]:
    """A kernel row (kernels.kernel_row) with its weight and cache parts at their own widths (the
    row carries their element counts), and those parts in bytes: bytes' = bytes + (w_w - w_a)
    weight_elems + (w_kv - w_a) cache_elems. The same row when it is already priced at them."""
    name, flops, moved, category, dtype, link, weight_elems, cache_elems, part, shape = row
    wa, wkv = DTYPE_BYTES[precision.activations], DTYPE_BYTES[precision.kv_cache]
    ww = precision.weight_width(part)
    to_dtype = precision.compute_for(part) if category == "matmul" else precision.activations
    to_shape = shape
    if shape and shape[0] == MOE_EXPERTS:  # the experts' weights as stored or quantised (a measured MoE table's key)
        to_shape = (*shape[:-2], precision.weight_format("experts"), precision.compute_for("experts"))
    elif shape and shape[0] == FUSED_ATTENTION:  # the KV cache's dtype (a measured attention table's key)
        to_shape = (*shape[:-1], precision.kv_cache)
    if ww == wa and wkv == wa and to_dtype == dtype and to_shape == shape:  # already priced at these widths
        return row, ww * weight_elems, wkv * cache_elems
    moved = moved + (ww - wa) * weight_elems + (wkv - wa) * cache_elems
    return ((name, flops, moved, category, to_dtype, link, weight_elems, cache_elems, part, to_shape),
            ww * weight_elems, wkv * cache_elems)


# ---------------------------------------------------------------------------------------------
# The ops of a whole model outside its layers: the one builder of each, which model_rows (the
# planner) and StepLayout (the serving step) both call. Sizes trusted (validated at the edge).
# ---------------------------------------------------------------------------------------------

def embedding_op(M, D, wa: str, kernel=Kernel.trusted) -> Kernel:
    """The embedding gather of M rows of the (V, D) table at activation dtype ``wa``
    (op_counts.gather_bytes); the M D elements read are weights of part "embedding". ``kernel``
    makes it (kernels.kernel_row: a row)."""
    return kernel("embedding", 0.0 * M, gather_bytes(M, D, DTYPE_BYTES[wa]), "gather", wa, None, M * D, 0.0, "embedding")


def tp_all_reduce_op(M, D, t: int, link: str, wa: str) -> Kernel:
    """One tensor-parallel all-reduce of the (M, D) activations among t GPUs over ``link``
    (kernels.all_reduce_kernel). A model runs Layer.tp_all_reduces of them a layer (tp_all_reduces)."""
    return all_reduce_kernel(M * D, t, link, wa, name=f"TP all-reduce ({link})")


def qk_norm_all_reduces(model) -> int:
    """qk_norm_all_reduce_op's a forward pass runs under tensor parallelism (layer_qk_norm_all_reduces, summed)."""
    return sum(n * layer_qk_norm_all_reduces(kind, model.model_type) for kind, n in model.kind_counts())


def tp_all_reduces(model) -> int:
    """All-reduces a forward pass runs under tensor parallelism: each layer's Layer.tp_all_reduces
    (Megatron-LM: one after the mixer's output projection, one after the MLP's down projection; a
    parallel hybrid's two mixers reduce apart)."""
    return sum(n * kind.tp_all_reduces for kind, n in model.kind_counts())


def logits_ops(R, model, wa: str, gemm_shape: bool = True, kernel=Kernel.trusted) -> list[Kernel]:
    """The final norm and the LM head on R rows (one a sequence that samples a token), on one GPU of
    ``model`` (its tensor-parallel slice: V its share of the vocabulary): the norm over (R, D)
    (op_counts.row_op_counts) and (R, D) @ (D, V) (op_counts.matmul_counts), its (D, V) weights of
    part "embedding" when tied, else "lm_head". ``gemm_shape``: the LM head carries its GEMM's
    (1, R, V, D), what a measured GEMM table is read at (the serving step's tables are by R: none).
    ``kernel`` makes each (kernels.kernel_row: rows)."""
    D, V, w = model.d_model, model.vocab, DTYPE_BYTES[wa]
    norm_flops, norm_bytes = row_op_counts(R * D, norm_flops_per_element(model.final_norm), w)
    head_flops, head_bytes = matmul_counts(R, V, D, w)
    return [kernel("final norm", norm_flops, norm_bytes, "norm", wa),
            kernel("LM head", head_flops, head_bytes, "matmul", wa, None, D * V, 0.0,
                   "embedding" if model.tied_embeddings else "lm_head", (1, R, V, D) if gemm_shape else ())]


def context_of(phase: str, tokens, context):
    """Keys each query attends over: the prompt itself in prefill (or ``context`` for a
    chunked-prefill step); the cached ``context`` in decode (``tokens`` when no context is given)."""
    return tokens if context is None else context


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_BF16 = Precision()  # the default, made once (frozen)
_new = object.__new__  # a frozen object made without its per-field __setattr__ (_scalar_totals' Totals)


def model_ops(model, phase="decode", tokens=1, batch=1, context=None, attention="flash", precision=None,
              tensor_parallel=1, link=None) -> list[CountedOp]:
    """One forward pass of the whole model on one GPU, in order: embedding gather, each distinct
    layer kind's ops (each counted as many times as layers have that kind; ops grouped by kind),
    the tensor-parallel all-reduces over ``link`` (required when t > 1; one per sub-layer, one per
    parallel block), the final norm and the LM head. Prefill: T = ``tokens`` per sequence (the last
    T of ``context`` positions when given); the final norm and LM head run on the last token only
    (B rows: time to first token needs one set of logits). Decode: one token per sequence against
    S = ``context`` cached. Sizes may be numpy arrays (they broadcast)."""
    if int(tensor_parallel) > 1 and link is None:
        raise RooflineError("tensor parallelism needs the link its all-reduces cross (predict_model defaults to the "
                            "machine's scale-up link)", field="link")
    return model_ops_without_links(model, phase, tokens, batch, context, attention, precision, tensor_parallel, link)


def model_ops_without_links(model, phase, tokens, batch, context, attention, precision, tensor_parallel,
                            link) -> list[CountedOp]:
    """model_ops without its refusal: with ``link`` None and t > 1 the all-reduces are left out (for
    plan.memory's weight and KV sums, which no link changes)."""
    return [counted_op(row) for row in model_rows(model, phase, tokens, batch, context, attention, precision,
                                                  tensor_parallel, link)]


def model_rows(model, phase, tokens, batch, context, attention, precision, tensor_parallel, link) -> list[tuple]:
    """model_ops_without_links as rows: each CountedOp's fields (kernel, count, weight_bytes, kv_bytes,
    group) in a tuple, the kernel itself a row of its fields (kernels.kernel_row): a whole-model
    analysis makes no object per op (predict_model makes them on first use: counted_op)."""
    cfg = get_model(model)
    precision = precision or _BF16
    sh = cfg if type(tensor_parallel) is int and tensor_parallel == 1 else shard(cfg, tensor_parallel)
    t = int(tensor_parallel)
    wa = precision.activations
    decode = phase == "decode"
    if decode:
        w = Workload.of("decode", None, batch, context_of(phase, tokens, context))
    else:
        w = Workload.of("prefill", tokens, batch, context)
    check_size(cfg, w)
    M = w.batch * w.tokens
    D = cfg.d_model
    w_a = DTYPE_BYTES[wa]
    plain = precision is _BF16 or (precision.stored is None and precision.weights == precision.kv_cache == wa
                                   and not precision.kept("lm_head"))

    def rows(ops, n, group=""):
        if plain:  # nothing to re-price: weights (r[6], elements) and cache (r[7]) at the activation width
            return [(r, n, w_a * r[6], w_a * r[7], group) for r in ops]
        return [(q, n, wbytes, kvbytes, group) for q, wbytes, kvbytes in (requantised_row(r, precision) for r in ops)]

    out = rows([embedding_op(M, D, wa, kernel_row)], 1)
    kinds = sh.kind_counts()
    multi = len(kinds) > 1
    for kind, n in kinds:
        ops = layer_rows(kind, D, decode, w.tokens, w.batch, w.context, attention, wa)
        if multi:
            group = LETTERS[sh.kinds.index(kind)]
            out += rows([(f"{group}: {r[0]}", *r[1:]) for r in ops], n, group)
        else:
            out += rows(ops, n)
    if t > 1 and link is not None:
        out += rows([tp_all_reduce_op(M, D, t, link, wa).as_row()], tp_all_reduces(sh))
        if qk_norm_all_reduces(sh):
            out += rows([qk_norm_all_reduce_op(M, t, link).as_row()], qk_norm_all_reduces(sh))
    return out + rows(logits_ops(w.batch, sh, wa, True, kernel_row), 1)  # on the last token of each sequence


def predict_counted(ops: list[CountedOp], machine, cost_model: CostModel) -> WorkloadPrediction:
    """Predict each op once and scale by its count. Each run pays one launch; with a CUDA graph
    the whole pass pays one, shared by all runs."""
    machine = get_machine(machine)
    runs = sum(op.count for op in ops)
    per_run = cost_model.launch_overhead_s / runs if cost_model.cuda_graph else None
    preds = []
    for op in ops:
        p = cost_model.predict_op(op.kernel, machine, per_run)
        preds.append(p.times(op.count) if op.count != 1 else p)
    return WorkloadPrediction.from_ops(machine.name, cost_model, tuple(preds))


def default_cost_model(machine: Machine) -> CostModel:
    """The workshop's cost model (cost.seed_cost_model) with the machine's preset launch overhead
    (one frozen CostModel per launch overhead, made once)."""
    return _seed_model(machine.launch_overhead_s)


@functools.lru_cache(maxsize=64)
def _seed_model(launch_overhead_s: float) -> CostModel:
    return seed_cost_model(launch_overhead_s=launch_overhead_s)


@dataclass(frozen=True)
class Totals:
    """Sums over a pass's ops (arrays when a size was): seconds by the limit that binds each op,
    FLOPs and bytes, the matmuls' share, and the weight and KV-cache bytes read."""

    time_s: object = 0.0
    memory_time_s: object = 0.0
    compute_time_s: object = 0.0
    link_time_s: object = 0.0
    launch_s: object = 0.0
    flops: object = 0.0
    bytes: object = 0.0
    weight_bytes: object = 0.0
    kv_bytes: object = 0.0
    gemm_flops: object = 0.0
    gemm_weight_bytes: object = 0.0
    gemm_compute_s: object = 0.0
    gemm_memory_s: object = 0.0


def totals(ops: list[CountedOp], machine, cost_model: CostModel) -> Totals:
    """The same arithmetic as predict_counted (cost.op_times per op, times its count), summed
    without building per-op results: the fast path for sweeps. An op is memory- (or link-) bound
    when moving its bytes takes longer than its arithmetic, as in CostModel.predict_op."""
    rows = [(op.kernel.as_row(), op.count, op.weight_bytes, op.kv_bytes, op.group) for op in ops]
    return totals_of_rows(rows, get_machine(machine), cost_model)


def totals_of_rows(rows: list[tuple], machine: Machine, cm: CostModel, plain: bool = False) -> Totals:
    """totals() of rows (kernel row, count, weight_bytes, kv_bytes, group): model_rows' and CountedOp's
    fields. ``plain``: the caller's word that every op's FLOPs and bytes are plain numbers (its sizes
    were: predict_model's ints); else each op is looked at, and one array takes the general path."""
    # with a CUDA graph the pass's one launch is shared by all its runs
    launch = cm.launch_overhead_s / sum([row[1] for row in rows]) if cm.cuda_graph else cm.launch_overhead_s
    if type(cm) is CostModel and (plain or all(type(r[0][1]) in PLAIN_SCALARS and type(r[0][2]) in PLAIN_SCALARS
                                               for r in rows)):
        return _scalar_totals(rows, machine, cm, launch)
    acc = dict.fromkeys(Totals.__dataclass_fields__, 0.0)
    for row, n, weight_bytes, kv_bytes, _group in rows:
        k = Kernel.of_row(row)
        c, m, t = cm.op_seconds(k, machine, launch)  # a calibrated model's measured rates, or e_c and e_m
        moving = bytes_bind(c, m)
        t = t * n
        acc["time_s"] += t
        acc["link_time_s" if k.link else "memory_time_s"] += t * moving
        acc["compute_time_s"] += t * ~moving
        acc["launch_s"] += launch * n
        acc["flops"] += k.flops * n
        acc["bytes"] += k.bytes * n
        acc["weight_bytes"] += weight_bytes * n
        acc["kv_bytes"] += kv_bytes * n
        if k.category == "matmul":
            acc["gemm_flops"] += k.flops * n
            acc["gemm_weight_bytes"] += weight_bytes * n
            acc["gemm_compute_s"] += c * n
            acc["gemm_memory_s"] += m * n
    return Totals(**acc)


def _scalar_totals(rows: list[tuple], machine: Machine, cm: CostModel, launch: float) -> Totals:
    """totals() for ops whose FLOPs and bytes are plain numbers (PLAIN_SCALARS): cost.op_times'
    arithmetic in Python floats, overlapped_s and bytes_bind written inline (the same expressions:
    time = max(c, m) + (1 - overlap) min(c, m) + launch; memory binds when m > c), without numpy's
    or a call's per-op overhead. The products e_c peak and e_m bandwidth are made once (the same floats);
    each sum adds its terms in the ops' order, as the general path does."""
    e_c, e_m, slack = cm.compute_efficiency, cm.memory_efficiency, 1.0 - cm.overlap
    hbm = e_m * machine.bandwidth
    peaks: dict[str, float] = {}  # e_c x the dtype's peak
    time_s = memory_s = compute_s = link_s = flops = moved = wbytes = kvbytes = 0.0
    g_flops = g_wbytes = g_c = g_m = 0.0
    runs = 0
    for (name, f, b, category, dtype, link, weight_elems, cache_elems, part, shape), n, weight_bytes, kv_bytes, _group in rows:
        runs += n
        n = float(n)  # the same products (an int count converts exactly), at the float-by-float speed
        try:
            c = f / peaks[dtype]
        except KeyError:
            c = f / peaks.setdefault(dtype, e_c * machine.peak(dtype))
        if link is None:
            m = b / hbm
        else:  # a collective: its link's bandwidth and fixed cost read its shape
            k = Kernel.trusted(name, f, b, category, dtype, link, weight_elems, cache_elems, part, shape)
            bw = bytes_per_s(k, machine)
            m = b / (e_m * bw) + link_latency_s(k, bw, e_m, cm.launch_overhead_s)
        # overlapped_s + launch, times the runs; at overlap 1 (slack 0) the shorter adds nothing
        if m > c:  # bytes_bind
            t = ((m + slack * c if slack else m) + launch) * n
            if link is None:
                memory_s += t
            else:
                link_s += t
        else:
            t = ((c + slack * m if slack else c) + launch) * n
            compute_s += t
        time_s += t
        f_n = f * n
        flops += f_n
        moved += b * n
        if weight_bytes:  # 0.0 for most ops but matmuls: adding 0.0 x n changes no sum, so it is skipped
            w_n = weight_bytes * n
            wbytes += w_n
        else:
            w_n = 0.0
        if kv_bytes:
            kvbytes += kv_bytes * n
        if category == "matmul":
            g_flops += f_n
            g_wbytes += w_n
            g_c += c * n
            g_m += m * n
    out = _new(Totals)  # the frozen dataclass's fields set in place (its __init__ sets them one by one)
    d = out.__dict__
    d["time_s"], d["memory_time_s"], d["compute_time_s"], d["link_time_s"] = time_s, memory_s, compute_s, link_s
    d["launch_s"], d["flops"], d["bytes"], d["weight_bytes"], d["kv_bytes"] = launch * runs, flops, moved, wbytes, kvbytes
    d["gemm_flops"], d["gemm_weight_bytes"], d["gemm_compute_s"], d["gemm_memory_s"] = g_flops, g_wbytes, g_c, g_m
    return out
