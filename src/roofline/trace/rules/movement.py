"""Rules of the ops that move data without arithmetic (gathers, copies, scatters, fills) and of the
free ones (views, metadata, allocations), registered at zero explicitly.
"""

from __future__ import annotations

from roofline.trace.rules.registry import Call, Cost, io_bytes, rule, written


@rule("aten::index_select", "aten::gather", "aten::index", "aten::_unsafe_index", category="gather")
def gather(call: Call) -> Cost:
    """Gather elements of ``self`` at the indices (an MoE dispatch, a row lookup): no FLOPs; the
    indices are read, the gathered elements read and the output written (as many as the output
    holds); the rest of ``self`` is never touched (the embedding rule's count)."""
    indices = sum(t.read_bytes for t in call.inputs[1:])
    return Cost(0.0, indices + 2 * written(call))


@rule(*(f"aten::{n}" for n in "clone _to_copy lift_fresh_copy cat stack index_put "
                                "scatter scatter_add slice_scatter select_scatter "
                                "repeat repeat_interleave tril triu tril_ triu_ flip roll constant_pad_nd "
                                "reflection_pad1d reflection_pad2d replication_pad1d replication_pad2d narrow_copy "
                                "masked_scatter _pdist_forward".split()), category="copy")
def copy(call: Call) -> Cost:
    """No FLOPs; inputs read, outputs written."""
    return Cost(0.0, io_bytes(call))


@rule("aten::copy_", category="copy")
def copy_(call: Call) -> Cost:
    """dst.copy_(src): src read, dst written (dst's old contents are not read)."""
    return Cost(0.0, call.tensor(1).read_bytes + written(call))


@rule("aten::index_put_", "aten::index_copy_", "aten::scatter_", category="copy")
def scatter_(call: Call) -> Cost:
    """In-place scatter into ``self`` (a KV-cache update): the indices and the new values are read
    and as many elements written; the rest of ``self`` is not touched."""
    values = call.inputs[-1]
    indices = sum(t.read_bytes for t in call.inputs[1:-1])
    return Cost(0.0, indices + 2 * values.read_bytes)


@rule("aten::index_add_", "aten::scatter_add_", "aten::scatter_reduce_", category="copy")
def scatter_add_(call: Call) -> Cost:
    """In-place accumulate into ``self`` (an MoE's combine of expert outputs): the indices and the
    new values read, as many elements of ``self`` read, added to and written: 1 FLOP each."""
    values = call.inputs[-1]
    indices = sum(t.read_bytes for t in call.inputs[1:-1])
    return Cost(float(values.numel), indices + 3 * values.read_bytes)


@rule("aten::embedding", category="gather")
def embedding(call: Call) -> Cost:
    """Gather rows of the (V, D) table: no FLOPs; the ids and the gathered rows are read, the
    (..., D) output written; the rest of the table is never touched (kernels.embedding_kernel)."""
    ids = call.tensor(1)
    return Cost(0.0, ids.read_bytes + 2 * written(call))


@rule(*(f"aten::{n}" for n in "fill_ zero_ zeros ones full zeros_like ones_like full_like arange scalar_tensor "
                                "rand randn randint rand_like randn_like normal_ uniform_ bernoulli_ linspace "
                                "new_zeros new_ones new_full".split()), category="fill")
def fill(call: Call) -> Cost:
    """No FLOPs; the output is written, nothing read."""
    return Cost(0.0, written(call))


# ---------------------------------------------------------------------------------------------
# free: views, metadata, allocations (and composites that cost nothing when they dispatch nothing)
# ---------------------------------------------------------------------------------------------

_FREE = """view _unsafe_view _reshape_alias reshape as_strided as_strided_ t transpose permute expand expand_as unsqueeze squeeze
select slice split split_with_sizes unbind chunk narrow detach alias lift_fresh view_as view_as_real
view_as_complex unfold diagonal real imag _conj conj resolve_conj resolve_neg _neg_view flatten unflatten
movedim swapaxes numpy_T mT empty empty_like empty_strided new_empty new_empty_strided resize_ set_
_local_scalar_dense item is_nonzero sym_size sym_stride sym_numel sym_storage_offset size stride numel
dim is_contiguous is_same_size result_type to contiguous dropout type_as detach_ _assert_async
_assert_tensor_metadata record_stream""".split()


@rule(*(f"aten::{n}" for n in _FREE), category="view")
def free(call: Call) -> Cost:
    """Views, metadata and allocations move no data: zero FLOPs, zero bytes."""
    return Cost(0.0, 0.0)
