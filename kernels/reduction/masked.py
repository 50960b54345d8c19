"""Masked vec4 reductions: vec4 loads that are right for any row length (see :mod:`wgtune.kernels.reduction`).

A plain vec4 candidate binds ``x`` as ``array<vec4<f32>>`` and needs ``cols % 4 == 0``, so that
every row starts on a vec4. A *masked* one (``ReductionVariant(masked=True)``) binds it the same
way but reads, for a range of elements ``[lo, hi)`` (a row, or a chunk of one), the aligned
vec4 ``lo / 4`` up to ``ceil(hi / 4)``, and replaces the lanes outside ``[lo, hi)`` by the
operation's identity (0 for sum; ``-inf``, made at run time, for max): every element is read
once, by a vec4 load, whatever the alignment. Masking every vec4 costs a few integer operations
a load, which a memory-bound loop has to spare.

One gap remains: an ``array<vec4<f32>>`` binding ends at the last whole vec4 of the buffer, so
where ``rows * cols`` is not a multiple of 4 the last one to three elements of ``x`` cannot be
read through it. The candidate's last stage reads them through an ``array<f32>`` binding and
combines them into their rows' results: the second stage of ``split`` candidates does it
alongside its work (:func:`split_final_wgsl` of a masked variant); ``row`` and ``pack`` candidates
get a stage of their own, :func:`tail_wgsl`, one invocation (dispatched only where there is a
tail: its grid is empty otherwise).
"""

from __future__ import annotations

from .wgsl import (
    SCRATCH,
    Op,
    ReductionVariant,
    _combine,
    _header,
    _shared,
    _signature,
    _strided_fold,
    _tree,
    _workgroup_combine,
)

__all__ = ["masked_pack_wgsl", "masked_row_wgsl", "masked_split_wgsl", "tail_wgsl"]

# -inf for max, made from a uniform so that it is no constant expression (a constant infinity is a
# WGSL error); p.cols is never below 0, so the min is 0.
_NEG_INF = "  let neg_inf = bitcast<f32>(0xff800000u + min(p.cols, 0u));\n"
# Whole vec4 of x inside the data: the masked loads stop there (the rest is the tail's).
_WHOLE = "  let whole = p.rows * p.cols / 4u;\n"


def _identity(op: Op) -> str:
    return "vec4<f32>()" if op.zero is not None else "vec4<f32>(neg_inf)"


def _prologue(op: Op) -> str:
    return _WHOLE + ("" if op.zero is not None else _NEG_INF)


def _accumulate_masked(op: Op, unroll: int, lo: str, hi: str, thread: str, stride: int) -> str:
    """Code leaving in ``acc`` (f32) this invocation's part of elements ``[lo, hi)`` of ``x``: the
    vec4 ``lo / 4 + thread + j * stride`` below ``ceil(hi / 4)`` (and ``whole``), lanes outside
    the range masked to the identity, ``unroll`` loads a step."""
    identity = _identity(op)
    lines = [
        f"  let lo4 = vec4<u32>({lo});\n  let hi4 = vec4<u32>({hi});\n",
        f"  let q_end = min(({hi} + 3u) / 4u, whole);\n",
    ]
    lines += [f"  var a{u} = {identity};\n" for u in range(unroll)]
    lines.append(f"  var i = {lo} / 4u + {thread};\n")

    def take(index: str) -> str:
        lanes = f"vec4<u32>(({index}) * 4u) + vec4<u32>(0u, 1u, 2u, 3u)"
        return f"select({identity}, x[{index}], ({lanes} >= lo4) & ({lanes} < hi4))"

    total = _strided_fold(op, unroll, stride, "q_end", take, lines)
    lines.append(f"  let v = {total};\n  let acc = {op.fold4.format(v='v')};\n")
    return "".join(lines)


def masked_row_wgsl(op: Op, v: ReductionVariant) -> str:
    """Layout ``row``, masked: workgroup ``g`` reduces row ``g`` into ``out[g]`` (less the tail)."""
    return (
        _header("vec4<f32>", v.subgroups)
        + _shared(v.combine, v.workgroup)
        + _signature(v.workgroup, v.subgroups)
        + "  let row = group;\n"
        "  if (row >= p.rows) { return; }\n"
        + _prologue(op)
        + _accumulate_masked(op, v.unroll, "row * p.cols", "row * p.cols + p.cols", "lid", v.workgroup)
        + _workgroup_combine(op, v.combine, v.workgroup, "out[row] = result;")
        + "}\n"
    )


def masked_split_wgsl(op: Op, v: ReductionVariant) -> str:
    """Stage 1, masked: workgroup ``g`` reduces chunk ``g % chunks`` (``chunk`` elements) of row
    ``g / chunks`` into its partials, ``scratch[g]``."""
    return (
        _header("vec4<f32>", v.subgroups, out=False, scratch=True)
        + _shared(v.combine, v.workgroup)
        + _signature(v.workgroup, v.subgroups)
        + f"  let chunks = (p.cols + {v.chunk - 1}u) / {v.chunk}u;\n"
        "  if (group >= p.rows * chunks) { return; }\n"
        "  let row = group / chunks;\n"
        f"  let lo = row * p.cols + (group % chunks) * {v.chunk}u;\n"
        f"  let hi = min(row * p.cols + p.cols, lo + {v.chunk}u);\n"
        + _prologue(op)
        + _accumulate_masked(op, v.unroll, "lo", "hi", "lid", v.workgroup)
        + _workgroup_combine(op, v.combine, v.workgroup, f"{SCRATCH}[group] = result;")
        + "}\n"
    )


def masked_pack_wgsl(op: Op, v: ReductionVariant) -> str:
    """Layout ``pack``, masked: ``g`` invocations per row; rows past the end take part, idle."""
    rows_per_group = v.workgroup // v.g
    lines = [
        _header("vec4<f32>", v.subgroups),
        _shared(v.combine, v.workgroup),
        _signature(v.workgroup, v.subgroups),
        f"  let row = group * {rows_per_group}u + lid / {v.g}u;\n",
        f"  let t = lid % {v.g}u;\n" if v.g > 1 else "  let t = 0u;\n",
        "  let lo = select(0u, row * p.cols, row < p.rows);\n",
        "  let hi = select(0u, lo + p.cols, row < p.rows);  // rows past the end: an empty range\n",
        _prologue(op),
        _accumulate_masked(op, v.unroll, "lo", "hi", "t", v.g),
    ]
    if v.combine == "none":
        lines.append("  if (row < p.rows) { out[row] = acc; }\n")
    elif v.combine == "shuffle":
        lines.append("  var result = acc;\n")
        mask = 1
        while mask < v.g:
            lines.append(f"  result = {_combine(op, 'result', f'subgroupShuffleXor(result, {mask}u)')};\n")
            mask *= 2
        lines.append("  if (t == 0u && row < p.rows) { out[row] = result; }\n")
    else:
        lines.append(_tree(op, "t", v.g))
        lines.append("  if (t == 0u && row < p.rows) { out[row] = partial[lid]; }\n")
    lines.append("}\n")
    return "".join(lines)


def tail_elements(op: Op) -> str:
    """Code combining the tail of ``x`` (the elements past its last whole vec4; none where
    ``rows * cols`` is a multiple of 4) into ``out`` of the rows that hold them."""
    merged = _combine(op, "out[e / p.cols]", "x[e]")
    return f"  for (var e = p.rows * p.cols / 4u * 4u; e < p.rows * p.cols; e++) {{ out[e / p.cols] = {merged}; }}\n"


def tail_wgsl(op: Op) -> str:
    """The last stage of a masked ``row`` or ``pack`` candidate: one invocation combines the tail
    (see :func:`tail_elements`), ``x`` bound as ``array<f32>``."""
    return (
        _header("f32", False)
        + "\n@compute @workgroup_size(1, 1, 1)\nfn main() {\n"
        + tail_elements(op)
        + "}\n"
    )
